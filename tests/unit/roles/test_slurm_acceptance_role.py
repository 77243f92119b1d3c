# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_acceptance's Slurm checks, wired: only for hosts in slurm_gpu_nodes (or when asked), refusals by name.

One ansible-playbook run on this machine (connection local), which has no Slurm: where the checks run,
gpucloud.fleet.slurm_node_info reports scontrol missing and the checks fail saying so; where they do
not, the node's checks are exactly node_acceptance's own.
"""

import os
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance, slurm_acceptance
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT
from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, case_play, run_cases
from ansible_collections.gpucloud.fleet.tests.unit.roles.test_node_acceptance import CAPTURES, CHECKS, H200

INVENTORY = """[slurm_gpu_nodes]
slurmhost ansible_connection=local
[gpu_nodes]
plainhost ansible_connection=local
"""
# The smoke job is not asked here: srun is not installed on this machine either.
RUNS = {
    "slurm-auto": ("slurmhost", {}),
    "slurm-off": ("slurmhost", {"node_acceptance_slurm": False}),
    "plain-auto": ("plainhost", {}),
    "plain-forced": ("plainhost", {"node_acceptance_slurm": True}),
}
REFUSALS = {
    "smoke-too-many": ("slurmhost", {"gpucloud_profile": H200, "node_acceptance_slurm_smoke_gpus": 2},
                       "Refuse a Slurm smoke job asking for more GPUs than the profile has",
                       ["node_acceptance_slurm_smoke_gpus is 2, profile h200 has 1 GPUs"]),
    "bad-switch": ("slurmhost", {"gpucloud_profile": H200, "node_acceptance_slurm": "sometimes"},
                   None, ["node_acceptance_slurm", "sometimes"]),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm_acceptance_role")
    plays = []
    for case_id, (host, variables) in RUNS.items():
        play = case_play(case_id, "node_acceptance",
                         dict(CAPTURES, node_acceptance_report_dir=str(work / "reports"),
                              node_acceptance_slurm_smoke_gpus=0, **variables),
                         ("main",), passed={"checks": CHECKS})
        play["hosts"] = host
        plays.append(play)
    for case_id, (host, variables, _task, _words) in REFUSALS.items():
        play = case_play(case_id, "node_acceptance", dict(variables, node_acceptance_report_dir=str(work / "reports")),
                         ("main",))
        play["hosts"] = host
        plays.append(play)
    (work / "hosts.ini").write_text(INVENTORY)
    env = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    # run_cases writes the outcomes from localhost: give it both hosts' records through hostvars.
    plays.append({"name": "Gather", "hosts": "localhost", "connection": "local", "gather_facts": False,
                  "tasks": [{"name": "Collect", "ansible.builtin.set_fact": {
                      "__cases": "{{ hostvars['slurmhost'].__cases | default({}) | "
                                 "combine(hostvars['plainhost'].__cases | default({})) }}"}}]})
    result, _output = run_cases(work, plays, inventory=str(work / "hosts.ini"), env=env)
    return result


def test_a_slurm_node_gets_the_slurm_checks_after_its_own(outcomes):
    outcome = outcomes["slurm-auto"]
    assert outcome["task"] is None, outcome
    assert list(outcome["checks"]) == list(acceptance.CHECKS) + list(slurm_acceptance.CHECKS)
    # No Slurm on this machine: the node is not registered, and the checks say why.
    assert outcome["checks"]["slurm.gres"] == "fail"
    assert outcome["checks"]["slurm.smoke"] == "skipped"
    assert outcome["checks"]["slurm.nccl_pmix"] == "n/a"


@pytest.mark.parametrize("case_id", ["slurm-off", "plain-auto"])
def test_other_nodes_keep_their_checks(outcomes, case_id):
    outcome = outcomes[case_id]
    assert outcome["task"] is None, outcome
    assert list(outcome["checks"]) == list(acceptance.CHECKS)


def test_the_checks_can_be_forced_on(outcomes):
    assert list(outcomes["plain-forced"]["checks"])[-len(slurm_acceptance.CHECKS):] == list(slurm_acceptance.CHECKS)


@pytest.mark.parametrize("case_id", sorted(REFUSALS))
def test_bad_slurm_settings_are_refused_by_name(outcomes, case_id):
    outcome = outcomes[case_id]
    _host, _variables, task, words = REFUSALS[case_id]
    assert outcome["task"] is not None, outcome
    if task:
        assert outcome["task"] == task, outcome
    for word in words:
        assert word in outcome["msg"], outcome


def _tasks(items):
    for item in items or []:
        yield item
        for key in ("block", "rescue", "always", "tasks"):
            yield from _tasks(item.get(key))


def test_site_yml_verifies_batches_without_the_slurm_checks():
    # site.yml's verify stage runs inside every batch, before the slurm plays join the nodes: there
    # the Slurm checks would fail every new node and keep it out of Slurm (playbooks/verify.yml judges them).
    with open(os.path.join(ROOT, "playbooks", "site.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    includes = [task for play in plays for task in _tasks(play.get("tasks"))
                if (task.get("ansible.builtin.include_role") or {}).get("name") == "gpucloud.fleet.node_acceptance"]
    assert includes, "site.yml no longer includes node_acceptance"
    assert all((task.get("vars") or {}).get("node_acceptance_slurm") is False for task in includes), includes
