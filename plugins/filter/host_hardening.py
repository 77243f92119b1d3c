# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: host_hardening_ssh_lockout.yml, host_hardening_authorized_keys_files.yml and
# host_hardening_unattended_blacklist.yml.


from ansible.errors import AnsibleFilterError
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_hardening import (
    authorized_keys_files,
    parse_sshd_t_text,
    ssh_lockout_problems,
    unattended_blacklist,
)


def _sshd(sshd_t):
    """sshd -T as a registered command result ({rc, stdout, stderr}), its text, or None."""
    if sshd_t is None:
        return None, None
    if isinstance(sshd_t, dict):
        if sshd_t.get("rc") != 0:
            why = (sshd_t.get("stderr") or sshd_t.get("msg") or "").strip()[:300]
            return None, ("sshd -T failed on the host (rc %s: %s): its sshd configuration must pass sshd -T "
                          "before host_hardening changes it" % (sshd_t.get("rc"), why))
        sshd_t = sshd_t.get("stdout")
    if not isinstance(sshd_t, str):
        raise AnsibleFilterError("host_hardening_ssh_lockout: sshd_t must be sshd -T's output, got %r" % (sshd_t,))
    return parse_sshd_t_text(sshd_t), None


def host_hardening_ssh_lockout(user, user_groups, allow_groups, permit_root_login, connection,
                               uses_password=False, authorized_keys=None, sshd_t=None):
    if not isinstance(user, str) or not user or user != user.strip() or "\n" in user:
        raise AnsibleFilterError("host_hardening_ssh_lockout: the login account (id -un) is required, got %r" % (user,))
    if isinstance(user_groups, str):
        user_groups = user_groups.split()
    if isinstance(authorized_keys, (list, tuple)):
        authorized_keys = "\n".join(str(k) for k in authorized_keys)
    lines = authorized_keys.splitlines() if isinstance(authorized_keys, str) else None
    sshd, failure = _sshd(sshd_t)
    problems = ssh_lockout_problems(user, list(user_groups or []), list(allow_groups or []), permit_root_login,
                                    connection, bool(uses_password), lines, sshd)
    return problems + ([failure] if failure else [])


def host_hardening_authorized_keys_files(sshd_t, user, home):
    if not isinstance(user, str) or not user or not isinstance(home, str) or not home.startswith("/"):
        raise AnsibleFilterError("host_hardening_authorized_keys_files: a login account and its absolute home "
                                 "directory are required, got %r and %r" % (user, home))
    sshd, _failure = _sshd(sshd_t)
    return authorized_keys_files(sshd, user, home)


def host_hardening_unattended_blacklist(held, prefixes):
    if isinstance(held, str):
        held = held.split()
    if not isinstance(prefixes, (list, tuple)):
        raise AnsibleFilterError("host_hardening_unattended_blacklist: prefixes must be a list, got %r" % (prefixes,))
    return unattended_blacklist(held, prefixes)


class FilterModule(object):
    def filters(self):
        return {
            "host_hardening_ssh_lockout": host_hardening_ssh_lockout,
            "host_hardening_authorized_keys_files": host_hardening_authorized_keys_files,
            "host_hardening_unattended_blacklist": host_hardening_unattended_blacklist,
        }
