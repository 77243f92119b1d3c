# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/gpu_monitoring/files/gpu_metrics.py and the collector program around it.

NVML answers come from the H200 host's capture (nvml-dump.json, through the FakeNvml of
tests/unit/plugins/modules/utils.py); nvidia-smi answers from that host's --query-gpu capture
and from the lab's simulated nvidia-smi (scripts/nvsim), which is built from the same captures.
Every text is read back by a strict exposition-format parser, and by `promtool check metrics`
where Prometheus is installed.
"""


import csv
import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    DRIVER_NOT_LOADED,
    FakeNvml,
    Struct,
    fixture_path,
    fixture_text,
    h200_dump,
    h200_extra,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "gpu_monitoring")
COLLECTOR = os.path.join(ROLE, "files", "gpucloud-gpu-collector")
GPU_METRICS = os.path.join(ROLE, "files", "gpu_metrics.py")


def _load_gpu_metrics():
    """The role's gpu_metrics.py, imported from its file as the collector imports it on a node."""
    spec = importlib.util.spec_from_file_location("gpu_metrics", GPU_METRICS)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_metrics", module)
    spec.loader.exec_module(module)
    return module


gpu_metrics = _load_gpu_metrics()
NVSIM = os.path.join(ROOT, "scripts", "nvsim")
sys.path.insert(0, NVSIM)

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_smi  # noqa: E402  pylint: disable=wrong-import-position

H200_UUID = "GPU-4fc604de-9030-742c-d69f-594418e871d5"
H200_BUS = "00000000:00:06.0"
H200_CSV = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_query-gpu.csv")
HGX_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
NOW = 1764600000.25

# Xid lines in the driver's format (tests/unit/plugins/module_utils/test_xid.py, from public
# bug reports), as /dev/kmsg hands them out: "priority,sequence,microseconds,flags;message"
# (the kernel's Documentation/ABI/testing/dev-kmsg).
KMSG_XID_63 = "4,1841,1936510000,-;NVRM: Xid (PCI:0000:00:06): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.\n"
KMSG_XID_79 = "3,1842,1939000000,-;NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:06.0\n"
DMESG_XID_OTHER_GPU = "[ 1938.00] NVRM: Xid (PCI:0000:18:00): 48, pid=1900, DBE (double bit error) ECC error\n"

# promtool's lint findings that come from dcgm-exporter's own names, which the contract keeps:
# camelCase labels (UUID, modelName, Hostname), counters without _total, and
# DCGM_FI_DEV_PCIE_REPLAY_COUNTER, a counter named so.
PROMTOOL_ACCEPTED = (re.compile(r"^\S+ label names should be written in 'snake_case' not 'camelCase'$"),
                     re.compile(r'^\S+ counter metrics should have "_total" suffix$'),
                     re.compile(r"^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$"))

METRIC_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$')
LABEL_PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


# ---------------------------------------------------------------- helpers


def parse_exposition(text):
    """A strict reader of the text format: {family: {"type", "help", "samples": [(labels, value)]}}.

    Refuses what node exporter's textfile collector would: a sample line that does not parse,
    a family split in two, a TYPE after its samples, a series twice, client timestamps.
    """
    assert text.endswith("\n")
    families = {}
    order = []
    seen = set()
    for number, line in enumerate(text.splitlines(), 1):
        assert line == line.strip() and line, "line %d: %r" % (number, line)
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            _hash, kind, name, rest = line.split(" ", 3)
            family = families.setdefault(name, {"type": None, "help": None, "samples": []})
            assert not family["samples"], "line %d: %s after the samples of %s" % (number, kind, name)
            family[kind.lower()] = rest
            if not order or order[-1] != name:
                assert name not in order, "line %d: family %s split" % (number, name)
                order.append(name)
            continue
        if line.startswith("#"):
            continue
        match = METRIC_LINE.match(line)
        assert match, "line %d does not parse: %r" % (number, line)
        labels = {}
        raw = match.group("labels")
        if raw:
            position = 0
            while position < len(raw):
                pair = LABEL_PAIR.match(raw, position)
                assert pair, "line %d: bad labels %r" % (number, raw)
                labels[pair.group(1)] = re.sub(r"\\(.)", lambda escaped: "\n" if escaped.group(1) == "n" else escaped.group(1),
                                               pair.group(2))
                position = pair.end()
        name = match.group("name")
        assert order and order[-1] == name, "line %d: sample of %s outside its family" % (number, name)
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, "line %d: series twice" % number
        seen.add(key)
        families[name]["samples"].append((labels, float(match.group("value"))))
    for name, family in families.items():
        assert family["type"] in ("gauge", "counter"), name
        assert family["help"], name
    return families


def promtool_check(text):
    """`promtool check metrics` on TEXT: no parse error, and only the lint findings we accept."""
    promtool = shutil.which("promtool")
    if promtool is None:
        return None
    run = subprocess.run([promtool, "check", "metrics"], input=text, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False, timeout=60)
    assert run.returncode in (0, 3), run.stdout
    for line in run.stdout.splitlines():
        assert any(pattern.match(line) for pattern in PROMTOOL_ACCEPTED), line
    return run.stdout


def values(families, name):
    return [value for _labels, value in families.get(name, {"samples": []})["samples"]]


def by_gpu(families, name):
    return dict((labels["gpu"], value) for labels, value in families[name]["samples"])


def nvml_capture(**kwargs):
    """The H200 host's NVML, with the answers the capture holds in another shape given as it
    recorded them: UtilizationRates (a struct in pynvml), NvLink state per link. Calls it did not
    record (FieldValues) answer NotSupported, as an NVML without them would."""
    nvml = FakeNvml(h200_dump(), extra=h200_extra(), **kwargs)
    device = h200_dump()["devices"][0]

    def nvlink_state(link):
        entry = device["NvLink"][str(link)]["state"]
        if "error" in entry:
            raise getattr(nvml, entry["error"])()
        return entry["ok"]

    def not_supported(*_args):
        raise nvml.NVMLError_NotSupported()

    nvml.extra.update({
        (0, "UtilizationRates"): lambda: Struct(device["UtilizationRates"]["ok"]),
        (0, "NvLinkState"): nvlink_state,
        (0, "FieldValues"): not_supported,
    })
    return nvml


