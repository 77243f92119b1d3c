#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: nvidia_gpu_facts
short_description: Gather facts about NVIDIA GPUs, their driver and their health counters
version_added: 0.1.0
description:
  - Reads the NVIDIA driver and every GPU in-process through NVML, using the C(pynvml) module
    of the C(nvidia-ml-py) Python package, without starting another process.
  - When C(pynvml) cannot be imported, parses C(nvidia-smi -q -x) instead (plus
    C(nvidia-smi --query-gpu=index,compute_cap) and the GPUs' sysfs NUMA node and CPU list),
    and says which source answered in RV(source).
  - An NVML "Not Supported" (or "Not Found", "No Permission", "Function Not Found") answer, and
    an C(N/A) from nvidia-smi, becomes V(null); it never fails the module.
  - A host without NVIDIA driver or GPU is a normal answer (RV(gpu_count=0), RV(driver_loaded=false))
    unless O(fail_on_missing=true). So is a failing NVML or C(nvidia-smi) while no NVIDIA kernel
    module is loaded (no C(/proc/driver/nvidia/version)), as on a host where only the userspace
    is installed yet.
  - The facts are returned as C(ansible_facts.nvidia) and as top-level result keys.
  - The name C(gpucloud.fleet.nvidia_gpu_info) still reaches this module, with a deprecation warning,
    until 1.0.0 (a module that sets C(ansible_facts) is named C(*_facts)).
author:
  - gpucloud.fleet contributors (@gpucloud)
extends_documentation_fragment:
  - gpucloud.fleet.read_only
attributes:
  facts:
    support: full
    description: Sets C(ansible_facts.nvidia).
options:
  source:
    description:
      - Where to read the facts.
      - V(auto) uses NVML when C(pynvml) imports and nvidia-smi otherwise; when NVML finds no
        library or driver, nvidia-smi gets a second look before the host counts as driverless.
      - V(nvml) fails when C(nvidia-ml-py) is not installed on the target.
      - V(nvidia-smi) never imports C(pynvml).
    type: str
    choices: [auto, nvml, nvidia-smi]
    default: auto
  fail_on_missing:
    description:
      - Fail when the driver is not loaded or sees no GPU, instead of returning
        RV(gpu_count=0).
      - Deprecated and removed in 1.0.0, since a facts module reports and the caller judges. Assert on
        RV(driver_loaded) and RV(gpu_count) instead (see the examples).
    type: bool
    default: false
  src:
    description:
      - Path, on the managed node, of a captured C(nvidia-smi -q -x) or C(nvidia-smi -q) output
        to read instead of the live host (for CI and fixture tests).
      - Such captures carry neither compute capability, NUMA node nor CPU affinity; those stay
        V(null). RV(source) is V(nvidia-smi).
      - Only O(source=auto) or O(source=nvidia-smi) can read it.
    type: path
requirements:
  - An NVIDIA driver on the target; C(nvidia-ml-py) (module C(pynvml)) for the NVML source.
notes:
  - NVML counts the driver-reserved memory as used when the driver is too old for
    C(nvmlDeviceGetMemoryInfo_v2); nvidia-smi lists it apart. RV(gpus[].memory_used_mib) can
    therefore differ by a few hundred MiB between sources on such drivers.
  - The NUMA node and CPU affinity come from NVML's affinity masks or from sysfs
    (C(/sys/bus/pci/devices/*/numa_node), C(local_cpulist)); both say the same thing.
seealso:
  - module: gpucloud.fleet.nvidia_topology
  - module: gpucloud.fleet.nvidia_persistence
"""

EXAMPLES = r"""
- name: Read GPU facts
  gpucloud.fleet.nvidia_gpu_facts:

- name: Refuse to go on without a working GPU
  ansible.builtin.assert:
    that:
      - ansible_facts.nvidia.driver_loaded
      - ansible_facts.nvidia.gpu_count > 0
    fail_msg: "no usable GPU: driver loaded {{ ansible_facts.nvidia.driver_loaded }}, {{ ansible_facts.nvidia.gpu_count }} GPUs"

- name: Check that no GPU has pending row remaps or uncorrected ECC errors
  ansible.builtin.assert:
    that:
      - ansible_facts.nvidia.gpus | selectattr('remapped_rows', 'ne', none)
        | map(attribute='remapped_rows.pending') | select | list | length == 0
      - ansible_facts.nvidia.gpus | map(attribute='ecc.uncorrected_volatile')
        | reject('none') | select | list | length == 0

- name: Read a captured nvidia-smi -q -x file instead of the host
  gpucloud.fleet.nvidia_gpu_facts:
    src: /tmp/captures/nvidia-smi_-q_-x.xml
  register: captured
"""

RETURN = r"""
source:
  description: What answered, V(nvml) or V(nvidia-smi).
  returned: always
  type: str
  sample: nvml
driver_loaded:
  description: Whether an NVIDIA driver answered.
  returned: always
  type: bool
  sample: true
driver_version:
  description: NVIDIA driver version.
  returned: always
  type: str
  sample: "580.159.04"
cuda_driver_version:
  description: Highest CUDA version the driver supports.
  returned: always
  type: str
  sample: "13.0"
nvml_version:
  description: NVML library version; V(null) from nvidia-smi.
  returned: always
  type: str
  sample: "13.580.159.04"
gpu_count:
  description: Number of GPUs the driver sees.
  returned: always
  type: int
  sample: 1
gpus:
  description: One entry per GPU in NVML index order. Unknown or unsupported values are V(null).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML / nvidia-smi index.
      type: int
    name:
      description: Product name.
      type: str
      sample: NVIDIA H200
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-4fc604de-9030-742c-d69f-594418e871d5
    serial:
      description: Board serial number.
      type: str
    pci_bus_id:
      description: PCI address as nvidia-smi prints it.
      type: str
      sample: "00000000:00:06.0"
    architecture:
      description: GPU architecture name.
      type: str
      sample: Hopper
    compute_capability:
      description: CUDA compute capability.
      type: str
      sample: "9.0"
    memory_total_mib:
      description: Framebuffer memory in MiB.
      type: int
      sample: 143771
    memory_used_mib:
      description: Framebuffer memory in use, MiB.
      type: int
    persistence_mode:
      description: Whether persistence mode is on.
      type: bool
    compute_mode:
      description: V(Default), V(Exclusive_Process), V(Prohibited) or V(Exclusive_Thread).
      type: str
    mig:
      description: MIG mode, V(current) and V(pending) (booleans, V(null) where MIG is not supported).
      type: dict
    ecc:
      description: >-
        ECC mode V(current) and V(pending), and the uncorrected error counts
        V(uncorrected_volatile) (since the last driver load) and V(uncorrected_aggregate) (lifetime).
      type: dict
    remapped_rows:
      description: >-
        Row remapping (Ampere and later): V(correctable), V(uncorrectable) counts and
        the V(pending) and V(failure) flags; V(null) where not supported.
      type: dict
    retired_pages:
      description: >-
        Page retirement (before Ampere): V(single_bit_ecc), V(double_bit_ecc) counts and
        V(pending); V(null) where not supported.
      type: dict
    power:
      description: V(draw_w), V(limit_w), V(default_limit_w) and V(enforced_limit_w), in watts.
      type: dict
    temperature_c:
      description: GPU core temperature, Celsius.
      type: int
    clocks_mhz:
      description: Current and maximum SM and memory clocks, V(sm), V(sm_max), V(memory), V(memory_max).
      type: dict
    pcie:
      description:
        - PCIe link V(gen), V(gen_max), V(gen_device_max), V(width) and V(width_max).
        - V(gen_max) is the highest generation this GPU and system allow; V(gen_device_max) what the GPU
          itself supports, so a lower V(gen_max) means the slot, switch or BIOS caps the link.
        - NVIDIA lowers the current generation and width of an idle GPU to save power.
      type: dict
    vbios_version:
      description: VBIOS version.
      type: str
    numa_node:
      description: NUMA node nearest to the GPU (host memory affinity).
      type: int
    gpu_numa_id:
      description: NUMA node of the GPU's own memory on coherent platforms (Grace); V(null) elsewhere.
      type: int
    cpu_affinity:
      description: CPUs nearest to the GPU, in kernel list format.
      type: str
      sample: "0-15"
    idle:
      description:
        - Whether the GPU's clocks are low because nothing runs on it (clocks event reason GpuIdle);
          null when not reported.
      type: bool
    fabric:
      description:
        - NVSwitch systems only, the GPU's registration with Fabric Manager, V(state) (V(Completed),
          V(In Progress) or V(Not Started)) and V(status) (V(Success) or the error).
        - Both null where there is no fabric (NVML NotSupported, nvidia-smi N/A).
      type: dict
      sample: {state: Completed, status: Success}
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import (
    LibraryMissing,
    NvidiaError,
    facts_from_capture,
    gather,
    import_pynvml,
    missing_reason,
    read_text,
)
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner

# Two plain assignments: ansible-doc reads this file's assignments and cannot name a tuple.
pynvml = import_pynvml()[0]
PYNVML_IMPORT_ERROR = import_pynvml()[1]

FAIL_ON_MISSING_DEPRECATION = (
    "fail_on_missing is deprecated: the module reports and the caller judges; assert on"
    " driver_loaded and gpu_count > 0 instead"
)


def _facts(module):
    src = module.params["src"]
    if src is None:
        return gather(module.params["source"], pynvml, Runner(module).program("nvidia-smi"), read_text)
    if module.params["source"] == "nvml":
        raise NvidiaError("src holds nvidia-smi output; source=nvml cannot read it")
    text = read_text(src)
    if text is None:
        raise NvidiaError("cannot read src %s" % src)
    return facts_from_capture(text)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", default="auto", choices=["auto", "nvml", "nvidia-smi"]),
            fail_on_missing=dict(type="bool", default=False),
            src=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    if module.params["fail_on_missing"]:
        module.deprecate(FAIL_ON_MISSING_DEPRECATION, version="1.0.0")
    try:
        facts = _facts(module)
    except LibraryMissing:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py"), exception=PYNVML_IMPORT_ERROR)
    except (NvidiaError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    reason = missing_reason(facts)
    if reason and module.params["fail_on_missing"]:
        module.fail_json(msg=reason, **facts)
    module.exit_json(changed=False, ansible_facts={"nvidia": facts}, **facts)


if __name__ == "__main__":
    main()
