# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Run role task files through ansible-playbook on localhost, one play per case.

Shared by the tests that feed a role's tasks/validate.yml good and bad settings and record
which task refused each case (tests/unit/roles/test_validate.py, test_gpu_monitoring.py,
tests/unit/monitoring/test_monitoring_server_templates.py). Nothing changes on the machine:
the task files only read variables.
"""


import json
import os
import re
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")

# A loop's failure says "One or more items failed"; the items' own messages follow it.
FAILED_MSG = ("{{ ([ansible_failed_result.msg | default('')] + (ansible_failed_result.results | default([])"
              " | selectattr('failed', 'defined') | selectattr('failed') | map(attribute='msg') | list)) | join(' ') }}")


def ansible_env(**extra):
    """The environment of a test's ansible-playbook: this checkout as the collection, its ansible.cfg."""
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
                ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false", **extra)


def run_playbook(work, playbook, inventory="localhost,", args=(), env=None):
    """ansible-playbook PLAYBOOK in WORK; the finished process (stdout and stderr together)."""
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           str(playbook)] + list(args), cwd=str(work), env=env or ansible_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600,
                          check=False)


def case_play(case_id, role, variables, tasks_from=("validate",), passed=None):
    """A play that runs ROLE's TASKS_FROM files with VARIABLES and records the outcome under CASE_ID.

    The outcome is {"task": None, "msg": ""} (plus PASSED) when every file ran, else the name of
    the task that failed and its message.
    """
    record = "{{ __cases | default({}) | combine({'%s': __outcome}) }}" % case_id
    steps = [{"name": "Run %s.yml" % name, "ansible.builtin.include_role": {
        "name": "gpucloud.fleet.%s" % role, "tasks_from": name}} for name in tasks_from]
    return {
        "name": case_id, "hosts": "localhost", "connection": "local", "gather_facts": False, "vars": variables,
        "tasks": [{
            "name": "Validate",
            "block": steps + [
                {"name": "Record the pass", "ansible.builtin.set_fact": {"__cases": record},
                 "vars": {"__outcome": dict({"task": None, "msg": ""}, **(passed or {}))}},
            ],
            "rescue": [
                {"name": "Record the refusal", "ansible.builtin.set_fact": {"__cases": record},
                 "vars": {"__outcome": {"task": "{{ ansible_failed_task.name }}", "msg": FAILED_MSG}}},
            ],
        }],
    }


def run_cases(work, plays, inventory="localhost,", env=None):
    """Run PLAYS (case_play()s, maybe after others) in WORK; ({case id: outcome}, the run's output)."""
    result = work / "result.json"
    plays = list(plays) + [{
        "name": "Write the outcomes", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "Write", "ansible.builtin.copy": {
            "dest": str(result), "content": "{{ __cases | to_json }}", "mode": "0600"}}]}]
    playbook = work / "validate.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    run = run_playbook(work, playbook, inventory, env=env)
    assert run.returncode == 0 and result.exists(), run.stdout[-4000:]
    return json.loads(result.read_text()), run.stdout


def assert_outcomes(outcomes, cases):
    """CASES: {case id: (variables, expected)}; expected None means the case must pass, else a
    regex the refusing task's message must match."""
    for case, (_variables, expected) in cases.items():
        if expected is None:
            assert outcomes[case]["task"] is None, (case, outcomes[case])
        else:
            assert outcomes[case]["task"] is not None and re.search(expected, outcomes[case]["msg"]), (case, outcomes[case])