def field_values(answers):
    """An nvmlDeviceGetFieldValues answer built from nvidia-ml-py's own structs: {field: (type, value) or error}."""
    pynvml = pytest.importorskip("pynvml")

    def call(ids):
        array = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for entry, field in zip(array, ids):
            entry.fieldId = field
            answer = answers.get(field, pynvml.NVML_ERROR_NOT_SUPPORTED)
            if isinstance(answer, tuple):
                entry.valueType = answer[0]
                setattr(entry.value, gpu_metrics.NVML_VALUE_MEMBERS[answer[0]], answer[1])
                entry.nvmlReturn = 0
            else:
                entry.nvmlReturn = answer
        return array
    return call


class EightGpuNvml(FakeNvml):
    """An HGX H200 board for NVML: the captured GPU eight times on the board's PCI buses."""

    def __init__(self, lost=(), links=18, **kwargs):
        dump = h200_dump()
        dump["system"]["count"] = {"ok": 8}
        dump["devices"] = [dump["devices"][0]] * 8
        super(EightGpuNvml, self).__init__(dump, **kwargs)
        self.lost = lost
        self.links = links
        for index in range(8):
            self.extra.update({
                (index, "UtilizationRates"): lambda: Struct({"gpu": 0, "memory": 0}),
                (index, "FieldValues"): field_values({}),
                (index, "NvLinkState"): self._link,
                (index, "RetiredPagesPendingStatus"): {"error": "NVMLError_NotSupported"},
            })

    def _link(self, link):
        if link >= self.links:
            raise self.NVMLError_InvalidArgument()
        return 1

    def nvmlDeviceGetHandleByIndex(self, index):
        if index in self.lost:
            raise self.NVMLError_GpuIsLost()
        return super(EightGpuNvml, self).nvmlDeviceGetHandleByIndex(index)

    def _device(self, handle, key, *args):
        value = super(EightGpuNvml, self)._device(handle, key, *args)
        if key == "UUID":
            return "GPU-00000000-0000-0000-0000-%012d" % handle[1]
        if key == "PciInfo":
            return Struct({"busId": "00000000:%s:00.0" % HGX_BUSES[handle[1]]})
        return value


def nvsim_host(userspace="580.159.04", module="580.159.04"):
    state = nvsim_smi.empty_state(userspace)
    state.update(module_version=module, profile="h200-hgx8", persistenced=True)
    data = dict((key, fixture_text(build_repo.CAPTURES[path]) if path else None)
                for key, path in ((key, nvsim_smi.PROFILES["h200-hgx8"][key]) for key in ("xml", "q", "table", "topo_legend")))
    calls = []

    def run(args):
        calls.append(list(args))
        answer = nvsim_smi.answer(list(args), state, data)
        return answer["rc"], answer["stdout"], answer["stderr"]

    run.calls = calls
    return run


def render(reading, xid=None, **kwargs):
    text = gpu_metrics.render(reading, "gpu-h200-001", NOW, xid=xid, **kwargs)
    families = parse_exposition(text)
    promtool_check(text)
    return text, families


# ---------------------------------------------------------------- NVML


def test_h200_through_nvml_one_session_exact_values():
    nvml = nvml_capture()
    reading = gpu_metrics.read_nvml(nvml)
    assert nvml.shutdowns == 1 and not nvml.initialised
    assert reading["up"] and reading["source"] == "nvml" and reading["driver_version"] == "580.159.04"
    _text, families = render(reading, xid=gpu_metrics.XidTracker())
    labels = families["DCGM_FI_DEV_GPU_TEMP"]["samples"][0][0]
    assert labels == {"gpu": "0", "UUID": H200_UUID, "pci_bus_id": H200_BUS, "device": "nvidia0",
                      "modelName": "NVIDIA H200", "Hostname": "gpu-h200-001", "DCGM_FI_DRIVER_VERSION": "580.159.04"}
    # nvml-dump.json: Temperature 31, PowerUsage 77079 mW, ClockInfo sm 345 / mem 3201, MemoryInfo
    # used 644939776 B (NVML v1 counts the driver's reserved memory as used) and free 150109880320 B,
    # UtilizationRates 0/0, CurrentClocksEventReasons 1 (GPU idle), RemappedRows [0, 0, 0, 0].
    expected = {
        "DCGM_FI_DEV_GPU_TEMP": 31, "DCGM_FI_DEV_POWER_USAGE": 77.079, "DCGM_FI_DEV_SM_CLOCK": 345,
        "DCGM_FI_DEV_MEM_CLOCK": 3201, "DCGM_FI_DEV_FB_USED": 615, "DCGM_FI_DEV_FB_FREE": 143155,
        "DCGM_FI_DEV_GPU_UTIL": 0, "DCGM_FI_DEV_MEM_COPY_UTIL": 0, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": 1,
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": 0, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": 0,
        "DCGM_FI_DEV_ROW_REMAP_PENDING": 0, "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0, "DCGM_FI_DEV_XID_ERRORS": 0,
        "gpucloud_gpu_compute_processes": 0,
    }
    for name, value in expected.items():
        assert values(families, name) == [value], name
    assert values(families, "gpucloud_gpu_collector_up") == [1]
    assert families["gpucloud_gpu_collector_up"]["samples"][0][0] == {"source": "nvml"}
    assert values(families, "gpucloud_gpu_collector_last_sample_timestamp_seconds") == [NOW]
    assert families["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"]["type"] == "counter"


def test_what_nvml_cannot_read_is_left_out_not_zero():
    # On that host NVLink answered NotSupported for every link, and nothing recorded the field
    # values (memory temperature, energy, PCIe replays, ECC and NVLink error totals).
    text, families = render(gpu_metrics.read_nvml(nvml_capture()))
    for name in ("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
                 "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
                 "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "gpucloud_gpu_nvlink_links_active",
                 "DCGM_FI_DEV_XID_ERRORS"):
        assert name not in families and name not in text, name
    assert "DCGM_FI_DEV_GPU_TEMP" in families


