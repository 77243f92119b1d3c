# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The remediation state machine's decisions (issue 30 items 3 and 4)."""

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import xid as xid_table
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import remediation as rm

NOW = 1796328000.0  # 2026-12-03T20:00:00Z
DAY = 86400.0


def alert(xid=48, gpu="0", node="gpu1", time=NOW, name="GpuXidFatal", **extra):
    labels = {"alertname": name, "node": node, "profile": "h200"}
    if xid is not None:
        labels["xid"] = str(xid)
    if gpu is not None:
        labels["gpu"] = gpu
    labels.update(extra.pop("labels", {}))
    raw = {"status": "firing", "labels": labels, "startsAt": time}
    raw.update(extra)
    return raw


def node(**extra):
    entry = {"name": "gpu1", "profile": "h200", "scheduler": "kubernetes", "nvswitch": False, "gpu_in_use": False}
    entry.update(extra)
    return entry


def event(fault_class="memory", gpu="0", time=NOW - DAY, **extra):
    entry = {"time": time, "gpu": gpu, "fault_class": fault_class, "decision": "remediate"}
    entry.update(extra)
    return entry


FLEET = {"nodes": ["gpu%d" % i for i in range(1, 11)], "out": [], "alerting": ["gpu1"]}


def plan(raw=None, history=None, fleet=None, settings=None, **node_extra):
    return rm.plan(raw or alert(), node(**node_extra), history, fleet or FLEET, settings)


def steps(result):
    return [step["step"] for step in result["steps"]]


# ---- fault class -> action ----------------------------------------------------------

@pytest.mark.parametrize("code, fault_class, repair", [
    (48, "memory", "gpu_reset"), (63, "memory", "gpu_reset"), (95, "memory", "gpu_reset"),
    (74, "nvlink", "gpu_reset"), (61, "gpu", "gpu_reset"), (38, "driver", "gpu_reset"),
    (79, "bus", "reboot"), (143, "bus", "reboot"), (154, "recovery", "reboot"), (999, "unknown", "reboot"),
])
def test_xid_class_chooses_the_repair(code, fault_class, repair):
    result = plan(alert(xid=code))
    assert result["decision"] == "remediate"
    assert result["fault"]["class"] == fault_class
    assert result["repair"] == repair
    assert steps(result) == ["quarantine", "drain", "repair", "verify", "return"]
    assert result["steps"][2]["kind"] == repair
    assert all(step["reason"] for step in result["steps"]) and result["reason"]
    assert result["state_after"] == "out" and result["record"]["repair"] == repair


def test_every_hardware_code_of_the_xid_table_is_classified_on_purpose():
    hardware = sorted(code for code, entry in xid_table.XID_CODES.items() if entry[1] == "hw")
    assert sorted(rm.XID_CLASSES) == hardware


@pytest.mark.parametrize("code", [13, 31, 43, 45, 68, 69, 109, 8])
def test_application_xid_leaves_the_node_in(code):
    result = plan(alert(xid=code))
    assert result["decision"] == "ignore" and result["steps"] == [] and result["state_after"] is None
    assert "application-class" in result["reason"]


@pytest.mark.parametrize("extra, why", [
    ({"nvswitch": True}, "Fabric Manager"),
    ({"gpu_in_use": True}, "processes hold GPU 0"),
])
def test_reset_becomes_reboot_where_a_reset_is_not_allowed(extra, why):
    result = plan(alert(xid=48), **extra)
    assert result["repair"] == "reboot" and why in result["steps"][2]["reason"]


def test_reset_needs_a_named_gpu():
    result = plan(alert(xid=None, gpu=None, name="GpuRowRemapPending"))
    assert result["repair"] == "reboot" and "names no GPU" in result["reason"]


def test_second_driver_fault_reinstalls_the_driver_and_is_not_an_rma():
    history = {"state": "in", "events": [event("driver", time=NOW - 2 * DAY, xid=119)]}
    result = plan(alert(xid=120), history)
    assert result["decision"] == "remediate" and result["repair"] == "driver_reinstall"
    assert "second driver-class fault" in result["reason"]


@pytest.mark.parametrize("alertname, fault_class, repair", [
    ("GpuEccDoubleBitError", "memory", "gpu_reset"), ("GpuNvlinkLinksDown", "nvlink", "gpu_reset"),
    ("GpusMissing", "bus", "reboot"),
])
def test_alerts_without_an_xid_label(alertname, fault_class, repair):
    result = plan(alert(xid=None, name=alertname))
    assert (result["fault"]["class"], result["repair"]) == (fault_class, repair)


