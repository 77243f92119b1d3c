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
    with open(os.path.join(ROOT, "playbooks", "vars", "settings.yml"), encoding="utf-8") as handle:
        text = handle.read()
    assert "__site_" not in text and "site_allow_reboot" not in text


def test_site_yml_parses_with_the_lab_and_example_inventories():
    for inventory in ("inventories/lab", "inventories/example"):
        run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "--syntax-check",
                              "-i", inventory, "playbooks/site.yml"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, timeout=300, check=False)
        assert run.returncode == 0, run.stdout[-3000:]


def test_every_setting_left_in_settings_yml_is_read_by_a_playbook():
    with open(os.path.join(ROOT, "playbooks", "vars", "settings.yml"), encoding="utf-8") as handle:
        names = set(yaml.safe_load(handle))
    readers = ""
    for folder, _dirs, files in os.walk(os.path.join(ROOT, "playbooks")):
        for name in files:
            if name.endswith(".yml") and name != "settings.yml":
                with open(os.path.join(folder, name), encoding="utf-8") as handle:
                    readers += handle.read()
    unread = sorted(name for name in names if name not in readers)
    assert not unread, "settings.yml defines names no playbook reads: %s" % unread