def test_field_values_decoded_from_nvml_structs_and_failed_fields_left_out():
    pynvml = pytest.importorskip("pynvml")
    nvml = nvml_capture()
    nvml.extra[(0, "FieldValues")] = field_values({
        82: (1, 41),  # memory temperature, unsigned int
        83: (3, 123456789012),  # energy in mJ, unsigned long long
        94: (1, 2),
        3: (3, 5), 4: (3, 0), 5: (3, 7),
        6: pynvml.NVML_ERROR_NOT_SUPPORTED,
        38: (3, 1), 45: (3, 0), 52: (3, 9), 59: (3, 0),
    })
    _text, families = render(gpu_metrics.read_nvml(nvml))
    assert values(families, "DCGM_FI_DEV_MEMORY_TEMP") == [41]
    assert values(families, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == [123456789012]
    assert values(families, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER") == [2]
    assert values(families, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL") == [5]
    assert values(families, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL") == [7]
    assert "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL" not in families
    assert values(families, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL") == [9]
    assert families["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"]["type"] == "counter"


def test_eight_gpus_in_one_nvml_session_with_active_nvlinks():
    nvml = EightGpuNvml()
    reading = gpu_metrics.read_nvml(nvml)
    assert nvml.shutdowns == 1
    _text, families = render(reading)
    assert sorted(by_gpu(families, "DCGM_FI_DEV_GPU_TEMP")) == [str(i) for i in range(8)]
    assert set(by_gpu(families, "gpucloud_gpu_nvlink_links_active").values()) == {18}
    buses = [labels["pci_bus_id"] for labels, _value in families["DCGM_FI_DEV_GPU_TEMP"]["samples"]]
    assert buses == ["00000000:%s:00.0" % bus for bus in HGX_BUSES]
    # 18 active links asked, then the 19th answered InvalidArgument: no further calls.
    assert len([call for call in nvml.calls if call[0] == "NvLinkState"]) == 8 * 19


def test_a_lost_gpu_is_left_out_and_said_why():
    reading = gpu_metrics.read_nvml(EightGpuNvml(lost=(3,)))
    assert reading["up"]
    assert [gpu["index"] for gpu in reading["gpus"]] == [0, 1, 2, 4, 5, 6, 7]
    assert "GPU 3: NVMLError_GpuIsLost" in reading["reason"]
    text, families = render(reading)
    assert "3" not in by_gpu(families, "DCGM_FI_DEV_GPU_TEMP")
    assert text.startswith("# gpucloud-gpu-collector: left out, not answering: GPU 3")


@pytest.mark.parametrize("error", ["NVMLError_DriverNotLoaded", "NVMLError_Unknown"])
def test_no_driver_writes_only_the_health_series_with_up_0(error):
    nvml = nvml_capture(init_error=error)
    reading = gpu_metrics.read_nvml(nvml)
    assert not reading["up"] and not reading["library_missing"]
    assert error in reading["reason"]
    # No session was opened, so none is closed.
    assert nvml.shutdowns == 0
    text, families = render(reading, xid=gpu_metrics.XidTracker())
    assert sorted(families) == ["gpucloud_gpu_collector_last_sample_timestamp_seconds", "gpucloud_gpu_collector_up"]
    assert values(families, "gpucloud_gpu_collector_up") == [0]
    assert "DCGM_FI" not in text


def test_driver_library_version_mismatch_is_said_as_nvml_says_it():
    nvml = nvml_capture()
    # pynvml's exception prints nvmlErrorString(): "Driver/library version mismatch".
    mismatch = type("NVMLError_LibRmVersionMismatch", (nvml.NVMLError,), {"__str__": lambda self: "Driver/library version mismatch"})

    def init():
        raise mismatch()

    nvml.nvmlInit = init
    reading = gpu_metrics.read_nvml(nvml)
    assert not reading["up"]
    assert reading["reason"] == "NVML cannot start: Driver/library version mismatch (NVMLError_LibRmVersionMismatch)"
    text, _families = render(reading)
    assert "# gpucloud-gpu-collector: NVML cannot start: Driver/library version mismatch" in text


def test_auto_falls_back_to_nvidia_smi_only_when_the_nvml_library_is_missing():
    smi = nvsim_host()
    collector = gpu_metrics.Collector(pynvml=nvml_capture(init_error="NVMLError_LibraryNotFound"), run_smi=smi)
    reading = collector.read()
    assert reading["source"] == "nvidia-smi" and reading["up"] and len(reading["gpus"]) == 8
    smi.calls[:] = []
    collector = gpu_metrics.Collector(pynvml=nvml_capture(init_error="NVMLError_DriverNotLoaded"), run_smi=smi)
    assert collector.read()["source"] == "nvml" and not smi.calls
    assert gpu_metrics.Collector(pynvml=None, run_smi=smi).read()["source"] == "nvidia-smi"


def test_source_nvml_without_pynvml_is_down_and_says_so():
    reading = gpu_metrics.Collector(source="nvml", pynvml=None, run_smi=nvsim_host()).read()
    assert not reading["up"] and "nvidia-ml-py" in reading["reason"]


# ---------------------------------------------------------------- nvidia-smi


def test_nvidia_smi_drops_the_fields_the_simulation_refuses_once():
    smi = nvsim_host()
    reading, fields = gpu_metrics.read_smi(smi)
    assert reading["up"] and reading["source"] == "nvidia-smi" and len(reading["gpus"]) == 8
    refused = set(gpu_metrics.SMI_QUERY_FIELDS) - set(fields)
    assert "clocks.current.memory" in refused and "temperature.gpu" in fields
    queries = [call for call in smi.calls if call[0].startswith("--query-gpu=")]
    assert len(queries) == len(refused) + 1
    # Next time only the accepted fields are asked for: one query (and one for the processes).
    smi.calls[:] = []
    gpu_metrics.read_smi(smi, fields)
    assert [call[0].split("=")[0] for call in smi.calls] == ["--query-gpu", "--query-compute-apps"]
    _text, families = render(reading)
    assert set(by_gpu(families, "DCGM_FI_DEV_GPU_TEMP").values()) == {32}
    assert set(by_gpu(families, "DCGM_FI_DEV_POWER_USAGE").values()) == {77.64}
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in families and "DCGM_FI_DEV_FB_FREE" not in families
    # The simulation does not know --query-compute-apps: the processes are unknown, not 0.
    # nvsim answers --query-compute-apps (since af2e7e8): no process on any GPU.
    assert set(by_gpu(families, "gpucloud_gpu_compute_processes").values()) == {0}
    assert families["gpucloud_gpu_collector_up"]["samples"][0][0] == {"source": "nvidia-smi"}


def test_nvidia_smi_without_driver_and_with_a_version_mismatch():
    # Exactly what the simulation prints, from nvidia-smi's real messages and exit codes.
    reading, _fields = gpu_metrics.read_smi(nvsim_host(module=None))
    assert not reading["up"] and "couldn't communicate with the NVIDIA driver" in reading["reason"]
    reading, _fields = gpu_metrics.read_smi(nvsim_host(module="550.163.01"))
    assert not reading["up"] and reading["reason"] == "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"
    text, families = render(reading)
    assert sorted(families) == ["gpucloud_gpu_collector_last_sample_timestamp_seconds", "gpucloud_gpu_collector_up"]
    assert "DCGM_FI" not in text


def test_nvidia_smi_missing_hanging_or_seeing_no_gpu():
    assert gpu_metrics.read_smi(lambda args: None)[0]["reason"] == "nvidia-smi is not installed"
    hung = gpu_metrics.read_smi(lambda args: (124, "", "nvidia-smi did not answer within 10 s"))[0]
    assert not hung["up"] and "did not answer" in hung["reason"]
    empty = gpu_metrics.read_smi(lambda args: (6, "No devices were found\n", ""))[0]
    assert empty["up"] and empty["gpus"] == []
    assert gpu_metrics.smi_answer("nvidia-smi", 9, DRIVER_NOT_LOADED, "")["up"] is False


def test_nvidia_smi_counts_compute_processes_per_gpu():
    def run(args):
        if args[0].startswith("--query-gpu"):
            return 0, "0, GPU-a, NVIDIA H200, 00000000:18:00.0, 580.159.04\n1, GPU-b, NVIDIA H200, 00000000:2A:00.0, 580.159.04\n", ""
        return 0, "00000000:18:00.0\n00000000:18:00.0\n", ""

    reading, _fields = gpu_metrics.read_smi(run, ["index", "uuid", "name", "pci.bus_id", "driver_version"])
    _text, families = render(reading)
    assert by_gpu(families, "gpucloud_gpu_compute_processes") == {"0": 2, "1": 0}


def test_nvidia_smi_values_na_units_states_and_bitmask():
    fields = ["index", "uuid", "name", "pci.bus_id", "driver_version", "temperature.memory", "memory.free",
              "remapped_rows.pending", "remapped_rows.failure", "clocks_throttle_reasons.active", "power.draw"]
    out = "0, GPU-a, NVIDIA H200, 00000000:18:00.0, 580.159.04, [N/A], 141000, Yes, No, 0x0000000000000044, [Unknown Error]\n"
    reading = gpu_metrics.smi_answer("nvidia-smi", 0, out, "", fields)
    assert reading["gpus"][0]["values"] == {"fb_free": 141000, "row_remap_pending": 1, "row_remap_failure": 0,
                                            "clocks_event_reasons": 0x44}


# ---------------------------------------------------------------- replay


def test_replay_of_the_h200_capture_says_source_replay():
    reading = gpu_metrics.read_replay(H200_CSV, "h200.csv")
    assert reading["up"] and reading["source"] == "replay" and reading["driver_version"] == "580.159.04"
    text, families = render(reading)
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "replay"}, 1.0)]
    # The capture's values, units stripped: 32 C, 86.90 W, 0 %, 0 MiB used, 345 MHz.
    assert values(families, "DCGM_FI_DEV_GPU_TEMP") == [32]
    assert values(families, "DCGM_FI_DEV_POWER_USAGE") == [86.9]
    assert values(families, "DCGM_FI_DEV_FB_USED") == [0]
    assert values(families, "DCGM_FI_DEV_SM_CLOCK") == [345]
    # Not in the capture: left out.
    assert "DCGM_FI_DEV_FB_FREE" not in families and "DCGM_FI_DEV_MEM_CLOCK" not in text
    assert families["DCGM_FI_DEV_GPU_TEMP"]["samples"][0][0]["UUID"] == H200_UUID


def test_replay_files_shipped_with_the_role():
    one = gpu_metrics.read_replay(fixture_text(os.path.join(ROLE, "files", "replay", "h200-1gpu-query-gpu.csv")))
    assert one["gpus"] == gpu_metrics.read_replay(H200_CSV)["gpus"]
    with open(os.path.join(ROLE, "files", "replay", "nvsim-h200-hgx8-query-gpu.csv")) as handle:
        eight = handle.read()
    # Still what the lab's simulated nvidia-smi prints for those fields.
    header = next(csv.reader([eight.splitlines()[0]], skipinitialspace=True))
    fields = [re.sub(r"\s*\[.*\]$", "", name) for name in header]
    assert nvsim_host()(["--query-gpu=" + ",".join(fields), "--format=csv"]) == (0, eight, "")
    reading = gpu_metrics.read_replay(eight)
    assert len(reading["gpus"]) == 8 and len(set(gpu["uuid"] for gpu in reading["gpus"])) == 8
    for name in ("h200-1gpu-query-gpu", "nvsim-h200-hgx8-query-gpu"):
        assert os.path.exists(os.path.join(ROLE, "files", "replay", name + ".source"))


def test_replay_faults_missing_file_and_driver_gone():
    assert gpu_metrics.read_replay(None, "/etc/gpucloud-gpu-collector/replay.csv")["reason"] == (
        "replay file /etc/gpucloud-gpu-collector/replay.csv cannot be read")
    gone = gpu_metrics.read_replay(DRIVER_NOT_LOADED)
    assert not gone["up"] and gone["source"] == "replay"
    _text, families = render(gone)
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "replay"}, 0.0)]
    # A GPU missing: the capture without its row.
    assert gpu_metrics.read_replay(H200_CSV.splitlines()[0] + "\n")["gpus"] == []
    garbage = gpu_metrics.read_replay("hello\n")
    assert not garbage["up"] and "without index, uuid" in garbage["reason"]