@pytest.mark.parametrize("test, fault_class, repair", [
    ("memory", "memory", "gpu_reset"), ("Memory Bandwidth", "memory", "gpu_reset"),
    ("pcie", "bus", "reboot"), ("software", "driver", "gpu_reset"), ("targeted_stress", "gpu", "gpu_reset"),
    ("brand_new_plugin", "unknown", "reboot"),
])
def test_diagnostic_failure_classes(test, fault_class, repair):
    result = plan(alert(xid=None, name="GpuHealthCheckFailed", labels={"test": test, "level": "medium"}))
    assert result["fault"]["source"] == "diagnostic"
    assert (result["fault"]["class"], result["repair"]) == (fault_class, repair)


# ---- repeat -> RMA ------------------------------------------------------------------

def test_repeated_hardware_fault_on_the_same_gpu_is_an_rma():
    history = {"state": "in", "events": [event("memory", time=NOW - 3 * DAY, xid=48)]}
    result = plan(alert(xid=95), history)
    assert result["decision"] == "rma" and result["state_after"] == "rma"
    assert steps(result) == ["quarantine", "drain", "rma_bundle", "hold"]
    assert "2 hardware-class faults" in result["reason"] and "rma_repeats is 2" in result["reason"]


@pytest.mark.parametrize("history_event", [
    event("memory", gpu="1"),                    # another GPU
    event("memory", time=NOW - 31 * DAY),        # outside the 30-day window
    event("driver"),                             # not a hardware class
])
def test_no_rma_without_a_repeat_of_the_same_gpu_in_the_window(history_event):
    result = plan(alert(xid=48), {"state": "in", "events": [history_event]})
    assert result["decision"] == "remediate"


def test_rma_repeats_setting():
    history = {"state": "in", "events": [event(), event(time=NOW - 2 * DAY)]}
    assert plan(alert(), history, settings={"rma_repeats": 4})["decision"] == "remediate"
    assert plan(alert(), history, settings={"rma_repeats": 3})["decision"] == "rma"
    assert plan(alert(), None, settings={"rma_repeats": 1})["decision"] == "rma"


# ---- profile share / fleet-wide -> refuse -------------------------------------------

def test_profile_share_exceeded_refuses_and_pages():
    fleet = dict(FLEET, out=["gpu5"])
    result = plan(alert(), fleet=fleet)
    assert result["decision"] == "refuse" and result["page"] and result["steps"] == []
    assert "profile share exceeded" in result["reason"] and "gpu5" in result["reason"]
    assert plan(alert(), fleet=fleet, settings={"max_out_share": 0.2})["decision"] == "remediate"


def test_share_counts_at_least_min_out_nodes():
    fleet = {"nodes": ["gpu1", "gpu2"], "out": [], "alerting": ["gpu1"]}
    assert plan(alert(), fleet=fleet)["decision"] == "remediate"
    assert plan(alert(), fleet=fleet, settings={"min_out_nodes": 0})["decision"] == "refuse"


def test_share_applies_to_an_rma_too():
    history = {"state": "in", "events": [event()]}
    result = plan(alert(), history, fleet=dict(FLEET, out=["gpu2"]))
    assert result["decision"] == "refuse" and "profile share exceeded" in result["reason"]


def test_fleet_wide_fault_drains_none_and_pages():
    fleet = {"nodes": ["gpu1", "gpu2", "gpu3"], "out": [], "alerting": ["gpu1", "gpu2", "gpu3"]}
    result = plan(alert(), fleet=fleet)
    assert result["decision"] == "refuse" and result["page"] and result["steps"] == []
    assert "fleet-wide fault" in result["reason"] and "3 nodes of profile h200" in result["reason"]


def test_one_node_profile_is_not_fleet_wide():
    result = plan(alert(), fleet={"nodes": ["gpu1"], "out": [], "alerting": ["gpu1"]})
    assert result["decision"] == "remediate"


# ---- leave alone --------------------------------------------------------------------

def test_node_under_maintenance_is_left_alone():
    result = plan(alert(), maintenance="firmware update, ticket OPS-12")
    assert result["decision"] == "refuse" and not result["page"] and "OPS-12" in result["reason"]


