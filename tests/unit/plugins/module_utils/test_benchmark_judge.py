# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Judging on a real report (the CPU run of the benchmark program, 2 gloo ranks), with faults
injected into copies of it: slower numbers, errors, missing parts, another run's id."""


import copy
import json
import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import benchmark_judge as bj

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "training_benchmark",
                       "cpu-2rank-gloo-host.json")
RUN = "20261201T204500Z"


@pytest.fixture(scope="module")
def real():
    with open(FIXTURE) as handle:
        report = json.load(handle)
    assert report["run_id"] == RUN and report["schema"] == bj.SCHEMA
    return report


def node_report(real, name, resnet=None, bert=None, **changes):
    """A copy of the real report as node NAME, with its throughputs scaled or replaced."""
    report = copy.deepcopy(real)
    report["node"] = name
    for bench, value in (("resnet50", resnet), ("bert_base", bert)):
        if value is not None:
            report["benchmarks"][bench]["samples_per_s"] = value
    report.update(changes)
    return report


def fleet(real, values, profile="p", gpus=0):
    nodes = [{"node": n, "profile": profile, "gpus_expected": gpus} for n in values]
    reports = {n: node_report(real, n, *v) for n, v in values.items()}
    return nodes, reports


def by_node(judgement):
    return {n["node"]: n for n in judgement["nodes"]}


def kinds(entry):
    return sorted(f["kind"] for f in entry["findings"])


FLOORS = {"p": {"resnet50": {"min_samples_per_s": 2.0, "source": "measured in the lab"},
                "bert_base": {"min_samples_per_s": 0.5, "source": "measured in the lab"}}}


def test_real_report_passes_its_floors(real):
    nodes, reports = fleet(real, {"n1": (None, None)})
    out = bj.judge(nodes, reports, FLOORS, run_id=RUN)
    entry = by_node(out)["n1"]
    assert (entry["status"], entry["findings"]) == ("pass", [])
    assert entry["results"]["resnet50"]["samples_per_s"] == real["benchmarks"]["resnet50"]["samples_per_s"]
    assert out["summary"] == {"pass": 1, "warn": 0, "fail": 0}
    # One result: its own median; too few to judge siblings.
    assert out["profiles"]["p"]["resnet50"]["median"] == entry["results"]["resnet50"]["samples_per_s"]


def test_below_floor_fails_and_names_the_source(real):
    nodes, reports = fleet(real, {"n1": (1.5, None)})
    entry = by_node(bj.judge(nodes, reports, FLOORS))["n1"]
    assert entry["status"] == "fail" and kinds(entry) == ["below_floor"]
    assert "below the floor 2.0 (measured in the lab)" in entry["findings"][0]["message"]
    assert entry["results"]["resnet50"]["status"] == "below_floor"


def test_per_gpu_floor_counts_the_gpus_the_profile_expects(real):
    floors = {"p": {"resnet50": {"min_samples_per_s_per_gpu": 1000}, "bert_base": {"min_samples_per_s": 0}}}
    # 7900 samples/s on a node expected to have 8 GPUs: 987 per GPU, below the 8000 floor.
    nodes, reports = fleet(real, {"n1": (7900.0, None)}, gpus=8)
    for report in reports.values():
        report["world_size"] = 8
    entry = by_node(bj.judge(nodes, reports, floors))["n1"]
    assert entry["results"]["resnet50"]["floor"] == 8000.0
    assert entry["results"]["resnet50"]["per_gpu"] == pytest.approx(987.5)
    assert kinds(entry) == ["below_floor"]


def test_fewer_ranks_than_gpus_fails(real):
    nodes, reports = fleet(real, {"n1": (None, None)}, gpus=8)  # the real report ran 2 ranks
    entry = by_node(bj.judge(nodes, reports, {}))["n1"]
    assert "gpu_count" in kinds(entry) and entry["status"] == "fail"
    assert "ran on 2 GPUs, the profile expects 8" in [f["message"] for f in entry["findings"]]


