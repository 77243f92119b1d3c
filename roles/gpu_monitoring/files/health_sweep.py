# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node's quick health sweep: checks on one GPU sample, published as textfile series.

Run by ``gpucloud-gpu-collector --health-sweep`` from the gpucloud-health-sweep timer of the
gpu_monitoring role, installed beside gpu_metrics.py (whose sample it judges). A sweep never
runs on a busy node: when any GPU holds a compute process it records ``skipped: busy`` and
keeps the last results. The checks are verify's quick GPU checks that a node can answer alone:

- ``nvml``: the driver answers (NVML, or nvidia-smi as the collector falls back), gpu "all";
- ``gpu_count``: as many GPUs as the hardware profile expects, gpu "all" (only with a count);
- ``ecc_uncorrectable_volatile``: no uncorrectable ECC error since the GPU's last reset;
- ``row_remap``: no row remapping pending (a reset activates it) and none failed;
- ``xid_fatal``: no new hardware-class or unknown Xid since the last sweep, read from the Xid
  counts the collector keeps (its --xid-state file; the same counter Prometheus scrapes).

A check a source cannot read (the replay of a capture without those columns) is left out, never
passed. Series: gpucloud_health_check_ok{check, gpu}, gpucloud_health_last_pass_timestamp_seconds
{check, gpu}, gpucloud_health_sweep_timestamp_seconds, gpucloud_health_sweep_skipped{reason}.
"""

import json

import gpu_metrics
from ansible_collections.gpucloud.fleet.plugins.module_utils.xid import meaning

CHECK_OK = "gpucloud_health_check_ok"
LAST_PASS = "gpucloud_health_last_pass_timestamp_seconds"
SWEEP = "gpucloud_health_sweep_timestamp_seconds"
SKIPPED = "gpucloud_health_sweep_skipped"
SKIP_REASONS = ("busy",)
FATAL_CLASSES = ("hw", "unknown")
ALL = "all"


def busy_gpus(reading):
    """Indexes of the GPUs that hold compute processes (unknown counts are not busy)."""
    return [str(gpu["index"]) for gpu in reading["gpus"] if (gpu["values"].get("compute_processes") or 0) > 0]


def xid_counts(state, boot_id):
    """``({bus_id: {code: count}}, {bus_id: gpu})`` of the collector's Xid state of this boot;
    None when there is none to judge (no state, another boot)."""
    if not isinstance(state, dict) or state.get("boot_id") != boot_id:
        return None
    events = state.get("events") or {}
    counts = {}
    for bus, code, count in events.get("counts", ()):
        counts.setdefault(bus, {})[int(code)] = int(count)
    return counts, dict(events.get("gpus") or {})


def new_fatal_xids(counts, seen):
    """{bus_id: [codes]} of hardware-class or unknown codes that rose since SEEN."""
    found = {}
    for bus, codes in counts.items():
        for code, count in sorted(codes.items()):
            fatal = meaning(code)["kind"] in FATAL_CLASSES
            if fatal and count > seen.get(bus, {}).get(code, 0):
                found.setdefault(bus, []).append(code)
    return found


def quick_checks(reading, expected_gpus=0, xid=None, xid_seen=None):
    """``[(check, gpu, ok, detail)]`` for one sample. XID is :func:`xid_counts`' answer or None."""
    results = [("nvml", ALL, bool(reading["up"]), reading["reason"] or "")]
    gpus = reading["gpus"] if reading["up"] else []
    if reading["up"] and expected_gpus:
        results.append(("gpu_count", ALL, len(gpus) == expected_gpus,
                        "%d GPUs, the profile expects %d" % (len(gpus), expected_gpus)))
    for gpu in gpus:
        index, values = str(gpu["index"]), gpu["values"]
        if values.get("ecc_dbe_vol") is not None:
            results.append(("ecc_uncorrectable_volatile", index, values["ecc_dbe_vol"] == 0,
                            "%d uncorrectable ECC errors since the last reset" % values["ecc_dbe_vol"]))
        if values.get("row_remap_pending") is not None or values.get("row_remap_failure") is not None:
            pending, failure = values.get("row_remap_pending") or 0, values.get("row_remap_failure") or 0
            results.append(("row_remap", index, not pending and not failure,
                            "row remapping pending %d, failed %d" % (pending, failure)))
    if xid is not None:
        counts, known = xid
        new = new_fatal_xids(counts, xid_seen or {})
        labels = dict(known)
        for gpu in gpus:
            key = gpu_metrics.pci_key(gpu["pci_bus_id"])
            if key is not None:
                labels[gpu_metrics.canonical_bus_id(key)] = str(gpu["index"])
        for bus in sorted(set(labels) | set(new), key=lambda b: (labels.get(b, ""), b)):
            codes = new.get(bus, [])
            results.append(("xid_fatal", labels.get(bus, bus), not codes,
                            "new Xid %s on %s" % (", ".join(str(c) for c in codes), bus) if codes else ""))
    return results


