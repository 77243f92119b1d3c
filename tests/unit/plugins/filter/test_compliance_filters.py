# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucloud.fleet.plugins.filter.compliance import FilterModule
from ansible_collections.gpucloud.fleet.plugins.filter.host_hardening import FilterModule as HardeningFilters

FILTERS = FilterModule().filters()
HARDENING = HardeningFilters().filters()
MAP = {"frameworks": [{"id": "iso", "title": "ISO", "controls": [
    {"id": "A.8.5", "title": "Secure authentication", "checks": ["ssh_key_only"]},
    {"id": "A.8.7", "title": "Malware", "checks": []}]}]}


def test_node_report_fleet_and_markdown():
    ev = {"sshd_effective": {"command": "sshd -T", "rc": 0, "stdout": "passwordauthentication yes\n", "stderr": "", "start": "t"}}
    node = FILTERS["compliance_node_report"](ev, MAP, "n1", {})
    assert [c["status"] for c in node["frameworks"][0]["controls"]] == ["fail", "not covered"]
    fleet = FILTERS["compliance_fleet_report"]([node], "now")
    assert fleet["totals"] == {"pass": 0, "fail": 1, "not covered": 1}
    assert FILTERS["compliance_markdown"](node).startswith("# Compliance evidence: n1")
    assert FILTERS["compliance_markdown"](fleet).startswith("# Compliance evidence: fleet")


def test_bad_input_raises_filter_errors():
    with pytest.raises(AnsibleFilterError, match="evidence must be a mapping"):
        FILTERS["compliance_node_report"]("text", MAP, "n1")
    with pytest.raises(AnsibleFilterError, match="unknown check"):
        FILTERS["compliance_node_report"]({}, {"frameworks": [{"id": "x", "controls": [{"id": "1", "title": "t", "checks": ["x"]}]}]}, "n1")
    with pytest.raises(AnsibleFilterError):
        HARDENING["host_hardening_ssh_lockout"]("", "root", [], "no", "ssh")


def test_hardening_filters_take_command_output():
    assert HARDENING["host_hardening_ssh_lockout"]("root", "root fleet-ssh", ["fleet-ssh"], "prohibit-password",
                                                   "containers.podman.podman") == []
    assert HARDENING["host_hardening_unattended_blacklist"]("nvidia-driver\n", ["cuda-"]) == ["^cuda\\-", "^nvidia\\-driver$"]
