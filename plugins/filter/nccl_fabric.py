# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: nccl_fabric_plan.yml beside this file. The logic lives in
# plugins/plugin_utils/nccl_fabric.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nccl_fabric


def nccl_fabric_plan(settings, host):
    try:
        return nccl_fabric.nccl_fabric_plan(settings, host)
    except nccl_fabric.NcclFabricPlanError as exc:
        raise AnsibleFilterError("nccl_fabric_plan: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"nccl_fabric_plan": nccl_fabric_plan}
