# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.rollout holds site.yml's settings as role defaults with an argument spec: bad
values are refused by name before any host changes, and site.yml reads them from the role in every
play (no defaults in disguise, no play var resetting rollout_allow_reboot under another name)."""

import os
import subprocess
import sys

import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import (
    ROOT, ansible_env, assert_outcomes, case_play, run_cases)

ENV = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)

CASES = {
    "defaults": ({}, None),
    "lab": ({"rollout_stages": ["preflight", "tang_server", "host_prep", "verify"], "rollout_serial": [1, "100%"],
             "rollout_homogeneity": "warn", "rollout_skip_reasons": {"cuda_toolkit": "too big"}}, None),
    "hardening_opt_in": ({"rollout_stages": ["preflight", "hardening", "verify"]}, None),
    "unknown_stage": ({"rollout_stages": ["preflight", "nvidia-driver"]}, r"unknown:\s+nvidia-driver;"),
    "stage_twice": ({"rollout_stages": ["host_prep", "verify", "host_prep"]}, r"twice:\s+host_prep\)"),
    "unknown_skip_reason": ({"rollout_skip_reasons": {"cuda": "x"}}, r"rollout_skip_reasons only such stages \(unknown:\s+cuda\)"),
    # a single value, as Ansible's serial takes it (the bench and -e rollout_serial=100% pass one)
    "serial_scalar_percent": ({"rollout_serial": "100%"}, None),
    "serial_scalar_count": ({"rollout_serial": 2}, None),
    "serial_zero": ({"rollout_serial": [0, "25%"]}, "rollout_serial entry 0 must be at least 1"),
    "serial_over_100": ({"rollout_serial": [1, "150%"]}, "rollout_serial entry '150%' must be a percentage from 1% to 100%"),
    "serial_word": ({"rollout_serial": ["canary"]}, "rollout_serial entry 'canary' is not a number of hosts"),
    "serial_newline": ({"rollout_serial": ["25%\n"]}, "rollout_serial entry '25%\\\\n' is not a number"),
    "serial_empty": ({"rollout_serial": []}, "rollout_serial is empty"),
    "max_fail": ({"rollout_max_fail_percentage": 101}, "rollout_max_fail_percentage must be 0 to 100"),
    # One check names every bad setting at once.
    "stage_and_max_fail": ({"rollout_stages": ["preflight", "nvidia-driver"], "rollout_max_fail_percentage": -1},
                           r"unknown:\s+nvidia-driver;[\s\S]*rollout_max_fail_percentage must be 0 to 100 \(got -1\)"),
    "homogeneity": ({"rollout_homogeneity": "loose"}, "rollout_homogeneity"),
    "allow_reboot": ({"rollout_allow_reboot": "maybe"}, "rollout_allow_reboot"),
}


def test_rollout_refuses_bad_settings_by_name(tmp_path):
    plays = [case_play(case, "rollout", overrides, tasks_from=("main",)) for case, (overrides, _e) in CASES.items()]
    outcomes, _output = run_cases(tmp_path, plays, env=ENV)
    assert_outcomes(outcomes, CASES)


def _site():
    with open(os.path.join(ROOT, "playbooks", "site.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_every_site_play_reads_the_rollout_role_and_no_play_resets_a_setting():
    defaults_path = os.path.join(ROOT, "roles", "rollout", "defaults", "main.yml")
    with open(defaults_path, encoding="utf-8") as handle:
        settings = set(yaml.safe_load(handle))
    for play in _site():
        assert "vars_files" not in play, play["name"]
        assert not settings & set(play.get("vars") or {}), play["name"]
        assert not [name for name in play.get("vars") or {} if name.endswith("_allow_reboot")], play["name"]
        imports = [task for task in play.get("tasks", [])
                   if (task.get("ansible.builtin.import_role") or {}).get("name") == "gpucloud.fleet.rollout"]
        assert imports and play["tasks"].index(imports[0]) == 0, "%s does not load the rollout settings first" % play["name"]
    assert not os.path.exists(os.path.join(ROOT, "playbooks", "vars", "rollout_defaults.yml"))


def test_no_settings_in_disguise_are_left():
    """settings.yml's `__x: "{{ x | default(...) }}"` names are gone: site.yml reads the rollout role's
    rollout_report_dir and rollout_fail_on_error, collect_logs.yml its own play's settings."""
    assert not os.path.exists(os.path.join(ROOT, "playbooks", "vars", "settings.yml"))
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "playbooks")):
        for name in files:
            with open(os.path.join(folder, name), encoding="utf-8") as handle:
                text = handle.read()
            assert "vars/settings.yml" not in text and "__verify_" not in text, name
    with open(os.path.join(ROOT, "roles", "rollout", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    assert options["rollout_report_dir"]["type"] == "str" and options["rollout_fail_on_error"]["type"] == "bool"


def test_site_yml_stages_cost_a_note_and_a_role_and_the_summary_is_written_in_one_task():
    """No stage goes through an included task file (include_tasks + a debug or a set_fact per stage):
    each is one set_fact and one include_role, the skipped ones are named by one task per batch, and
    the summary files are written by one copy per batch and one at the end."""
    text = open(os.path.join(ROOT, "playbooks", "site.yml"), encoding="utf-8").read()
    assert "include_tasks" not in text and "include_vars" not in text
    assert not os.path.exists(os.path.join(ROOT, "playbooks", "tasks", "stage.yml"))
    rollout = [play for play in _site() if play["hosts"] == "site_rollout"][0]
    block = [task for task in rollout["tasks"] if "block" in task][0]["block"]
    roles = [task for task in block if "ansible.builtin.include_role" in task]
    notes = [task for task in block if "ansible.builtin.set_fact" in task]
    assert len(roles) == len(notes) == 11, [task["name"] for task in block]
    for role, note in zip(roles, notes):
        assert role["tags"] == note["tags"] and len(role["tags"]) == 1, role
        assert role["ansible.builtin.include_role"]["apply"]["tags"] == role["tags"], role
    writes = [task for play in _site() for task in play["tasks"] if "ansible.builtin.copy" in task]
    assert len(writes) == 2 and all("site_reports" in task["loop"] or "__site_reports" in task["loop"] for task in writes)


def test_site_yml_parses_with_the_lab_and_example_inventories():
    for inventory in ("inventories/lab", "inventories/example"):
        run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--syntax-check",
                              "-i", inventory, "playbooks/site.yml"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
        assert run.returncode == 0, run.stdout[-3000:]


def test_every_setting_of_collect_logs_is_read_by_it():
    with open(os.path.join(ROOT, "playbooks", "collect_logs.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    names = set(plays[0]["vars"])
    assert names, "collect_logs.yml's play lost its settings"
    tasks = yaml.safe_dump(plays[0]["tasks"])
    unread = sorted(name for name in names if name not in tasks)
    assert not unread, "collect_logs.yml defines names it does not read: %s" % unread
