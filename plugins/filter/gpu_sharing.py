# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: gpu_sharing_plan.yml beside this file. The logic lives in
# plugins/plugin_utils/gpu_sharing.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import gpu_sharing


def gpu_sharing_plan(profile, settings):
    try:
        return gpu_sharing.gpu_sharing_plan(profile, settings)
    except gpu_sharing.GpuSharingPlanError as exc:
        raise AnsibleFilterError("gpu_sharing_plan: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"gpu_sharing_plan": gpu_sharing_plan}
