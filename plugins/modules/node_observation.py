#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: node_observation
short_description: Read everything node acceptance judges on a GPU node, as one dict
version_added: 0.2.0
description:
  - Reads, in one call, what the C(gpucloud.fleet.node_acceptance) role judges against the node's
    hardware profile, and returns it as RV(observation); the judging happens on the controller
    (the C(gpucloud.fleet.acceptance_checks) filter).
  - Always read are the installed driver, CUDA, cuDNN and NCCL versions (C(dpkg-query) or C(rpm)) and the
    pending-reboot record (C(/run/reboot-required), the reasons in C(/run/reboot-required.pkgs) and
    C(/run/gpucloud/reboot-reasons)); on GPU profiles also the loaded kernel module's version
    (C(/proc/driver/nvidia/version)); a module that is not the installed driver waits for a reboot.
  - Unless a reboot is pending, the GPUs as M(gpucloud.fleet.nvidia_gpu_facts) reads them, and where the
    profile asks for them the MIG instances, the GPU/NIC topology, Fabric Manager's state.
  - Where the profile asks for them, whatever the reboot, the InfiniBand ports, the NVRM Xid lines of
    this boot's kernel log, the Tang-bound data volume, the firewall policy and C(lspci -vvv).
  - An expectation that is not met (a topology or InfiniBand mismatch) is part of the observation;
    the module fails only when it cannot read the package database or the GPUs at all.
author:
  - gpucloud.fleet contributors (@gpucloud)
extends_documentation_fragment:
  - gpucloud.fleet.read_only
options:
  profile:
    description:
      - The node's hardware profile (C(gpucloud_profile) combined with C(gpucloud_profile_overrides)).
      - It decides what is read; C(topology) and C(ib) are the expectations the mismatches are taken against.
    type: dict
    required: true
  reboot_pending:
    description:
      - V(true) or V(false) decides whether a reboot is pending, and nothing is read to find out.
      - Unset, the record and the loaded kernel module decide, with O(reboot_required).
    type: bool
  reboot_required:
    description: A pending reboot the caller knows of (a role of this run installed a driver); the record is still read.
    type: bool
    default: false
  package_manager:
    description: Which package database lists the installed stack; V(auto) tries C(dpkg-query), then C(rpm).
    type: str
    choices: [auto, dpkg, rpm]
    default: auto
  stack_packages:
    description: Component (driver, cuda, cudnn, nccl) -> shell patterns of package names, best first.
    type: dict
    default: {}
  stack_text:
    description: A captured stack-versions text (lines C(cuda 13.0), C(cudnn 91900), C(nccl (2, 28, 9))) read instead of the packages.
    type: str
  gpu_text:
    description: Captured C(nvidia-smi -q -x) or C(nvidia-smi -q) output read instead of the GPUs.
    type: str
  mig_lgi_text:
    description: Captured C(nvidia-smi mig -lgi) output read instead of the GPU instances.
    type: str
  topology_text:
    description: Captured C(nvidia-smi topo -m) output read instead of the host's.
    type: str
  ib_src:
    description: Path, on the node, of a captured C(ibstat) output read instead of running C(ibstat).
    type: path
  xid_text:
    description: A captured kernel log whose NVRM Xid lines are judged instead of this boot's.
    type: str
  xid_source:
    description: What O(xid_text) is (a file name), for the report.
    type: str
  lspci_text:
    description: Captured C(lspci -vvv) output read instead of the host's.
    type: str
  data_volume:
    description: The Tang-bound data volume, read where the profile has C(tang_bound).
    type: dict
    default: {}
    suboptions:
      device:
        description: Its block device.
        type: str
        default: ""
      name:
        description: Its dm-crypt mapping name.
        type: str
        default: ""
      mount_point:
        description: Where it is mounted; empty when it is not mounted.
        type: str
        default: ""
      check_open:
        description: Read its dm-crypt mapping and mount (V(false) where device-mapper is absent).
        type: bool
        default: true
  firewall_probe:
    description: Read-only command (argv) printing the firewall policy.
    type: list
    elements: str
    default: [iptables, -w, -S, INPUT]
  firewall_expect:
    description: Regular expression the probe's output matches when the policy is active.
    type: str
    default: "-j GPUCLOUD-INPUT"
  fabric_manager_probe:
    description: Read-only command (argv) printing Fabric Manager's state (NVSwitch profiles).
    type: list
    elements: str
    default: [systemctl, is-active, nvidia-fabricmanager]
