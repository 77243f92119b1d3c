# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: one <filter name>.yml beside this file per filter. The logic lives in
# plugins/plugin_utils/nvidia_driver.py, the nvidia_driver role's plan functions.


import functools

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nvidia_driver as nd


def _filter(name, func):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (nd.NvidiaDriverError, TypeError, ValueError, AttributeError, KeyError) as exc:
            raise AnsibleFilterError("%s: %s" % (name, exc)) from exc
    return wrapper


FILTERS = {
    "nvidia_driver_settings_problems": nd.settings_problems,
    "nvidia_driver_state": nd.driver_state,
    "nvidia_driver_package_plan": nd.package_plan,
}


class FilterModule(object):
    def filters(self):
        return {name: _filter(name, func) for name, func in FILTERS.items()}
