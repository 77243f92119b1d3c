# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: gpu_monitoring_source.yml and monitoring_server_targets.yml beside this file.
# Logic: plugin_utils/gpu_monitoring.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import gpu_monitoring


def gpu_monitoring_source(requested, dcgm_version, facts):
    try:
        return gpu_monitoring.gpu_source(requested, dcgm_version, facts)
    except gpu_monitoring.GpuMonitoringError as exc:
        raise AnsibleFilterError("gpu_monitoring_source: %s" % exc) from exc


def monitoring_server_targets(nodes, hostvars):
    try:
        return gpu_monitoring.scrape_targets(nodes, hostvars)
    except gpu_monitoring.GpuMonitoringError as exc:
        raise AnsibleFilterError("monitoring_server_targets: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {
            "gpu_monitoring_source": gpu_monitoring_source,
            "monitoring_server_targets": monitoring_server_targets,
        }
