# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter import remediation as filters

ALERT = {"status": "firing", "startsAt": "2026-12-03T20:00:00Z",
         "labels": {"alertname": "GpuXidFatal", "node": "gpu1", "gpu": "0", "xid": "79"}}
NODE = {"name": "gpu1", "profile": "h200", "scheduler": "slurm"}


def test_plan_takes_the_alert_as_json_text():
    result = filters.remediation_plan(json.dumps(ALERT), NODE)
    assert result["decision"] == "remediate" and result["repair"] == "reboot"


def test_errors_name_the_filter_and_are_chained():
    with pytest.raises(AnsibleFilterError, match="remediation_plan: remediate_alert: not JSON") as info:
        filters.remediation_plan("{not json", NODE)
    assert info.value.__cause__ is not None
    with pytest.raises(AnsibleFilterError, match="remediation_alert: .*names no node") as info:
        filters.remediation_alert({"labels": {"alertname": "GpuXidFatal"}, "startsAt": 0})
    assert info.value.__cause__ is not None


def test_fleet_view_filter():
    view = filters.remediation_fleet_view("gpu1", ["gpu1", "gpu2"], {}, [json.dumps(ALERT)], 1796328000)
    assert view == {"nodes": ["gpu1", "gpu2"], "out": [], "alerting": ["gpu1"]}


def test_filters_are_registered():
    assert set(filters.FilterModule().filters()) == {"remediation_alert", "remediation_fleet_view",
                                                     "remediation_plan", "remediation_gpu_in_use"}
