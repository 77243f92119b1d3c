# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every PromQL expression of the Grafana dashboards runs against a real Prometheus and returns data.

No Grafana server can be installed here, so the dashboards' queries are checked where they
would fail in practice: in Prometheus. The test writes an OpenMetrics file shaped like what
the fleet's Prometheus scrapes (docs/monitoring-contract.md: two nodes of two hardware
profiles, 8 + 2 GPUs, every contract series with all its labels and the `node` / `profile`
target labels, and `up`), backfills it with `promtool tsdb create-blocks-from openmetrics`,
starts Debian's `prometheus` on a free localhost port over those blocks, backfills the
recording rules the dashboards use (`promtool tsdb create-blocks-from rules`, from
roles/monitoring_server/files/rules/gpucloud-recording.rules.yml), and runs every panel
target and every template-variable query through `promtool query instant` with the
template variables replaced by concrete values, as Grafana would interpolate them.

The data carries one fault of each kind the overview lists (a hardware Xid, an application
Xid, an ECC double-bit error, a pending and a failed row remap, NVLink links down and
NVLink errors, thermal throttling, a GPU near its temperature limit, a GPU that fell off the
bus, an allocated but idle GPU, a node on replayed data), so that "returns data" means the
filter found the fault; a few panels are also checked for exactly which GPUs they list.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.test_gpu_metrics import gpu_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DASHBOARDS = os.path.join(ROOT, "roles", "grafana_dashboards", "files", "dashboards")
RECORDING_RULES = os.path.join(ROOT, "roles", "monitoring_server", "files", "rules", "gpucloud-recording.rules.yml")

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    not (PROMETHEUS and PROMTOOL),
    reason="needs Debian's prometheus package (prometheus and promtool; requirements/monitoring.deb, scripts/setup.sh)")

STEP = 15           # seconds between samples, the lab's scrape interval
SPAN = 3600         # one hour of data
RANGE = "1h"        # $__range: the dashboard's time range
RATE_INTERVAL = "1m"  # $__rate_interval: 4 x the scrape interval
INTERVAL = "15s"    # $__interval

# (node, profile, GPUs, model, FB MiB total, NVLink links per GPU, DCGM job, collector source)
NODES = [
    ("gpu-h200-01", "h200_sxm", 8, "NVIDIA H200", 143771, 18, "dcgm", "nvml"),
    ("gpu-a100-01", "a100_80g_pcie", 2, "NVIDIA A100 80GB PCIe", 81920, 0, "node", "replay"),
]
H200, A100 = NODES[0][0], NODES[1][0]
GONE = (H200, 7)            # fell off the bus 10 minutes before the end: its series stop
HW_XID = (H200, 2, 48)      # double-bit ECC error: Xid 48, DBE 1, row remap pending
APP_XID = (A100, 0, 13)     # application class Xid
REMAP_FAILED = (A100, 1)
NVLINK_DOWN = (H200, 5)     # 16 of 18 links active, CRC flit errors rising
HOT = (H200, 3)             # 84 C against a limit of 85, HW thermal slowdown (0x40)
IDLE_ALLOCATED = (A100, 0)  # one compute process, utilisation 0
TEMP_LIMIT = 85

# Every per-GPU series of the contract, as the collector publishes them (test_gpu_metrics.py pins that list).
GPU_SERIES = [name for name, _kind, _help, _key in gpu_metrics.DCGM_SERIES + gpu_metrics.GPUCLOUD_GPU_SERIES]
NVLINK_COUNTERS = [name for name in GPU_SERIES if name.startswith("DCGM_FI_DEV_NVLINK_")]


