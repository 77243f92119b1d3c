# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: device_plugin_config.yml beside this file. The logic and its sources live in
# plugins/plugin_utils/device_plugin_config.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import device_plugin_config as dpc


def device_plugin_config(profile, flags=None):
    try:
        return dpc.device_plugin_config(profile, flags)
    except ValueError as exc:
        raise AnsibleFilterError("device_plugin_config: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"device_plugin_config": device_plugin_config}
