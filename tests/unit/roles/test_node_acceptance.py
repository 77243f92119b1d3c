# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node_acceptance role on localhost: refusals by name, and a whole run judged on captures.

One ansible-playbook run (connection local). The role only reads: the captures stand in for the
GPUs and the kernel log, the reboot decision is given, and the profile asks for nothing else
but the installed packages (dpkg-query or rpm of this machine, whatever they hold).
"""


import json
import os
import sys

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_path
from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, case_play, run_cases

H200 = {"name": "h200", "gpu_count": 1, "gpu_model": "H200", "gpu_memory_mib_min": 143000, "firewall": False}
CAPTURES = {
    "gpucloud_profile": H200,
    "node_acceptance_reboot_pending": False,
    # The old name the Molecule scenarios set is still read.
    "verify_facts_from": fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"),
    "node_acceptance_xid_from": fixture_path("h200-ubuntu2404-driver580", "dmesg_nvrm.txt"),
    "node_acceptance_stack_from": fixture_path("h200-ubuntu2404-driver580", "stack-versions.txt"),
    "gpucloud_version_lock": {"cuda": "13.0", "nccl": "2.28"},
}
CHECKS = "{{ dict(verify_checks | map(attribute='check') | zip(verify_checks | map(attribute='status'))) }}"
# One task refuses every setting the role cannot run with (acceptance_settings_problems).
VALIDATE = RENAMED = CAPTURED = PROBES = "Refuse settings node_acceptance cannot run with, naming each"

CASES = [
    ("no-profile", {}, ("validate",), VALIDATE, ["gpucloud_profile", "localhost"]),
    ("profile-without-gpu-count", {"gpucloud_profile": {"name": "x"}}, ("validate",), VALIDATE, ["gpu_count"]),
    ("renamed-burn-in", {"gpucloud_profile": H200, "verify_burn_in": True, "verify_ib_src": "/tmp/ibstat"},
     ("validate",), RENAMED, ["verify_burn_in is now node_acceptance_burn_in",
                              "verify_ib_src is now node_acceptance_ib_src"]),
    ("missing-capture", {"gpucloud_profile": H200, "verify_topology_src": "/nonexistent/topo.txt"}, ("validate",),
     CAPTURED, ["node_acceptance_topology_from", "/nonexistent/topo.txt"]),
    ("bad-probe", {"gpucloud_profile": H200, "node_acceptance_firewall_probe": []}, ("validate",),
     PROBES, ["node_acceptance_firewall_probe"]),
    # Every bad setting is named at once, not only the first.
    ("all-at-once", {"verify_burn_in": True, "node_acceptance_fabric_manager_probe": []}, ("validate",), VALIDATE,
     ["gpucloud_profile: localhost", "verify_burn_in is now node_acceptance_burn_in",
      "node_acceptance_fabric_manager_probe ([])"]),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    work = tmp_path_factory.mktemp("node_acceptance")
    plays = [case_play(case_id, "node_acceptance", variables, tasks_from)
             for case_id, variables, tasks_from, _task, _words in CASES]
    plays.append(case_play("captures", "node_acceptance", dict(CAPTURES, node_acceptance_report_dir=str(work / "reports")),
                           ("main",), passed={"checks": CHECKS, "observed": "{{ node_acceptance_observed }}"}))
    outcomes, _output = run_cases(work, plays, env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))
    return outcomes, work


@pytest.mark.parametrize("case_id,variables,tasks_from,task,words", CASES, ids=[case[0] for case in CASES])
def test_validate_refuses_by_name(outcomes, case_id, variables, tasks_from, task, words):
    outcome = outcomes[0][case_id]
    assert outcome["task"] == task, outcome
    for word in words:
        assert word in outcome["msg"], outcome


def test_a_captured_h200_is_judged_and_reported(outcomes):
    outcome, work = outcomes[0]["captures"], outcomes[1]
    assert outcome["task"] is None, outcome
    checks = outcome["checks"]
    assert (checks["reboot"], checks["gpu.count"], checks["gpu.model"], checks["gpu.memory"]) == (
        "pass", "pass", "pass", "pass")
    assert (checks["stack.cuda"], checks["stack.nccl"], checks["gpu.xid"]) == ("pass", "pass", "pass")
    # Not asked for by the profile: no firewall, no topology, no CUDA context.
    assert (checks["firewall"], checks["topology"], checks["cuda.context"]) == ("n/a", "n/a", "n/a")
    assert outcome["observed"]["kernel_log"]["source"].endswith("dmesg_nvrm.txt")
    assert outcome["observed"]["nvidia"]["gpus"][0]["name"] == "NVIDIA H200"
    report = json.loads((work / "reports" / "localhost.json").read_text())
    assert report["profile"] == "h200"
    assert dict((c["check"], c["status"]) for c in report["checks"]) == checks
    assert os.path.isfile(str(work / "reports" / "localhost.md"))
