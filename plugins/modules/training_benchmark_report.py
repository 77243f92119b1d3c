#!/usr/bin/python
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: training_benchmark_report
short_description: Judge a training benchmark run per hardware profile and write the fleet report
version_added: 0.1.0
author:
  - gpucloud.fleet contributors (@gpucloud)
description:
  - Reads the JSON report each node of one run of C(playbooks/benchmark.yml) wrote (fetched to
    O(reports_dir) as C(<node>.json)) and judges every node against its profile's floor, against the
    median of its siblings of the same profile in the same run, and for missing data.
  - A node fails when its report is missing, of another run, says it failed, lacks a benchmark, has a
    throughput that is not a finite positive number, ran on fewer GPUs than the profile expects, or is
    below a floor. More than O(outlier_pct) % below the profile median is a warning (or a failure with
    O(outlier_fails)).
  - With O(dest), writes C(fleet.md) (the table), C(fleet.json) (the judgement) and the plot of
    samples/s per node grouped by profile (C(fleet-throughput.png) with matplotlib, else
    C(fleet-throughput.svg)).
  - Meant to run once on the controller (C(run_once), C(delegate_to=localhost)).
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; C(changed) says whether a file would change.
  diff_mode:
    support: none
    description: The files are reports; C(changed) says whether one was (or would be) rewritten.
  platform:
    support: full
    platforms: posix
    description: The controller, where the nodes' reports were fetched to.