# ---------------------------------------------------------------- Xid


def test_xid_last_value_per_gpu_by_pci_address():
    tracker = gpu_metrics.XidTracker()
    tracker.feed(KMSG_XID_63 + DMESG_XID_OTHER_GPU)
    tracker.feed(KMSG_XID_79)
    assert tracker.value(H200_BUS) == 79
    assert tracker.value("00000000:18:00.0") == 48
    assert tracker.value("00000000:2A:00.0") == 0
    assert tracker.value(None) is None
    _text, families = render(gpu_metrics.read_nvml(EightGpuNvml()), xid=tracker)
    xids = by_gpu(families, "DCGM_FI_DEV_XID_ERRORS")
    assert xids["0"] == 48 and set(value for gpu, value in xids.items() if gpu != "0") == {0}
    assert families["DCGM_FI_DEV_XID_ERRORS"]["type"] == "gauge"


def test_kernel_log_file_is_read_incrementally(tmp_path):
    path = tmp_path / "kern.log"
    log = gpu_metrics.KernelLog(str(path))
    assert log.read_new() is None and "No such file" in log.error
    path.write_text("[    0.5] NVRM: loading NVIDIA UNIX Open Kernel Module\n[ 1936.51] NVRM: Xid (PCI:0000:00")
    assert log.read_new() == "[    0.5] NVRM: loading NVIDIA UNIX Open Kernel Module\n"
    with open(str(path), "a") as handle:
        handle.write(":06): 63, pid=1896, Row Remapper\n")
    assert log.read_new() == "[ 1936.51] NVRM: Xid (PCI:0000:00:06): 63, pid=1896, Row Remapper\n"
    assert log.read_new() == ""
    path.write_text(DMESG_XID_OTHER_GPU)  # truncated and written anew
    assert log.read_new() == DMESG_XID_OTHER_GPU
    replacement = tmp_path / "new.log"
    replacement.write_text(KMSG_XID_79)
    os.replace(str(replacement), str(path))
    assert log.read_new() == KMSG_XID_79
    log.close()