@pytest.mark.parametrize("state, words", [("out", "already in progress"), ("rma", "held out for RMA")])
def test_node_already_out_is_not_started_twice(state, words):
    result = plan(alert(), {"state": state, "events": []})
    assert result["decision"] == "refuse" and words in result["reason"]


def test_same_alert_again_is_a_duplicate():
    history = {"state": "in", "events": [event(time=NOW, alert="GpuXidFatal", alert_time="2026-12-03T20:00:00Z")]}
    result = plan(alert(), history)
    assert result["decision"] == "refuse" and "already handled" in result["reason"]


def test_resolved_alert_does_nothing():
    result = plan(alert(status="resolved"))
    assert result["decision"] == "ignore" and result["steps"] == []


# ---- Alertmanager's alert -----------------------------------------------------------

def test_alert_from_alertmanager_reads_instance_and_nanoseconds():
    raw = {"status": "firing", "startsAt": "2026-12-03T20:00:00.123456789Z",
           "labels": {"alertname": "GpuXidFatal", "instance": "gpu7.example:9400", "gpu": 3, "xid": "79"}}
    result = rm.alert_from_alertmanager(raw)
    assert result["node"] == "gpu7.example" and result["gpu"] == "3" and result["xid"] == "79"
    assert result["time"] == pytest.approx(NOW + 0.123456)


@pytest.mark.parametrize("raw, words", [
    (alert(node=""), "names no node"),
    (alert(name=""), "names no alert"),
    (alert(xid="79; reboot"), "alert.xid"),
    (alert(time="yesterday"), "startsAt"),
    (alert(time="2026-12-03T20:00:00"), "with a zone"),
    (alert(xid=None, name="GpuTemperatureHigh"), "not an alert this loop knows"),
    (alert(status="pending"), "status"),
    ("text", "expected a mapping"),
])
def test_bad_alert_is_refused_naming_the_field(raw, words):
    with pytest.raises(rm.RemediationError, match=words):
        rm.alert_from_alertmanager(raw)


@pytest.mark.parametrize("kwargs, words", [
    ({"settings": {"max_out_share": 2}}, "settings.max_out_share"),
    ({"settings": {"rma_repeat": 2}}, "unknown setting"),
    ({"settings": {"rma_repeats": 1.5}}, "settings.rma_repeats"),
    ({"history": {"state": "broken"}}, "state must be"),
    ({"history": {"events": [{"time": NOW, "fault_class": "cosmic"}]}}, "fault_class"),
    ({"scheduler": "pbs"}, "scheduler must be"),
    ({"nvswitch": "yes"}, "nvswitch must be"),
])
def test_bad_input_is_refused_naming_the_field(kwargs, words):
    with pytest.raises(rm.RemediationError, match=words):
        plan(**kwargs)


# ---- an alert that started before the node's last return ---------------------------

def test_alert_that_started_before_the_last_return_is_refused_not_counted_as_a_repeat():
    # One DRAM error raises GpuEccDoubleBitError and GpuRowRemapPending; the first was remediated
    # and the node returned verified; the second, queued meanwhile, must not make an RMA of it.
    history = {"state": "in", "returned": NOW - 60, "events": [
        event("memory", time=NOW - 300, alert="GpuEccDoubleBitError", alert_time=NOW - 300)]}
    stale = plan(alert(xid=None, name="GpuRowRemapPending", time=NOW - 299), history)
    assert stale["decision"] == "refuse" and not stale["page"]
    assert "before gpu1 returned verified" in stale["reason"] and "2026-12-03T19:59:00Z" in stale["reason"]
    again = plan(alert(xid=None, name="GpuEccDoubleBitError", time=NOW), history)
    assert again["decision"] == "rma"  # a new alert after the return is a repeat


def test_returned_time_only_matters_while_the_node_is_in():
    history = {"state": "out", "returned": NOW, "events": [event("memory", time=NOW - 300)]}
    assert "already in progress" in plan(alert(time=NOW - 10), history)["reason"]
    with pytest.raises(rm.RemediationError, match="history of gpu1: returned"):
        plan(alert(), {"state": "in", "returned": "yesterday", "events": []})


def test_alert_for_another_node_is_refused():
    with pytest.raises(rm.RemediationError, match="names node 'gpu2'"):
        plan(alert(node="gpu2"))


# ---- fleet view ---------------------------------------------------------------------

