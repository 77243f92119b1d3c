#!/usr/bin/python
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: slurm_node_info
short_description: Report how Slurm sees a GPU node, and run a GPU smoke job when asked
version_added: 0.1.0
author:
  - gpucloud.fleet contributors (@gpucloud)
description:
  - Reads C(systemctl is-active slurmd), C(scontrol show node -o NODE) and C(sinfo -N -h -n NODE) and
    returns the node's record (state, flags, reason, GRES counts, partitions, TRES).
  - With O(smoke_gpus) it runs C(srun -w NODE --gres=gpu:N) with a short shell script that prints
    C(CUDA_VISIBLE_DEVICES) and, for every C(/dev/nvidia<N>), whether the job may open it (the job's
    device cgroup answers C(Operation not permitted) for a GPU it was not given).
  - With O(nccl) it runs nccl-tests through C(srun --mpi=pmix) across several nodes, where
    C(srun --mpi=list) lists pmix; otherwise RV(nccl) says it is not available.
  - It never fails on what it sees (an C(_info) module reports); the C(gpucloud.fleet.node_acceptance)
    role judges what it returns (C(plugins/plugin_utils/slurm_acceptance.py)).
  - In check mode only the reads run; the jobs are reported as skipped.
extends_documentation_fragment:
  - gpucloud.fleet.read_only
attributes:
  platform:
    support: full
    platforms: posix
    description: Linux hosts with the Slurm client commands (C(scontrol), C(sinfo), C(srun)).
options:
  node:
    description: The node's name in Slurm; default the host's short host name, as slurmd takes it.
    type: str
  smoke_gpus:
    description: Number of GPUs the smoke job asks for; V(0) runs no job.
    type: int
    default: 0
  partition:
    description: Partition the jobs run in; default the cluster's default partition.
    type: str
  mpi_list:
    description: Also run C(srun --mpi=list) and return the MPI plugin types in RV(mpi).
    type: bool
    default: false
  nccl:
    description:
      - Run nccl-tests across O(nccl.nodes) nodes through C(srun --mpi=pmix), one task per GPU.
      - Parsed with the collection's nccl-tests parser into the C(result) of RV(nccl).
    type: dict
    suboptions:
      nodes:
        description: Number of nodes.
        type: int
        required: true
      gpus_per_node:
        description: GPUs (and tasks) per node.
        type: int
        required: true
      command:
        description: The nccl-tests argv, for example V([all_reduce_perf, -b, 8, -e, 1G, -f, 2, -g, 1]).
        type: list
        elements: str
        required: true
notes:
  - In a lab container whose GPUs are C(mknod)'ed device files the smoke job shows the device
    confinement (EPERM for a GPU not given) but no GPU works; see docs/slurm.md.
  - The collection's docs/slurm.md describes the acceptance checks and what only a real GPU shows.
seealso:
  - name: scontrol(1)
    description: The command whose C(show node -o) output is parsed.
    link: https://slurm.schedmd.com/scontrol.html
  - name: Generic Resource (GRES) Scheduling
    description: GPU GRES, device confinement, MPS and MIG in Slurm.
    link: https://slurm.schedmd.com/gres.html
"""

EXAMPLES = r"""
- name: Read the node as Slurm sees it and run a one-GPU smoke job
  gpucloud.fleet.slurm_node_info:
    smoke_gpus: 1
  register: slurm_node

- name: The node is registered with its 8 GPUs
  ansible.builtin.assert:
    that: slurm_node.node.gres_counts['gpu:h200'] == 8
"""

RETURN = r"""
node_name:
  description: The node name asked for.
  returned: always
  type: str
registered:
  description: Whether C(scontrol show node) knows the node.
  returned: always
  type: bool
node:
  description:
    - The parsed C(scontrol show node -o) record (null when not registered) with C(name), C(state)
      (C(base), C(flags), C(not_responding), C(text)), C(reason), C(reason_by), C(reason_at), C(gres),
      C(gres_counts) (GRES name and type to count, for example C(gpu:h200) to 8), C(partitions), C(cfg_tres), C(alloc_tres),
      C(version), C(cpus) and all C(fields).
  returned: always
  type: dict
error:
  description: Why the node record could not be read, or null.
  returned: always
  type: str
partitions:
  description: C(sinfo -N) rows of the node, one per partition (C(partition), C(default), C(state), C(gres), C(reason)).
  returned: always
  type: list
  elements: dict
slurmd:
  description: C(systemctl is-active slurmd) (C(active), C(inactive), C(failed), ...).
  returned: always
  type: str
smoke:
  description:
    - C(asked) (GPUs), C(ran); when it ran C(rc), C(stdout), C(stderr), C(cuda_visible_devices),
      C(devices) (path to the open answer), C(allowed), C(denied), or C(error); C(skipped) in check mode.
  returned: always
  type: dict
mpi:
  description: C(types), C(pmix_versions), C(pmix) from C(srun --mpi=list), when read.
  returned: when O(mpi_list) or O(nccl)
  type: dict
nccl:
  description: C(asked), C(ran), C(skipped) (why not), C(rc), C(stdout), C(result) (parsed nccl-tests) or C(error).
  returned: always
  type: dict
"""

import socket

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucloud.fleet.plugins.module_utils.nccl_tests import parse_nccl_tests
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner
from ansible_collections.gpucloud.fleet.plugins.module_utils.slurm_scontrol import observe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            node=dict(type="str"),
            smoke_gpus=dict(type="int", default=0),
            partition=dict(type="str"),
            mpi_list=dict(type="bool", default=False),
            nccl=dict(type="dict", options=dict(
                nodes=dict(type="int", required=True),
                gpus_per_node=dict(type="int", required=True),
                command=dict(type="list", elements="str", required=True),
            )),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["smoke_gpus"] < 0:
        module.fail_json(msg="smoke_gpus must be 0 (no job) or more, got %d" % params["smoke_gpus"])
    if params["nccl"] and (params["nccl"]["nodes"] < 1 or params["nccl"]["gpus_per_node"] < 1):
        module.fail_json(msg="nccl.nodes and nccl.gpus_per_node must be at least 1, got %r" % (params["nccl"],))
    node = params["node"] or socket.gethostname().split(".")[0]
    result = observe(Runner(module, missing="rc"), node, smoke_gpus=params["smoke_gpus"],
                     partition=params["partition"], mpi_list=params["mpi_list"], nccl=params["nccl"],
                     check_mode=module.check_mode, nccl_parse=parse_nccl_tests)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