def test_kernel_log_device_semantics_non_blocking(tmp_path):
    # A FIFO behaves as /dev/kmsg does for us: non-blocking reads, EAGAIN once nothing is left.
    fifo = str(tmp_path / "kmsg")
    os.mkfifo(fifo)
    log = gpu_metrics.KernelLog(fifo)
    assert log.read_new() == ""
    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(writer, KMSG_XID_63.encode())
        assert log.read_new() == KMSG_XID_63
        assert log.read_new() == ""
        tracker = gpu_metrics.XidTracker()
        os.write(writer, KMSG_XID_79.encode())
        tracker.feed(log.read_new())
        assert tracker.value(H200_BUS) == 79
    finally:
        os.close(writer)
        log.close()


def test_collector_without_a_readable_kernel_log_writes_no_xid_series(tmp_path):
    collector = gpu_metrics.Collector(source="replay", replay_path="r", read_file=lambda path: H200_CSV,
                                      kernel_log=gpu_metrics.KernelLog(str(tmp_path / "absent")))
    _reading, text = collector.collect("n1", NOW)
    assert "DCGM_FI_DEV_XID_ERRORS" not in text
    (tmp_path / "absent").write_text(KMSG_XID_79)
    _reading, text = collector.collect("n1", NOW)
    assert by_gpu(parse_exposition(text), "DCGM_FI_DEV_XID_ERRORS") == {"0": 79}


PUBLIC_XID_LOG = fixture_text("xid", "kernel-log-public.txt")


def xid_counts(families):
    """{(gpu, pci_bus_id, xid, class): count} of gpucloud_gpu_xid_events_total."""
    return dict(((labels["gpu"], labels["pci_bus_id"], labels["xid"], labels["class"]), value)
                for labels, value in families[gpu_metrics.XID_EVENTS]["samples"])


def test_xid_counter_counts_every_event_per_gpu_and_code_of_real_lines():
    counter = gpu_metrics.XidCounter()
    counter.learn([gpu_metrics.gpu_reading(3, "GPU-x", "H200", "00000000:18:00.0")])
    counter.feed(PUBLIC_XID_LOG)
    text, families = render(gpu_metrics.sample("nvml", up=False, reason="driver gone"), xid_events=counter)
    assert families[gpu_metrics.XID_EVENTS]["type"] == "counter"
    assert xid_counts(families) == {
        ("", "00000000:01:00.0", "3", "unknown"): 1,
        ("", "00000000:10:1C.0", "63", "hw"): 2,
        ("3", "00000000:18:00.0", "63", "hw"): 1,
        ("", "00000000:2B:00.0", "79", "hw"): 1,
        ("", "00000000:44:00.0", "79", "hw"): 1,
    }
    # The driver's multi-line "fallen off the bus" message has no Xid code: nothing for b3.
    assert "B3:00" not in text
    # A counter: new events add to it, a code seen again on the same GPU adds one.
    counter.feed(DMESG_XID_OTHER_GPU + DMESG_XID_OTHER_GPU)
    _text, families = render(gpu_metrics.sample("nvml", up=False), xid_events=counter)
    assert xid_counts(families)[("3", "00000000:18:00.0", "48", "hw")] == 2
    assert xid_counts(families)[("3", "00000000:18:00.0", "63", "hw")] == 1