def test_slow_sibling_is_flagged_against_the_profile_median(real):
    values = {"n1": (10.0, 1.0), "n2": (10.4, 1.0), "n3": (9.6, 1.0), "n4": (8.0, 1.0)}
    nodes, reports = fleet(real, values)
    out = bj.judge(nodes, reports, FLOORS, outlier_pct=10)
    assert out["profiles"]["p"]["resnet50"]["median"] == 9.8
    nodes_out = by_node(out)
    assert [n for n, e in sorted(nodes_out.items()) if e["status"] != "pass"] == ["n4"]
    n4 = nodes_out["n4"]
    assert (n4["status"], kinds(n4), n4["results"]["resnet50"]["status"]) == ("warn", ["sibling_outlier"], "outlier")
    assert n4["results"]["resnet50"]["vs_median_pct"] == pytest.approx((8.0 / 9.8 - 1) * 100)
    assert "18.4 % below the median 9.8 of the 4 p nodes" in n4["findings"][0]["message"]
    # 9.6 is 2 % below: not an outlier. With outlier_fails the slow node fails.
    assert by_node(bj.judge(nodes, reports, FLOORS, outlier_fails=True))["n4"]["status"] == "fail"
    # A looser threshold lets it pass.
    assert by_node(bj.judge(nodes, reports, FLOORS, outlier_pct=20))["n4"]["status"] == "pass"


def test_siblings_need_enough_results(real):
    nodes, reports = fleet(real, {"n1": (10.0, 1.0), "n2": (5.0, 1.0)})
    out = bj.judge(nodes, reports, FLOORS)
    assert [e["status"] for e in out["nodes"]] == ["pass", "pass"]
    out = bj.judge(nodes, reports, FLOORS, outlier_min_nodes=2)
    assert by_node(out)["n2"]["status"] == "warn"


def test_profiles_are_judged_apart(real):
    nodes = [{"node": "a1", "profile": "a"}, {"node": "a2", "profile": "a"}, {"node": "a3", "profile": "a"},
             {"node": "b1", "profile": "b"}, {"node": "b2", "profile": "b"}, {"node": "b3", "profile": "b"}]
    values = {"a1": 100.0, "a2": 100.0, "a3": 100.0, "b1": 10.0, "b2": 10.0, "b3": 10.0}
    reports = {n: node_report(real, n, v, 1.0) for n, v in values.items()}
    out = bj.judge(nodes, reports, {})
    assert out["profiles"]["a"]["resnet50"]["median"] == 100.0 and out["profiles"]["b"]["resnet50"]["median"] == 10.0
    # No floors: every node is flagged for it, none is an outlier.
    assert set(kinds(by_node(out)["b1"])) == {"no_floor"} and out["summary"]["warn"] == 6


def test_missing_data_never_passes(real):
    error_report = node_report(real, "err")
    error_report["benchmarks"]["bert_base"] = {"error": "rank 1: torch.OutOfMemoryError: CUDA out of memory"}
    no_bert = node_report(real, "nobert")
    del no_bert["benchmarks"]["bert_base"]
    crashed = node_report(real, "crashed", errors=["RuntimeError: device cuda asked for, but torch sees no CUDA device"])
    crashed["benchmarks"] = {}
    reports = {
        "gone": None, "err": error_report, "nobert": no_bert, "crashed": crashed,
        "nan": node_report(real, "nan", float("nan")), "inf": node_report(real, "inf", float("inf")),
        "zero": node_report(real, "zero", 0.0), "text": node_report(real, "text", "fast"),
        "bool": node_report(real, "bool", True), "old": node_report(real, "old", run_id="20261130T000000Z"),
        "alien": node_report(real, "alien", schema="something/v0"), "ok": node_report(real, "ok"),
    }
    nodes = [{"node": n, "profile": "p"} for n in sorted(reports)]
    out = by_node(bj.judge(nodes, reports, FLOORS, run_id=RUN))
    assert out["ok"]["status"] == "pass"
    expected = {
        "gone": ["missing_report"], "err": ["benchmark_error"], "nobert": ["missing_benchmark"],
        "crashed": ["missing_benchmark", "missing_benchmark", "report_error"],
        "nan": ["invalid_value"], "inf": ["invalid_value"], "zero": ["invalid_value"], "text": ["invalid_value"],
        "bool": ["invalid_value"], "old": ["stale_report"], "alien": ["missing_report"],
    }
    for name, want in expected.items():
        assert (name, out[name]["status"], kinds(out[name])) == (name, "fail", want)
    assert "CUDA out of memory" in out["err"]["findings"][0]["message"]
    assert out["gone"]["results"]["resnet50"] == {"samples_per_s": None, "floor": 2.0, "per_gpu": None,
                                                  "median": real["benchmarks"]["resnet50"]["samples_per_s"],
                                                  "vs_median_pct": None, "status": "missing"}


