# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The roles' tasks/validate.yml refuse hostile values before any change (issue 15).

One ansible-playbook run on localhost (connection local, nothing changes: validate.yml only
reads variables) applies every case as its own play and records which task refused it.
"""


import os
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ROOT, ansible_env, case_play, run_cases

FLOATS = "Refuse version variables that YAML read as floats"
TIMEOUTS = "Require positive timeouts"
# nccl_fabric checks everything in one plan task (plugins/plugin_utils/nccl_fabric.py, issue 29).
NCCL_SETTINGS = "Check the settings and compute this host's IPoIB addresses"
HOST_PREP = "Check the settings and plan the sysctl profile"
NVIDIA_DRIVER_SETTINGS = "Refuse settings that do not fit together (each refusal names its variable)"

# (case id, role, variables, task expected to refuse it or None, words its message holds)
CASES = [
    ("driver-version-float", "nvidia_driver", {"nvidia_driver_version": 570.10}, NVIDIA_DRIVER_SETTINGS,
     ["nvidia_driver_version", "quote"]),
    ("driver-branch-float", "nvidia_driver", {"nvidia_driver_branch": 580.0}, NVIDIA_DRIVER_SETTINGS,
     ["nvidia_driver_branch", "float"]),
    ("driver-fabric-manager-debian", "nvidia_driver",
     {"nvidia_driver_branch": "580", "nvidia_driver_source": "distro", "nvidia_driver_fabric_manager": True},
     NVIDIA_DRIVER_SETTINGS, ["nvidia_driver_fabric_manager=true", "nvidia_driver_source=distro"]),
    ("driver-version-quoted", "nvidia_driver", {"nvidia_driver_version": "570.10"}, None, []),
    ("driver-branch-int", "nvidia_driver", {"nvidia_driver_branch": 580}, None, []),
    ("driver-reboot-timeout-0", "nvidia_driver", {"nvidia_driver_branch": "580", "nvidia_driver_reboot_timeout": 0},
     NVIDIA_DRIVER_SETTINGS, ["nvidia_driver_reboot_timeout", "greater than 0"]),
    ("driver-reboot-timeout-negative", "nvidia_driver",
     {"nvidia_driver_branch": "580", "nvidia_driver_reboot_timeout": -5}, NVIDIA_DRIVER_SETTINGS,
     ["nvidia_driver_reboot_timeout"]),
    ("cuda-versions-float", "cuda_toolkit", {"cuda_toolkit_versions": ["12.4", 12.10]}, FLOATS,
     ["cuda_toolkit_versions", "12.10 becomes 12.1"]),
    ("cudnn-version-float", "cuda_toolkit", {"cuda_toolkit_versions": ["12.4"], "cuda_toolkit_cudnn_version": 9.1},
     FLOATS, ["cuda_toolkit_cudnn_version"]),
    ("cuda-driver-version-float", "cuda_toolkit",
     {"cuda_toolkit_versions": ["12.4"], "cuda_toolkit_driver_version": 570.10}, FLOATS, ["cuda_toolkit_driver_version"]),
    ("cuda-quoted", "cuda_toolkit", {"cuda_toolkit_versions": ["12.10"], "cuda_toolkit_driver_version": "570.10"},
     None, []),
    ("host-prep-reboot-timeout-0", "host_prep", {"host_prep_reboot_timeout": 0}, HOST_PREP, ["host_prep_reboot_timeout"]),
    ("host-prep-bmc-timeout-negative", "host_prep", {"host_prep_bmc_timeout": -1}, HOST_PREP, ["host_prep_bmc_timeout"]),
    ("host-prep-timeouts-ok", "host_prep", {"host_prep_reboot_timeout": "900"}, None, []),
    ("nccl-reboot-timeout-0", "nccl_fabric", {"nccl_fabric_reboot_timeout": 0}, NCCL_SETTINGS, ["nccl_fabric_reboot_timeout"]),
    ("nccl-tests-timeout-negative", "nccl_fabric", {"nccl_fabric_nccl_tests_timeout": -1}, NCCL_SETTINGS,
     ["nccl_fabric_nccl_tests_timeout"]),
    ("nccl-env-value-newline", "nccl_fabric",
     {"nccl_fabric_nccl_extra_env": {"NCCL_DEBUG_SUBSYS": "INIT\nLD_PRELOAD=/tmp/x.so"}}, NCCL_SETTINGS,
     ["nccl_fabric_nccl_extra_env", "NCCL_DEBUG_SUBSYS", "one-line"]),
    ("nccl-env-value-cr-nul", "nccl_fabric",
     {"nccl_fabric_nccl_extra_env": {"NCCL_A": "x\ry", "NCCL_B": "x\x00y"}}, NCCL_SETTINGS, ["NCCL_A", "NCCL_B"]),
    ("nccl-env-name-newline", "nccl_fabric",
     {"nccl_fabric_nccl_extra_env": {"NCCL_X\nLD_PRELOAD": "/tmp/x.so"}}, NCCL_SETTINGS,
     ["nccl_fabric_nccl_extra_env", "in full"]),
    ("nccl-env-name-equals", "nccl_fabric", {"nccl_fabric_nccl_extra_env": {"NCCL_X=1": "2"}}, NCCL_SETTINGS,
     ["NCCL_X=1"]),
    ("nccl-env-value-list", "nccl_fabric", {"nccl_fabric_nccl_extra_env": {"NCCL_X": ["a", "b"]}}, NCCL_SETTINGS,
     ["NCCL_X"]),
    ("nccl-env-ok", "nccl_fabric",
     {"nccl_fabric_nccl_extra_env": {"NCCL_IB_TIMEOUT": 22, "NCCL_SOCKET_IFNAME": "=ib0"}}, None, []),
]


# validate.yml runs after main.yml has loaded the OS family's vars; load Debian's here.
OS_VARS = {role: os.path.join(ROOT, "roles", role, "vars", "Debian.yml") for role in ("nccl_fabric", "host_prep", "nvidia_driver")}


def _with_os_vars(role, variables):
    if role in OS_VARS:
        with open(OS_VARS[role]) as handle:
            return dict(yaml.safe_load(handle), **variables)
    return variables


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [{"name": "Gather the facts validate.yml reads", "hosts": "localhost", "connection": "local",
              "gather_facts": True, "gather_subset": ["min"], "tasks": []}]
    plays += [case_play(case_id, role, _with_os_vars(role, variables))
              for case_id, role, variables, _task, _words in CASES]
    return run_cases(tmp_path_factory.mktemp("validate"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,role,variables,task,words", CASES, ids=[case[0] for case in CASES])
def test_validate_refuses_by_name(outcomes, case_id, role, variables, task, words):
    outcome = outcomes[case_id]
    if task is None:
        # Later checks (the OS of this machine, say) may refuse the case; ours must not.
        assert outcome["task"] not in (FLOATS, TIMEOUTS, HOST_PREP, NVIDIA_DRIVER_SETTINGS), outcome
        assert "nccl_fabric_nccl_extra_env" not in outcome["msg"], outcome
    else:
        assert outcome["task"] == task, outcome
        for word in words:
            assert word in outcome["msg"], outcome