def test_xid_counter_skips_kmsg_records_it_already_counted():
    counter = gpu_metrics.XidCounter()
    counter.feed(KMSG_XID_63 + KMSG_XID_79)
    restarted = gpu_metrics.XidCounter()
    restarted.load(counter.dump())
    # A restarted collector reads /dev/kmsg from the ring buffer's oldest record again.
    restarted.feed(KMSG_XID_63 + KMSG_XID_79 + KMSG_XID_79.replace("3,1842,", "3,1850,"))
    assert restarted.counts == {((0, 0, 6), 63): 1, ((0, 0, 6), 79): 2}
    # Other kernel messages leave the saved position alone: the state is rewritten for Xids only.
    saved = restarted.dump()
    restarted.feed("6,1900,1950000000,-;usb 1-1: new high-speed USB device number 3 using xhci_hcd\n")
    assert restarted.dump() == saved


def test_xid_counter_is_written_beside_dcgm_exporter_and_when_the_gpu_is_gone(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(KMSG_XID_79)
    collector = gpu_metrics.Collector(source="replay", replay_path="r", read_file=lambda path: H200_CSV,
                                      kernel_log=gpu_metrics.KernelLog(str(log)), dcgm_series=False)
    _reading, text = collector.collect("n1", NOW)
    families = parse_exposition(text)
    assert "DCGM_FI_DEV_XID_ERRORS" not in families
    assert xid_counts(families) == {("0", H200_BUS, "79", "hw"): 1}
    # The GPU fell off the bus: gone from the replay, the counter keeps its gpu label.
    collector.read_file = lambda path: H200_CSV.splitlines()[0] + "\n"
    _reading, text = collector.collect("n1", NOW + 15)
    assert xid_counts(parse_exposition(text)) == {("0", H200_BUS, "79", "hw"): 1}


def read_or_none(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def test_a_restarted_collector_does_not_count_again_and_a_reboot_starts_from_zero(tmp_path):
    log = tmp_path / "kern.log"
    state = str(tmp_path / "xid-state.json")
    log.write_text(KMSG_XID_63 + DMESG_XID_OTHER_GPU)

    def collector(boot_id):
        return gpu_metrics.Collector(source="replay", replay_path="r",
                                     read_file=lambda path: H200_CSV if path == "r" else read_or_none(path),
                                     kernel_log=gpu_metrics.KernelLog(str(log)), xid_state=state, boot_id=boot_id)

    first = collector("boot-1")
    first.collect("n1", NOW)
    with open(str(log), "a") as handle:
        handle.write(KMSG_XID_79)
    first.collect("n1", NOW + 15)
    first.kernel_log.close()
    with open(str(log), "a") as handle:
        handle.write(DMESG_XID_OTHER_GPU)
    again = collector("boot-1")
    _reading, text = again.collect("n1", NOW + 30)
    assert xid_counts(parse_exposition(text)) == {
        ("0", H200_BUS, "63", "hw"): 1, ("0", H200_BUS, "79", "hw"): 1, ("", "00000000:18:00.0", "48", "hw"): 2}
    # The last code per GPU (DCGM_FI_DEV_XID_ERRORS) survives the restart too.
    assert by_gpu(parse_exposition(text), "DCGM_FI_DEV_XID_ERRORS") == {"0": 79}
    again.kernel_log.close()
    # Another boot: the saved counts and position are of the old boot; the log is read anew.
    log.write_text(KMSG_XID_63)
    rebooted = collector("boot-2")
    _reading, text = rebooted.collect("n1", NOW + 45)
    assert xid_counts(parse_exposition(text)) == {("0", H200_BUS, "63", "hw"): 1}
    rebooted.kernel_log.close()


def test_an_unreadable_xid_state_starts_afresh_and_an_unwritable_one_is_said(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text(KMSG_XID_63)
    state = tmp_path / "xid-state.json"
    state.write_text("{not json")
    collector = gpu_metrics.Collector(source="replay", replay_path="r",
                                      read_file=lambda path: H200_CSV if path == "r" else read_or_none(path),
                                      kernel_log=gpu_metrics.KernelLog(str(log)), xid_state=str(state), boot_id="b")
    _reading, text = collector.collect("n1", NOW)
    assert xid_counts(parse_exposition(text)) == {("0", H200_BUS, "63", "hw"): 1}
    assert json.loads(state.read_text())["events"]["counts"] == [["00000000:00:06.0", 63, 1]]
    collector.xid_state = str(tmp_path / "absent" / "xid-state.json")
    with open(str(log), "a") as handle:
        handle.write(KMSG_XID_79)
    collector.collect("n1", NOW + 15)
    assert "cannot write" in collector.state_error
    collector.kernel_log.close()


# ---------------------------------------------------------------- the text


def test_labels_are_escaped_and_read_back():
    gpu = gpu_metrics.gpu_reading(0, 'GPU-"x"', 'A "quoted"\\name\nnext', H200_BUS, {"gpu_temp": 40})
    reading = gpu_metrics.sample("replay", gpus=[gpu])
    text, families = render(reading)
    assert families["DCGM_FI_DEV_GPU_TEMP"]["samples"][0][0]["modelName"] == 'A "quoted"\\name\nnext'
    assert 'modelName="A \\"quoted\\"\\\\name\\nnext"' in text


def test_beside_dcgm_exporter_only_the_gpucloud_series():
    reading = gpu_metrics.read_nvml(EightGpuNvml())
    _text, families = render(reading, dcgm_series=False)
    assert sorted(families) == ["gpucloud_gpu_collector_last_sample_timestamp_seconds", "gpucloud_gpu_collector_up",
                                "gpucloud_gpu_compute_processes", "gpucloud_gpu_nvlink_links_active"]
    assert families["gpucloud_gpu_nvlink_links_active"]["samples"][0][0]["gpu"] == "0"


def test_dcgm_counters_csv_enables_exactly_the_collectors_series():
    with open(os.path.join(ROLE, "files", "dcgm-counters.csv")) as handle:
        rows = [[part.strip() for part in line.split(",", 2)] for line in handle
                if line.strip() and not line.startswith("#")]
    assert ["DCGM_FI_DRIVER_VERSION", "label", "Driver Version"] in rows
    counters = [(name, kind, help_text) for name, kind, help_text in rows if kind != "label"]
    assert counters == [(name, kind, help_text) for name, kind, help_text, _key in gpu_metrics.DCGM_SERIES]


def test_contract_names_and_labels():
    assert gpu_metrics.LABELS == ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
    assert [name for name, _kind, _help, _key in gpu_metrics.DCGM_SERIES] == [
        "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"]
    assert gpu_metrics.UP == "gpucloud_gpu_collector_up"
    assert gpu_metrics.LAST_SAMPLE == "gpucloud_gpu_collector_last_sample_timestamp_seconds"
    assert [name for name, _kind, _help, _key in gpu_metrics.GPUCLOUD_GPU_SERIES] == [
        "gpucloud_gpu_nvlink_links_active", "gpucloud_gpu_compute_processes"]


def test_atomic_write(tmp_path, monkeypatch):
    path = tmp_path / "gpucloud-gpu.prom"
    path.write_text("old\n")
    renamed = []
    real_replace = os.replace

    def replace(source, destination):
        # node exporter reads *.prom: the half-written file must never be one.
        assert not source.endswith(".prom") and os.path.dirname(source) == str(tmp_path)
        assert path.read_text() == "old\n"
        renamed.append(source)
        real_replace(source, destination)

    monkeypatch.setattr(gpu_metrics.os, "replace", replace)
    gpu_metrics.write_textfile(str(path), "new\n")
    assert path.read_text() == "new\n" and renamed
    assert oct(os.stat(str(path)).st_mode & 0o777) == "0o644"
    with pytest.raises(TypeError):
        gpu_metrics.write_textfile(str(path), None)
    assert path.read_text() == "new\n"
    assert sorted(os.listdir(str(tmp_path))) == ["gpucloud-gpu.prom"]


def test_collector_refuses_unknown_sources():
    with pytest.raises(ValueError):
        gpu_metrics.Collector(source="dcgm")
    with pytest.raises(ValueError):
        gpu_metrics.Collector(source="replay")


# ---------------------------------------------------------------- the program, end to end


@pytest.fixture
def installed(tmp_path):
    """The collector as the role installs it: gpu_metrics.py in its lib directory, the module_utils
    it imports at their package path (the role's vars name them)."""
    lib = tmp_path / "lib"
    package = lib / "ansible_collections" / "gpucloud" / "fleet" / "plugins" / "module_utils"
    package.mkdir(parents=True)
    shutil.copy(GPU_METRICS, str(lib / "gpu_metrics.py"))
    with open(os.path.join(ROLE, "vars", "main.yml"), encoding="utf-8") as handle:
        module_utils = yaml.safe_load(handle)["__gpu_monitoring_module_utils"]
    for name in module_utils:
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), str(package / name))
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    return {"lib": str(lib), "dir": textfiles, "prom": str(textfiles / "gpucloud-gpu.prom"), "tmp": tmp_path}


def collector_argv(installed, *extra):
    # -I: no PYTHONPATH, no user site, no script directory, as the unit runs it; only --lib-dir.
    return [sys.executable, "-I", "-B", COLLECTOR, "--lib-dir", installed["lib"], "--textfile", installed["prom"],
            "--hostname", "lab-gpu-1"] + list(extra)


def test_collector_once_with_the_replay_source(installed):
    kernel_log = installed["tmp"] / "kern.log"
    kernel_log.write_text(KMSG_XID_79)
    run = subprocess.run(collector_argv(installed, "--once", "--source", "replay", "--replay-file",
                                        fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_query-gpu.csv"),
                                        "--kernel-log", str(kernel_log)),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "source replay, up 1, 1 GPUs\n"
    assert os.listdir(str(installed["dir"])) == ["gpucloud-gpu.prom"]
    with open(installed["prom"]) as handle:
        text = handle.read()
    families = parse_exposition(text)
    promtool_check(text)
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "replay"}, 1.0)]
    assert values(families, "DCGM_FI_DEV_XID_ERRORS") == [79]
    assert families["DCGM_FI_DEV_GPU_TEMP"]["samples"][0][0]["Hostname"] == "lab-gpu-1"
    assert abs(values(families, "gpucloud_gpu_collector_last_sample_timestamp_seconds")[0] - time.time()) < 60


