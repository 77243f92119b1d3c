# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.acceptance import FilterModule

FILTERS = FilterModule().filters()
NO_GPU = {"driver_loaded": False, "gpu_count": 0, "gpus": []}


def test_checks_fleet_and_markdown_through_filters():
    profile = {"name": "lab", "gpu_count": 0, "firewall": False}
    checks = FILTERS["acceptance_checks"]({"nvidia": NO_GPU}, "lab-gpu-1", profile)
    assert all(c["ok"] for c in checks)
    report = FILTERS["acceptance_fleet"]({"lab-gpu-1": checks})
    assert report["gpu_less_hosts"] == ["lab-gpu-1"]
    assert FILTERS["acceptance_markdown"](checks, "lab-gpu-1").startswith("# Node acceptance: lab-gpu-1")
    assert "No failed checks." in FILTERS["acceptance_markdown"](report)


def test_errors_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match="acceptance_checks: host h: the hardware profile"):
        FILTERS["acceptance_checks"]({}, "h", None)
    with pytest.raises(AnsibleFilterError, match="acceptance_fleet: expected a mapping"):
        FILTERS["acceptance_fleet"]([])
    with pytest.raises(AnsibleFilterError, match="acceptance_markdown: give"):
        FILTERS["acceptance_markdown"]([])


def test_xid_summary():
    log = "NVRM: Xid (PCI:0000:10:1c): 48, pid=1, DBE (double bit error) ECC error\n"
    assert FILTERS["acceptance_xid_summary"](log)[0]["code"] == 48
    assert "Double-bit" in FILTERS["acceptance_xid_summary"](log, as_text=True)
    assert FILTERS["acceptance_xid_summary"](None) == []


def test_observed_completes_the_module_result():
    observed = FILTERS["acceptance_observed"]({"stack": {}, "lspci": {"text": ""}}, cuda='{"devices": []}',
                                              burn_in={"rc": 3, "stdout": "", "stderr": "no GPU\n"})
    assert observed["cuda"] == {"error": None, "devices": []}
    assert observed["burn_in"] == {"error": "no GPU"}
    assert "lspci" not in observed and observed["pcie_acs"]["error"]
    with pytest.raises(AnsibleFilterError, match="acceptance_observed: expected the node_observation"):
        FILTERS["acceptance_observed"]("text")
    with pytest.raises(AnsibleFilterError, match="acceptance_observed: burn_in must be"):
        FILTERS["acceptance_observed"]({}, burn_in="3")


def test_settings_problems_name_each_variable(tmp_path):
    capture = tmp_path / "topo.txt"
    capture.write_text("GPU0\n")
    good = {"overrides": {}, "renamed_set": ["verify_facts_from"],
            "renamed": {"verify_burn_in": "node_acceptance_burn_in"},
            "captures": {"node_acceptance_topology_from": str(capture), "node_acceptance_xid_from": ""},
            "firewall_probe": ["iptables"], "fabric_manager_probe": ["systemctl"], "burn_in_seconds": 10}

    def problems(profile, **changes):
        settings = dict(good)
        settings.update(changes)
        return FILTERS["acceptance_settings_problems"](profile, "h", **settings)

    assert problems({"gpu_count": 0}) == []
    assert "gpucloud_profile: h has no gpucloud_profile" in problems(None)[0]
    assert "gpucloud_profile_overrides" in problems({"gpu_count": 0}, overrides=[])[0]
    assert problems({"gpu_count": 0}, renamed_set=["verify_burn_in", "verify_facts_from"]) == [
        "verify_burn_in is now node_acceptance_burn_in: rename it in the inventory (roles/node_acceptance/README.md)."]
    assert problems({"gpu_count": 0}, captures={"node_acceptance_topology_from": "/nonexistent/t"}) == [
        "node_acceptance_topology_from: /nonexistent/t is not a file on the controller; give the path "
        "of a capture, or '' to read the node."]
    for bad in ({"firewall_probe": []}, {"fabric_manager_probe": []}, {"burn_in_seconds": 0},
                {"burn_in_seconds": "x"}):
        assert "node_acceptance_burn_in_seconds" in problems({"gpu_count": 0}, **bad)[0], bad
    assert len(problems(None, firewall_probe=[], renamed_set=["verify_burn_in"])) == 3
