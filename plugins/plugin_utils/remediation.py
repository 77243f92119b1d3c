# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The remediation loop's decisions (issue 30, item 3): alert + history + fleet -> plan.

Pure functions, controller only (playbooks/remediate.yml calls them through the
``gpucloud.fleet.remediation_*`` filters). The plan is one of

- ``remediate``: quarantine -> drain -> repair(kind) -> verify -> return;
- ``rma``: quarantine -> drain -> rma_bundle -> hold (the node stays out);
- ``refuse``: nothing is done, with the reason (and ``page: true`` where a person must look);
- ``ignore``: an application-class fault, the workload's business, nothing is done.

Every decision and every step carries its reason string. Bad input raises
``RemediationError`` naming the field, before anything is done to a host.

A node's history is a small JSON document kept on the controller (one file per node under
the state directory)::

    {"node": "gpu1", "state": "in" | "out" | "rma",
     "events": [{"time": 1733250000.0, "gpu": "0", "fault_class": "memory", "hardware": true,
                 "xid": 48, "diagnostic": null, "alert": "GpuXidFatal", "alert_time": ...,
                 "decision": "remediate", "repair": "gpu_reset", "reason": "..."}],
     "paged": [{"alert": "GpuEccDoubleBitError", "gpu": "5", "alert_time": ..., "decision": "refuse",
                "reason": "fleet-wide fault: ..."}]}

