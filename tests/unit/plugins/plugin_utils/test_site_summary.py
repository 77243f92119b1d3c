# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.site_summary import FilterModule, site_verdict
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.site_summary import SiteVerdictError, node_verdict

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

PASS = {"check": "driver", "ok": True, "status": "pass"}
NA = {"check": "fabric", "ok": True, "status": "n/a"}
PENDING = {"check": "gpus", "ok": True, "status": "pending"}
ECC = {"check": "ecc", "ok": False, "status": "fail"}
XID = {"check": "xid", "ok": False, "status": "fail"}


@pytest.mark.parametrize("checks, failure, expected", [
    ([PASS, NA], None, "accepted"),
    ([], None, "accepted"),
    ([PASS, PENDING], None, "reboot required (GPU checks wait for it)"),
    ([PASS, ECC, PENDING, XID], None, "FAILED acceptance: ecc, xid"),
    (None, None, "not verified"),
    ([PASS], "stage driver, task 'Install': boom", "FAILED in stage driver, task 'Install': boom"),
    (None, "stage verify, task '?': failed", "FAILED in stage verify, task '?': failed"),
])
def test_node_verdict(checks, failure, expected):
    assert node_verdict(checks, failure) == expected
    assert site_verdict(checks, failure) == expected


@pytest.mark.parametrize("checks, message", [
    ("accepted", "verify_checks must be a list"),
    ({"check": "ecc", "ok": False}, "verify_checks must be a list"),
    ([{"check": "ecc"}], "needs 'ok'"),
    (["ecc"], "needs 'ok'"),
])
def test_bad_checks(checks, message):
    with pytest.raises(SiteVerdictError, match=message):
        node_verdict(checks)
    with pytest.raises(AnsibleFilterError, match="site_verdict: .*" + message):
        site_verdict(checks)


def test_the_filter_is_the_function():
    assert FilterModule().filters()["site_verdict"]([ECC]) == "FAILED acceptance: ecc"


def test_site_yml_asks_python_for_the_verdict():
    """The summary's verdict is site_verdict's, not a Jinja chain beside it."""
    with open(os.path.join(ROOT, "playbooks", "site.yml"), encoding="utf-8") as handle:
        plays = yaml.safe_load(handle)
    found = []

    def walk(node):
        if isinstance(node, dict):
            summary = (node.get("ansible.builtin.set_fact") or {}).get("site_node_summary") \
                if isinstance(node.get("ansible.builtin.set_fact"), dict) else None
            if summary is not None:
                found.append(summary["verdict"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(plays)
    assert found, "site.yml no longer records site_node_summary"
    assert all("gpucloud.fleet.site_verdict(" in verdict and "verify_checks |" in verdict for verdict in found), found


SUMMARY = {"profile": "lab", "os": "Debian 12", "stages": ["host_prep"], "reboot_required": False,
           "reboot_allowed": False, "verdict": "accepted"}


def test_site_reports_write_the_summary_once_with_its_json():
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.site_summary import reports
    out = reports({"a": SUMMARY}, ["host_prep", "verify"], ["host_prep"], {"verify": "later"}, False, ["a", "b"])
    assert sorted(out["files"]) == ["site-summary.json", "site-summary.md"]
    assert out["fleet"] is None
    md = out["files"]["site-summary.md"]
    assert "| a | lab | Debian 12 | host_prep | not needed | accepted |" in md
    assert "Stages skipped by rollout_stages: verify (later)." in md and "Not rolled out: b." in md
    assert yaml.safe_load(out["files"]["site-summary.json"]) == {"a": SUMMARY}
    assert out["lines"] == md.splitlines()


def test_site_reports_with_checks_add_the_fleet_table_first():
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.site_summary import reports
    out = reports({"a": SUMMARY}, ["verify"], ["verify"], None, True, ["a", "b"],
                  {"a": [dict(PASS, host="a", detail=""), dict(ECC, host="a", detail="2 errors")]}, "/r")
    assert sorted(out["files"]) == ["fleet.json", "fleet.md", "site-summary.json", "site-summary.md"]
    assert out["fleet"]["failed_hosts"] == ["a", "b"]
    assert yaml.safe_load(out["files"]["fleet.json"]) == out["fleet"]
    assert out["lines"][:len(out["files"]["fleet.md"].splitlines())] == out["files"]["fleet.md"].splitlines()
    assert "Reports: /r" in out["lines"]
    assert out["lines"][-len(out["files"]["site-summary.md"].splitlines()):] == out["files"]["site-summary.md"].splitlines()
    assert out["files"]["site-summary.md"].startswith("# Rollout summary (CHECK MODE: nothing was changed)")


def test_site_reports_filter_refuses_what_is_not_a_mapping():
    filters = FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match="site_reports: expected a mapping"):
        filters["site_reports"]([], [], [])
    with pytest.raises(AnsibleFilterError, match="site_reports: the fleet's checks must be a mapping"):
        filters["site_reports"]({}, [], [], checks=[PASS])
