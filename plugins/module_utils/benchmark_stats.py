# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure arithmetic of the training benchmark, shared by the node and the controller.

The benchmark program (``playbooks/files/benchmark/gpucloud_train_bench.py``) runs on a GPU
node with this file beside it and imports it as ``benchmark_stats``; the controller imports it
as ``ansible_collections.gpucloud.fleet.plugins.module_utils.benchmark_stats``. It imports
nothing but the standard library, so that both work and the unit tests need no PyTorch.

* step times -> samples/s: the median over the steady-state steps (after warm-up), and the
  spread of the step times (p10/p50/p90, (p90 - p10) / p50);
* ``/proc/stat`` and ``/proc/meminfo`` parsers and the CPU busy share between two readings;
* a series of samples (NVML or /proc) -> mean / min / max per field.
"""


import math

# The fields of the first line of /proc/stat (proc(5)); guest and guest_nice are already
# counted in user and nice, so they are left out of the total.
_PROC_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def percentile(values, pct):
    """The PCT percentile (0-100) of VALUES by linear interpolation between closest ranks.

    The same definition as numpy's default ("linear"), so a reader can recompute it.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= pct <= 100:
        raise ValueError("percentile %r outside 0-100" % (pct,))
    ordered = sorted(float(v) for v in values)
    pos = (len(ordered) - 1) * pct / 100.0
    low = int(math.floor(pos))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def median(values):
    """The median of VALUES (the 50th percentile)."""
    return percentile(values, 50)


def summarize_steps(step_times, warmup_steps, global_batch):
    """Throughput of one benchmark from its per-step wall times in seconds.

    STEP_TIMES holds every step, warm-up included; the first WARMUP_STEPS are dropped.
    GLOBAL_BATCH is the samples one step processes on the whole node (all ranks).
    Returns samples_per_s (median of the per-step throughputs of the steady-state steps),
    samples_per_s_mean (steady samples / steady time), and step_time_s with the spread.
    A step time that is not a finite positive number is refused: a throughput computed
    around it would be a lie.
    """
    if warmup_steps < 0 or global_batch <= 0:
        raise ValueError("warmup_steps must be >= 0 and global_batch > 0")
    steady = [float(t) for t in step_times[warmup_steps:]]
    if not steady:
        raise ValueError("no steady-state steps: %d steps recorded, %d of them warm-up"
                         % (len(step_times), warmup_steps))
    bad = [t for t in steady if not (math.isfinite(t) and t > 0)]
    if bad:
        raise ValueError("step times must be finite and positive, got %r" % (bad[:3],))
    rates = [global_batch / t for t in steady]
    p10, p50, p90 = (percentile(steady, p) for p in (10, 50, 90))
    return {
        "samples_per_s": median(rates),
        "samples_per_s_mean": global_batch * len(steady) / sum(steady),
        "steady_steps": len(steady),
        "warmup_steps": warmup_steps,
        "step_time_s": {
            "median": p50, "p10": p10, "p90": p90, "min": min(steady), "max": max(steady),
            "spread_pct": (p90 - p10) / p50 * 100.0,
        },
    }


def parse_proc_stat(text):
    """The aggregate ``cpu`` line of /proc/stat as {"busy": jiffies, "total": jiffies}."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            values = [int(v) for v in parts[1:1 + len(_PROC_STAT_FIELDS)]]
            if len(values) < 4:
                break
            fields = dict(zip(_PROC_STAT_FIELDS, values))
            idle = fields["idle"] + fields.get("iowait", 0)
            total = sum(values)
            return {"busy": total - idle, "total": total}
    raise ValueError("no aggregate 'cpu' line in /proc/stat text")


def cpu_busy_pct(before, after):
    """Share of CPU time (all CPUs) spent busy between two parse_proc_stat readings, 0-100.

    None when no jiffy elapsed (two readings within one clock tick).
    """
    total = after["total"] - before["total"]
    if total <= 0:
        return None
    return max(0.0, min(100.0, (after["busy"] - before["busy"]) * 100.0 / total))


def parse_meminfo(text):
    """MemTotal and MemAvailable of /proc/meminfo in MiB: {"total_mib", "used_mib"}.

    Used is MemTotal - MemAvailable, what free(1) reports as used since procps 3.3.10.
    """
    values = {}
    for line in text.splitlines():
        key, _sep, rest = line.partition(":")
        fields = rest.split()
        if key in ("MemTotal", "MemAvailable") and fields:
            values[key] = int(fields[0])  # kB
    if "MemTotal" not in values or "MemAvailable" not in values:
        raise ValueError("/proc/meminfo text lacks MemTotal or MemAvailable")
    return {"total_mib": values["MemTotal"] / 1024.0,
            "used_mib": (values["MemTotal"] - values["MemAvailable"]) / 1024.0}


def aggregate_samples(samples, fields, start=None, end=None):
    """mean/min/max per field of SAMPLES (dicts with a "t" time) taken within [START, END].

    A field missing or None in a sample is skipped for that sample; a field with no value in
    the window is left out of the result, so a reader never mistakes "not measured" for 0.
    Returns {"samples": n, field: {"mean", "min", "max"}, ...}.
    """
    window = [s for s in samples
              if (start is None or s["t"] >= start) and (end is None or s["t"] <= end)]
    out = {"samples": len(window)}
    for field in fields:
        values = [float(s[field]) for s in window if s.get(field) is not None]
        values = [v for v in values if math.isfinite(v)]
        if values:
            out[field] = {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}
    return out
