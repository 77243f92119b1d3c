# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import copy
import json
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import benchmark_judge as bj
from ansible_collections.gpucloud.fleet.plugins.module_utils import benchmark_report as br

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "training_benchmark",
                       "cpu-2rank-gloo-host.json")
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def judgement():
    """Two profiles from the real report: three siblings, one of them slow, and a node without a report."""
    with open(FIXTURE) as handle:
        real = json.load(handle)
    reports = {}
    for name, factor in (("lab-1", 1.0), ("lab-2", 1.02), ("lab-3", 0.6), ("big-1", 3.0)):
        report = copy.deepcopy(real)
        for result in report["benchmarks"].values():
            result["samples_per_s"] *= factor
        reports[name] = report
    reports["big-2"] = None
    nodes = [{"node": n, "profile": "lab" if n.startswith("lab") else "big"} for n in sorted(reports)]
    floors = {"lab": {"resnet50": {"min_samples_per_s": 0.1, "source": "lab floor"},
                      "bert_base": {"min_samples_per_s": 0.1, "source": "lab floor"}},
              "big": {"resnet50": {"min_samples_per_s": 1.0, "source": "big floor"}}}
    return bj.judge(nodes, reports, floors), real


def test_markdown_table(judgement):
    out, real = judgement
    text = br.render_markdown(out, "Lab run")
    lines = text.splitlines()
    assert lines[0] == "# Lab run"
    header = [line for line in lines if line.startswith("| node")][0]
    assert header == ("| node | profile | resnet50 samples/s | floor | profile median | bert_base samples/s | floor "
                      "| profile median | verdict |")
    rows = {line.split(" | ")[0][2:]: line for line in lines if line.startswith("| ") and not line.startswith("| node")}
    assert sorted(rows) == ["big-1", "big-2", "lab-1", "lab-2", "lab-3"]
    resnet = real["benchmarks"]["resnet50"]["samples_per_s"]
    assert rows["lab-1"].startswith("| lab-1 | lab | %.3g | 0.1 | %.3g |" % (resnet, resnet))
    assert "(outlier)" in rows["lab-3"] and rows["lab-3"].endswith("| WARN |")
    assert rows["big-2"] == "| big-2 | big | - | 1 | %s | - | - | %s | FAIL |" % (
        br._fmt(3 * resnet), br._fmt(3 * real["benchmarks"]["bert_base"]["samples_per_s"]))
    assert (br._fmt(12345.678), br._fmt(3.4876), br._fmt(0.05), br._fmt(None)) == ("12345.7", "3.49", "0.05", "-")
    assert "- big-2: no report came back from the node (missing_report)" in lines
    assert "- big / bert_base: floor - samples/s (node); no source given" in lines
    assert "5 nodes: 2 pass, 2 warn, 1 fail." in text  # big-1 warns: no bert_base floor


def test_svg_plot_is_valid_and_draws_every_number(judgement):
    out, _real = judgement
    root = ET.fromstring(br.render_svg(out))
    assert root.tag == SVG + "svg"
    bars = [r for r in root.iter(SVG + "rect") if r.find(SVG + "title") is not None]
    # 4 nodes with numbers x 2 benchmarks; big-2 is an "n/a" slot in each panel.
    assert len(bars) == 8
    assert sum(1 for t in root.iter(SVG + "text") if t.text == "n/a") == 2
    slow = [r for r in bars if r.find(SVG + "title").text.startswith("lab-3")]
    assert {r.get("fill") for r in slow} == {br.BAR_COLORS["outlier"]}
    lines = [l.find(SVG + "title").text for l in root.iter(SVG + "line") if l.find(SVG + "title") is not None]
    assert "lab floor 0.1" in lines and "big floor 1.0" in lines  # SVG titles keep one decimal
    assert any(t.startswith("lab median") for t in lines)


def test_png_plot_when_matplotlib_is_there(judgement):
    pytest.importorskip("matplotlib")
    out, _real = judgement
    assert br.png_available()
    first = br.render_png(out)
    assert first[:8] == b"\x89PNG\r\n\x1a\n" and len(first) > 10000
    assert br.render_png(out) == first  # no timestamp: a re-run writes the same bytes
