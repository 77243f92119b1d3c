# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.node_reboot on localhost, its record in a temporary folder in place of /run: roles
append their reasons where update-notifier, unattended-upgrades and kured look (/run/reboot-required,
/run/reboot-required.pkgs) and ours in one "role: why" per line; read finds a reboot apt asked for;
two roles asking make one reboot; bad reasons are refused before anything is written. Every run that
could reboot runs in check mode: nothing here may reboot the machine running the tests."""

import json
import os
import re
import sys

import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import (
    ROOT, ansible_env, assert_outcomes, case_play, run_cases, run_playbook)

ENV = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)
UBUNTU_TEXT = "*** System restart required ***\n"


def paths(tmp_path):
    """The record's files under TMP_PATH/run, which exists as /run does."""
    (tmp_path / "run").mkdir(parents=True, exist_ok=True)
    return {"node_reboot_required_file": str(tmp_path / "run" / "reboot-required"),
            "node_reboot_packages_file": str(tmp_path / "run" / "reboot-required.pkgs"),
            "node_reboot_reasons_file": str(tmp_path / "run" / "gpucloud" / "reboot-reasons")}


def record(by, why, allow=False, packages=()):
    return {"name": "Record %s" % by, "ansible.builtin.include_role": {
        "name": "gpucloud.fleet.node_reboot", "tasks_from": "record"},
        "vars": {"node_reboot_by": by, "node_reboot_why": why, "node_reboot_allow": allow,
                 "node_reboot_packages": list(packages)}}


def play(tmp_path, tasks, out=None):
    tasks = list(tasks)
    if out:
        tasks.append({"name": "Write what the play saw", "ansible.builtin.copy": {
            "dest": str(out), "mode": "0600", "content": "{{ {'pending': node_reboot_pending | default(none),"
            " 'reasons': node_reboot_recorded_reasons | default(none), 'packages': node_reboot_recorded_packages"
            " | default(none), 'run_reasons': node_reboot_reasons | default(none), 'flag': gpucloud_reboot_required"
            " | default(none)} | to_json }}"}, "check_mode": False})
    book = tmp_path / "play.yml"
    book.write_text(yaml.safe_dump([{"name": "node_reboot", "hosts": "localhost", "connection": "local",
                                     "gather_facts": False, "vars": paths(tmp_path), "tasks": tasks}], sort_keys=False))
    return book


def recap(output):
    match = re.search(r"localhost\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)", output)
    assert match, output[-3000:]
    return int(match.group(1)), int(match.group(2))


TWO_ROLES = [record("host_prep", "kernel-cmdline"),
             record("nvidia_driver", "kernel module 580.95.05 waits for a reboot",
                    packages=["nvidia-kernel-open-dkms", "nvidia-driver"]),
             record("host_prep", "kernel-cmdline")]


def test_roles_record_where_the_ecosystem_looks_and_a_rerun_changes_nothing(tmp_path):
    files = paths(tmp_path)
    book = play(tmp_path, TWO_ROLES, out=tmp_path / "seen.json")
    first = run_playbook(tmp_path, book, env=ENV)
    assert recap(first.stdout)[1] == 0 and recap(first.stdout)[0] > 0, first.stdout[-3000:]
    with open(files["node_reboot_required_file"], encoding="utf-8") as handle:
        assert handle.read() == UBUNTU_TEXT
    with open(files["node_reboot_reasons_file"], encoding="utf-8") as handle:
        assert handle.read() == "host_prep: kernel-cmdline\nnvidia_driver: kernel module 580.95.05 waits for a reboot\n"
    with open(files["node_reboot_packages_file"], encoding="utf-8") as handle:
        assert handle.read() == "nvidia-kernel-open-dkms\nnvidia-driver\n"
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["flag"] is True and len(seen["run_reasons"]) == 2
    # Not allowed to reboot, nothing new to record: an idempotent re-run.
    again = run_playbook(tmp_path, book, env=ENV)
    assert recap(again.stdout) == (0, 0), again.stdout[-3000:]


def test_check_mode_reports_the_record_and_writes_nothing(tmp_path):
    checked = run_playbook(tmp_path, play(tmp_path, TWO_ROLES), args=["--check"], env=ENV)
    assert recap(checked.stdout)[1] == 0 and recap(checked.stdout)[0] >= 3, checked.stdout[-3000:]
    assert list((tmp_path / "run").iterdir()) == []


def test_read_finds_a_reboot_apt_recorded_and_none_on_a_fresh_boot(tmp_path):
    read = {"name": "Read", "ansible.builtin.include_role": {"name": "gpucloud.fleet.node_reboot", "tasks_from": "read"}}
    fresh = run_playbook(tmp_path, play(tmp_path, [read], out=tmp_path / "fresh.json"), env=ENV)
    assert recap(fresh.stdout) == (1, 0) or recap(fresh.stdout)[1] == 0, fresh.stdout[-3000:]
    seen = json.loads((tmp_path / "fresh.json").read_text())
    assert seen["pending"] is False and seen["flag"] is False and seen["reasons"] == [] and seen["packages"] == []
    # What update-notifier leaves after a kernel upgrade: no reasons of ours.
    paths(tmp_path)
    (tmp_path / "run" / "reboot-required").write_text(UBUNTU_TEXT)
    (tmp_path / "run" / "reboot-required.pkgs").write_text("linux-image-6.8.0-90-generic\nlinux-base\nlinux-base\n")
    apt = run_playbook(tmp_path, play(tmp_path, [read], out=tmp_path / "apt.json"), args=["--check"], env=ENV)
    assert recap(apt.stdout)[1] == 0, apt.stdout[-3000:]
    seen = json.loads((tmp_path / "apt.json").read_text())
    assert seen == {"pending": True, "flag": True, "reasons": [], "run_reasons": None,
                    "packages": ["linux-image-6.8.0-90-generic", "linux-base"]}


