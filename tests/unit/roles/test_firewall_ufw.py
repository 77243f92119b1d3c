# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.firewall on a host with ufw (issue 27 item 4: Ubuntu Server installs ufw).

ufw Breaks netfilter-persistent and iptables-persistent in Debian's and Ubuntu's archives
(ufw 0.36.2-6, noble: "Breaks: iptables-persistent, netfilter-persistent"), so the role's
package step would make apt remove it. tasks/validate.yml must refuse that before any change
unless firewall_remove_ufw is set. dpkg's answer comes from a stand-in dpkg-query first on
PATH, which prints what dpkg-query prints for each state.
"""


import os
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ROOT, ansible_env, case_play, run_cases

REFUSAL = "Validate the policy, detect the controller and choose the IP families (nothing changes yet)"

# dpkg-query --show --showformat '${db:Status-Abbrev}|${Package}|${Version}\n' ufw: (rc, stdout)
DPKG = {
    "installed": (0, "ii |ufw|0.36.2-6"),
    "config-files": (0, "rc |ufw|0.36.2-6"),
    "unknown": (1, ""),
}

CASES = [
    ("installed", {}, REFUSAL),
    ("installed", {"firewall_remove_ufw": True}, None),
    ("config-files", {}, None),
    ("unknown", {}, None),
]


def _fake_dpkg_query(directory, state):
    rc, out = DPKG[state]
    path = directory / "dpkg-query"
    path.write_text("#!/bin/sh\n[ -n '%s' ] && echo '%s'\n%s\nexit %d\n" % (
        out, out, "" if rc == 0 else "echo 'dpkg-query: no packages found matching ufw' >&2", rc))
    path.chmod(0o755)


def _debian_vars():
    with open(os.path.join(ROOT, "roles", "firewall", "vars", "Debian.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.mark.parametrize("state,variables,task", CASES,
                         ids=["%s-%s" % (case[0], "remove" if case[1] else "keep") for case in CASES])
def test_installed_ufw_is_refused_unless_removal_is_asked(tmp_path, state, variables, task):
    fake = tmp_path / "bin"
    fake.mkdir()
    _fake_dpkg_query(fake, state)
    plays = [{"name": "Gather the facts validate.yml reads", "hosts": "localhost", "connection": "local",
              "gather_facts": True, "gather_subset": ["min"], "tasks": []},
             case_play("case", "firewall", dict(_debian_vars(), firewall_controller_cidrs=["192.0.2.10/32"],
                                                **variables))]
    env = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable,
                      PATH=str(fake) + os.pathsep + os.environ.get("PATH", ""))
    outcome = run_cases(tmp_path, plays, env=env)[0]["case"]
    if task is None:
        assert outcome["task"] is None, outcome
    else:
        assert outcome["task"] == task, outcome
        assert "firewall_remove_ufw: true" in outcome["msg"] and "ufw is installed" in outcome["msg"], outcome
