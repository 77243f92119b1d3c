# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Judge the training benchmark's per-node reports of one run, per hardware profile.

Pure functions: plain data in (the nodes the run targeted, the JSON report each node wrote
or None, the floors per profile), plain data out; ``ValueError`` for settings that cannot be
judged against (a floor that is not a finite number >= 0). Three judgements, per node and
benchmark:

* **floor**: samples/s below the profile's floor fails the node. A floor is either
  ``min_samples_per_s`` (the whole node) or ``min_samples_per_s_per_gpu``, multiplied by the
  GPUs the profile expects (not the GPUs that ran: a node that lost a GPU must fail).
* **slow sibling**: more than ``outlier_pct`` % below the median of the same profile in the
  same run flags the node (a warning, or a failure with ``outlier_fails``). Judged only where
  the profile has ``outlier_min_nodes`` valid results: the median of two is their mean, which
  the slow node itself drags down.
* **missing data**: no report, a report of another run, a report or benchmark that says it
  failed, a throughput that is not a finite positive number, a report part of the wrong
  shape (``errors`` not a list, ``benchmarks`` not a mapping), or fewer ranks than the GPUs
  the profile expects, or a ``world_size`` that is no whole number (absent, NaN, text): the
  node fails; a missing number never passes.

The GPUs a profile expects (``gpu_count``) must be a whole number >= 0: 8.9, ``true`` or -8 are
refused (``ValueError``), never rounded into a floor that a node with fewer GPUs passes.
"""


import math

SCHEMA = "gpucloud.training_benchmark/v1"
DEFAULT_BENCHMARKS = ("resnet50", "bert_base")
# Findings that fail a node, and those that only flag it.
FAILING = frozenset(["missing_report", "stale_report", "report_error", "missing_benchmark",
                     "benchmark_error", "invalid_value", "below_floor", "gpu_count"])
WARNING = frozenset(["sibling_outlier", "no_floor"])


def _number(value):
    """VALUE as a float when it is a real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def gpu_count(value, what):
    """VALUE as the GPUs a profile expects: a whole number >= 0 (None: 0); ValueError naming WHAT otherwise."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("%s must be a whole number >= 0, got %r" % (what, value))
    return value


def _world_size(report, gpus):
    """A finding when the report's world_size shows fewer ranks than GPUS, or no count at all."""
    world = report.get("world_size")
    if isinstance(world, bool) or not isinstance(world, (int, float)) or not math.isfinite(world) \
            or world < 0 or world != int(world):
        return {"kind": "gpu_count", "benchmark": None,
                "message": "the report's world_size is %r, not a whole number of ranks: the profile expects %d GPUs"
                           % (world if "world_size" in report else "absent", gpus)}
    if world < gpus:
        return {"kind": "gpu_count", "benchmark": None,
                "message": "ran on %d GPUs, the profile expects %d" % (world, gpus)}
    return None


def node_floor(floor, gpus_expected):
    """The whole-node floor in samples/s of one profile's FLOOR entry, or None without one."""
    if not floor:
        return None
    if "min_samples_per_s" in floor:
        value = _number(floor["min_samples_per_s"])
        scale = 1
    elif "min_samples_per_s_per_gpu" in floor:
        value = _number(floor["min_samples_per_s_per_gpu"])
        scale = gpus_expected
        if not scale:
            raise ValueError("a per-GPU floor needs the GPUs the profile expects (gpus_expected > 0)")
    else:
        raise ValueError("a floor needs min_samples_per_s or min_samples_per_s_per_gpu, got keys %s"
                         % sorted(floor))
    if value is None or not math.isfinite(value) or value < 0:
        raise ValueError("a floor must be a finite number >= 0, got %r" % (floor,))
    return value * scale


def validate_floors(floors):
    """Refuse floors that could not be judged against; returns FLOORS."""
    if not isinstance(floors, dict):
        raise ValueError("floors must be a mapping of profile name to benchmark floors")
    for profile, entries in floors.items():
        if not isinstance(entries, dict):
            raise ValueError("floors of profile %s must be a mapping of benchmark to floor" % profile)
        for bench, floor in entries.items():
            try:
                node_floor(floor, 1)
            except ValueError as exc:
                raise ValueError("floor of %s / %s: %s" % (profile, bench, exc))
    return floors


def benchmark_value(report, bench):
    """(samples/s, finding) of BENCH in a node's REPORT: exactly one of them is not None."""
    benchmarks = report.get("benchmarks") or {}
    if not isinstance(benchmarks, dict):
        return None, ("missing_benchmark", "%s did not run (the report's benchmarks is no mapping)" % bench)
    result = benchmarks.get(bench)
    if result is None:
        return None, ("missing_benchmark", "%s did not run (not in the report)" % bench)
    if not isinstance(result, dict):
        return None, ("missing_benchmark", "the report's benchmarks.%s is %r, not a mapping with samples_per_s"
                      % (bench, result))
    if result.get("error"):
        return None, ("benchmark_error", "%s failed: %s" % (bench, result["error"]))
    value = _number(result.get("samples_per_s"))
    if value is None or not math.isfinite(value) or value <= 0:
        return None, ("invalid_value", "%s samples/s is %r, not a finite positive number"
                      % (bench, result.get("samples_per_s")))
    return value, None


