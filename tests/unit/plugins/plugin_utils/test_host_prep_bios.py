# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.host_prep import FilterModule, host_prep_bios_plan
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.host_prep_bios import BiosPlanError, bios_plan

CURRENT = {"SriovGlobalEnable": "Disabled", "NumaNodesPerSocket": 2, "ProcAmdIoVt": True,
           "BootMode": "Uefi", "PcieAspm": "Auto"}


def test_only_what_differs_is_patched():
    wanted = {"SriovGlobalEnable": "Enabled", "BootMode": "Uefi"}
    assert bios_plan(wanted, CURRENT) == {"unknown": [], "pending": {}, "to_patch": {"SriovGlobalEnable": "Enabled"}}


def test_nothing_to_patch_when_the_bios_matches():
    assert bios_plan({"BootMode": "Uefi", "NumaNodesPerSocket": 2}, CURRENT)["to_patch"] == {}


@pytest.mark.parametrize("wanted, current", [
    ("true", True), (True, "TRUE"), ("10", 10), (10, "10"), ("enabled", "Enabled"), (1.5, "1.5"),
])
def test_values_compare_as_lower_case_strings(wanted, current):
    assert bios_plan({"A": wanted}, {"A": current})["to_patch"] == {}


@pytest.mark.parametrize("wanted, current", [("Enabled", "Disabled"), (1, 2), (True, "false"), ("10", "100")])
def test_different_values_are_patched_as_wanted(wanted, current):
    assert bios_plan({"A": wanted}, {"A": current})["to_patch"] == {"A": wanted}


def test_pending_settings_win_over_current_values():
    settings = {"SriovGlobalEnable": "Enabled", "NumaNodesPerSocket": "2", "PcieAspm": "Disabled"}
    plan = bios_plan({"SriovGlobalEnable": "Enabled", "PcieAspm": "Auto"}, CURRENT, settings)
    # NumaNodesPerSocket "2" is the current 2: not pending. SriovGlobalEnable is already pending:
    # not patched again. PcieAspm: the pending Disabled would undo the wanted Auto, so patch it back.
    assert plan == {"unknown": [],
                    "pending": {"SriovGlobalEnable": "Enabled", "PcieAspm": "Disabled"},
                    "to_patch": {"PcieAspm": "Auto"}}


def test_pending_settings_of_attributes_the_bmc_lacks_are_ignored():
    assert bios_plan({"BootMode": "Uefi"}, CURRENT, {"Ghost": "On"})["pending"] == {}


@pytest.mark.parametrize("settings", [None, "", [], "Attributes"])
def test_no_settings_object(settings):
    assert bios_plan({"SriovGlobalEnable": "Enabled"}, CURRENT, settings) == {
        "unknown": [], "pending": {}, "to_patch": {"SriovGlobalEnable": "Enabled"}}


def test_unknown_attributes_are_named_and_nothing_is_patched():
    plan = bios_plan({"SriovGlobalEnable": "Enabled", "Zeta": 1, "Alpha": 2}, CURRENT)
    assert plan["unknown"] == ["Alpha", "Zeta"]
    assert plan["to_patch"] == {}


@pytest.mark.parametrize("wanted, current, message", [
    (["SriovGlobalEnable"], CURRENT, "host_prep_bios_attributes must be a mapping"),
    ("SriovGlobalEnable=Enabled", CURRENT, "host_prep_bios_attributes must be a mapping"),
    ({"A": 1}, None, "current BIOS attributes must be a mapping"),
])
def test_bad_input(wanted, current, message):
    with pytest.raises(BiosPlanError, match=message):
        bios_plan(wanted, current)
    with pytest.raises(AnsibleFilterError, match="host_prep_bios_plan: .*" + message):
        host_prep_bios_plan(wanted, current)


def test_the_filter_is_the_plan():
    plan = FilterModule().filters()["host_prep_bios_plan"]({"PcieAspm": "Disabled"}, CURRENT, {"PcieAspm": "Auto"})
    assert plan == {"unknown": [], "pending": {}, "to_patch": {"PcieAspm": "Disabled"}}