def _gpu_value(name, node, gpu, step, fb_total, links):
    """The value of one GPU series at sample STEP (0 .. SPAN/STEP), with the faults above."""
    at = (node, gpu)
    busy = not (gpu == 1 and node == H200)          # one idle, unallocated GPU
    util = 0 if at == IDLE_ALLOCATED or not busy else 60 + (gpu * 7 + step) % 35
    used = fb_total * (0.8 if util else 0.01)
    values = {
        "DCGM_FI_DEV_SM_CLOCK": 1980 if util else 345,
        "DCGM_FI_DEV_MEM_CLOCK": 2619 if node == H200 else 1512,
        "DCGM_FI_DEV_GPU_TEMP": 84 if at == HOT else (45 + util // 4),
        "DCGM_FI_DEV_MEMORY_TEMP": 80 if at == HOT else (40 + util // 4),
        "DCGM_FI_DEV_POWER_USAGE": (80 + util * 5.5) if node == H200 else (60 + util * 2.5),
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 9.0e9 + step * STEP * 400000.0,
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": step // 20 if (node, gpu) == (A100, 1) else 0,
        "DCGM_FI_DEV_GPU_UTIL": util,
        "DCGM_FI_DEV_MEM_COPY_UTIL": util // 3,
        "DCGM_FI_DEV_FB_USED": round(used),
        "DCGM_FI_DEV_FB_FREE": fb_total - round(used),
        "DCGM_FI_DEV_XID_ERRORS": (HW_XID[2] if at == HW_XID[:2] and step > 100
                                   else APP_XID[2] if at == APP_XID[:2] and step > 50 else 0),
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 3 if gpu == 4 else 0,
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 1 if at == HW_XID[:2] and step > 100 else 0,
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": 12 if gpu == 4 else 0,
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": 1 if at == HW_XID[:2] and step > 100 else 0,
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 1 if at in (HW_XID[:2], REMAP_FAILED) else 0,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 2 if gpu == 4 else 0,
        "DCGM_FI_DEV_ROW_REMAP_FAILURE": 1 if at == REMAP_FAILED else 0,
        "DCGM_FI_DEV_ROW_REMAP_PENDING": 1 if at == HW_XID[:2] and step > 100 else 0,
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": step * 3 if at == NVLINK_DOWN else 0,
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": step if at == NVLINK_DOWN else 0,
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": step // 10 if at == NVLINK_DOWN else 0,
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": 0,
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 0x40 if at == HOT else (0x4 if util > 90 else 0x0 if util else 0x1),
        "gpucloud_gpu_nvlink_links_active": (links - 2) if at == NVLINK_DOWN else links,
        "gpucloud_gpu_compute_processes": 1 if (util or at == IDLE_ALLOCATED) else 0,
    }
    return values[name]


def _labels(**labels):
    return "{" + ",".join('%s="%s"' % (key, value) for key, value in labels.items()) + "}"


def openmetrics(end):
    """The OpenMetrics text of one hour of the two-node fleet, ending at END (unix seconds)."""
    start = end - SPAN
    steps = range(SPAN // STEP + 1)
    families = {}

    def add(name, labels, value_at, until=None):
        family = families.setdefault(name, [])
        for step in steps:
            ts = start + step * STEP
            if until is not None and ts > until:
                break
            family.append("%s%s %s %d" % (name, labels, value_at(step, ts), ts))

    for index, (node, profile, count, model, fb_total, links, dcgm_job, source) in enumerate(NODES):
        node_target = dict(job="node", instance="%s:9100" % node, node=node, profile=profile)
        dcgm_target = dict(job=dcgm_job, instance="%s:%s" % (node, 9400 if dcgm_job == "dcgm" else 9100),
                           node=node, profile=profile)
        add("up", _labels(**node_target), lambda step, ts: 1)
        if dcgm_job == "dcgm":
            add("up", _labels(**dcgm_target), lambda step, ts: 1)
        add("gpucloud_gpu_collector_up", _labels(source=source, **node_target), lambda step, ts: 1)
        add("gpucloud_gpu_collector_last_sample_timestamp_seconds", _labels(**node_target),
            lambda step, ts: ts - 3)
        add("gpucloud_node_gpus_expected", _labels(**node_target), lambda step, ts, count=count: count)
        add("gpucloud_node_profile_info", _labels(**node_target), lambda step, ts: 1)
        add("gpucloud_node_gpu_temp_limit_celsius", _labels(**node_target), lambda step, ts: TEMP_LIMIT)
        add("gpucloud_node_nvlinks_expected_per_gpu", _labels(**node_target), lambda step, ts, links=links: links)
        for gpu in range(count):
            gpu_labels = dict(gpu=str(gpu), UUID="GPU-%08x-0000-0000-0000-%012x" % (index, gpu),
                              pci_bus_id="00000000:%02X:00.0" % (0x18 + 0x10 * gpu), device="nvidia%d" % gpu,
                              modelName=model, Hostname=node, DCGM_FI_DRIVER_VERSION="580.159.04")
            until = end - 600 if (node, gpu) == GONE else None
            for name in GPU_SERIES:
                if name in NVLINK_COUNTERS and not links:
                    continue    # a PCIe GPU has no NVLink counters: left out, never published as 0
                target = node_target if name.startswith("gpucloud_") else dcgm_target
                add(name, _labels(**dict(gpu_labels, **target)),
                    lambda step, ts, name=name, node=node, gpu=gpu, fb_total=fb_total, links=links:
                    _gpu_value(name, node, gpu, step, fb_total, links), until)
    lines = []
    for name, samples in families.items():
        lines.append("# TYPE %s gauge" % name)
        lines.extend(samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(argv, **kwargs):
    run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                         timeout=300, check=False, **kwargs)
    assert run.returncode == 0, "%s failed (rc %d):\n%s" % (" ".join(argv), run.returncode, run.stdout[-4000:])
    return run.stdout


class Prometheus:
    """Debian's prometheus on a free localhost port over DATA, no scrape targets."""

    def __init__(self, work, data):
        self.work, self.data = work, data
        self.port = _free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.proc = None
        self.log = None

    def start(self):
        config = os.path.join(self.work, "prometheus.yml")
        with open(config, "w") as handle:
            handle.write("global:\n  scrape_interval: 15s\n")
        self.log = open(os.path.join(self.work, "prometheus-%d.log" % self.port), "w")
        self.proc = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + self.data,
             "--web.listen-address=127.0.0.1:%d" % self.port, "--storage.tsdb.retention.time=30d"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.proc.poll() is None, "prometheus exited: %s" % self.logtext()
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError("prometheus not ready after 60 s: %s" % self.logtext())

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None
        if self.log:
            self.log.close()
            self.log = None

    def logtext(self):
        with open(os.path.join(self.work, "prometheus-%d.log" % self.port)) as handle:
            return handle.read()[-3000:]


def _dashboards():
    out = {}
    for name in sorted(os.listdir(DASHBOARDS)):
        if name.endswith(".json"):
            with open(os.path.join(DASHBOARDS, name)) as handle:
                out[name] = json.load(handle)
    return out


def _panels(panels):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels") or [])


def _queries(dashboard):
    """(where, PromQL) of every panel target and of every query variable (label_values as a count)."""
    for panel in _panels(dashboard.get("panels") or []):
        for target in panel.get("targets") or []:
            if target.get("expr"):
                yield ("panel %r target %s" % (panel.get("title"), target.get("refId")), target["expr"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = re.match(r"^label_values\((.*),\s*(\w+)\)$", query.strip())
        assert match, "variable %s: only label_values(selector, label) is checked, got %r" % (variable["name"], query)
        yield ("variable %s" % variable["name"], "count by (%s) (%s)" % (match.group(2), match.group(1)))


RECORDED = re.compile(r"\b[a-zA-Z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+\b")
VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
GLOBALS = {"__range": RANGE, "__rate_interval": RATE_INTERVAL, "__interval": INTERVAL, "datasource": "unused"}

# Values as Grafana interpolates them into a Prometheus query: a single value as it is, a
# multi-value selection as a regex group, "All" as the variable's allValue (.*).
# "all" says whether every query must return data with these values (the faults are spread
# over both nodes, so a single-profile view may rightly show an empty fault table).
SUBSTITUTIONS = {
    "gpucloud-fleet-overview.json": [
        {"id": "all-profiles", "values": {"profile": ".*"}, "all": True},
        {"id": "both-profiles-multi", "values": {"profile": "(h200_sxm|a100_80g_pcie)"}, "all": True},
        {"id": "h200-only", "values": {"profile": "h200_sxm"}, "all": False},
    ],
    "gpucloud-node-gpu.json": [
        {"id": "h200-all-gpus", "values": {"profile": ".*", "node": H200, "gpu": ".*"}, "all": True},
        {"id": "h200-two-gpus", "values": {"profile": "h200_sxm", "node": H200, "gpu": "(2|5)"}, "all": True},
        # A PCIe A100 has no NVLink counters (left out, not 0): those targets may show "no data".
        {"id": "a100-gpu0", "values": {"profile": "a100_80g_pcie", "node": A100, "gpu": "0"}, "all": True,
         "may_be_empty": NVLINK_COUNTERS},
    ],
}


def substitute(expr, values):
    def one(match):
        name = match.group(1) or match.group(2) or match.group(3)
        if name in values:
            return values[name]
        if name in GLOBALS:
            return GLOBALS[name]
        raise AssertionError("unknown template variable $%s in %r" % (name, expr))
    return VARIABLE.sub(one, expr)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("promql"))
    end = int(time.time()) // 60 * 60 - 120
    source = os.path.join(work, "fleet.om")
    with open(source, "w") as handle:
        handle.write(openmetrics(end))
    data = os.path.join(work, "data")
    _run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", source, data])
    server = Prometheus(work, data)
    try:
        server.start()
        recorded = set()
        for dashboard in _dashboards().values():
            for _where, expr in _queries(dashboard):
                recorded.update(RECORDED.findall(expr))
        if recorded:
            assert os.path.exists(RECORDING_RULES), (
                "the dashboards use recording rules %s but %s does not exist" % (sorted(recorded), RECORDING_RULES))
            with open(RECORDING_RULES) as handle:
                rules = yaml.safe_load(handle)
            defined = {rule["record"] for group in rules["groups"] for rule in group["rules"] if "record" in rule}
            assert recorded <= defined, "recording rules used but not defined: %s" % sorted(recorded - defined)
            # Evaluate the rules over the raw data, as Prometheus would have recorded them,
            # then restart over raw and recorded blocks together.
            rule_blocks = os.path.join(work, "rule-blocks")
            _run([PROMTOOL, "tsdb", "create-blocks-from", "rules", "--url", server.url, "--start", str(end - SPAN),
                  "--end", str(end), "--eval-interval", "%ds" % STEP, "--output-dir", rule_blocks, RECORDING_RULES])
            server.stop()
            for block in os.listdir(rule_blocks):
                shutil.move(os.path.join(rule_blocks, block), os.path.join(data, block))
            server.start()
        server.end = end
        server.recorded = recorded
        yield server
    finally:
        server.stop()


def query(server, expr):
    out = _run([PROMTOOL, "query", "instant", "-o", "json", "--time", str(server.end), server.url, expr])
    result = json.loads(out)
    if isinstance(result, dict):   # scalar / string results come back as {"resultType": ..., "result": ...}
        result = result.get("result", result)
    return result


def _cases():
    for name, sets in SUBSTITUTIONS.items():
        for subst in sets:
            yield pytest.param(name, subst, id="%s-%s" % (name[:-5], subst["id"]))


@pytest.mark.parametrize("name,subst", list(_cases()))
def test_every_query_returns_data(prometheus, name, subst):
    dashboard = _dashboards()[name]
    empty, ran = [], 0
    for where, expr in _queries(dashboard):
        concrete = substitute(expr, subst["values"])
        assert "$" not in concrete, "%s: %s" % (where, concrete)
        result = query(prometheus, concrete)
        ran += 1
        exempt = any(metric in expr for metric in subst.get("may_be_empty", []))
        if subst["all"] and not result and not exempt:
            empty.append("%s: %s" % (where, concrete))
    assert ran > 10
    assert not empty, "queries without data (%s):\n  %s" % (subst["id"], "\n  ".join(empty))


def test_every_dashboard_variable_is_substituted():
    for name, dashboard in _dashboards().items():
        declared = {v["name"] for v in dashboard["templating"]["list"]}
        for subst in SUBSTITUTIONS[name]:
            assert set(subst["values"]) | {"datasource"} == declared, (name, subst["id"], declared)


def _by_gpu(result):
    return {(sample["metric"].get("node"), sample["metric"].get("gpu")): float(sample["value"][1])
            for sample in result}


def _target(dashboard, title, ref="A"):
    """The expression of target REF of the panel titled TITLE (or, when none is, whose title starts so)."""
    panels = [panel for panel in _panels(dashboard["panels"]) if panel.get("type") != "row"]
    matches = ([panel for panel in panels if panel.get("title") == title]
               or [panel for panel in panels if panel.get("title", "").startswith(title)])
    assert len(matches) == 1, "panel %r: %d matches" % (title, len(matches))
    for target in matches[0]["targets"]:
        if target["refId"] == ref:
            return target["expr"]
    raise AssertionError("panel %r has no target %s" % (title, ref))


FLEET_EXPECTED = [
    # (panel title prefix, refId, {(node, gpu): value} the panel must list, nothing else)
    ("GPUs reporting", "A", {(None, None): 9.0}),
    ("GPUs expected", "A", {(None, None): 10.0}),
    ("GPUs missing", "A", {(None, None): 1.0}),
    ("GPUs with a hardware Xid", "A", {(None, None): 1.0}),
    ("Nodes on replayed data", "A", {(None, None): 1.0}),
    ("Exporter targets down", "A", {(None, None): 0.0}),
    ("Xid needing action", "A", {(HW_XID[0], str(HW_XID[1])): float(HW_XID[2])}),
    ("Application Xids", "A", {(APP_XID[0], str(APP_XID[1])): float(APP_XID[2])}),
    ("ECC double-bit errors", "A", {(HW_XID[0], str(HW_XID[1])): 1.0}),
    ("Row remapping failed or pending", "A", {(REMAP_FAILED[0], str(REMAP_FAILED[1])): 1.0}),
    ("Row remapping failed or pending", "B", {(HW_XID[0], str(HW_XID[1])): 1.0}),
    ("NVLink links down", "A", {(NVLINK_DOWN[0], str(NVLINK_DOWN[1])): 16.0}),
    ("Throttled GPUs", "A", {(HOT[0], str(HOT[1])): float(0x40)}),
    ("GPUs within 5", "A", {(HOT[0], str(HOT[1])): 84.0}),
    ("Allocated but idle GPUs", "A", {(IDLE_ALLOCATED[0], str(IDLE_ALLOCATED[1])): 0.0}),
]


@pytest.mark.parametrize("title,ref,expected", FLEET_EXPECTED, ids=["%s-%s" % (t[0], t[1]) for t in FLEET_EXPECTED])
def test_fleet_overview_lists_exactly_the_faulty_gpus(prometheus, title, ref, expected):
    expr = substitute(_target(_dashboards()["gpucloud-fleet-overview.json"], title, ref), {"profile": ".*"})
    assert _by_gpu(query(prometheus, expr)) == expected, expr


def test_nvlink_errors_are_counted_on_the_gpu_with_links_down(prometheus):
    expr = substitute(_target(_dashboards()["gpucloud-fleet-overview.json"], "NVLink errors in the time range"),
                      {"profile": ".*"})
    result = _by_gpu(query(prometheus, expr))
    assert list(result) == [(NVLINK_DOWN[0], str(NVLINK_DOWN[1]))], result
    assert result[(NVLINK_DOWN[0], str(NVLINK_DOWN[1]))] > 0


def test_node_drill_down_counts_the_gpu_that_fell_off(prometheus):
    dashboard = _dashboards()["gpucloud-node-gpu.json"]
    values = {"profile": ".*", "node": H200, "gpu": ".*"}
    reporting = query(prometheus, substitute(_target(dashboard, "GPUs reporting"), values))
    expected = query(prometheus, substitute(_target(dashboard, "GPUs expected"), values))
    assert float(reporting[0]["value"][1]) == 7.0
    assert float(expected[0]["value"][1]) == 8.0
    gpus = query(prometheus, substitute("count by (gpu) (DCGM_FI_DEV_GPU_TEMP{node=\"$node\"})", values))
    assert sorted(sample["metric"]["gpu"] for sample in gpus) == [str(gpu) for gpu in range(7)]


def test_recording_rules_were_backfilled_when_used(prometheus):
    for name in sorted(prometheus.recorded):
        assert query(prometheus, name), "recording rule %s has no backfilled data" % name
