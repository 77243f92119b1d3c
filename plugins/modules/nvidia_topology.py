#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nvidia_topology
short_description: Read the GPU/NIC topology matrix and check it against a hardware profile
version_added: 0.1.0
description:
  - Runs C(nvidia-smi topo -m) (with C(LC_ALL=C)) or reads a captured copy of its output,
    and returns the parsed matrix.
  - Derives the NVLink pairs with their link counts, every GPU's NICs ordered nearest first
    (PIX < PXB < PHB < NODE < SYS, the order to give NCCL's HCA list), and each GPU's CPU and
    NUMA affinity.
  - With O(expect), fails when the topology differs from the expected hardware profile and
    lists every mismatch, not only the first.
  - Understands the three header generations of C(nvidia-smi topo -m) (CPU Affinity only;
    with NUMA Affinity; with GPU NUMA ID, C(NICn) columns and a NIC legend), TAB- or
    space-separated text, ANSI escapes, wrapped rows and the old C(SOC) code (reported as
    printed, ranked as C(SYS)).
  - The matrix must be followed by nvidia-smi's C(Legend) (with C(X = Self)), and C(NICn)
    columns by a C(NIC Legend) naming every NIC; output cut short or altered fails with the
    reason rather than being half-read.
author:
  - gpucloud.fleet contributors (@gpucloud)
extends_documentation_fragment:
  - gpucloud.fleet.read_only
options:
  src:
    description:
      - Path, on the managed node, of a captured C(nvidia-smi topo -m) output to read instead
        of running C(nvidia-smi). Useful for CI and for testing O(expect) profiles against
        recorded machines.
      - Mutually exclusive with O(topology_text).
    type: path
  topology_text:
    description:
      - The C(nvidia-smi topo -m) output itself, for example from a C(lookup('file', ...)) on
        the controller.
      - Mutually exclusive with O(src).
    type: str
  expect:
    description:
      - Hardware profile to assert. Every given key is checked; the module fails listing all
        mismatches and also returns them in RV(mismatches).
    type: dict
    suboptions:
      gpu_count:
        description: Exact number of GPUs.
        type: int
      nic_count:
        description: Exact number of NICs in the matrix.
        type: int
      min_nvlinks:
        description:
          - Minimum number of bonded NVLinks between every pair of GPUs, for example V(18) for
            the all-to-all C(NV18) of HGX H100/H200 or V(12) for DGX A100.
        type: int
      max_nic_distance:
        description:
          - Every GPU must have at least one NIC at most this far away.
          - V(PXB) means behind the same PCIe switch tree, as GPUDirect RDMA wants.
        type: str
        choices: [PIX, PXB, PHB, NODE, SYS]
      require_affinity:
        description:
          - Every GPU must report its CPU and NUMA affinity (containers and some VMs print
            empty cells).
        type: bool
        default: false
notes:
  - Run it on the GPU host itself (or give O(src)/O(topology_text)); it needs the NVIDIA driver
    loaded to run C(nvidia-smi).
seealso:
  - module: gpucloud.fleet.nvidia_gpu_facts
"""

EXAMPLES = r"""
- name: Read the topology
  gpucloud.fleet.nvidia_topology:
  register: topo

- name: Assert an HGX H100/H200 8-GPU board with a NIC behind every GPU's PCIe switch
  gpucloud.fleet.nvidia_topology:
    expect:
      gpu_count: 8
      min_nvlinks: 18
      max_nic_distance: PXB
      require_affinity: true

- name: Check a recorded machine's topology in CI
  gpucloud.fleet.nvidia_topology:
    src: "{{ playbook_dir }}/files/dgx-a100-topo.txt"
    expect:
      gpu_count: 8
      nic_count: 8
      min_nvlinks: 12

- name: NCCL HCA list for GPU0, nearest NIC first
  ansible.builtin.debug:
    msg: "{{ topo.nearest_nics.GPU0 | map(attribute='name') | join(',') }}"
"""

RETURN = r"""
source:
  description: Where the text came from, V(nvidia-smi), V(src) or V(topology_text).
  returned: always
  type: str
  sample: nvidia-smi
topology:
  description: The parsed matrix.
  returned: always
  type: dict
  contains:
    gpus:
      description: GPU column labels in order.
      type: list
      elements: str
      sample: [GPU0, GPU1]
    nics:
      description: NIC column labels in order (V(NIC0)... or, from old drivers, V(mlx5_0)...).
      type: list
      elements: str
    nic_names:
      description: NIC label to device name, from the NIC legend (the label itself without legend).
      type: dict
      sample: {NIC0: mlx5_0}
    links:
      description: C(links[a][b]) is the connection code between two devices, as printed.
      type: dict
      sample: {GPU0: {GPU1: NV18, NIC0: PXB}}
    affinity:
      description: Per GPU, V(cpus), V(numa) and V(gpu_numa_id) as printed; V(null) where absent or empty.
      type: dict
gpu_count:
  description: Number of GPUs in the matrix.
  returned: always
  type: int
nic_count:
  description: Number of NICs in the matrix.
  returned: always
  type: int
nvlink_pairs:
  description: GPU pairs joined by NVLink with their link count.
  returned: always
  type: list
  elements: dict
  sample: [{gpus: [GPU0, GPU1], links: 18}]
nearest_nics:
  description:
    - Per GPU, every NIC as C({nic, name, link}), nearest first; entries with the same C(link)
      as the first are equally near.
  returned: always
  type: dict
  sample: {GPU0: [{nic: NIC0, name: mlx5_0, link: PXB}, {nic: NIC1, name: mlx5_1, link: SYS}]}
affinity:
  description: Per GPU CPU and NUMA affinity (same as RV(topology.affinity)).
  returned: always
  type: dict
  sample: {GPU0: {cpus: "0-15", numa: "0", gpu_numa_id: N/A}}
mismatches:
  description: Every difference from O(expect); empty when it matches or nothing is expected.
  returned: always
  type: list
  elements: str
  sample: ["GPU0-GPU4: SYS, expected at least NV18"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import CommandError, Runner
from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import NIC_DISTANCE_ORDER, analyze


def _topology_text(module):
    if module.params["topology_text"] is not None:
        return "topology_text", module.params["topology_text"]
    src = module.params["src"]
    if src is not None:
        try:
            with open(src, "rb") as handle:
                data = handle.read()
        except (IOError, OSError) as exc:
            module.fail_json(msg="cannot read src %s: %s" % (src, exc))
        try:
            return "src", data.decode("utf-8")
        except UnicodeDecodeError as exc:
            module.fail_json(msg="src %s is not UTF-8 text (%s): not nvidia-smi topo -m output" % (src, exc))
    try:
        out = Runner(module, check_rc=True)(["nvidia-smi", "topo", "-m"])[1]
    except CommandError as exc:
        module.fail_json(msg=str(exc), rc=exc.rc)
    return "nvidia-smi", out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path"),
            topology_text=dict(type="str"),
            expect=dict(
                type="dict",
                options=dict(
                    gpu_count=dict(type="int"),
                    nic_count=dict(type="int"),
                    min_nvlinks=dict(type="int"),
                    max_nic_distance=dict(type="str", choices=list(NIC_DISTANCE_ORDER)),
                    require_affinity=dict(type="bool", default=False),
                ),
            ),
        ),
        mutually_exclusive=[("src", "topology_text")],
        supports_check_mode=True,
    )
    source, text = _topology_text(module)
    try:
        result = analyze(text, module.params["expect"])
    except ValueError as exc:
        module.fail_json(msg="cannot parse nvidia-smi topo -m output from %s: %s" % (source, exc))
    if result["mismatches"]:
        module.fail_json(
            msg="topology does not match the expected profile (%d mismatches): %s"
            % (len(result["mismatches"]), "; ".join(result["mismatches"])),
            source=source,
            **result
        )
    module.exit_json(changed=False, source=source, **result)


if __name__ == "__main__":
    main()