def sweep(reading, now, state=None, expected_gpus=0, xid_state=None, boot_id=None):
    """One sweep: ``(new_state, text)``. STATE is the last sweep's (None at first)."""
    state = dict(state or {})
    if state.get("boot_id") != boot_id:
        state = {"results": state.get("results", []), "last_pass": state.get("last_pass", {})}
    state["boot_id"] = boot_id
    state["timestamp"] = now
    busy = busy_gpus(reading)
    if busy:
        state["skipped"] = "busy"
        state["detail"] = "compute processes on GPU %s" % ", ".join(busy)
        return state, render(state)
    xid = xid_counts(xid_state, boot_id)
    seen = dict((bus, dict((int(code), count) for code, count in codes.items()))
                for bus, codes in (state.get("xid_seen") or {}).items())
    results = quick_checks(reading, expected_gpus, xid, seen)
    last_pass = dict(state.get("last_pass") or {})
    for check, gpu, ok, _detail in results:
        if ok:
            last_pass["%s|%s" % (check, gpu)] = now
    state.update(skipped=None, detail="", results=[list(result) for result in results], last_pass=last_pass)
    if xid is not None:
        state["xid_seen"] = dict((bus, dict((str(code), count) for code, count in codes.items()))
                                 for bus, codes in xid[0].items())
    return state, render(state)


def render(state):
    """The health textfile of a sweep's state."""
    lines = []
    if state.get("skipped"):
        lines.append("# gpucloud-health-sweep: skipped, %s" % state.get("detail", ""))
    failed = [result for result in state.get("results", ()) if not result[2]]
    for check, gpu, _ok, detail in failed:
        lines.append("# gpucloud-health-sweep: %s failed on gpu %s: %s" % (check, gpu, " ".join(detail.split())))
    gpu_metrics._family(lines, CHECK_OK, "gauge", "1 when the check passed at the last sweep that ran, 0 when it failed.",
                        [([("check", check), ("gpu", gpu)], 1 if ok else 0)
                         for check, gpu, ok, _detail in state.get("results", ())])
    passes = sorted(state.get("last_pass", {}).items())
    gpu_metrics._family(lines, LAST_PASS, "gauge", "Unix time of the last sweep in which the check passed.",
                        [(list(zip(("check", "gpu"), key.split("|", 1))), float(when)) for key, when in passes])
    gpu_metrics._family(lines, SWEEP, "gauge", "Unix time of the last health sweep, run or skipped.",
                        [([], float(state["timestamp"]))])
    gpu_metrics._family(lines, SKIPPED, "gauge", "1 when the last sweep was skipped for this reason.",
                        [([("reason", reason)], 1 if state.get("skipped") == reason else 0) for reason in SKIP_REASONS])
    return "\n".join(lines) + "\n"


def load_json(text):
    try:
        data = json.loads(text) if text else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
