# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import re

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
