#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: gpu_diagnostics
short_description: Run a GPU node's deep diagnostic at a named level, refusing GPUs that hold compute processes
version_added: 0.3.0
description:
  - Reads the compute processes on the GPUs first (C(nvidia-smi --query-compute-apps)) and fails, naming the
    GPUs and PIDs, when a targeted GPU holds one, unless O(force) is set.
  - With DCGM (C(dcgmi) installed and C(nv-hostengine) answering C(dcgmi discovery -l)) runs
    C(dcgmi diag -r 1|2|3|4 -j) and returns it parsed and judged per test and per GPU.
  - Without DCGM reads the node as node acceptance does (GPUs through NVML or nvidia-smi, Fabric Manager,
    C(nvidia-smi topo -m)) and returns that observation with the names of the acceptance checks that judge it
    on the controller (RV(checks)), and how long the burn-in of the level runs (RV(burn_in_seconds)).
  - Never changes a GPU setting. In check mode runs no diagnostic, since a diagnostic loads the GPU, and returns
    what would run and the busy verdict.
author:
  - gpucloud.fleet contributors (@gpucloud)
options:
  level:
    description:
      - V(quick) before a job (C(-r 1)), V(medium) for a periodic sweep of idle nodes (C(-r 2)), V(long) before a
        node returns from repair (C(-r 3)), V(extended) for an RMA decision (C(-r 4)).
    type: str
    choices: [quick, medium, long, extended]
    default: quick
  force:
    description: Run although a targeted GPU holds compute processes (they are still listed in RV(busy)).
    type: bool
    default: false
  gpus:
    description:
      - GPU indexes to diagnose; every GPU when unset. DCGM runs on these only (C(-i)); the own checks read every
        GPU, and only these count for the busy refusal.
    type: list
    elements: int
  source:
    description: V(auto) runs DCGM where it answers and the own checks otherwise; V(dcgm) fails without DCGM.
    type: str
    choices: [auto, dcgm, own]
    default: auto
  profile:
    description: The node's hardware profile (C(gpucloud_profile)); the own checks need its C(gpu_count).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads the busy verdict and the source; runs no diagnostic.
  diff_mode:
    support: none
    description: Nothing on the node changes.
requirements:
  - C(nvidia-smi) on the node; C(dcgmi) and a running C(nv-hostengine) for the DCGM source.
seealso:
  - module: gpucloud.fleet.node_observation
"""

EXAMPLES = r"""
- name: Run the quick diagnostic before a job
  gpucloud.fleet.gpu_diagnostics:
    level: quick
    profile: "{{ gpucloud_profile }}"
  register: diagnostic
"""

RETURN = r"""
source:
  description: What ran, or would run, V(dcgm) or V(own) (the collection's own checks).
  returned: always
  type: str
source_reason:
  description: Why that source (C(dcgmi) missing, the host engine not answering, asked for).
  returned: always
  type: str
level:
  description: The level name.
  returned: always
  type: str
dcgm_level:
  description: The C(dcgmi diag -r) number of the level.
  returned: always
  type: int
command:
  description: The C(dcgmi diag) argv (DCGM source), else null.
  returned: always
  type: list
checks:
  description: The acceptance checks that judge the own checks' RV(observation) (own source).
  returned: always
  type: list
burn_in_seconds:
  description: Seconds of burn-in the level asks for (own source; 0 at quick).
  returned: always
  type: int
gpus:
  description: The GPU indexes diagnosed.
  returned: always
  type: list
busy:
  description: The compute processes on the targeted GPUs, as C({gpu, pid, name}).
  returned: always
  type: list
refused:
  description: Whether the run was refused for busy GPUs (the module then fails).
  returned: always
  type: bool
forced:
  description: Whether it ran on busy GPUs because O(force) was set.
  returned: always
  type: bool
ran:
  description: Whether a diagnostic ran (false in check mode).
  returned: always
  type: bool
passed:
  description: The DCGM verdict.
  returned: when the DCGM source ran
  type: bool
failures:
  description: The DCGM failures, C({gpu, test, message}); gpu null where DCGM tied the failure to no GPU.
  returned: when the DCGM source ran
  type: list
warnings:
  description: The DCGM warnings, as RV(failures).
  returned: when the DCGM source ran
  type: list
skipped:
  description: The tests and GPUs DCGM skipped, as RV(failures).
  returned: when the DCGM source ran
  type: list
dcgm:
  description: The parsed C(dcgmi diag -j) document (tests with per-GPU results).
  returned: when the DCGM source ran
  type: dict
observation:
  description: The node read as M(gpucloud.fleet.node_observation) reads it, limited to GPUs, fabric and topology.
  returned: when the own source ran
  type: dict
pending_reboot:
  description: Whether the node waits for a reboot (the GPU checks are then pending, not judged).
  returned: when the own source ran
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.gpu_diagnostics import DiagnosticsError, diagnose
from ansible_collections.gpucloud.fleet.plugins.module_utils.node_observation import ObservationError, observe
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import NvidiaError, gather, import_pynvml, read_text
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner

pynvml = import_pynvml()[0]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="str", default="quick", choices=["quick", "medium", "long", "extended"]),
            force=dict(type="bool", default=False),
            gpus=dict(type="list", elements="int"),
            source=dict(type="str", default="auto", choices=["auto", "dcgm", "own"]),
            profile=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    run = Runner(module, environ={"LANG": "C"}, missing="rc")

    def gpu_facts():
        return gather("auto", pynvml, Runner(module).program("nvidia-smi"), read_text)

    def observe_node(params):
        return observe(params, run, read_text, gpu_facts)

    try:
        result = diagnose(module.params, run, observe_node, module.check_mode)
    except DiagnosticsError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    except (ObservationError, NvidiaError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
