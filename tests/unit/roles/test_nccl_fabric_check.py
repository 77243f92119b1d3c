# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nccl_fabric's fabric check judges what gpucloud.fleet.ib_info reports (issue 29, item 7):
the module returns the mismatches and never fails on them; the role's assert refuses them with
the message operators know ("InfiniBand fabric check failed: ...")."""


import os
import sys

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ROOT, ansible_env, case_play, run_cases

IBSTAT = os.path.join(ROOT, "tests", "fixtures", "public", "ibstat")
H100 = os.path.join(IBSTAT, "h100-node-8x-cx7-ndr-4x-cx6dx-eth-tabs-gpud.txt")
A100_VM = os.path.join(IBSTAT, "a100-vm-9x-mt4126-roce-200g-gpud.txt")
ASSERT = "Assert port state, rate and link layer of every HCA the profile names"

# (case id, variables, task expected to refuse it or None, words its message holds)
CASES = [
    ("h100-expected-8-ndr-ib", {"nccl_fabric_ib_info_src": H100,
                                "nccl_fabric_ib_expect": {"hca_count": 8, "rate": 400, "link_layer": "InfiniBand"}},
     ASSERT, ["InfiniBand fabric check failed: expected 8 HCA(s), found 12",
              "mlx5_1 port 1: rate is 100, expected 400.0"]),
    ("a100-vm-matches", {"nccl_fabric_ib_info_src": A100_VM,
                         "nccl_fabric_ib_expect": {"hca_count": 8, "ca_pattern": "mlx5_[1-8]", "rate": 200,
                                                   "link_layer": "InfiniBand"}}, None, []),
    ("a100-vm-wrong-link-layer", {"nccl_fabric_ib_info_src": A100_VM,
                                  "nccl_fabric_ib_expect": {"ca_pattern": "mlx5_[1-8]", "link_layer": "Ethernet"}},
     ASSERT, ["InfiniBand fabric check failed: ", "link layer is InfiniBand, expected Ethernet"]),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [case_play(case_id, "nccl_fabric", variables, tasks_from=("fabric_check",))
             for case_id, variables, _task, _words in CASES]
    return run_cases(tmp_path_factory.mktemp("nccl_fabric_check"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,variables,task,words", CASES, ids=[case[0] for case in CASES])
def test_the_role_judges_what_ib_info_reports(outcomes, case_id, variables, task, words):
    outcome = outcomes[case_id]
    assert outcome["task"] == task, outcome
    for word in words:
        assert word in outcome["msg"], outcome