def test_an_existing_apt_record_is_kept_and_our_reason_added(tmp_path):
    paths(tmp_path)
    (tmp_path / "run" / "reboot-required").write_text("*** System restart required ***\n")
    (tmp_path / "run" / "reboot-required.pkgs").write_text("linux-base\n")
    run = run_playbook(tmp_path, play(tmp_path, [record("gpu_sharing", "MIG mode change pending")]), env=ENV)
    assert recap(run.stdout)[1] == 0, run.stdout[-3000:]
    assert (tmp_path / "run" / "reboot-required.pkgs").read_text() == "linux-base\n"
    assert (tmp_path / "run" / "gpucloud" / "reboot-reasons").read_text() == "gpu_sharing: MIG mode change pending\n"


def test_two_roles_that_allow_it_make_one_reboot_and_check_mode_only_says_so(tmp_path):
    tasks = [record("host_prep", "nouveau-blacklist", allow=True),
             record("nvidia_driver", "kernel module 580.95.05 waits for a reboot", allow=True),
             {"name": "Flush", "ansible.builtin.meta": "flush_handlers"}]
    checked = run_playbook(tmp_path, play(tmp_path, tasks), args=["--check"], env=ENV)
    assert recap(checked.stdout)[1] == 0, checked.stdout[-3000:]
    would = re.findall(r"check mode: would reboot localhost once \(([^)]*)\)", checked.stdout)
    assert would == ["host_prep: nouveau-blacklist, nvidia_driver: kernel module 580.95.05 waits for a reboot"], \
        checked.stdout[-3000:]
    assert list((tmp_path / "run").iterdir()) == []


def test_a_role_that_does_not_allow_it_never_notifies_the_reboot(tmp_path):
    tasks = [record("nvidia_driver", "kernel module 580.95.05 waits for a reboot", allow=False),
             {"name": "Flush", "ansible.builtin.meta": "flush_handlers"}]
    checked = run_playbook(tmp_path, play(tmp_path, tasks), args=["--check"], env=ENV)
    assert recap(checked.stdout)[1] == 0, checked.stdout[-3000:]
    assert "would reboot" not in checked.stdout and "RUNNING HANDLER" not in checked.stdout
    assert "not rebooting: nvidia_driver_allow_reboot is false" in checked.stdout


CASES = {
    "good": ({"node_reboot_by": "host_prep", "node_reboot_why": "kernel-cmdline"}, None),
    "no_role": ({"node_reboot_by": "", "node_reboot_why": "kernel-cmdline"}, "node_reboot_by must name the asking role"),
    "role_capitals": ({"node_reboot_by": "Host-Prep", "node_reboot_why": "x"}, "node_reboot_by must name"),
    "no_why": ({"node_reboot_by": "host_prep", "node_reboot_why": ""}, "node_reboot_why must say why"),
    "why_two_lines": ({"node_reboot_by": "host_prep", "node_reboot_why": "a\nb"}, "node_reboot_why must say why"),
    "why_trailing_newline": ({"node_reboot_by": "host_prep", "node_reboot_why": "a\n"}, "node_reboot_why must say why"),
    "package_with_space": ({"node_reboot_by": "nvidia_driver", "node_reboot_why": "x",
                            "node_reboot_packages": ["nvidia-driver", "bad pkg"]}, r'not: \["bad pkg"\]'),
    "package_newline": ({"node_reboot_by": "nvidia_driver", "node_reboot_why": "x",
                         "node_reboot_packages": ["nvidia-driver\n"]}, "node_reboot_packages must be package names"),
    "relative_path": ({"node_reboot_by": "host_prep", "node_reboot_why": "x",
                       "node_reboot_reasons_file": "reboot-reasons"}, "absolute paths"),
    "zero_timeout": ({"node_reboot_by": "host_prep", "node_reboot_why": "x", "node_reboot_timeout": 0},
                     "node_reboot_timeout must be a positive"),
}


def test_record_refuses_bad_reasons_by_name_before_writing(tmp_path):
    plays = []
    for case, (overrides, _expected) in CASES.items():
        variables = dict(paths(tmp_path / case), **overrides)
        plays.append(case_play(case, "node_reboot", variables, tasks_from=("record",)))
    outcomes, _output = run_cases(tmp_path, plays, env=ENV)
    assert_outcomes(outcomes, CASES)
    assert (tmp_path / "good" / "run" / "reboot-required").exists()
    for case in CASES:
        if case != "good":
            assert list((tmp_path / case / "run").iterdir()) == [], case


def test_read_is_one_remote_task_and_one_fact():
    """tasks_from: read runs on every role that asks (host_prep, nvidia_driver): the marker and both
    lists are read by one task, not a stat and a slurp, and one set_fact records them."""
    with open(os.path.join(ROOT, "roles", "node_reboot", "tasks", "read.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    assert [next(key for key in task if key.startswith("ansible.builtin.")) for task in tasks] == [
        "ansible.builtin.slurp", "ansible.builtin.set_fact"]
    assert len(tasks[0]["loop"]) == 3
