# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node side of the compliance evidence: the probe runner the compliance_evidence module
ships. The judging is tested in tests/unit/plugins/plugin_utils/test_compliance_report*.py."""


import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.compliance import ComplianceError, collect


def test_collect_records_missing_programs_and_skips():
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[0] == "missing":
            raise OSError(2, "No such file or directory")
        return 0, "out\n", ""

    ev = collect([{"name": "a", "argv": ["echo", "x"]}, {"name": "b", "argv": ["missing"]},
                  {"name": "c", "argv": ["auditctl", "-l"], "skip": "container"}], run, lambda: "T")
    assert ev["a"] == {"command": "echo x", "rc": 0, "stdout": "out", "stderr": "", "start": "T"}
    assert ev["b"]["rc"] == 127 and "No such file" in ev["b"]["stderr"]
    assert ev["c"] == {"skipped": True, "reason": "container"}
    assert calls == [["echo", "x"], ["missing"]]
    with pytest.raises(ComplianceError):
        collect([{"name": "a", "argv": ["x"]}, {"name": "a", "argv": ["y"]}], run, lambda: "T")


def test_collect_refuses_a_probe_without_a_name_or_argv():
    with pytest.raises(ComplianceError, match="unique name"):
        collect([{"argv": ["true"]}], lambda argv: (0, "", ""), lambda: "T")
    with pytest.raises(ComplianceError, match="probe a has no argv"):
        collect([{"name": "a", "argv": []}], lambda argv: (0, "", ""), lambda: "T")
