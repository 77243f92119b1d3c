# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA Xid events: find them in kernel log text and say what each code means.

The meanings and actions follow NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors);
only codes a data-center operator meets in practice are listed, anything else is
reported as "not in this table" with the catalog's address.
"""


import re

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/"

# code -> (meaning, what to do). "app" errors are usually the workload's fault;
# "hw" needs a GPU reset, a drain or a replacement.
XID_CODES = {
    8: ("GPU stopped processing (channel idle timeout)", "app", "restart the application; if it repeats, reset the GPU"),
    13: ("Graphics engine exception", "app", "usually an application bug (out-of-range access); check the workload"),
    31: ("GPU memory page fault (MMU fault)", "app", "usually an application bug (illegal address); check the workload"),
    32: ("Invalid or corrupted push buffer stream", "hw", "check PCIe link health; reset the GPU if it repeats"),
    38: ("Driver firmware error", "hw", "reset the GPU; update the driver if it repeats"),
    43: ("GPU stopped processing (channel reset by the driver)", "app", "the application faulted; nothing to do if it stays rare"),
    44: ("Graphics engine fault during context switch", "hw", "reset the GPU"),
    45: ("Preemptive cleanup after a previous error", "app", "look at the Xid logged just before it"),
    48: ("Double-bit (uncorrectable) ECC error", "hw", "drain the node and reset the GPU; replace it if it repeats"),
    61: ("Internal micro-controller breakpoint/warning", "hw", "reset the GPU; collect nvidia-bug-report.sh"),
    62: ("Internal micro-controller halt", "hw", "reset the GPU; collect nvidia-bug-report.sh"),
    63: ("ECC page retirement or row remapping recorded", "hw", "reset the GPU to activate the remap; watch for repeats"),
    64: ("ECC page retirement or row remapping failed", "hw", "drain the node; the GPU needs service"),
    68: ("Video processor (NVDEC) exception", "app", "restart the application"),
    69: ("Graphics engine class error", "app", "restart the application"),
    74: ("NVLink error", "hw", "check NVLink/NVSwitch state (nvidia-smi nvlink -s); reset the GPU"),
    79: ("GPU has fallen off the bus", "hw", "drain the node; check PCIe, power and cooling; a reboot is needed"),
    92: ("High single-bit ECC error rate", "hw", "watch the counters; schedule a GPU reset"),
    94: ("Contained ECC error", "hw", "restart the affected application; reset the GPU when convenient"),
    95: ("Uncontained ECC error", "hw", "drain the node and reset the GPU"),
    109: ("Context switch timeout", "app", "restart the application; reset the GPU if it repeats"),
    119: ("GSP RPC timeout", "hw", "reset the GPU; update the driver if it repeats"),
    120: ("GSP error", "hw", "reset the GPU; collect nvidia-bug-report.sh"),
    121: ("C2C (chip-to-chip) link error", "hw", "reset the GPU; the board may need service"),
    140: ("Unrecovered ECC error", "hw", "drain the node and reset the GPU"),
    143: ("GPU initialization failure", "hw", "reboot; the GPU may need service"),
    154: ("GPU recovery action changed", "hw", "do the recovery action the message names (reset, reboot, drain)"),
}

XID_LINE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)\): "
    r"(?P<code>\d+),?\s*(?P<message>.*)$"
)


def meaning(code):
    """{code, meaning, kind, action} for an Xid code, known or not."""
    code = int(code)
    known = XID_CODES.get(code)
    if known is None:
        return {"code": code, "meaning": "not in this table; see %s" % CATALOG_URL, "kind": "unknown",
                "action": "look the code up in NVIDIA's Xid catalog"}
    return {"code": code, "meaning": known[0], "kind": known[1], "action": known[2]}


def parse_xid_events(text):
    """Every Xid line of kernel log text (dmesg, kern.log, journalctl -k) as a dict."""
    events = []
    for line in (text or "").splitlines():
        match = XID_LINE.search(line)
        if match:
            events.append({
                "code": int(match.group("code")),
                "pci": match.group("pci"),
                "message": match.group("message").strip(),
                "line": line.strip(),
            })
    return events


def summarize(text):
    """Xid codes in TEXT with their count, GPUs and meaning, most frequent first."""
    by_code = {}
    for event in parse_xid_events(text):
        entry = by_code.get(event["code"])
        if entry is None:
            entry = meaning(event["code"])
            entry.update({"count": 0, "pci": [], "first": event["line"], "last": event["line"]})
            by_code[event["code"]] = entry
        entry["count"] += 1
        entry["last"] = event["line"]
        if event["pci"] not in entry["pci"]:
            entry["pci"].append(event["pci"])
    return sorted(by_code.values(), key=lambda e: (-e["count"], e["code"]))


def summary_text(summary):
    """A human-readable report of summarize()'s result."""
    if not summary:
        return "No Xid events in the kernel log.\n"
    lines = ["Xid events in the kernel log (%s):" % CATALOG_URL, ""]
    for entry in summary:
        lines.append("Xid %d x%d on %s: %s [%s]" % (entry["code"], entry["count"], ", ".join(entry["pci"]),
                                                    entry["meaning"], entry["kind"]))
        lines.append("  action: %s" % entry["action"])
        lines.append("  last:   %s" % entry["last"])
    return "\n".join(lines) + "\n"


def judge(text, ignore=()):
    """Split the Xid events of TEXT into the ones to act on and the ones to report.

    Returns ``{"actionable": [...], "informational": [...]}``, each a :func:`summarize` list.
    ``hw`` codes need a GPU reset, a drain or a replacement; codes not in this table are
    actionable too, since nobody has said they are harmless. ``app`` codes are usually the
    workload's fault, and codes in IGNORE (the operator's decision) are only reported.
    """
    ignore = set(int(code) for code in ignore or ())
    result = {"actionable": [], "informational": []}
    for entry in summarize(text):
        harmless = entry["kind"] == "app" or entry["code"] in ignore
        result["informational" if harmless else "actionable"].append(entry)
    return result