def test_collector_program_keeps_xid_counts_across_runs(installed):
    kernel_log = installed["tmp"] / "kern.log"
    kernel_log.write_text(KMSG_XID_79)
    boot_id = installed["tmp"] / "boot_id"
    boot_id.write_text("5a1c0d3e-0000-4000-8000-000000000001\n")
    argv = collector_argv(installed, "--once", "--source", "replay", "--replay-file",
                          fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_query-gpu.csv"),
                          "--kernel-log", str(kernel_log), "--xid-state", str(installed["tmp"] / "xid.json"),
                          "--boot-id-file", str(boot_id))
    counts = []
    for extra in ("", KMSG_XID_79.replace("3,1842,", "3,1843,")):
        with open(str(kernel_log), "a") as handle:
            handle.write(extra)
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             timeout=60, check=False)
        assert run.returncode == 0, run.stderr
        with open(installed["prom"]) as handle:
            counts.append(values(parse_exposition(handle.read()), "gpucloud_gpu_xid_events_total"))
    assert counts == [[1], [2]]


def test_collector_without_driver_or_nvidia_smi_says_up_0(installed):
    run = subprocess.run(collector_argv(installed, "--once", "--source", "nvidia-smi", "--nvidia-smi",
                                        str(installed["tmp"] / "no-nvidia-smi"), "--kernel-log", "none"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    with open(installed["prom"]) as handle:
        families = parse_exposition(handle.read())
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "nvidia-smi"}, 0.0)]


