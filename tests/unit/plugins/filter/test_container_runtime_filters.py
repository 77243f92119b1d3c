# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_runtime filters: thin edges over plugin_utils/container_toolkit.py."""


import json
import os
import sys

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.container_runtime import FilterModule
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "nvsim"))

import nvsim_ctk  # noqa: E402  pylint: disable=wrong-import-position

FILTERS = FilterModule().filters()
SPEC = nvsim_ctk.render(nvsim_ctk.build_spec("h200-hgx8", "580.95.05"), "/etc/cdi/nvidia.yaml")
H200_PROC = fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")


def test_packages_and_missing():
    assert FILTERS["nvidia_container_toolkit_packages"]("1.17.8", "apt")[1] == "nvidia-container-toolkit-base=1.17.8-1"
    facts = {"libnvidia-container1": [{"version": "1.17.8-1~gpucloudsim1"}]}
    assert FILTERS["nvidia_container_toolkit_missing"](facts, "1.17.8", "apt", "1~gpucloudsim1") == [
        "nvidia-container-toolkit=1.17.8-1~gpucloudsim1", "nvidia-container-toolkit-base=1.17.8-1~gpucloudsim1",
        "libnvidia-container-tools=1.17.8-1~gpucloudsim1"]


@pytest.mark.parametrize("name,args", [
    ("nvidia_container_toolkit_packages", ("", "apt")),
    ("nvidia_container_toolkit_missing", ([], "1.17.8", "apt")),
    ("nvidia_container_toolkit_missing", ({}, "1.17", "apt")),
    ("docker_nvidia_runtime", ("[1]",)),
    ("docker_nvidia_runtime", ({"a": 1},)),
])
def test_bad_input_is_a_filter_error(name, args):
    with pytest.raises(AnsibleFilterError, match=name):
        FILTERS[name](*args)


def test_docker_plan():
    plan = FILTERS["docker_nvidia_runtime"](None, "/usr/bin/nvidia-container-runtime", True)
    assert json.loads(plan["text"])["default-runtime"] == "nvidia" and plan["changed"] is True


def test_cdi_plan_keeps_a_valid_spec_for_the_loaded_driver():
    spec = nvsim_ctk.render(nvsim_ctk.build_spec("h200-hgx8", "580.159.04"), "x.yaml")
    plan = FILTERS["nvidia_cdi_plan"](spec, proc_text=H200_PROC, recorded="580.159.04\n")
    assert plan == {"action": "keep", "driver": "580.159.04", "errors": [],
                    "reason": "the CDI spec was made for driver 580.159.04, the loaded kernel module"}


def test_cdi_plan_generates_for_a_new_driver_and_without_a_spec():
    assert FILTERS["nvidia_cdi_plan"](SPEC, proc_text=H200_PROC, recorded="580.95.05")["action"] == "generate"
    plan = FILTERS["nvidia_cdi_plan"](None, package_version="580.95.05-1~gpucloudsim1")
    assert plan["action"] == "generate" and plan["driver"] == "580.95.05"


def test_cdi_plan_waits_for_a_pending_reboot():
    plan = FILTERS["nvidia_cdi_plan"](None, package_version="580.95.05-1", reboot_required=True)
    assert plan["action"] == "skip" and "reboot is pending" in plan["reason"]


def test_cdi_plan_regenerates_an_invalid_or_unreadable_spec():
    broken = yaml.safe_load(SPEC)
    broken["kind"] = "nvidia.com"
    plan = FILTERS["nvidia_cdi_plan"](yaml.safe_dump(broken), package_version="580.95.05-1", recorded="580.95.05")
    assert plan["action"] == "generate" and plan["errors"] == ["kind 'nvidia.com' is not VENDOR/CLASS"]
    plan = FILTERS["nvidia_cdi_plan"]("devices: [", package_version="580.95.05-1", recorded="580.95.05")
    assert plan["action"] == "generate" and plan["errors"][0].startswith("it is not YAML")


def test_cdi_plan_bad_proc_text_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="nvidia_cdi_plan: .*NVRM version"):
        FILTERS["nvidia_cdi_plan"](None, proc_text="nonsense")