options:
  reports_dir:
    description: Directory holding one C(<node>.json) per node.
    type: path
    required: true
  nodes:
    description: Every node the run targeted (inventory names), failed and unreachable ones included.
    type: list
    elements: str
    required: true
  node_profiles:
    description:
      - Each node's hardware profile (its C(gpucloud_profile)); C(name) groups the siblings, C(gpu_count) is the GPUs
        the profile expects (a per-GPU floor is multiplied by it, and a run on fewer GPUs fails).
      - C(gpu_count) must be a whole number >= 0; anything else (V(8.9), V(true), V(-8), text) fails the module by
        name, never rounded. Where the profile expects GPUs, a report without a whole-number C(world_size) fails
        its node.
      - A node missing here has the profile V("") and expects no GPU.
    type: dict
    default: {}
  profiles:
    description:
      - The benchmark settings per profile name (the inventory's C(gpucloud_benchmark_profiles)); only each
        profile's C(floors) is read here.
      - C(floors) holds, per benchmark, C(min_samples_per_s) (the whole node) or C(min_samples_per_s_per_gpu)
        (multiplied by the GPUs the profile expects), and C(source) (where the number comes from). Other keys
        are kept but not judged. A profile without a floor for a benchmark is flagged, never passed silently.
    type: dict
    default: {}
  benchmarks:
    description: The benchmarks every node must report.
    type: list
    elements: str
    default: [resnet50, bert_base]
  outlier_pct:
    description: A node more than this many percent below its profile's median is a slow sibling.
    type: float
    default: 10.0
  outlier_min_nodes:
    description: Valid results a profile needs before its median is used to judge siblings (at least 2).
    type: int
    default: 3
  outlier_fails:
    description: Fail a slow sibling instead of flagging it.
    type: bool
    default: false
  run_id:
    description: This run's id; a report carrying another C(run_id) is stale and counts as missing.
    type: str
  dest:
    description: Directory to write the fleet report into (created when missing). Without it, only judge.
    type: path
  plot_format:
    description: C(auto) draws a PNG when matplotlib can be imported, else writes an SVG.
    type: str
    choices: [auto, png, svg, none]
    default: auto
  title:
    description: Title of the table and the plot.
    type: str
    default: Training benchmark
"""

EXAMPLES = r"""
- name: Judge the run and write the fleet report
  gpucloud.fleet.training_benchmark_report:
    reports_dir: /srv/reports/benchmark/nodes
    dest: /srv/reports/benchmark
    run_id: 20261201T203000Z
    nodes: [gpu-h200-001, gpu-h200-002]
    node_profiles:
      gpu-h200-001: {name: h200_sxm, gpu_count: 8}
      gpu-h200-002: {name: h200_sxm, gpu_count: 8}
    profiles:
      h200_sxm:
        floors:
          resnet50: {min_samples_per_s_per_gpu: 1660, source: "80 % of NVIDIA DLE's DGX A100 80GB AMP number"}
  run_once: true
  delegate_to: localhost
  register: benchmark_report
"""

RETURN = r"""
judgement:
  description: The full judgement (profiles with medians and floors, nodes with results and findings, summary).
  returned: always
  type: dict
verdicts:
  description: Per node, its status (pass, warn or fail) and its findings.
  returned: always
  type: dict
  sample: {"gpu-h200-002": {"status": "fail", "findings": [{"kind": "below_floor", "benchmark": "resnet50",
           "message": "resnet50 12000.0 samples/s is below the floor 16624.0 (...)"}]}}
markdown:
  description: The fleet table as Markdown.
  returned: always
  type: str
files:
  description: Paths written (or that would be written in check mode).
  returned: when dest is given
  type: list
  elements: str
plot_format:
  description: The plot format used (png, svg or none).
  returned: always
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes
from ansible_collections.gpucloud.fleet.plugins.module_utils import benchmark_judge, benchmark_report


def read_reports(reports_dir, names):
    """{node: report dict or None}; an unreadable or non-JSON file counts as no report."""
    out = {}
    for name in names:
        try:
            with open(os.path.join(reports_dir, "%s.json" % name), "rb") as handle:
                out[name] = json.loads(handle.read().decode("utf-8"))
        except (OSError, ValueError):
            out[name] = None
    return out


def write_if_changed(path, data, check_mode):
    """Write bytes DATA to PATH unless it holds them already; whether it changed (or would)."""
    try:
        with open(path, "rb") as handle:
            if handle.read() == data:
                return False
    except OSError:
        pass
    if not check_mode:
        tmp = path + ".tmp"
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    return True


def run(module):
    """Judge, render and write; the module's result."""
    params = module.params
    names = params["nodes"]
    nodes = []
    for name in names:
        profile = params["node_profiles"].get(name) or {}
        if not isinstance(profile, dict):
            module.fail_json(msg="training_benchmark_report: node_profiles.%s must be a mapping (name, gpu_count)" % name)
        try:
            gpus = benchmark_judge.gpu_count(profile.get("gpu_count"), "node_profiles.%s.gpu_count" % name)
        except ValueError as exc:
            module.fail_json(msg="training_benchmark_report: %s" % exc)
        nodes.append({"node": name, "profile": str(profile.get("name") or ""), "gpus_expected": gpus})
    floors = {}
    for profile, settings in params["profiles"].items():
        if not isinstance(settings, dict) or not isinstance(settings.get("floors", {}), dict):
            module.fail_json(msg="training_benchmark_report: profiles.%s must be a mapping with a floors mapping" % profile)
        floors[profile] = settings.get("floors", {})
    try:
        judgement = benchmark_judge.judge(
            nodes, read_reports(params["reports_dir"], names), floors, params["benchmarks"],
            params["outlier_pct"], params["outlier_min_nodes"], params["outlier_fails"], params["run_id"])
    except ValueError as exc:
        module.fail_json(msg="training_benchmark_report: %s" % exc)
    markdown = benchmark_report.render_markdown(judgement, params["title"])
    fmt = params["plot_format"]
    if fmt == "auto":
        fmt = "png" if benchmark_report.png_available() else "svg"
    result = {"changed": False, "judgement": judgement, "markdown": markdown, "plot_format": fmt,
              "verdicts": {n["node"]: {"status": n["status"], "findings": n["findings"]} for n in judgement["nodes"]}}
    if params["dest"]:
        dest = params["dest"]
        if not os.path.isdir(dest):
            result["changed"] = True
            if not module.check_mode:
                os.makedirs(dest)
        outputs = [("fleet.md", to_bytes(markdown)),
                   ("fleet.json", to_bytes(json.dumps(judgement, indent=1, sort_keys=True) + "\n"))]
        if fmt == "svg":
            outputs.append(("fleet-throughput.svg", to_bytes(benchmark_report.render_svg(judgement, params["title"]))))
        elif fmt == "png":
            outputs.append(("fleet-throughput.png", benchmark_report.render_png(judgement, params["title"])))
        result["files"] = [os.path.join(dest, name) for name, _data in outputs]
        for name, data in outputs:
            result["changed"] |= write_if_changed(os.path.join(dest, name), data, module.check_mode)
    return result


def main():
    """Entry point."""
    module = AnsibleModule(argument_spec=dict(
        reports_dir=dict(type="path", required=True),
        nodes=dict(type="list", elements="str", required=True),
        node_profiles=dict(type="dict", default={}),
        profiles=dict(type="dict", default={}),
        benchmarks=dict(type="list", elements="str", default=["resnet50", "bert_base"]),
        outlier_pct=dict(type="float", default=10.0),
        outlier_min_nodes=dict(type="int", default=3),
        outlier_fails=dict(type="bool", default=False),
        run_id=dict(type="str"),
        dest=dict(type="path"),
        plot_format=dict(type="str", default="auto", choices=["auto", "png", "svg", "none"]),
        title=dict(type="str", default="Training benchmark"),
    ), supports_check_mode=True)
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