def test_collector_loop_stops_on_sigterm_and_says_so(installed):
    replay = installed["tmp"] / "replay.csv"
    replay.write_text(H200_CSV)
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_path = str(installed["tmp"] / "notify")
    notify.bind(notify_path)
    notify.settimeout(30)
    env = dict(os.environ, NOTIFY_SOCKET=notify_path)
    proc = subprocess.Popen(collector_argv(installed, "--source", "replay", "--replay-file", str(replay),
                                           "--kernel-log", "none", "--interval", "0.2"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env)
    try:
        messages = [notify.recv(256).decode(), notify.recv(256).decode()]
        assert messages == ["READY=1", "WATCHDOG=1"]
        # A GPU goes missing in the replay: the next sample has none.
        replay.write_text(H200_CSV.splitlines()[0] + "\n")
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(installed["prom"]) as handle:
                if "DCGM_FI_DEV_GPU_TEMP" not in handle.read():
                    break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        notify.close()
    assert proc.returncode == 0, err
    assert "source replay, up 1, 0 GPUs" in err
    with open(installed["prom"]) as handle:
        text = handle.read()
    families = parse_exposition(text)
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "replay"}, 0.0)]
    assert text.startswith("# gpucloud-gpu-collector: collector stopped\n")


def test_node_exporter_serves_the_textfile(installed):
    """Debian's prometheus-node-exporter reads the collector's file without a scrape error."""
    exporter = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if exporter is None:
        pytest.skip("prometheus-node-exporter is not installed")
    subprocess.run(collector_argv(installed, "--once", "--source", "replay", "--replay-file",
                                  os.path.join(ROLE, "files", "replay", "nvsim-h200-hgx8-query-gpu.csv"),
                                  "--kernel-log", "none"), check=True, timeout=60)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([exporter, "--collector.disable-defaults", "--collector.textfile",
                             "--collector.textfile.directory=%s" % installed["dir"],
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        body = None
        deadline = time.time() + 30
        while body is None and time.time() < deadline:
            try:
                body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
            except OSError:
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert body is not None
    assert re.search(r"^node_textfile_scrape_error 0$", body, re.M)
    temps = re.findall(r'^DCGM_FI_DEV_GPU_TEMP\{.*gpu="(\d)".*\} 32$', body, re.M)
    assert sorted(temps) == [str(i) for i in range(8)]
    assert re.search(r'^gpucloud_gpu_collector_up\{source="replay"\} 1$', body, re.M)


def test_collector_goes_on_when_the_textfile_cannot_be_written(installed):
    argv = collector_argv(installed, "--once", "--source", "replay", "--replay-file",
                          fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_query-gpu.csv"), "--kernel-log", "none")
    argv[argv.index("--textfile") + 1] = str(installed["tmp"] / "absent" / "gpucloud-gpu.prom")
    run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60,
                         check=False)
    assert run.returncode == 1
    assert "source replay, up 1, 1 GPUs; cannot write " in run.stderr and "No such file or directory" in run.stderr


def test_collector_argument_errors(installed):
    run = subprocess.run(collector_argv(installed, "--once", "--source", "replay"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False)
    assert run.returncode == 2 and "--source replay needs --replay-file" in run.stderr


def test_ctypes_value_members_cover_every_nvml_value_type():
    pynvml = pytest.importorskip("pynvml")
    members = [name for name, _ctype in pynvml.c_nvmlValue_t._fields_]
    assert sorted(gpu_metrics.NVML_VALUE_MEMBERS.values()) == sorted(members)
    assert all(isinstance(getattr(pynvml.c_nvmlValue_t, name), type(pynvml.c_nvmlValue_t.dVal)) for name in members)
    assert ctypes.sizeof(pynvml.c_nvmlFieldValue_t) > 0
    for field, key in gpu_metrics.NVML_FIELDS:
        assert field in [value for name, value in vars(pynvml).items() if name.startswith("NVML_FI_DEV_")], key


# Issue 28 item 17: nvidia-smi output that is not UTF-8 (a GPU name, an error message in another
# encoding) is read with replacement characters; the collector never dies on a UnicodeDecodeError.
FAKE_SMI = r'''
import sys
args = sys.argv[1:]
if args[0].startswith("--query-gpu="):
    if MODE == "driver-gone":
        sys.stderr.buffer.write(b"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver \xff\xfe\n")
        sys.exit(9)
    values = {"index": b"0", "uuid": b"GPU-6e1b1b2c-0000-4000-8000-000000000001", "name": b"NVIDIA H200 \xe9\xff",
              "pci.bus_id": b"00000000:18:00.0", "driver_version": b"580.65.06", "temperature.gpu": b"31"}
    fields = args[0].split("=", 1)[1].split(",")
    sys.stdout.buffer.write(b", ".join(values.get(field, b"[N/A]") for field in fields) + b"\n")
elif args[0].startswith("--query-compute-apps="):
    sys.stdout.buffer.write(b"00000000:18:00.0 \xff\n")
'''


@pytest.mark.parametrize("mode,up,gpus", [("gpu", 1, 1), ("driver-gone", 0, 0)])
def test_collector_reads_nvidia_smi_output_that_is_not_utf8(installed, mode, up, gpus):
    fake = installed["tmp"] / "nvidia-smi"
    fake.write_text("#!%s\nMODE = %r\n%s" % (sys.executable, mode, FAKE_SMI))
    fake.chmod(0o755)
    run = subprocess.run(collector_argv(installed, "--once", "--source", "nvidia-smi", "--nvidia-smi", str(fake),
                                        "--kernel-log", "none"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60, check=False,
                         env=dict(os.environ, LC_ALL="C"))
    assert run.returncode == 0, run.stderr
    assert run.stderr.startswith("source nvidia-smi, up %d, %d GPUs" % (up, gpus)), run.stderr
    with open(installed["prom"], encoding="utf-8") as handle:
        text = handle.read()
    families = parse_exposition(text)
    assert families["gpucloud_gpu_collector_up"]["samples"] == [({"source": "nvidia-smi"}, float(up))]
    if gpus:
        assert families["DCGM_FI_DEV_GPU_TEMP"]["samples"][0][0]["modelName"] == "NVIDIA H200 \ufffd\ufffd"
    else:
        assert "couldn't communicate with the NVIDIA driver" in text
