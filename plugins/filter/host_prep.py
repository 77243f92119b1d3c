# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: host_prep_bios_plan.yml, host_prep_plan.yml and host_prep_node_state.yml beside this file.
# Logic: plugin_utils/host_prep_bios.py and plugin_utils/host_prep.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import host_prep, host_prep_bios


def host_prep_bios_plan(wanted, current, settings=None):
    try:
        return host_prep_bios.bios_plan(wanted, current, settings)
    except host_prep_bios.BiosPlanError as exc:
        raise AnsibleFilterError("host_prep_bios_plan: %s" % exc) from exc


def host_prep_plan(settings):
    try:
        return host_prep.plan(settings)
    except host_prep.HostPrepError as exc:
        raise AnsibleFilterError("host_prep_plan: %s" % exc) from exc


def host_prep_node_state(text):
    try:
        return host_prep.node_state(text)
    except host_prep.HostPrepError as exc:
        raise AnsibleFilterError("host_prep_node_state: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"host_prep_bios_plan": host_prep_bios_plan, "host_prep_plan": host_prep_plan,
                "host_prep_node_state": host_prep_node_state}