``events`` are the faults the loop acted on (they count towards the fleet window and RMA);
``paged`` are the alerts it refused and paged a person for (a fleet-wide fault, a profile
share exceeded). A later notification of a paged alert (the same alert name, GPU and start
time) stays refused: Alertmanager sends the group again as its alerts resolve one by one,
and the node whose alert resolves last would otherwise look like a fault of its own.
"""


import datetime
import math
import numbers
import re

from ansible_collections.gpucloud.fleet.plugins.module_utils import xid as xid_table

DECISIONS = ("remediate", "rma", "refuse", "ignore")
SCHEDULERS = ("kubernetes", "slurm", "none")
REPAIRS = ("gpu_reset", "reboot", "driver_reinstall")

# Fault class -> (first repair, counts towards RMA). "reset" becomes a reboot where a reset is
# not allowed (a process holds the GPU, NVSwitch, no GPU named); "driver" becomes a driver
# reinstall when the node had a driver-class fault within the RMA window before.
FAULT_CLASSES = {
    "memory": ("reset", True),     # ECC, row remapping
    "gpu": ("reset", True),        # engines, micro-controller, push buffer
    "nvlink": ("reset", True),     # NVLink / C2C links
    "bus": ("reboot", True),       # fallen off the bus, initialisation, PCIe
    "recovery": ("reboot", True),  # the driver asks for a recovery action
    "unknown": ("reboot", True),   # nobody has said it is harmless
    "driver": ("reset", False),    # firmware / GSP / software: the driver, not the board
    "app": (None, False),          # the workload's fault
}

# Xid code -> fault class, for the hardware-kind codes of module_utils/xid.py. A hardware code
# missing here is "gpu"; a code outside xid.py's table is "unknown"; xid.py's "app" codes are "app".
XID_CLASSES = {
    32: "gpu", 38: "driver", 44: "gpu", 48: "memory", 61: "gpu", 62: "gpu", 63: "memory",
    64: "memory", 74: "nvlink", 79: "bus", 92: "memory", 94: "memory", 95: "memory",
    119: "driver", 120: "driver", 121: "nvlink", 140: "memory", 143: "bus", 154: "recovery",
}

# Alerts of roles/monitoring_server's rules that name no Xid code -> fault class.
ALERT_CLASSES = {
    "GpuEccDoubleBitError": "memory",
    "GpuRowRemapFailure": "memory",
    "GpuRowRemapPending": "memory",
    "GpuNvlinkLinksDown": "nvlink",
    "GpuNvlinkErrors": "nvlink",
    "GpusMissing": "bus",
    "GpuXidApplication": "app",
}

# Diagnostic test name (dcgmi diag's plugins, and the collection's own checks) -> fault class.
DIAGNOSTIC_CLASSES = {
    "software": "driver", "deployment": "driver", "context_create": "driver", "nvml": "driver",
    "memory": "memory", "memtest": "memory", "memory_bandwidth": "memory", "ecc": "memory",
    "row_remap": "memory",
    "pcie": "bus", "pcie_link": "bus",
    "nvlink": "nvlink", "nvlink_state": "nvlink", "nvbandwidth": "nvlink",
    "diagnostic": "gpu", "targeted_stress": "gpu", "targeted_power": "gpu", "sm_stress": "gpu",
    "pulse_test": "gpu", "eud": "gpu", "gemm": "gpu", "gemm_burn": "gpu", "burn_in": "gpu",
}

DEFAULT_SETTINGS = {
    # share of a profile's nodes that may be out (remediation, RMA hold, maintenance) at once
    "max_out_share": 0.1,
    # ... but at least this many, so that a small profile can still be repaired
    "min_out_nodes": 1,
    # the same GPU with this many hardware-class faults within the window -> RMA
    "rma_repeats": 2,
    "rma_window_hours": 720,
    # every node of a profile alerting within this many minutes is a fleet-wide fault
    "fleet_window_minutes": 15,
    # a profile needs at least this many nodes before "all of them" means fleet-wide
    "fleet_wide_min_nodes": 2,
}


class RemediationError(ValueError):
    """Bad input to the remediation planner; the message names the field."""


def _time(value, field):
    """Seconds since the epoch from a number or an RFC 3339 time (Alertmanager's startsAt)."""
    if isinstance(value, bool):
        raise RemediationError("%s: expected a time, got %r" % (field, value))
    if isinstance(value, numbers.Real):
        if math.isnan(value) or math.isinf(value):
            raise RemediationError("%s: expected a time, got %r" % (field, value))
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        # Go writes up to nine fractional digits; Python reads six.
        text = re.sub(r"(\.\d{6})\d+", r"\1", text)
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.datetime.fromisoformat(text)
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise RemediationError("%s: expected an RFC 3339 time with a zone (2026-12-03T20:00:00Z) or "
                                   "seconds since the epoch, got %r" % (field, value))
        return parsed.timestamp()
    raise RemediationError("%s: expected a time, got %s" % (field, type(value).__name__))


def _number(settings, key, minimum, maximum=None):
    value = settings[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value < minimum or (
            maximum is not None and value > maximum):
        raise RemediationError("settings.%s: expected a number from %s%s, got %r"
                               % (key, minimum, "" if maximum is None else " to %s" % maximum, value))
    return value


def check_settings(settings):
    """The settings with defaults filled in, each one checked."""
    if settings is not None and not isinstance(settings, dict):
        raise RemediationError("settings: expected a mapping, got %s" % type(settings).__name__)
    unknown = sorted(set(settings or {}) - set(DEFAULT_SETTINGS))
    if unknown:
        raise RemediationError("settings: unknown setting(s) %s (allowed: %s)"
                               % (", ".join(unknown), ", ".join(sorted(DEFAULT_SETTINGS))))
    merged = dict(DEFAULT_SETTINGS)
    merged.update(settings or {})
    _number(merged, "max_out_share", 0, 1)
    for key in ("min_out_nodes", "rma_repeats", "fleet_wide_min_nodes"):
        if isinstance(merged[key], bool) or not isinstance(merged[key], int):
            raise RemediationError("settings.%s: expected a whole number, got %r" % (key, merged[key]))
    _number(merged, "min_out_nodes", 0)
    _number(merged, "rma_repeats", 1)
    _number(merged, "fleet_wide_min_nodes", 2)
    _number(merged, "rma_window_hours", 0)
    _number(merged, "fleet_window_minutes", 0)
    return merged


def _gpu(value, field):
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RemediationError("%s: expected a GPU index, UUID or PCI address, got %r" % (field, value))
    return str(value).strip()


def fault(alert):
    """The fault an alert reports: {class, hardware, source, xid, diagnostic, meaning}.

    ALERT is a normalised alert (see :func:`alert_from_alertmanager`): a diagnostic failure
    (``diagnostic: {test: ...}``) first, then an Xid code, then the alert's name.
    """
    diagnostic = alert.get("diagnostic")
    if diagnostic:
        if not isinstance(diagnostic, dict) or not isinstance(diagnostic.get("test"), str) or not diagnostic["test"]:
            raise RemediationError("alert.diagnostic: expected {test: <name>, ...}, got %r" % (diagnostic,))
        name = re.sub(r"[\s-]+", "_", diagnostic["test"].strip().lower())
        fault_class = DIAGNOSTIC_CLASSES.get(name, "unknown")
        return {"class": fault_class, "hardware": FAULT_CLASSES[fault_class][1], "source": "diagnostic",
                "xid": None, "diagnostic": dict(diagnostic),
                "meaning": "diagnostic test %s failed%s" % (
                    diagnostic["test"], "" if name in DIAGNOSTIC_CLASSES else " (a test this table does not know)")}
    code = alert.get("xid")
    if code is not None and code != "":
        if isinstance(code, bool) or not re.fullmatch(r"\d{1,4}", str(code).strip()):
            raise RemediationError("alert.xid: expected an Xid code (a number), got %r" % (code,))
        entry = xid_table.meaning(int(str(code).strip()))
        if entry["kind"] == "app":
            fault_class = "app"
        elif entry["kind"] == "unknown":
            fault_class = "unknown"
        else:
            fault_class = XID_CLASSES.get(entry["code"], "gpu")
        return {"class": fault_class, "hardware": FAULT_CLASSES[fault_class][1], "source": "xid",
                "xid": entry["code"], "diagnostic": None,
                "meaning": "Xid %d: %s" % (entry["code"], entry["meaning"])}
    name = alert.get("alertname")
    if name in ALERT_CLASSES:
        fault_class = ALERT_CLASSES[name]
        return {"class": fault_class, "hardware": FAULT_CLASSES[fault_class][1], "source": "alert",
                "xid": None, "diagnostic": None, "meaning": "alert %s" % name}
    raise RemediationError("alert: %r names no Xid code, no diagnostic test and is not an alert this loop knows "
                           "(%s)" % (name, ", ".join(sorted(ALERT_CLASSES))))


def alert_from_alertmanager(alert):
    """A normalised alert from one alert of Alertmanager's webhook payload (``alerts[]``).

    Reads ``labels.alertname``, the node from ``labels.node`` (the collection's rules),
    ``labels.Hostname`` (dcgm-exporter) or ``labels.instance`` without its port, the GPU from
    ``labels.gpu`` / ``labels.UUID``, ``labels.xid``, a failed check from ``labels.test`` or
    ``labels.check``, and the time from ``startsAt``. An alert already normalised (with
    ``node`` at its top) is checked and returned.
    """
    if not isinstance(alert, dict):
        raise RemediationError("remediate_alert: expected a mapping (one alert of Alertmanager's webhook), got %s"
                               % type(alert).__name__)
    if "labels" not in alert:
        normalised = dict(alert)
    else:
        labels = alert.get("labels")
        if not isinstance(labels, dict):
            raise RemediationError("remediate_alert.labels: expected a mapping, got %r" % (labels,))
        node = labels.get("node") or labels.get("Hostname") or ""
        if not node and labels.get("instance"):
            node = re.sub(r":\d+\Z", "", str(labels["instance"]))
        test = labels.get("test") or labels.get("check")
        normalised = {
            "alertname": labels.get("alertname"),
            "node": node,
            "gpu": labels.get("gpu", labels.get("UUID")),
            "xid": labels.get("xid"),
            "diagnostic": {"test": test, "level": labels.get("level")} if test else None,
            "time": alert.get("startsAt"),
            "status": alert.get("status", "firing"),
            "profile": labels.get("profile"),
        }
    if not isinstance(normalised.get("node"), str) or not normalised["node"].strip():
        raise RemediationError("remediate_alert: names no node (labels.node, labels.Hostname or labels.instance)")
    normalised["node"] = normalised["node"].strip()
    if not isinstance(normalised.get("alertname"), str) or not normalised["alertname"]:
        raise RemediationError("remediate_alert: names no alert (labels.alertname)")
    normalised["gpu"] = _gpu(normalised.get("gpu"), "remediate_alert.gpu")
    normalised["time"] = _time(normalised.get("time"), "remediate_alert.startsAt")
    if normalised.get("status", "firing") not in ("firing", "resolved"):
        raise RemediationError("remediate_alert.status: expected firing or resolved, got %r" % (normalised["status"],))
    normalised.setdefault("status", "firing")
    fault(normalised)
    return normalised


def check_history(history, node):
    """The node's history with its fields checked (an empty history when None)."""
    if history is None or history == {}:
        return {"node": node, "state": "in", "events": [], "returned": None, "paged": []}
    if not isinstance(history, dict):
        raise RemediationError("history of %s: expected a mapping, got %s" % (node, type(history).__name__))
    state = history.get("state", "in")
    if state not in ("in", "out", "rma"):
        raise RemediationError("history of %s: state must be in, out or rma, got %r" % (node, state))
    events = history.get("events", [])
    if not isinstance(events, list):
        raise RemediationError("history of %s: events must be a list" % node)
    checked = []
    for index, event in enumerate(events):
        where = "history of %s: events[%d]" % (node, index)
        if not isinstance(event, dict):
            raise RemediationError("%s: expected a mapping" % where)
        if event.get("fault_class") not in FAULT_CLASSES:
            raise RemediationError("%s.fault_class: expected one of %s, got %r"
                                   % (where, ", ".join(sorted(FAULT_CLASSES)), event.get("fault_class")))
        entry = dict(event)
        entry["time"] = _time(event.get("time"), where + ".time")
        entry["gpu"] = _gpu(event.get("gpu"), where + ".gpu")
        entry["hardware"] = FAULT_CLASSES[event["fault_class"]][1]
        checked.append(entry)
    returned = history.get("returned")
    if returned is not None:
        returned = _time(returned, "history of %s: returned" % node)
    paged = history.get("paged", [])
    if not isinstance(paged, list):
        raise RemediationError("history of %s: paged must be a list" % node)
    for index, entry in enumerate(paged):
        where = "history of %s: paged[%d]" % (node, index)
        if not isinstance(entry, dict) or not isinstance(entry.get("alert"), str):
            raise RemediationError("%s: expected a mapping with the alert's name" % where)
        _time(entry.get("alert_time"), where + ".alert_time")
        _gpu(entry.get("gpu"), where + ".gpu")
    return {"node": node, "state": state, "events": checked, "returned": returned, "paged": list(paged)}


def fleet_view(node, profile_nodes, histories, group_alerts, now, settings=None, maintenance=()):
    """Which nodes of NODE's profile are out and which are alerting now.

    PROFILE_NODES: every node of the profile (inventory). HISTORIES: node -> history (missing:
    never remediated). GROUP_ALERTS: the firing alerts Alertmanager sent in the same
    notification (normalised or raw). A node is out when its history's state is out or rma,
    or it is under maintenance; alerting when a firing alert names it, or its history records
    a fault within ``fleet_window_minutes`` of NOW.
    """
    settings = check_settings(settings)
    now = _time(now, "now")
    nodes = [str(name) for name in profile_nodes or []]
    if node not in nodes:
        nodes.append(node)
    histories = histories or {}
    if not isinstance(histories, dict):
        raise RemediationError("histories: expected a mapping node -> history")
    window = settings["fleet_window_minutes"] * 60.0
    out, alerting = [], set([node])
    for name in nodes:
        history = check_history(histories.get(name), name)
        if history["state"] in ("out", "rma") or name in (maintenance or ()):
            out.append(name)
        if any(now - event["time"] <= window for event in history["events"]):
            alerting.add(name)
    for raw in group_alerts or []:
        try:
            alert = alert_from_alertmanager(raw)
        except RemediationError:
            # another kind of alert in the same notification (a temperature warning): not a fault here
            continue
        if alert["status"] == "firing" and alert["node"] in nodes and fault(alert)["class"] != "app":
            alerting.add(alert["node"])
    return {"nodes": nodes, "out": out, "alerting": [name for name in nodes if name in alerting]}


def _step(step, reason, **extra):
    entry = {"step": step, "reason": reason}
    entry.update(extra)
    return entry


def _result(decision, reason, alert, node, found, steps=(), repair=None, page=False):
    record = {
        "time": alert["time"], "gpu": alert["gpu"], "fault_class": found["class"], "hardware": found["hardware"],
        "xid": found["xid"], "diagnostic": found["diagnostic"], "alert": alert["alertname"],
        "alert_time": alert["time"], "decision": decision, "repair": repair, "reason": reason,
    }
    state = {"remediate": "out", "rma": "rma"}.get(decision)
    return {"node": node["name"], "gpu": alert["gpu"], "decision": decision, "reason": reason, "page": page,
            "fault": found, "repair": repair, "steps": list(steps), "record": record, "state_after": state}


def check_node(node):
    if not isinstance(node, dict):
        raise RemediationError("node: expected a mapping, got %s" % type(node).__name__)
    name = node.get("name")
    if not isinstance(name, str) or not name:
        raise RemediationError("node.name: expected the inventory host name, got %r" % (name,))
    scheduler = node.get("scheduler", "none")
    if scheduler not in SCHEDULERS:
        raise RemediationError("node %s: scheduler must be one of %s, got %r" % (name, ", ".join(SCHEDULERS), scheduler))
    for key in ("nvswitch", "gpu_in_use"):
        if not isinstance(node.get(key, False), bool):
            raise RemediationError("node %s: %s must be true or false, got %r" % (name, key, node.get(key)))
    maintenance = node.get("maintenance") or ""
    if not isinstance(maintenance, str):
        raise RemediationError("node %s: maintenance must be a reason string or empty, got %r" % (name, maintenance))
    return {"name": name, "profile": str(node.get("profile") or ""), "scheduler": scheduler,
            "nvswitch": node.get("nvswitch", False), "gpu_in_use": node.get("gpu_in_use", False),
            "maintenance": maintenance}


def _repair(found, alert, node, history, window_start):
    """(repair kind, reason) for a remediable fault."""
    first = FAULT_CLASSES[found["class"]][0]
    if found["class"] == "driver":
        earlier = [event for event in history["events"]
                   if event["fault_class"] == "driver" and event["time"] >= window_start and event["time"] < alert["time"]]
        if earlier:
            return "driver_reinstall", ("%s is the node's second driver-class fault within the RMA window "
                                        "(the first at %s): reinstall the driver"
                                        % (found["meaning"], _iso(earlier[-1]["time"])))
    if first == "reboot":
        return "reboot", "%s is a %s-class fault: a GPU reset cannot recover it, reboot" % (found["meaning"], found["class"])
    if alert["gpu"] is None:
        return "reboot", "%s names no GPU to reset: reboot" % found["meaning"]
    if node["nvswitch"]:
        return "reboot", ("%s: the node has NVSwitches, Fabric Manager owns GPU resets there: reboot"
                          % found["meaning"])
    if node["gpu_in_use"]:
        return "reboot", "%s: processes hold GPU %s, it cannot be reset: reboot" % (found["meaning"], alert["gpu"])
    return "gpu_reset", ("%s is a %s-class fault, no process holds GPU %s and the node has no NVSwitch: "
                         "reset the GPU (nvidia-smi -r)" % (found["meaning"], found["class"], alert["gpu"]))


def _iso(seconds):
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def plan(alert, node, history=None, fleet=None, settings=None):
    """The remediation plan for ALERT on NODE.

    ALERT: normalised (:func:`alert_from_alertmanager`). NODE: {name, profile, scheduler,
    nvswitch, gpu_in_use, maintenance}. HISTORY: the node's history. FLEET: :func:`fleet_view`'s
    result for the node's profile. SETTINGS: see ``DEFAULT_SETTINGS``.
    """
    settings = check_settings(settings)
    node = check_node(node)
    alert = alert_from_alertmanager(alert)
    if alert["node"] != node["name"]:
        raise RemediationError("remediate_alert names node %r, but the run is for %r" % (alert["node"], node["name"]))
    history = check_history(history, node["name"])
    fleet = fleet or {"nodes": [node["name"]], "out": [], "alerting": [node["name"]]}
    if not isinstance(fleet, dict) or not all(isinstance(fleet.get(key, []), list) for key in ("nodes", "out", "alerting")):
        raise RemediationError("fleet: expected {nodes: [...], out: [...], alerting: [...]}")
    found = fault(alert)
    where = "GPU %s of %s" % (alert["gpu"], node["name"]) if alert["gpu"] is not None else node["name"]

    if alert["status"] != "firing":
        return _result("ignore", "the alert is resolved: nothing to do", alert, node, found)
    if node["maintenance"]:
        return _result("refuse", "%s is under manual maintenance (%s): left alone" % (node["name"], node["maintenance"]),
                       alert, node, found)
    if found["class"] == "app":
        return _result("ignore", "%s is an application-class fault: the workload's business, the node stays in"
                       % found["meaning"], alert, node, found)
    for event in history["events"]:
        if event.get("alert_time") is not None and event.get("alert") == alert["alertname"] and \
                event["gpu"] == alert["gpu"] and _time(event["alert_time"], "history alert_time") == alert["time"]:
            return _result("refuse", "this alert (%s on %s, since %s) was already handled: %s"
                           % (alert["alertname"], where, _iso(alert["time"]), event.get("decision")), alert, node, found)
    if history["state"] == "in" and history["returned"] is not None and alert["time"] < history["returned"]:
        stale = (alert["alertname"], where, _iso(alert["time"]), node["name"], _iso(history["returned"]))
        return _result("refuse", "this alert (%s on %s) started at %s, before %s returned verified from its last "
                       "remediation at %s: that remediation dealt with it (one fault often raises several alerts, "
                       "an ECC error and its pending row remap, and a queued event arrives late); a fault that is "
                       "still there raises a new alert" % stale, alert, node, found)
    for entry in history["paged"]:
        if entry["alert"] == alert["alertname"] and _gpu(entry.get("gpu"), "paged gpu") == alert["gpu"] and \
                _time(entry["alert_time"], "paged alert_time") == alert["time"]:
            return _result("refuse", "this alert (%s on %s, since %s) was refused and a person paged: %s; it is "
                           "that person's now, not the loop's, also after the other nodes' alerts resolve (a fault "
                           "still there once it resolves raises a new alert)"
                           % (alert["alertname"], where, _iso(alert["time"]), entry.get("reason", "")),
                           alert, node, found)
    if history["state"] == "rma":
        return _result("refuse", "%s is held out for RMA: a person replaces the GPU and clears the hold" % node["name"],
                       alert, node, found)
    if history["state"] == "out":
        return _result("refuse", "a remediation of %s is already in progress (state out): not started twice"
                       % node["name"], alert, node, found)

    nodes, out, alerting = fleet.get("nodes", []), fleet.get("out", []), fleet.get("alerting", [])
    total = len(set(nodes) | set([node["name"]]))
    if total >= settings["fleet_wide_min_nodes"] and set(nodes) | set([node["name"]]) <= set(alerting) | set([node["name"]]):
        return _result("refuse", "fleet-wide fault: every one of the %d nodes of profile %s is alerting at once; "
                       "this points at something they share (driver, firmware, cooling, fabric), not at %s: "
                       "draining none, paging a person" % (total, node["profile"] or "(none)", node["name"]),
                       alert, node, found, page=True)
    allowed = max(settings["min_out_nodes"], int(math.floor(total * settings["max_out_share"] + 1e-9)))
    already = sorted(set(out) - set([node["name"]]))
    if len(already) + 1 > allowed:
        return _result("refuse", "profile share exceeded: %d of %d nodes of profile %s are out already (%s); "
                       "taking %s out too would exceed max_out_share %s (at most %d out): page a person"
                       % (len(already), total, node["profile"] or "(none)", ", ".join(already), node["name"],
                          settings["max_out_share"], allowed), alert, node, found, page=True)

    quarantine = [
        _step("quarantine", "stop new work reaching %s: %s" % (where, found["meaning"]), scheduler=node["scheduler"]),
        _step("drain", "move the running work off %s before it is touched" % node["name"], scheduler=node["scheduler"]),
    ]
    window_start = alert["time"] - settings["rma_window_hours"] * 3600.0
    if found["hardware"] and alert["gpu"] is not None:
        repeats = [event for event in history["events"]
                   if event["hardware"] and event["gpu"] == alert["gpu"] and window_start <= event["time"] < alert["time"]]
        if len(repeats) + 1 >= settings["rma_repeats"]:
            reason = ("GPU %s of %s has had %d hardware-class faults within %s h (%s, now %s), rma_repeats is %d: "
                      "hold the node out and write the RMA bundle"
                      % (alert["gpu"], node["name"], len(repeats) + 1, settings["rma_window_hours"],
                         ", ".join("%s at %s" % (event["fault_class"], _iso(event["time"])) for event in repeats),
                         found["meaning"], settings["rma_repeats"]))
            steps = quarantine + [
                _step("rma_bundle", "the vendor needs serials, VBIOS, the Xid history, diagnostics and "
                      "nvidia-bug-report of GPU %s" % alert["gpu"]),
                _step("hold", "%s stays out until a person replaces GPU %s and clears the hold"
                      % (node["name"], alert["gpu"]), scheduler=node["scheduler"]),
            ]
            return _result("rma", reason, alert, node, found, steps)

    kind, why = _repair(found, alert, node, history, window_start)
    steps = quarantine + [
        _step("repair", why, kind=kind),
        _step("verify", "the node returns only when node acceptance and the long diagnostic pass", level="long"),
        _step("return", "verified: %s takes work again" % node["name"], scheduler=node["scheduler"]),
    ]
    return _result("remediate", "%s on %s: %s" % (found["meaning"], where, why), alert, node, found, steps, repair=kind)


def _bus(value):
    """A PCI address in one spelling: 8-digit domain, lower case (nvidia-smi writes 00000000:1B:00.0)."""
    text = value.strip().lower()
    match = re.fullmatch(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f])", text)
    if not match:
        return text
    return "%08x:%s:%s.%s" % (int(match.group(1) or "0", 16), match.group(2), match.group(3), match.group(4))


def gpu_in_use(gpu, gpus_csv, apps_csv, readable=True):
    """Whether a compute process holds GPU (an index, UUID or PCI address).

    GPUS_CSV: ``nvidia-smi --query-gpu=index,uuid,pci.bus_id --format=csv,noheader``;
    APPS_CSV: ``nvidia-smi --query-compute-apps=gpu_uuid,gpu_bus_id,pid --format=csv,noheader``.
    Unreadable output, or a GPU the node does not list, counts as held: a reset is then not offered.
    """
    if not readable:
        return True
    gpu = _gpu(gpu, "gpu")
    if gpu is None:
        return False
    ids = None
    for line in (gpus_csv or "").splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) != 3:
            continue
        if gpu in (fields[0], fields[1]) or _bus(gpu) == _bus(fields[2]):
            ids = (fields[1], _bus(fields[2]))
    if ids is None:
        return True
    for line in (apps_csv or "").splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) >= 2 and (fields[0] == ids[0] or _bus(fields[1]) == ids[1]):
            return True
    return False
