# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: firewall_role_plan.yml, firewall_probes.yml and firewall_plan.yml beside this file.
# Logic: plugin_utils/firewall.py.


from ansible_collections.gpucloud.fleet.plugins.plugin_utils.firewall import firewall_plan, probe_commands, role_plan


def firewall_role_plan(settings, host, probe, saved=None):
    return role_plan(settings, host, probe, saved)


def firewall_probes(host):
    return probe_commands(host)


class FilterModule(object):
    def filters(self):
        return {
            "firewall_role_plan": firewall_role_plan,
            "firewall_probes": firewall_probes,
            "firewall_plan": firewall_plan,
        }
