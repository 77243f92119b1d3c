# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_sharing's validate.yml refuses values with a trailing newline ('$' matched before it;
issue 28 item 13): the MPS limits and the MIG layout name, which reach a unit's environment and
mig-parted's command line."""


import sys

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, case_play, run_cases

MPS = {"name": "mps", "gpu_model": "H200", "gpu_count": 2, "gpu_memory_mib_min": 80000, "mig": False,
       "sharing": {"mode": "mps", "replicas": 4}}
MIG = {"name": "mig", "gpu_model": "A100 80GB PCIe", "gpu_count": 4, "mig": {"strategy": "single", "layout": "all-1g.10gb"}}
# One plan task checks both (plugins/plugin_utils/gpu_sharing.py, issue 29).
LIMITS = CONFIG = "Check the profile's MIG and sharing keys and the settings, and plan the MIG layout and the MPS limits"

# (case id, variables, task expected to refuse it or None)
CASES = [
    ("mps-ok", {"gpucloud_profile": MPS, "gpu_sharing_mps_pinned_device_mem_limit": "0=16G,1=16G"}, None),
    ("mps-mem-limit-newline", {"gpucloud_profile": MPS, "gpu_sharing_mps_pinned_device_mem_limit": "0=16G,1=16G\n"},
     LIMITS),
    ("mig-ok", {"gpucloud_profile": MIG}, None),
    ("mig-layout-newline", {"gpucloud_profile": dict(MIG, mig={"strategy": "single", "layout": "all-1g.10gb\n"})},
     CONFIG),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [case_play(case_id, "gpu_sharing", variables) for case_id, variables, _task in CASES]
    return run_cases(tmp_path_factory.mktemp("gpu_sharing_validate"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,variables,task", CASES, ids=[case[0] for case in CASES])
def test_a_trailing_newline_is_refused(outcomes, case_id, variables, task):
    assert outcomes[case_id]["task"] == task, outcomes[case_id]
