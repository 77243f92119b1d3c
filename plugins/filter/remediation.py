# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: remediation_plan.yml, remediation_alert.yml, remediation_fleet_view.yml and
# remediation_gpu_in_use.yml beside this file. Logic: plugin_utils/remediation.py.


import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import remediation
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


def _alert(alert):
    if isinstance(alert, str):
        try:
            return json.loads(alert)
        except ValueError as exc:
            raise remediation.RemediationError("remediate_alert: not JSON (%s)" % exc) from exc
    return plain(alert)


def remediation_alert(alert):
    try:
        return remediation.alert_from_alertmanager(_alert(alert))
    except remediation.RemediationError as exc:
        raise AnsibleFilterError("remediation_alert: %s" % exc) from exc


def remediation_fleet_view(node, profile_nodes, histories, group_alerts, now, settings=None, maintenance=None):
    try:
        return remediation.fleet_view(str(node), plain(profile_nodes), plain(histories),
                                      [_alert(alert) for alert in plain(group_alerts) or []], plain(now),
                                      plain(settings), plain(maintenance) or ())
    except remediation.RemediationError as exc:
        raise AnsibleFilterError("remediation_fleet_view: %s" % exc) from exc


def remediation_plan(alert, node, history=None, fleet=None, settings=None):
    try:
        return remediation.plan(_alert(alert), plain(node), plain(history), plain(fleet), plain(settings))
    except remediation.RemediationError as exc:
        raise AnsibleFilterError("remediation_plan: %s" % exc) from exc


def remediation_gpu_in_use(gpu, gpus_csv, apps_csv, readable=True):
    try:
        return remediation.gpu_in_use(plain(gpu), str(gpus_csv or ""), str(apps_csv or ""), bool(readable))
    except remediation.RemediationError as exc:
        raise AnsibleFilterError("remediation_gpu_in_use: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"remediation_alert": remediation_alert, "remediation_fleet_view": remediation_fleet_view,
                "remediation_plan": remediation_plan, "remediation_gpu_in_use": remediation_gpu_in_use}
