# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import re
import time

import pytest

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_hardening import (
    ssh_lockout_problems,
    unattended_blacklist,
)

KEY = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA lab"]


def test_user_in_an_allowed_group_passes():
    assert ssh_lockout_problems("root", ["root", "fleet-ssh"], ["fleet-ssh"], "prohibit-password", "ssh",
                                authorized_keys_lines=KEY) == []


def test_user_outside_every_allowed_group_is_refused_by_name():
    problems = ssh_lockout_problems("ops", ["ops", "sudo"], ["fleet-ssh"], "prohibit-password", "ssh",
                                    authorized_keys_lines=KEY)
    assert len(problems) == 1
    assert "ops" in problems[0] and "host_hardening_ssh_allow_groups" in problems[0] and "fleet-ssh" in problems[0]


def test_allow_groups_checked_for_podman_too():
    # the next SSH run uses the same user
    assert ssh_lockout_problems("root", ["root"], ["fleet-ssh"], "prohibit-password", "containers.podman.podman")


def test_no_allow_groups_means_no_group_problem():
    assert ssh_lockout_problems("ops", ["ops"], [], "prohibit-password", "ssh", authorized_keys_lines=KEY) == []


def test_root_with_permit_root_login_no_is_refused():
    problems = ssh_lockout_problems("root", ["root"], [], "no", "ssh", authorized_keys_lines=KEY)
    assert any("permit_root_login" in p for p in problems)


def test_password_connection_is_refused():
    problems = ssh_lockout_problems("ops", ["ops"], [], "prohibit-password", "ssh", uses_password=True)
    assert any("password" in p for p in problems)


def test_no_authorized_key_over_ssh_is_refused_but_not_over_podman():
    assert ssh_lockout_problems("ops", ["ops"], [], "prohibit-password", "ssh", authorized_keys_lines=["# none", ""])
    assert ssh_lockout_problems("ops", ["ops"], [], "prohibit-password", "containers.podman.podman",
                                authorized_keys_lines=[]) == []


def test_blacklist_anchors_holds_and_prefixes():
    entries = unattended_blacklist(["nvidia-driver", "libnvidia-ml1:amd64", "linux-image-6.1.0-28-amd64"], ["nvidia", "cuda-"])
    assert entries == sorted(set(entries))
    assert "^nvidia\\-driver$" in entries and "^libnvidia\\-ml1$" in entries and "^cuda\\-" in entries
    for name in ("nvidia-driver", "libnvidia-ml1", "linux-image-6.1.0-28-amd64", "nvidia-kernel-dkms", "cuda-toolkit-12-4"):
        assert any(re.search(e, name) for e in entries), name
    # a held name is matched whole, not as a prefix of another package
    assert not any(re.search(e, "nvidia-driver-libs") for e in entries if e.endswith("$") and "driver" in e)