def test_fleet_view_from_histories_group_alerts_and_maintenance():
    histories = {
        "gpu2": {"state": "out", "events": [event(time=NOW - DAY)]},
        "gpu3": {"state": "in", "events": [event(time=NOW - 600)]},
        "gpu4": {"state": "rma", "events": []},
    }
    group = [alert(node="gpu5"), alert(node="gpu6", status="resolved"), alert(node="gpu7", xid=13),
             alert(node="gpu8", xid=None, name="GpuTemperatureHigh"), alert(node="elsewhere")]
    view = rm.fleet_view("gpu1", ["gpu%d" % i for i in range(1, 10)], histories, group, NOW,
                         maintenance=["gpu9"])
    assert view["out"] == ["gpu2", "gpu4", "gpu9"]
    assert view["alerting"] == ["gpu1", "gpu3", "gpu5"]


def test_fleet_view_feeds_the_fleet_wide_refusal():
    group = [alert(node=name) for name in ("gpu1", "gpu2", "gpu3")]
    view = rm.fleet_view("gpu1", ["gpu1", "gpu2", "gpu3"], {}, group, NOW)
    assert plan(alert(), fleet=view)["decision"] == "refuse"


def test_a_paged_alert_sent_again_alone_stays_refused():
    """Alertmanager sends a group again as its alerts resolve one by one (seen in the lab,
    2026-12-07): the alert a person was paged for then arrives without the others. The first
    decision is recorded in the history's paged list; the same alert again is not the node's own
    fault, while a new alert on that GPU (a later start) or another GPU is judged afresh."""
    group = [alert(node=name) for name in ("gpu1", "gpu2", "gpu3")]
    first = plan(alert(), fleet=rm.fleet_view("gpu1", ["gpu1", "gpu2", "gpu3"], {}, group, NOW))
    assert first["decision"] == "refuse" and first["page"]
    history = {"node": "gpu1", "state": "in", "events": [], "paged": [first["record"]]}
    alone = rm.fleet_view("gpu1", ["gpu1", "gpu2", "gpu3"], {"gpu1": history}, [alert()], NOW + 60)
    again = plan(alert(), history, fleet=alone)
    assert again["decision"] == "refuse" and not again["page"]
    assert "was refused and a person paged" in again["reason"] and "fleet-wide" in again["reason"]
    assert plan(alert(time=NOW + 600), history, fleet=alone)["decision"] == "remediate"
    assert plan(alert(gpu="3"), history, fleet=alone)["decision"] == "remediate"
    # a page is no fault: it neither makes the node alerting for the fleet rule nor counts towards RMA
    assert "gpu1" not in rm.fleet_view("gpu2", ["gpu1", "gpu2"], {"gpu1": history}, [], NOW)["alerting"]


@pytest.mark.parametrize("paged, field", [
    ({"gpu": "0"}, "paged[0]"),
    ([{"alert": "GpuXidFatal", "gpu": "0", "alert_time": "yesterday"}], "paged[0].alert_time"),
    ([{"alert": "GpuXidFatal", "gpu": ["0"], "alert_time": NOW}], "paged[0].gpu"),
])
def test_bad_paged_records_are_named(paged, field):
    if isinstance(paged, dict):
        paged = [paged]
    with pytest.raises(rm.RemediationError, match=r"paged\[0\]" if field == "paged[0]" else field.replace("[", r"\[").replace("]", r"\]")):
        plan(alert(), {"state": "in", "events": [], "paged": paged})


# ---- whether a process holds the GPU ------------------------------------------------

GPUS = ("0, GPU-11111111-2222-3333-4444-555555555555, 00000000:1B:00.0\n"
        "1, GPU-66666666-7777-8888-9999-000000000000, 00000000:43:00.0\n")


@pytest.mark.parametrize("gpu, apps, readable, held", [
    ("0", "GPU-11111111-2222-3333-4444-555555555555, 00000000:1B:00.0, 4242\n", True, True),
    ("1", "GPU-11111111-2222-3333-4444-555555555555, 00000000:1B:00.0, 4242\n", True, False),
    ("0000:1b:00.0", "GPU-x, 00000000:1B:00.0, 7\n", True, True),
    ("GPU-66666666-7777-8888-9999-000000000000", "", True, False),
    ("7", "", True, True),       # a GPU the node does not list
    ("0", "", False, True),      # nvidia-smi did not answer
    (None, "", True, False),
])
def test_gpu_in_use(gpu, apps, readable, held):
    assert rm.gpu_in_use(gpu, GPUS, apps, readable) is held
