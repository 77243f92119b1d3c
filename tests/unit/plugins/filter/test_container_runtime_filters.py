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


def test_packages():
    assert FILTERS["nvidia_container_toolkit_packages"]("1.17.8", "apt")[1] == "nvidia-container-toolkit-base=1.17.8-1"


@pytest.mark.parametrize("name,args", [
    ("nvidia_container_toolkit_packages", ("", "apt")),
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
    assert plan == {"action": "keep", "driver": "580.159.04", "errors": [], "record": "580.159.04\n",
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


# --- Issue 28 item 9: the CDI spec follows the MIG layout ------------------------------------------
# nvidia-smi -L of one GPU before and after a MIG layout change, in the format of NVIDIA's MIG
# user guide ("nvidia-smi -L" under "Getting Started with MIG"); UUIDs made up.
GPU_ONLY = "GPU 0: NVIDIA H200 (UUID: GPU-4fc604de-9030-742c-d69f-594418e871d5)\n"
MIG_2X3G = GPU_ONLY + (
    "  MIG 3g.71gb     Device  0: (UUID: MIG-0a1b2c3d-0000-5000-8000-000000000001)\n"
    "  MIG 3g.71gb     Device  1: (UUID: MIG-0a1b2c3d-0000-5000-8000-000000000002)\n")
MIG_7X1G = GPU_ONLY + "".join(
    "  MIG 1g.18gb     Device  %d: (UUID: MIG-0a1b2c3d-0000-5000-8000-00000000001%d)\n" % (n, n) for n in range(7))


def plan_for(gpu_list, recorded):
    return FILTERS["nvidia_cdi_plan"](SPEC, proc_text=H200_PROC.replace("580.159.04", "580.95.05"),
                                      recorded=recorded, gpu_list=gpu_list)


def test_cdi_plan_regenerates_after_a_mig_layout_change():
    first = plan_for(MIG_2X3G, "580.95.05")  # a record from before layouts were recorded
    assert first["action"] == "generate" and "does not say which GPU/MIG layout" in first["reason"]
    assert first["record"].startswith("580.95.05\nlayout sha256:")
    assert plan_for(MIG_2X3G, first["record"])["action"] == "keep"
    changed = plan_for(MIG_7X1G, first["record"])
    assert changed["action"] == "generate"
    assert changed["reason"] == "the GPU/MIG layout changed since the CDI spec was made (1 GPU(s) and 7 MIG device(s) now)"
    assert plan_for(GPU_ONLY, first["record"])["action"] == "generate"  # MIG turned off
    # The driver still decides on its own: a new driver regenerates even with the same layout.
    assert plan_for(MIG_2X3G, first["record"].replace("580.95.05", "570.195.03"))["action"] == "generate"


def test_cdi_plan_without_nvidia_smi_output_judges_only_the_driver():
    plan = plan_for("", "580.95.05\nlayout sha256:abc\n")
    assert plan["action"] == "keep" and plan["record"] == "580.95.05\n"


def test_cdi_plan_refuses_unreadable_nvidia_smi_output_by_name():
    with pytest.raises(AnsibleFilterError, match=r"nvidia_cdi_plan: nvidia-smi -L line 1 is neither"):
        plan_for("No devices were found\n", "580.95.05")
    with pytest.raises(AnsibleFilterError, match=r"nvidia-smi -L line 1"):
        plan_for("  MIG 1g.18gb     Device  0: (UUID: MIG-1)\n", "580.95.05")


# --- Issue 28 items 3/17: daemon.json ---------------------------------------------------------------

def test_deeply_nested_daemon_json_is_a_filter_error():
    text = '{"a": ' * 100000 + "1" + "}" * 100000
    with pytest.raises(AnsibleFilterError, match="docker_nvidia_runtime: daemon.json nests objects or arrays too deeply"):
        FILTERS["docker_nvidia_runtime"](text)


def test_deeply_nested_cdi_spec_is_regenerated():
    plan = FILTERS["nvidia_cdi_plan"]("a: " + "[" * 100000, package_version="580.95.05-1", recorded="580.95.05")
    assert plan["action"] == "generate" and plan["errors"]