# ---------------------------------------------------------------- issue 28 items 1 and 2

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_hardening import (  # noqa: E402
    authentication_methods_problem,
    authorized_keys_files,
    parse_sshd_t_text,
    wildmatch,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text  # noqa: E402

DEFAULT_SSHD_T = fixture_text("compliance", "sshd-T-debian12-default.txt")


def sshd_text_with(*lines):
    """Debian 12's real default sshd -T with LINES in place of the lines of the same keywords
    (sshd -T prints each keyword once; list keywords one line per entry)."""
    keys = {line.split()[0] for line in lines}
    kept = [line for line in DEFAULT_SSHD_T.splitlines() if line.split(" ", 1)[0] not in keys]
    return "\n".join(kept + list(lines)) + "\n"


def sshd_with(*lines):
    return parse_sshd_t_text(sshd_text_with(*lines))


def alice(sshd, allow_groups=("fleet-ssh",), groups=("alice", "fleet-ssh"), keys=None, connection="ssh"):
    return ssh_lockout_problems("alice", list(groups), list(allow_groups), "prohibit-password", connection,
                                authorized_keys_lines=KEY if keys is None else keys, sshd=sshd)


def test_the_default_debian_sshd_lets_an_allowed_key_holder_in():
    assert alice(sshd_with()) == []


@pytest.mark.parametrize("line, reason", [
    ("denyusers alice", "DenyUsers alice"),
    ("denyusers al*", "DenyUsers al*"),
    ("denyusers ?lice", "DenyUsers ?lice"),
    ("allowusers bob", "none of AllowUsers bob"),
    ("allowusers bob@10.0.0.1", "none of AllowUsers bob@10.0.0.1"),
    ("denygroups fleet-*", "group fleet-ssh is refused by DenyGroups fleet-*"),
    ("denygroups alice", "group alice is refused by DenyGroups alice"),
])
def test_every_class_of_sshd_access_rule_is_judged_for_the_login_account(line, reason):
    problems = alice(sshd_with(line))
    assert len(problems) == 1 and reason in problems[0], problems


@pytest.mark.parametrize("line", ["allowusers alice", "allowusers al?ce", "allowusers *", "allowusers alice@192.0.2.*",
                                  "denyusers bob", "denyusers alice@203.0.113.9", "denygroups wheel",
                                  "allowgroups fleet-*"])
def test_rules_that_still_admit_the_account_pass(line):
    assert alice(sshd_with(line)) == []


def test_allow_groups_add_up_with_the_hosts_own():
    # the host already allows "admins"; the planned list adds fleet-ssh: alice (admins only) stays in
    assert alice(sshd_with("allowgroups admins"), groups=["alice", "admins"]) == []
    # the host allows only "admins" and the inventory plans none: alice (fleet-ssh) is refused by the host's line
    problems = alice(sshd_with("allowgroups admins"), allow_groups=[])
    assert len(problems) == 1 and "AllowGroups admins" in problems[0]


def test_the_become_user_is_not_the_account_judged():
    """Issue 28 item 1: login alice, become root, AllowGroups [root]: alice is locked out."""
    problems = ssh_lockout_problems("alice", ["alice"], ["root"], "prohibit-password", "ssh",
                                    authorized_keys_lines=KEY, sshd=sshd_with())
    assert problems and "alice (groups: alice) is in none of host_hardening_ssh_allow_groups (root)" in problems[0]


@pytest.mark.parametrize("methods", ["publickey,keyboard-interactive", "publickey,keyboard-interactive:pam",
                                     "password", "publickey,password keyboard-interactive",
                                     "gssapi-with-mic,publickey"])
def test_authentication_methods_the_role_turns_off_are_refused(methods):
    problems = alice(sshd_with("authenticationmethods %s" % methods))
    assert len(problems) == 1 and "AuthenticationMethods %s" % methods in problems[0], problems
    assert "sshd -t" in problems[0]


@pytest.mark.parametrize("methods, extra", [("any", ()), ("publickey", ()), ("publickey password", ()),
                                            ("publickey,hostbased", ("hostbasedauthentication yes",)),
                                            ("gssapi-with-mic", ("gssapiauthentication yes",))])
def test_authentication_methods_that_stay_possible_pass(methods, extra):
    assert authentication_methods_problem(sshd_with("authenticationmethods %s" % methods, *extra)) is None


def test_an_account_without_a_key_loses_its_only_way_in_unless_keys_come_from_elsewhere():
    problems = alice(sshd_with(), keys=[])
    assert len(problems) == 1 and "only way in" in problems[0]
    assert alice(sshd_with("authorizedkeyscommand /usr/bin/sss_ssh_authorizedkeys"), keys=[]) == []
    assert alice(sshd_with("trustedusercakeys /etc/ssh/user_ca.pub"), keys=[]) == []
    # over podman (the lab) sshd is not the way in
    assert alice(sshd_with(), keys=[], connection="containers.podman.podman") == []


def test_wildmatch_is_sshds_pattern_language_and_stays_fast():
    assert wildmatch("*", "") and wildmatch("a*b?d", "axxbcd") and not wildmatch("a*b?d", "axxbd")
    assert wildmatch("[ab]", "[ab]") and not wildmatch("[ab]", "a")  # no classes in sshd patterns
    assert not wildmatch("Alice", "alice")
    start = time.monotonic()
    assert not wildmatch("*a" * 40 + "b", "a" * 2000)
    assert time.monotonic() - start < 1


def test_authorized_keys_files_follow_sshd_t():
    sshd = sshd_with()
    assert authorized_keys_files(sshd, "alice", "/home/alice") == [
        "/home/alice/.ssh/authorized_keys", "/home/alice/.ssh/authorized_keys2"]
    sshd = sshd_with("authorizedkeysfile /etc/ssh/keys/%u %h/.ssh/k%% /etc/ssh/by-uid/%U")
    assert authorized_keys_files(sshd, "alice", "/home/alice") == ["/etc/ssh/keys/alice", "/home/alice/.ssh/k%"]
    assert authorized_keys_files(None, "root", "/root") == ["/root/.ssh/authorized_keys", "/root/.ssh/authorized_keys2"]


def test_filter_reports_a_failing_sshd_t_and_refuses_a_bad_login_name():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpucloud.fleet.plugins.filter.host_hardening import FilterModule
    filters = FilterModule().filters()
    failed = {"rc": 255, "stdout": "", "stderr": "/etc/ssh/sshd_config line 3: Bad configuration option: Nonsense"}
    problems = filters["host_hardening_ssh_lockout"]("root", "root fleet-ssh", ["fleet-ssh"], "prohibit-password",
                                                     "ssh", False, ["ssh-ed25519 AAAA k"], sshd_t=failed)
    assert problems == [problems[-1]] and "sshd -T failed" in problems[0] and "Nonsense" in problems[0]
    ok = {"rc": 0, "stdout": sshd_text_with("authenticationmethods publickey,keyboard-interactive"), "stderr": ""}
    assert "AuthenticationMethods" in filters["host_hardening_ssh_lockout"](
        "root", "root fleet-ssh", ["fleet-ssh"], "prohibit-password", "ssh", False, ["ssh-ed25519 AAAA k"], sshd_t=ok)[0]
    for bad in ("", "root\n", None):
        with pytest.raises(AnsibleFilterError, match="login account"):
            filters["host_hardening_ssh_lockout"](bad, "root", [], "no", "ssh")
    assert filters["host_hardening_authorized_keys_files"](ok, "root", "/root")[0] == "/root/.ssh/authorized_keys"
