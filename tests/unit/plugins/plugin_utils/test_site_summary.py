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
