# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The monitoring server's rule files, checked and unit-tested by Prometheus' own promtool.

promtool comes from Debian's prometheus package (requirements/monitoring.deb, installed by
scripts/setup.sh); a machine without it fails here rather than skipping the rules' tests.
Besides running promtool, these tests hold the rule files to the collection's conventions:
every alert has a severity, summary, description and runbook and a promtool case that fires
and one that does not; the recording rules of the monitoring contract are there, unchanged;
and the Xid classes of the alerts are exactly those of plugins/module_utils/xid.py.
"""


import glob
import importlib.util
import os
import re
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import xid

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RULES_DIR = os.path.join(ROOT, "roles", "monitoring_server", "files", "rules")
RULE_FILES = sorted(glob.glob(os.path.join(RULES_DIR, "*.rules.yml")))
TEST_DIR = os.path.join(ROOT, "tests", "promtool")
TEST_FILES = sorted(glob.glob(os.path.join(TEST_DIR, "*.test.yml")))

# docs/monitoring-contract.md: these names and expressions are fixed.
CONTRACT_RECORDS = {
    "node:gpucloud_gpus_reporting:count": "count by (node, profile) (DCGM_FI_DEV_GPU_TEMP)",
    "node:gpucloud_gpu_util:avg": "avg by (node, profile) (DCGM_FI_DEV_GPU_UTIL)",
    "node:gpucloud_fb_used_mib:sum": "sum by (node, profile) (DCGM_FI_DEV_FB_USED)",
    "node:gpucloud_power_watts:sum": "sum by (node, profile) (DCGM_FI_DEV_POWER_USAGE)",
    "profile:gpucloud_gpu_util:avg": "avg by (profile) (DCGM_FI_DEV_GPU_UTIL)",
    "fleet:gpucloud_gpus_reporting:count": "count (DCGM_FI_DEV_GPU_TEMP)",
}
SEVERITIES = {"critical", "warning", "info"}


def promtool():
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: scripts/setup.sh installs Debian's prometheus package "
                    "(requirements/monitoring.deb; on Debian 13 the promtool package)")
    return path


def run(*args):
    return subprocess.run([promtool()] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)


def load(path):
    with open(path) as handle:
        return yaml.safe_load(handle)


def rules(kind):
    """Every rule of the given kind ('alert' or 'record') over all rule files."""
    found = []
    for path in RULE_FILES:
        for group in load(path)["groups"]:
            found.extend(rule for rule in group["rules"] if kind in rule)
    return found


def alert(name):
    (rule,) = [rule for rule in rules("alert") if rule["alert"] == name]
    return rule


def test_the_files_are_there():
    assert [os.path.basename(p) for p in RULE_FILES] == [
        "gpucloud-alerts.rules.yml", "gpucloud-nvidia-smi-compat.rules.yml", "gpucloud-recording.rules.yml"]
    assert len(TEST_FILES) >= 8


@pytest.mark.parametrize("path", RULE_FILES, ids=os.path.basename)
def test_promtool_check_rules(path):
    result = run("check", "rules", path)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout


@pytest.mark.parametrize("path", TEST_FILES, ids=os.path.basename)
def test_promtool_test_rules(path):
    result = run("test", "rules", path)
    assert result.returncode == 0 and "SUCCESS" in result.stdout, result.stdout


def test_a_wrong_expectation_fails(tmp_path):
    # The harness itself: promtool must fail on an expectation that is wrong.
    source = os.path.join(TEST_DIR, "memory.test.yml")
    text = open(source).read().replace("counted 1 double-bit", "counted 2 double-bit")
    text = text.replace("../../roles/", os.path.join(ROOT, "roles") + "/")
    mutated = tmp_path / "memory.test.yml"
    mutated.write_text(text)
    result = run("test", "rules", str(mutated))
    assert result.returncode != 0 and "FAILED" in result.stdout, result.stdout


@pytest.mark.parametrize("rule", rules("alert"), ids=lambda rule: rule["alert"])
def test_every_alert_says_what_to_do(rule):
    assert rule["labels"]["severity"] in SEVERITIES
    for key in ("summary", "description", "runbook"):
        assert len(rule["annotations"].get(key, "").strip()) > 20, (rule["alert"], key)


def _alert_cases():
    cases = {}
    for path in TEST_FILES:
        for test in load(path)["tests"]:
            for case in test.get("alert_rule_test", []):
                cases.setdefault(case["alertname"], []).append(bool(case.get("exp_alerts")))
    return cases


@pytest.mark.parametrize("name", [rule["alert"] for rule in rules("alert")])
def test_every_alert_has_a_case_that_fires_and_one_that_does_not(name):
    cases = _alert_cases().get(name, [])
    assert True in cases, "%s: no promtool case in which it fires" % name
    assert False in cases, "%s: no promtool case in which it stays quiet" % name


@pytest.mark.parametrize("name", [rule["record"] for rule in rules("record")])
def test_every_recording_rule_is_tested(name):
    exprs = set()
    for path in TEST_FILES:
        for test in load(path)["tests"]:
            for case in test.get("promql_expr_test", []):
                if case.get("exp_samples"):
                    exprs.add(re.split(r"[{\s]", case["expr"].strip())[0])
    assert name in exprs


def test_contract_recording_rules_unchanged():
    recorded = {rule["record"]: " ".join(rule["expr"].split()) for rule in rules("record")}
    for name, expr in CONTRACT_RECORDS.items():
        assert recorded.get(name) == expr, name
    contract_file = load(os.path.join(RULES_DIR, "gpucloud-recording.rules.yml"))
    in_file = {rule.get("record") for group in contract_file["groups"] for rule in group["rules"]}
    assert set(CONTRACT_RECORDS) <= in_file


def _xid_class(name):
    match = re.fullmatch(r'gpu:gpucloud_xid_events:increase10m\{class="([a-z]+)"\}', alert(name)["expr"].strip())
    assert match, "%s: not one class of gpu:gpucloud_xid_events:increase10m: %s" % (name, alert(name)["expr"])
    return match.group(1)


def _collector():
    """The role's gpu_metrics.py, which labels every counted Xid code with its class."""
    spec = importlib.util.spec_from_file_location(
        "gpu_metrics", os.path.join(ROOT, "roles", "gpu_monitoring", "files", "gpu_metrics.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_xid_alerts_select_the_classes_the_collector_writes():
    # The class label is xid.py's kind, written by the collector: hw needs a GPU reset, a drain
    # or a replacement; a code not in the table is actionable too (xid.judge), never silent.
    assert {name: _xid_class(name) for name in ("GpuXidFatal", "GpuXidApplication", "GpuXidUnclassified")} == {
        "GpuXidFatal": "hw", "GpuXidApplication": "app", "GpuXidUnclassified": "unknown"}
    counter = _collector().XidCounter()
    counter.feed("".join("NVRM: Xid (PCI:0000:18:00): %d, text\n" % code for code in list(xid.XID_CODES) + [150]))
    classes = dict((int(dict(labels)["xid"]), dict(labels)["class"]) for labels, _count in counter.samples())
    assert classes == dict([(code, entry[1]) for code, entry in xid.XID_CODES.items()] + [(150, "unknown")])


def test_no_xid_alert_is_built_on_the_sticking_gauge():
    # DCGM_FI_DEV_XID_ERRORS keeps only the last code until a reset (dcgm-exporter #190, #500).
    for rule in rules("alert"):
        assert "DCGM_FI_DEV_XID_ERRORS" not in rule["expr"] and "gpucloud_xid_last" not in rule["expr"], rule["alert"]


def test_xid_kinds_are_only_hw_and_app():
    # A third kind in xid.py would need a class of its own in the rules.
    assert {entry[1] for entry in xid.XID_CODES.values()} == {"hw", "app"}
