# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import json
import math
import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import benchmark_stats as bs

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "training_benchmark")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_percentile_is_numpy_linear():
    # numpy.percentile([1, 2, 3, 4], [10, 50, 90]) == [1.3, 2.5, 3.7]
    assert [round(bs.percentile([4, 1, 3, 2], p), 9) for p in (10, 50, 90)] == [1.3, 2.5, 3.7]
    assert bs.percentile([7.0], 90) == 7.0
    assert bs.median([3, 1, 2]) == 2
    with pytest.raises(ValueError):
        bs.percentile([], 50)
    with pytest.raises(ValueError):
        bs.percentile([1], 101)


@pytest.mark.parametrize("report", ["cpu-2rank-gloo-host.json", "cpu-2rank-gloo-lab-debian12.json"])
def test_summary_recomputed_from_real_step_times(report):
    """The program's numbers are what summarize_steps makes of the step times it recorded."""
    data = json.loads(fixture(report))
    for name, result in data["benchmarks"].items():
        again = bs.summarize_steps(result["step_times_s"], result["warmup_steps"], result["global_batch"])
        assert again["samples_per_s"] == pytest.approx(result["samples_per_s"]), name
        assert again["step_time_s"] == pytest.approx(result["step_time_s"]), name
        assert again["steady_steps"] == len(result["step_times_s"]) - result["warmup_steps"]
        # The median of per-step rates is the batch over the median step time (odd count) or between
        # the two middle steps' rates (even count).
        steady = sorted(result["step_times_s"][result["warmup_steps"]:])
        assert result["global_batch"] / steady[-1] <= result["samples_per_s"] <= result["global_batch"] / steady[0]


def test_summary_drops_warmup_and_measures_spread():
    out = bs.summarize_steps([5.0, 4.0, 1.0, 1.0, 2.0], warmup_steps=2, global_batch=8)
    assert out["samples_per_s"] == 8.0  # rates 8, 8, 4 -> median 8
    assert out["samples_per_s_mean"] == pytest.approx(8 * 3 / 4.0)
    assert out["step_time_s"]["median"] == 1.0
    assert out["step_time_s"]["max"] == 2.0
    assert out["step_time_s"]["spread_pct"] == pytest.approx((1.8 - 1.0) / 1.0 * 100)


@pytest.mark.parametrize("times,warmup", [([1.0, 2.0], 2), ([1.0, float("nan")], 1), ([1.0, 0.0], 1),
                                          ([1.0, float("inf")], 1), ([1.0, -1.0], 0)])
def test_summary_refuses_what_would_lie(times, warmup):
    with pytest.raises(ValueError):
        bs.summarize_steps(times, warmup, 4)


def test_proc_stat_and_cpu_busy_from_real_captures():
    first = bs.parse_proc_stat(fixture("proc-stat-1.txt"))
    second = bs.parse_proc_stat(fixture("proc-stat-2.txt"))
    # cpu  2197982 416388 810628 1500537 14578 0 7987 1989 0 0
    assert first == {"busy": 2197982 + 416388 + 810628 + 7987 + 1989, "total": 2197982 + 416388 + 810628 + 1500537
                     + 14578 + 7987 + 1989}
    # The second reading, 1 s later on a fully loaded 2-core machine: no idle jiffy in between.
    assert bs.cpu_busy_pct(first, second) == 100.0
    assert bs.cpu_busy_pct(second, second) is None
    with pytest.raises(ValueError):
        bs.parse_proc_stat("intr 1 2 3\n")


def test_meminfo_from_real_capture():
    text = fixture("proc-meminfo.txt")
    lines = dict(line.split(":", 1) for line in text.splitlines())
    total_kb = int(lines["MemTotal"].split()[0])
    avail_kb = int(lines["MemAvailable"].split()[0])
    assert bs.parse_meminfo(text) == {"total_mib": total_kb / 1024.0, "used_mib": (total_kb - avail_kb) / 1024.0}
    with pytest.raises(ValueError):
        bs.parse_meminfo("MemTotal: 1 kB\n")


def test_aggregate_samples_keeps_the_window_and_leaves_unmeasured_out():
    samples = [{"t": 0.0, "util": 10, "power": None}, {"t": 1.0, "util": 90, "power": 300.0},
               {"t": 2.0, "util": 100, "power": float("nan")}, {"t": 3.0, "util": 0}]
    out = bs.aggregate_samples(samples, ("util", "power", "clock"), start=1.0, end=2.0)
    assert out == {"samples": 2, "util": {"mean": 95.0, "min": 90.0, "max": 100.0},
                   "power": {"mean": 300.0, "min": 300.0, "max": 300.0}}
    assert "clock" not in out and math.isfinite(out["power"]["mean"])
    assert bs.aggregate_samples([], ("util",)) == {"samples": 0}


def test_real_capture_ran_the_real_models():
    """The fixture's run used the default shapes: torchvision's ResNet-50 (25,557,032 parameters, as
    torchvision's model card says) and BERT-base pre-training (110,106,428, BertForPreTraining's count
    for bert-base-uncased), on two ranks, losses finite."""
    data = json.loads(fixture("cpu-2rank-gloo-host.json"))
    assert data["benchmarks"]["resnet50"]["params"] == 25557032
    assert data["benchmarks"]["bert_base"]["params"] == 110106428
    assert data["benchmarks"]["resnet50"]["model_impl"].startswith("torchvision 0.28.0")
    for result in data["benchmarks"].values():
        assert result["world_size"] == 2 and result["precision"] == "bf16"
        assert all(math.isfinite(loss) for loss in result["loss_first_last"])