requirements:
  - C(nvidia-ml-py) (module C(pynvml)) on the node is used when present; nvidia-smi otherwise.
seealso:
  - module: gpucloud.fleet.nvidia_gpu_facts
  - module: gpucloud.fleet.nvidia_topology
  - module: gpucloud.fleet.ib_info
"""

EXAMPLES = r"""
- name: Read the node for acceptance
  gpucloud.fleet.node_observation:
    profile: "{{ gpucloud_profile }}"
    stack_packages:
      driver: [nvidia-open, cuda-drivers, "nvidia-driver-[0-9]*"]
  register: observation

- name: Judge it on the controller
  ansible.builtin.set_fact:
    checks: "{{ observation.observation | gpucloud.fleet.acceptance_checks(inventory_hostname, gpucloud_profile) }}"
"""

RETURN = r"""
observation:
  description:
    - What was read, by key (C(stack), C(reboot_required), C(reboot_reasons), C(driver_mismatch), C(nvidia),
      C(mig_instances), C(topology), C(ib), C(kernel_log), C(tang), C(firewall), C(fabric_manager), C(lspci));
      a key is absent when it was not read. The C(gpucloud.fleet.acceptance_observed) filter turns
      C(lspci) into C(pcie_acs).
  returned: success
  type: dict
  sample: {stack: {driver: "580.95.05-1", cuda: null, cudnn: null, nccl: null}, reboot_required: false}
pending_reboot:
  description:
    - Whether the node waits for a reboot (recorded, said by the caller, or a loaded driver that is not the
      installed one); the GPUs were not queried then.
  returned: success
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.node_observation import ObservationError, observe
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import NvidiaError, gather, import_pynvml, read_text
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner

pynvml = import_pynvml()[0]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="dict", required=True),
            reboot_pending=dict(type="bool"),
            reboot_required=dict(type="bool", default=False),
            package_manager=dict(type="str", default="auto", choices=["auto", "dpkg", "rpm"]),
            stack_packages=dict(type="dict", default={}),
            stack_text=dict(type="str"),
            gpu_text=dict(type="str"),
            mig_lgi_text=dict(type="str"),
            topology_text=dict(type="str"),
            ib_src=dict(type="path"),
            xid_text=dict(type="str"),
            xid_source=dict(type="str"),
            lspci_text=dict(type="str"),
            data_volume=dict(type="dict", default={}, options=dict(
                device=dict(type="str", default=""),
                name=dict(type="str", default=""),
                mount_point=dict(type="str", default=""),
                check_open=dict(type="bool", default=True),
            )),
            firewall_probe=dict(type="list", elements="str", default=["iptables", "-w", "-S", "INPUT"]),
            firewall_expect=dict(type="str", default="-j GPUCLOUD-INPUT"),
            fabric_manager_probe=dict(type="list", elements="str",
                                      default=["systemctl", "is-active", "nvidia-fabricmanager"]),
        ),
        supports_check_mode=True,
    )
    # A program that is not installed is an observation (rc 127), not a failure.
    run = Runner(module, environ={"LANG": "C"}, missing="rc")

    def gpu_facts():
        return gather("auto", pynvml, Runner(module).program("nvidia-smi"), read_text)

    try:
        observation, pending = observe(module.params, run, read_text, gpu_facts)
    except (ObservationError, NvidiaError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, observation=observation, pending_reboot=pending)


if __name__ == "__main__":
    main()
