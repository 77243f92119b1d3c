# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import copy
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import training_benchmark_report
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_path, run_module

REAL = fixture_path("training_benchmark", "cpu-2rank-gloo-host.json")
PROGRAM = os.path.join(ROOT, "playbooks", "files", "benchmark", "gpucloud_train_bench.py")
STATS = os.path.join(ROOT, "plugins", "module_utils", "benchmark_stats.py")
PROFILES = {"lab": {"precision": "bf16", "floors": {
    "resnet50": {"min_samples_per_s": 0.5, "source": "lab"}, "bert_base": {"min_samples_per_s": 0.1, "source": "lab"}}}}


@pytest.fixture
def reports(tmp_path):
    with open(REAL) as handle:
        real = json.load(handle)
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    for name in ("lab-1", "lab-2"):
        report = copy.deepcopy(real)
        report["node"] = name
        (nodes / ("%s.json" % name)).write_text(json.dumps(report))
    (nodes / "lab-3.json").write_text("{not json")
    return tmp_path, real["run_id"]


def args(tmp_path, run_id, **extra):
    base = {"reports_dir": str(tmp_path / "nodes"), "run_id": run_id, "profiles": PROFILES,
            "nodes": ["lab-1", "lab-2", "lab-3", "lab-4"],
            "node_profiles": {n: {"name": "lab", "gpu_count": 0} for n in ("lab-1", "lab-2", "lab-3", "lab-4")}}
    base.update(extra)
    return base


def test_judges_without_writing(reports):
    tmp_path, run_id = reports
    result = run_module(training_benchmark_report, args(tmp_path, run_id))
    assert result["changed"] is False and "files" not in result
    assert {n: v["status"] for n, v in result["verdicts"].items()} == {
        "lab-1": "pass", "lab-2": "pass", "lab-3": "fail", "lab-4": "fail"}
    assert [f["kind"] for f in result["verdicts"]["lab-3"]["findings"]] == ["missing_report"]


def test_writes_the_report_once_and_check_mode_writes_nothing(reports):
    tmp_path, run_id = reports
    dest = tmp_path / "out"
    checked = run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(dest), plot_format="svg"),
                         check_mode=True)
    assert checked["changed"] is True and not dest.exists()
    first = run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(dest), plot_format="svg"))
    assert first["changed"] is True
    assert sorted(os.listdir(str(dest))) == ["fleet-throughput.svg", "fleet.json", "fleet.md"]
    assert json.loads((dest / "fleet.json").read_text())["summary"] == {"pass": 2, "warn": 0, "fail": 2}
    assert (dest / "fleet.md").read_text() == first["markdown"]
    again = run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(dest), plot_format="svg"))
    assert again["changed"] is False


def test_png_when_matplotlib_is_there(reports):
    pytest.importorskip("matplotlib")
    tmp_path, run_id = reports
    dest = tmp_path / "out"
    first = run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(dest)))
    assert first["plot_format"] == "png" and (dest / "fleet-throughput.png").read_bytes()[:4] == b"\x89PNG"
    assert run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(dest)))["changed"] is False


def test_gpu_count_comes_from_the_profile(reports):
    tmp_path, run_id = reports
    profiles = {n: {"name": "lab", "gpu_count": 8} for n in ("lab-1", "lab-2")}
    result = run_module(training_benchmark_report, args(tmp_path, run_id, nodes=["lab-1", "lab-2"], node_profiles=profiles))
    assert "ran on 2 GPUs, the profile expects 8" in [f["message"] for f in result["verdicts"]["lab-1"]["findings"]]
    result = run_module(training_benchmark_report, args(tmp_path, run_id, node_profiles={"lab-1": {"gpu_count": "x"}}))
    assert result["failed"] and "node_profiles.lab-1.gpu_count" in result["msg"]


def test_bad_floor_fails_by_name(reports):
    tmp_path, run_id = reports
    profiles = {"lab": {"floors": {"resnet50": {"min_samples_per_s": "fast"}}}}
    result = run_module(training_benchmark_report, args(tmp_path, run_id, profiles=profiles))
    assert result["failed"] and "floor of lab / resnet50" in result["msg"]
    result = run_module(training_benchmark_report, args(tmp_path, run_id, profiles={"lab": ["resnet50"]}))
    assert result["failed"] and "profiles.lab" in result["msg"]


def test_program_without_torch_reports_the_failure_and_the_node_fails(tmp_path):
    """The real program run by a Python without PyTorch (this controller): it still writes a report,
    which says why, and the judge fails the node with that reason instead of a missing number."""
    work = tmp_path / "node"
    work.mkdir()
    shutil.copy(PROGRAM, str(work))
    shutil.copy(STATS, str(work))
    (work / "config.json").write_text(json.dumps({"node": "lab-1", "profile": "lab", "device": "cpu"}))
    (tmp_path / "nodes").mkdir()
    out = tmp_path / "nodes" / "lab-1.json"
    proc = subprocess.run([sys.executable, str(work / "gpucloud_train_bench.py"), "--config", str(work / "config.json"),
                           "--output", str(out), "--run-id", "r1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout
    report = json.loads(out.read_text())
    assert report["errors"] == ["ModuleNotFoundError: No module named 'torch'"]
    assert report["run_id"] == "r1" and report["benchmarks"] == {}
    result = run_module(training_benchmark_report, {
        "reports_dir": str(tmp_path / "nodes"), "run_id": "r1", "profiles": PROFILES,
        "nodes": ["lab-1"], "node_profiles": {"lab-1": {"name": "lab"}}})
    verdict = result["verdicts"]["lab-1"]
    assert verdict["status"] == "fail"
    assert [f["kind"] for f in verdict["findings"]] == ["report_error", "missing_benchmark", "missing_benchmark"]


# Issue 28 item 15: gpu_count is a whole number >= 0, never coerced (8.9 is not 8, true is not 1,
# and -8 is no floor).
@pytest.mark.parametrize("gpu_count", [8.9, True, -8, "8", "x", [8]])
def test_gpu_count_is_never_coerced(reports, gpu_count):
    tmp_path, run_id = reports
    result = run_module(training_benchmark_report, args(tmp_path, run_id, node_profiles={"lab-1": {"gpu_count": gpu_count}}))
    assert result["failed"] and "node_profiles.lab-1.gpu_count must be a whole number >= 0" in result["msg"], result


# Issue 28 item 17: a report with errors: 5 or benchmarks: [1] fails its node, named; the module
# does not crash, and writes its report.
@pytest.mark.parametrize("changes,words", [({"errors": 5}, "errors is 5"), ({"benchmarks": [1]}, "benchmarks is [1]"),
                                           ({"benchmarks": {"resnet50": [1]}}, "resnet50 is [1]")])
def test_malformed_report_fails_its_node(reports, changes, words):
    tmp_path, run_id = reports
    path = tmp_path / "nodes" / "lab-1.json"
    report = json.loads(path.read_text())
    report.update(changes)
    path.write_text(json.dumps(report))
    result = run_module(training_benchmark_report, args(tmp_path, run_id, dest=str(tmp_path / "out"), plot_format="svg"))
    assert not result.get("failed"), result
    assert result["verdicts"]["lab-1"]["status"] == "fail"
    assert any(words in f["message"] for f in result["verdicts"]["lab-1"]["findings"]), result["verdicts"]["lab-1"]
    assert "lab-1" in (tmp_path / "out" / "fleet.md").read_text()
