# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Decisions of the host_hardening role that could lock the operator out or let a
background upgrade move a held package: pure functions, unit-tested."""


import re


def ssh_lockout_problems(user, user_groups, allow_groups, permit_root_login, connection,
                         uses_password=False, authorized_keys_lines=None):
    """Why the hardened sshd would refuse the user this play connects as; [] when it would not.

    user_groups: the user's groups (`id -Gn USER`); allow_groups: the planned AllowGroups
    ([] = no AllowGroups line); connection: the play's connection plugin (ssh, paramiko,
    podman, local ...); authorized_keys_lines: the user's authorized_keys lines, or None when
    not read. Only an SSH-borne connection can be cut off by sshd, but the AllowGroups rule
    is checked for any connection: the next SSH run would use the same user.
    """
    problems = []
    groups = set(user_groups or [])
    if allow_groups and not groups & set(allow_groups):
        problems.append(
            "%s (groups: %s) is in none of host_hardening_ssh_allow_groups (%s): add the user to one "
            "of them, or the group to the list, before hardening sshd"
            % (user, " ".join(sorted(groups)) or "none", ", ".join(allow_groups)))
    if user == "root" and permit_root_login == "no":
        problems.append("the play logs in as root and host_hardening_ssh_permit_root_login is 'no': "
                        "connect as an unprivileged user with become, or use prohibit-password")
    over_ssh = connection in ("ssh", "paramiko", "paramiko_ssh", "ansible.builtin.ssh",
                              "ansible.builtin.paramiko_ssh", "smart")
    if over_ssh and uses_password:
        problems.append("the play logs in with a password (ansible_password), which the hardened sshd refuses: "
                        "install the key first")
    if over_ssh and not uses_password and authorized_keys_lines is not None:
        keys = [line for line in authorized_keys_lines
                if line.strip() and not line.lstrip().startswith("#")]
        if not keys:
            problems.append("%s has no key in its authorized_keys, and password logins are about to end" % user)
    return problems


def unattended_blacklist(held, prefixes):
    """Unattended-Upgrade::Package-Blacklist entries (regular expressions, which
    unattended-upgrades matches against package names) for every held package and every
    name prefix, sorted and without duplicates."""
    entries = set()
    for name in held or []:
        name = name.strip().split(":", 1)[0]
        if name:
            entries.add("^%s$" % re.escape(name))
    for prefix in prefixes or []:
        prefix = prefix.strip()
        if prefix:
            entries.add("^%s" % re.escape(prefix))
    return sorted(entries)
