# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugin_utils/gpu_sharing.py: the gpu_sharing role's plan (checks and derived values), and its
mig-parted config on the example inventory's profiles (was the mig_parted_config filter's test)."""


import glob
import json
import os

import jsonschema
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.gpu_sharing import gpu_sharing_plan as plan_filter
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.gpu_sharing import GpuSharingPlanError, gpu_sharing_plan
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT

SCHEMA = os.path.join(ROOT, "roles", "gpu_sharing", "files", "schemas", "mig-parted-config-v1.schema.json")
MPS = {"name": "mps", "gpu_model": "H200", "gpu_count": 2, "gpu_memory_mib_min": 80000, "mig": False,
       "sharing": {"mode": "mps", "replicas": 4}}
MIG = {"name": "mig", "gpu_model": "A100 80GB PCIe", "gpu_count": 4, "mig": {"strategy": "single", "layout": "all-1g.10gb"}}
TS = {"name": "ts", "gpu_model": "H200", "gpu_count": 8, "mig": False, "sharing": {"mode": "time-slicing", "replicas": 2}}
SETTINGS = {"gpu_sharing_mig_tool": "nvidia-smi", "gpu_sharing_mig_parted_version": "0.15.0-1",
            "gpu_sharing_mps_host_daemon": True, "gpu_sharing_mps_active_thread_percentage": None,
            "gpu_sharing_mps_pinned_device_mem_limit": None}


def settings(**changes):
    return dict(SETTINGS, **changes)


def example_profiles():
    profiles = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "example", "group_vars", "*.yml"))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        if "gpucloud_profile" in data:
            profiles[data["gpucloud_profile"]["name"]] = data["gpucloud_profile"]
    return profiles


def test_every_example_profile_gives_a_strict_config():
    with open(SCHEMA) as handle:
        validator = jsonschema.Draft202012Validator(json.load(handle))
    profiles = example_profiles()
    assert "a100_80g_pcie" in profiles
    for name, profile in profiles.items():
        plan = gpu_sharing_plan(profile, SETTINGS)
        config = yaml.safe_load(plan["mig_config"])
        validator.validate(config)
        assert list(config["mig-configs"]) == [plan["mig_layout"]], name


def test_an_a100_80gb_all_1g10gb_profile_is_seven_slices():
    plan = gpu_sharing_plan(MIG, SETTINGS)
    assert plan["mig_wanted"] is True and plan["mig_layout"] == "all-1g.10gb"
    assert yaml.safe_load(plan["mig_config"])["mig-configs"] == {"all-1g.10gb": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    assert plan["mode"] == "none" and plan["mps_wanted"] is False
    assert plan["mps_thread_percentage"] == 0 and plan["mps_mem_limit"] == ""


def test_mps_limits_come_from_the_profile():
    plan = gpu_sharing_plan(MPS, SETTINGS)
    assert plan["mode"] == "mps" and plan["mps_wanted"] is True and plan["mig_wanted"] is False
    assert plan["mig_layout"] == "all-disabled"
    assert plan["mps_thread_percentage"] == 25
    assert plan["mps_mem_limit"] == "0=20000M,1=20000M"


def test_mps_settings_win_over_the_profile():
    plan = gpu_sharing_plan(MPS, settings(gpu_sharing_mps_active_thread_percentage="60",
                                          gpu_sharing_mps_pinned_device_mem_limit="0=16G,1=16G"))
    assert plan["mps_thread_percentage"] == 60 and plan["mps_mem_limit"] == "0=16G,1=16G"
    assert gpu_sharing_plan(MPS, settings(gpu_sharing_mps_pinned_device_mem_limit=""))["mps_mem_limit"] == ""
    assert gpu_sharing_plan(MPS, settings(gpu_sharing_mps_host_daemon=False))["mps_wanted"] is False


def test_time_slicing_has_no_mps_limits():
    plan = gpu_sharing_plan(TS, SETTINGS)
    assert plan["mode"] == "time-slicing" and plan["mps_wanted"] is False
    assert plan["mps_thread_percentage"] == 0 and plan["mps_mem_limit"] == ""
    assert gpu_sharing_plan(dict(TS, sharing=None), SETTINGS)["mode"] == "none"


@pytest.mark.parametrize("profile,changes,words", [
    (None, {}, "gpucloud_profile must be the node's hardware profile"),
    ("mps", {}, "gpucloud_profile must be the node's hardware profile"),
    (dict(MPS, mig={"strategy": "single", "layout": "all-1g.18gb"}), {}, "gpucloud_profile: "),
    (dict(MPS, sharing={"mode": "mps", "replicas": 1}), {}, "gpucloud_profile: "),
    (dict(MPS, sharing={"mode": "mps", "replicas": 2, "typo": 1}), {}, "gpucloud_profile: "),
    (dict(MIG, mig={"strategy": "single", "layout": "all-1g.10gb\n"}), {}, "gpucloud_profile: .*MIG layout"),
    (dict(MIG, gpu_model="H200"), {}, "gpucloud_profile: .*H200-141GB has no MIG profile 1g.10gb"),
    (dict(MIG, gpu_model="L4"), {}, "gpucloud_profile: .*not a MIG GPU"),
    (MPS, {"gpu_sharing_mig_tool": "mig-manager"}, "gpu_sharing_mig_tool must be nvidia-smi or mig-parted"),
    (MPS, {"gpu_sharing_mig_tool": "mig-parted", "gpu_sharing_mig_parted_version": ""},
     "gpu_sharing_mig_parted_version must pin"),
    (MPS, {"gpu_sharing_mps_active_thread_percentage": 101}, "gpu_sharing_mps_active_thread_percentage must be"),
    (MPS, {"gpu_sharing_mps_active_thread_percentage": -1}, "gpu_sharing_mps_active_thread_percentage must be"),
    (MPS, {"gpu_sharing_mps_active_thread_percentage": "50\n"}, "gpu_sharing_mps_active_thread_percentage must be"),
    (MPS, {"gpu_sharing_mps_active_thread_percentage": True}, "gpu_sharing_mps_active_thread_percentage must be"),
    (MPS, {"gpu_sharing_mps_active_thread_percentage": 50.5}, "gpu_sharing_mps_active_thread_percentage must be"),
    (MPS, {"gpu_sharing_mps_pinned_device_mem_limit": "0=16G,1=16G\n"}, "gpu_sharing_mps_pinned_device_mem_limit must be"),
    (MPS, {"gpu_sharing_mps_pinned_device_mem_limit": "0=16G;1=16G"}, "gpu_sharing_mps_pinned_device_mem_limit must be"),
    (MPS, {"gpu_sharing_mps_pinned_device_mem_limit": 16}, "gpu_sharing_mps_pinned_device_mem_limit must be"),
])
def test_bad_input_is_refused_naming_the_variable(profile, changes, words):
    with pytest.raises(GpuSharingPlanError, match=words):
        gpu_sharing_plan(profile, settings(**changes))


def test_the_filter_names_itself_and_chains():
    with pytest.raises(AnsibleFilterError, match="gpu_sharing_plan: gpu_sharing_mig_tool") as info:
        plan_filter(MPS, settings(gpu_sharing_mig_tool="x"))
    assert isinstance(info.value.__cause__, GpuSharingPlanError)
