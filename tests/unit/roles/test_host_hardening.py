# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.host_hardening's validate.yml on localhost: the lock-out check judges the account
the play logs in as (`id -un` without become; never ansible_user or the become user's facts),
against the host's own sshd -T (here a stand-in printing Debian 12's real default sshd -T with
the case's lines), and names it."""


import os
import sys

import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, assert_outcomes, case_play, run_cases

ENV = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_SSHD_T = os.path.join(ROOT, "tests", "fixtures", "compliance", "sshd-T-debian12-default.txt")
GOOD = {"host_hardening_chrony_servers": ["192.0.2.10"], "host_hardening_ssh_allow_groups": ["root"]}

# case: (variables, sshd -T lines replacing the default's, sshd -T exit status, expected refusal)
CASES = {
    # The play runs as root on localhost: root is the login account.
    "root_in_allowed_group": ({}, [], 0, None),
    # ansible_user names an allowed account, but the connection logs in as root: root is judged.
    "ansible_user_is_not_the_login": ({"ansible_user": "nobody", "host_hardening_ssh_allow_groups": ["nogroup"]}, [], 0,
                                      r"would lock root out of SSH: root \(groups: root\) is in none of "
                                      r"host_hardening_ssh_allow_groups \(nogroup\)"),
    "root_not_allowed": ({"host_hardening_ssh_allow_groups": ["gpucloud-admins"]}, [], 0,
                         r"would lock root out of SSH: root \(groups: root\) is in none"),
    "root_login_refused": ({"host_hardening_ssh_permit_root_login": "no"}, [], 0, r"logs in as root"),
    "host_denies_the_login": ({}, ["denyusers root"], 0, r"root is refused by DenyUsers root"),
    "host_allows_other_users": ({}, ["allowusers ops", "allowusers admin@10.0.0.*"], 0, r"none of AllowUsers ops admin@"),
    "host_denies_its_group": ({}, ["denygroups ro*"], 0, r"group root is refused by DenyGroups ro\*"),
    "host_needs_keyboard_interactive": ({}, ["authenticationmethods publickey,keyboard-interactive"], 0,
                                        r"AuthenticationMethods publickey,keyboard-interactive, which needs "
                                        r"keyboard-interactive"),
    "host_sshd_t_fails": ({}, [], 255, r"sshd -T failed on the host \(rc 255"),
}


def fake_sshd(tmp_path, case, lines, rc):
    """An sshd that answers -T with Debian 12's default configuration and LINES, and exits RC."""
    keys = {line.split()[0] for line in lines}
    with open(DEFAULT_SSHD_T) as handle:
        kept = [line for line in handle.read().splitlines() if line.split(" ", 1)[0] not in keys]
    out = tmp_path / ("%s.sshd-T" % case)
    out.write_text("\n".join(kept + lines) + "\n")
    script = tmp_path / ("%s.sshd" % case)
    script.write_text("#!/bin/sh\n[ \"$1\" = -T ] || exit 2\n%scat %s\n" % (
        "echo 'fake sshd: refused' >&2; exit %d\n" % rc if rc else "", out))
    script.chmod(0o755)
    return str(script)


def test_lockout_check_judges_the_login_account(tmp_path):
    plays = []
    for case, (overrides, lines, rc, _expected) in CASES.items():
        play = case_play(case, "host_hardening", dict(GOOD, **overrides), tasks_from=("set_vars", "validate"))
        # validate.yml reads the facts of the account the play runs as.
        play.update(gather_facts=True, gather_subset=["min"])
        for step in play["tasks"][0]["block"][:2]:
            step["vars"] = {"__host_hardening_sshd_bin": fake_sshd(tmp_path, case, lines, rc)}
        plays.append(play)
    outcomes, _output = run_cases(tmp_path, plays, env=ENV)
    assert_outcomes(outcomes, {case: (None, expected) for case, (_v, _l, _rc, expected) in CASES.items()})


def test_the_login_account_is_asked_for_without_become():
    with open(os.path.join(ROOT, "roles", "host_hardening", "tasks", "validate.yml")) as handle:
        tasks = yaml.safe_load(handle)
    login = [t for t in tasks if (t.get("ansible.builtin.command") or {}).get("argv") == ["id", "-un"]]
    assert len(login) == 1 and login[0]["become"] is False
    with open(os.path.join(ROOT, "roles", "host_hardening", "tasks", "validate.yml")) as handle:
        code = "\n".join(line for line in handle.read().splitlines() if not line.lstrip().startswith("#"))
    assert "ansible_facts.user_id" not in code and "ansible_user" not in code