def judge(nodes, reports, floors, benchmarks=DEFAULT_BENCHMARKS, outlier_pct=10.0, outlier_min_nodes=3,
          outlier_fails=False, run_id=None):
    """The verdict of one benchmark run.

    NODES: [{"node": name, "profile": profile name, "gpus_expected": int}], every node the run
    targeted (failed ones included). REPORTS: {node: report dict, or None when none came back}.
    FLOORS: {profile: {benchmark: floor}} (see node_floor; a floor may carry "source").
    RUN_ID: when given, a report with another run_id is stale and counts as missing.
    Returns {"benchmarks", "profiles": {profile: {benchmark: {median, valid_nodes, floor, source}}},
    "nodes": [{node, profile, status, results: {benchmark: {...}}, findings}], "summary"}.
    """
    pct = _number(outlier_pct)
    if pct is None or not 0 < pct < 100:
        raise ValueError("outlier_pct must be a number between 0 and 100, got %r" % (outlier_pct,))
    if int(outlier_min_nodes) < 2:
        raise ValueError("outlier_min_nodes must be at least 2, got %r" % (outlier_min_nodes,))
    validate_floors(floors)
    benchmarks = list(benchmarks)
    judged = []
    for entry in nodes:
        name, profile = entry["node"], entry.get("profile") or ""
        gpus = gpu_count(entry.get("gpus_expected"), "%s: the GPUs the profile expects (gpu_count)" % name)
        report = reports.get(name)
        findings, results = [], {}
        if not isinstance(report, dict):
            findings.append({"kind": "missing_report", "benchmark": None, "message": "no report came back from the node"})
        elif report.get("schema") != SCHEMA:
            findings.append({"kind": "missing_report", "benchmark": None,
                             "message": "the report is not a %s report (schema %r)" % (SCHEMA, report.get("schema"))})
            report = None
        elif run_id is not None and report.get("run_id") != run_id:
            findings.append({"kind": "stale_report", "benchmark": None,
                             "message": "the report is of run %r, not of this run %r" % (report.get("run_id"), run_id)})
            report = None
        if isinstance(report, dict):
            errors = report.get("errors") or []
            if not isinstance(errors, list):
                findings.append({"kind": "report_error", "benchmark": None,
                                 "message": "the report's errors is %r, not a list" % (errors,)})
                errors = []
            for error in errors:
                findings.append({"kind": "report_error", "benchmark": None, "message": str(error)})
            if not isinstance(report.get("benchmarks") or {}, dict):
                findings.append({"kind": "report_error", "benchmark": None,
                                 "message": "the report's benchmarks is %r, not a mapping" % (report["benchmarks"],)})
            problem = _world_size(report, gpus) if gpus else None
            if problem:
                findings.append(problem)
        for bench in benchmarks:
            value, problem = benchmark_value(report, bench) if isinstance(report, dict) else (None, None)
            if problem:
                findings.append({"kind": problem[0], "benchmark": bench, "message": problem[1]})
            floor_entry = (floors.get(profile) or {}).get(bench)
            floor = node_floor(floor_entry, gpus) if floor_entry else None
            results[bench] = {"samples_per_s": value, "floor": floor,
                              "per_gpu": value / gpus if value is not None and gpus else None}
        judged.append({"node": name, "profile": profile, "gpus_expected": gpus, "results": results,
                       "findings": findings})

    profiles = {}
    for profile in sorted(set(n["profile"] for n in judged)):
        members = [n for n in judged if n["profile"] == profile]
        profiles[profile] = {}
        for bench in benchmarks:
            values = [n["results"][bench]["samples_per_s"] for n in members
                      if n["results"][bench]["samples_per_s"] is not None]
            floor_entry = (floors.get(profile) or {}).get(bench) or {}
            profiles[profile][bench] = {
                "median": _median(values) if values else None, "valid_nodes": len(values),
                "nodes": len(members), "floor": members[0]["results"][bench]["floor"],
                "source": floor_entry.get("source", ""),
            }

    for entry in judged:
        for bench in benchmarks:
            res = entry["results"][bench]
            stats = profiles[entry["profile"]][bench]
            res["median"] = stats["median"]
            value = res["samples_per_s"]
            res["vs_median_pct"] = ((value / stats["median"] - 1) * 100.0
                                    if value is not None and stats["median"] else None)
            if value is None:
                res["status"] = "missing"
                continue
            res["status"] = "pass"
            if res["floor"] is None:
                entry["findings"].append({"kind": "no_floor", "benchmark": bench,
                                          "message": "profile %s has no floor for %s" % (entry["profile"], bench)})
            elif value < res["floor"]:
                res["status"] = "below_floor"
                entry["findings"].append({"kind": "below_floor", "benchmark": bench, "message": (
                    "%s %.1f samples/s is below the floor %.1f (%s)"
                    % (bench, value, res["floor"], stats["source"] or "no source given"))})
            if stats["valid_nodes"] >= int(outlier_min_nodes) and value < stats["median"] * (1 - pct / 100.0):
                if res["status"] == "pass":
                    res["status"] = "outlier"
                entry["findings"].append({"kind": "sibling_outlier", "benchmark": bench, "message": (
                    "%s %.1f samples/s is %.1f %% below the median %.1f of the %d %s nodes in this run"
                    % (bench, value, -res["vs_median_pct"], stats["median"], stats["valid_nodes"], entry["profile"]))})
        kinds = set(f["kind"] for f in entry["findings"])
        failing = FAILING | (frozenset(["sibling_outlier"]) if outlier_fails else frozenset())
        entry["status"] = "fail" if kinds & failing else ("warn" if kinds else "pass")

    summary = {"pass": 0, "warn": 0, "fail": 0}
    for entry in judged:
        summary[entry["status"]] += 1
    return {"benchmarks": benchmarks, "profiles": profiles, "nodes": judged, "summary": summary,
            "outlier_pct": pct, "outlier_min_nodes": int(outlier_min_nodes),
            "outlier_fails": bool(outlier_fails), "run_id": run_id}


def _median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0
