# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/training_benchmark tasks/validate.yml: whole numbers end where the string ends (issue 28
item 13: a check written with '$' lets "8\\n" through)."""


import sys

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, case_play, run_cases

LIMITS = "Require whole numbers for the run's limits and a positive sampling interval"

BENCHMARKS = {"training_benchmark_benchmarks": {"resnet50": {"batch_size": 8, "steps": 4, "warmup_steps": 1, "image_size": 32}}}

# (case id, variables, task expected to refuse them or None)
CASES = [
    ("world-size-newline", {"training_benchmark_world_size": "8\n"}, LIMITS),
    ("timeout-newline", {"training_benchmark_timeout": "600\n"}, LIMITS),
    ("master-port-newline", {"training_benchmark_master_port": "29500\n"}, LIMITS),
    ("whole-numbers", {"training_benchmark_world_size": 8, "training_benchmark_timeout": "600"}, None),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [{"name": "Gather the facts set_vars.yml reads", "hosts": "localhost", "connection": "local",
              "gather_facts": True, "gather_subset": ["min"], "tasks": []}]
    plays += [case_play(case_id, "training_benchmark", dict(BENCHMARKS, **variables), tasks_from=("set_vars", "validate"))
              for case_id, variables, _task in CASES]
    return run_cases(tmp_path_factory.mktemp("training_benchmark_validate"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,variables,task", CASES, ids=[case[0] for case in CASES])
def test_validate_refuses_a_trailing_newline(outcomes, case_id, variables, task):
    outcome = outcomes[case_id]
    assert outcome["task"] == task, outcome