@pytest.mark.parametrize("floors", [
    {"p": {"resnet50": {"min_samples_per_s": float("nan")}}},
    {"p": {"resnet50": {"min_samples_per_s": -1}}},
    {"p": {"resnet50": {"min_samples_per_s": "100"}}},
    {"p": {"resnet50": {"min_samples_per_s": True}}},
    {"p": {"resnet50": {"samples": 100}}},
    {"p": ["resnet50"]},
    ["p"],
])
def test_floors_that_cannot_be_judged_against_are_refused(real, floors):
    nodes, reports = fleet(real, {"n1": (None, None)})
    with pytest.raises(ValueError):
        bj.judge(nodes, reports, floors)


def test_per_gpu_floor_without_expected_gpus_is_refused(real):
    nodes, reports = fleet(real, {"n1": (None, None)}, gpus=0)
    with pytest.raises(ValueError, match="gpus_expected"):
        bj.judge(nodes, reports, {"p": {"resnet50": {"min_samples_per_s_per_gpu": 10}}})


@pytest.mark.parametrize("pct,min_nodes", [(0, 3), (100, 3), ("ten", 3), (10, 1)])
def test_outlier_settings_are_checked(real, pct, min_nodes):
    nodes, reports = fleet(real, {"n1": (None, None)})
    with pytest.raises(ValueError):
        bj.judge(nodes, reports, FLOORS, outlier_pct=pct, outlier_min_nodes=min_nodes)


# Issue 28 item 15: a world_size that is no whole number of GPUs never skips the GPU-count check.
@pytest.mark.parametrize("world", ["absent", None, float("nan"), float("inf"), "8", "eight", 7.5, True, -1, [8]])
def test_a_world_size_that_is_no_count_fails_the_node(real, world):
    nodes, reports = fleet(real, {"n1": (None, None)}, gpus=8)
    if world == "absent":
        del reports["n1"]["world_size"]
    else:
        reports["n1"]["world_size"] = world
    entry = by_node(bj.judge(nodes, reports, FLOORS, run_id=RUN))["n1"]
    assert "gpu_count" in kinds(entry) and entry["status"] == "fail"
    message = [f["message"] for f in entry["findings"] if f["kind"] == "gpu_count"][0]
    assert "world_size" in message


@pytest.mark.parametrize("world", [8, 8.0, 16])
def test_a_world_size_of_at_least_the_gpus_passes(real, world):
    nodes, reports = fleet(real, {"n1": (None, None)}, gpus=8)
    reports["n1"]["world_size"] = world
    assert "gpu_count" not in kinds(by_node(bj.judge(nodes, reports, FLOORS, run_id=RUN))["n1"])


@pytest.mark.parametrize("gpus", [8.9, 8.0, True, False, -8, "8", float("nan"), [8]])
def test_gpus_expected_is_never_coerced(real, gpus):
    nodes, reports = fleet(real, {"n1": (None, None)})
    nodes[0]["gpus_expected"] = gpus
    with pytest.raises(ValueError, match=r"n1: the GPUs the profile expects \(gpu_count\) must be a whole number >= 0"):
        bj.judge(nodes, reports, FLOORS, run_id=RUN)


@pytest.mark.parametrize("value,expected", [(8, 8), (0, 0), (None, 0)])
def test_gpu_count_accepts_whole_numbers_and_none(value, expected):
    assert bj.gpu_count(value, "x") == expected


# Issue 28 item 17: a report whose parts have the wrong shape fails its node with a message naming
# the part, never a traceback.
@pytest.mark.parametrize("changes,kind,words", [
    ({"errors": 5}, "report_error", "errors is 5, not a list"),
    ({"errors": "OOM"}, "report_error", "errors is 'OOM', not a list"),
    ({"errors": {"a": 1}}, "report_error", "not a list"),
    ({"benchmarks": [1]}, "report_error", "benchmarks is [1], not a mapping"),
    ({"benchmarks": "resnet50"}, "report_error", "benchmarks is 'resnet50', not a mapping"),
    ({"benchmarks": {"resnet50": 1, "bert_base": [2]}}, "missing_benchmark", "resnet50 is 1, not a mapping"),
    ({"benchmarks": {"resnet50": {"samples_per_s": 3.0, "error": ["x"]}}}, "benchmark_error", "resnet50 failed"),
])
def test_malformed_report_parts_fail_the_node_by_name(real, changes, kind, words):
    nodes, reports = fleet(real, {"n1": (None, None)})
    reports["n1"].update(changes)
    entry = by_node(bj.judge(nodes, reports, FLOORS, run_id=RUN))["n1"]
    assert entry["status"] == "fail"
    assert any(f["kind"] == kind and words in f["message"] for f in entry["findings"]), entry["findings"]
