# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.host_hardening's validate.yml on localhost: the lock-out check judges the account
Ansible logs in as (ansible_user), not the become user the facts describe, and names it."""


import sys

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, assert_outcomes, case_play, run_cases

ENV = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)
GOOD = {"host_hardening_chrony_servers": ["192.0.2.10"], "host_hardening_ssh_allow_groups": ["root"]}

CASES = {
    # No ansible_user: the play's own account (root here) is the login account.
    "root_in_allowed_group": ({}, None),
    "login_user_not_allowed": ({"ansible_user": "nobody"}, r"would lock nobody out of SSH: nobody \(groups: nogroup\)"),
    "root_not_allowed": ({"host_hardening_ssh_allow_groups": ["gpucloud-admins"]},
                         r"would lock root out of SSH: root \(groups: root\) is in none"),
    "root_login_refused": ({"host_hardening_ssh_permit_root_login": "no"}, r"logs in as root"),
}


def test_lockout_check_judges_the_login_account(tmp_path):
    plays = []
    for case, (overrides, _expected) in CASES.items():
        play = case_play(case, "host_hardening", dict(GOOD, **overrides), tasks_from=("set_vars", "validate"))
        # validate.yml reads the facts of the account the play runs as.
        play.update(gather_facts=True, gather_subset=["min"])
        plays.append(play)
    outcomes, _output = run_cases(tmp_path, plays, env=ENV)
    assert_outcomes(outcomes, CASES)
