# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: host_hardening_ssh_lockout.yml and host_hardening_unattended_blacklist.yml.


from ansible.errors import AnsibleFilterError
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_hardening import (
    ssh_lockout_problems,
    unattended_blacklist,
)


def host_hardening_ssh_lockout(user, user_groups, allow_groups, permit_root_login, connection,
                               uses_password=False, authorized_keys=None):
    if not isinstance(user, str) or not user:
        raise AnsibleFilterError("host_hardening_ssh_lockout: the connecting user is required, got %r" % (user,))
    if isinstance(user_groups, str):
        user_groups = user_groups.split()
    lines = authorized_keys.splitlines() if isinstance(authorized_keys, str) else authorized_keys
    return ssh_lockout_problems(user, list(user_groups or []), list(allow_groups or []), permit_root_login,
                                connection, bool(uses_password), lines)


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
            "host_hardening_unattended_blacklist": host_hardening_unattended_blacklist,
        }
