# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU readings as Prometheus text for node exporter's textfile collector.

The readings come from one of three sources, each passed in so that everything here
runs without a GPU:

- NVML through the ``pynvml`` module object (nvidia-ml-py): one ``nvmlInit()`` and one
  ``nvmlShutdown()`` per sample, every GPU read in that one session. NVML is never
  kept open between samples, because an open handle keeps the kernel module busy and
  would block unloading the driver during an upgrade.
- ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` (a ``run_smi(args)``
  callable returning ``(rc, stdout, stderr)``), when NVML cannot be loaded.
- A replay file: a captured ``nvidia-smi --query-gpu=... --format=csv`` output WITH its
  header line (units in the values are fine), read again at every sample. The lab feeds
  the collector captured numbers this way; the series then say ``source="replay"``.

Xid errors come from kernel log text (``/dev/kmsg``, or a file in the lab), parsed by
:mod:`xid` and mapped to the GPU by PCI bus id.

Series names, types and labels are dcgm-exporter's (its default counters plus the
fields the collection's ``dcgm-counters.csv`` enables), so that alert rules and
dashboards work with either exporter. A metric a source cannot read is left out for
that GPU, never written as 0. Without a driver (not loaded, gone, or a driver/library
version mismatch) only the ``gpucloud_gpu_collector_*`` health series are written,
with ``gpucloud_gpu_collector_up`` 0; nothing here raises for it.

A file of the gpu_monitoring role (roles/gpu_monitoring/files/), not a module_utils: no
module imports it. On a node the role installs it as ``<lib>/gpu_metrics.py`` beside the
collector program's package tree: the parsers it shares with the collection's modules
(``nvml.py``, ``smi_xml.py``, ``xid.py``) go under
``<lib>/ansible_collections/gpucloud/fleet/plugins/module_utils/``, the collection's own
package path, so the imports below work unchanged there (Python 3 namespace packages: no
``__init__.py`` is needed) and no second copy of that code exists.
"""


import csv
import json
import os
import re
import stat
import tempfile

from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import (
    SMI_DRIVER_MESSAGES,
    SMI_DRIVER_NOT_LOADED,
    SMI_NO_DEVICE,
    SMI_NO_DEVICE_MESSAGE,
    SMI_NVML_NOT_FOUND,
    _Reader,
    _error_classes,
    _text,
)
from ansible_collections.gpucloud.fleet.plugins.module_utils.smi_xml import available, to_state
from ansible_collections.gpucloud.fleet.plugins.module_utils.xid import meaning, parse_xid_events

SOURCES = ("auto", "nvml", "nvidia-smi", "replay")

# (series, Prometheus type, help, reading key). Help texts and types follow dcgm-exporter's
# etc/default-counters.csv; ROW_REMAP_PENDING and CLOCKS_EVENT_REASONS are DCGM fields that
# file does not list (dcgmFieldsIds 396 and 112).
DCGM_SERIES = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", "sm_clock"),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", "mem_clock"),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", "gpu_temp"),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", "memory_temp"),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", "power_usage"),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", "total_energy"),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", "pcie_replay"),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", "gpu_util"),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", "mem_copy_util"),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", "fb_free"),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", "fb_used"),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "xid"),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", "ecc_sbe_vol"),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", "ecc_dbe_vol"),
    ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors.", "ecc_sbe_agg"),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.", "ecc_dbe_agg"),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     "rows_uncorrectable"),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
     "rows_correctable"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", "row_remap_failure"),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending", "row_remap_pending"),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control CRC errors.",
     "nvlink_crc_flit"),
    ("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC errors.",
     "nvlink_crc_data"),
    ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries.", "nvlink_replay"),
    ("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery errors.",
     "nvlink_recovery"),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge",
     "Current clock event reasons (bitmask of NVML clocks event reasons).", "clocks_event_reasons"),
)
GPUCLOUD_GPU_SERIES = (
    ("gpucloud_gpu_nvlink_links_active", "gauge", "NVLink links in state active on this GPU.", "nvlink_links_active"),
    ("gpucloud_gpu_compute_processes", "gauge", "Compute processes holding this GPU.", "compute_processes"),
)
XID_EVENTS = "gpucloud_gpu_xid_events_total"
XID_EVENTS_HELP = ("Xid events per GPU and code in the kernel log since boot; class is the Xid table's "
                   "(hw, app, unknown).")
UP = "gpucloud_gpu_collector_up"
LAST_SAMPLE = "gpucloud_gpu_collector_last_sample_timestamp_seconds"
UP_HELP = "1 when the last GPU sample succeeded, 0 when the driver or NVML is unavailable."
LAST_SAMPLE_HELP = "Unix time of the last sample written by gpucloud-gpu-collector."
# dcgm-exporter's label names and order.
LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")

# NVML answers to nvmlInit() that say: no NVML library here, try nvidia-smi.
NVML_LIBRARY_MISSING = ("NVMLError_LibraryNotFound",)
# nvmlDeviceGetFieldValues fields (nvml.h NVML_FI_DEV_*): one call per GPU reads them all.
NVML_FIELDS = (
    (82, "memory_temp"),  # NVML_FI_DEV_MEMORY_TEMP
    (83, "total_energy"),  # NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, mJ
    (94, "pcie_replay"),  # NVML_FI_DEV_PCIE_REPLAY_COUNTER
    (3, "ecc_sbe_vol"),  # NVML_FI_DEV_ECC_SBE_VOL_TOTAL
    (4, "ecc_dbe_vol"),  # NVML_FI_DEV_ECC_DBE_VOL_TOTAL
    (5, "ecc_sbe_agg"),  # NVML_FI_DEV_ECC_SBE_AGG_TOTAL
    (6, "ecc_dbe_agg"),  # NVML_FI_DEV_ECC_DBE_AGG_TOTAL
    (38, "nvlink_crc_flit"),  # NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL
    (45, "nvlink_crc_data"),  # NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL
    (52, "nvlink_replay"),  # NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL
    (59, "nvlink_recovery"),  # NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL
)
# nvmlValueType_t -> the member of the nvmlValue_t union that holds the value.
NVML_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
NVLINK_MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS (nvidia-ml-py 12.550+)
NVLINK_STATE_ACTIVE = 1  # NVML_FEATURE_ENABLED
MIB = 1048576

# nvidia-smi --query-gpu fields: (field asked for, other names nvidia-smi knows it by, reading
# key, parser). The first alias of each is what `--help-query-gpu` of driver 580 lists
# (tests/fixtures/h200-ubuntu2404-driver580/nvidia-smi_--help-query-gpu.txt); the throttle
# name is asked for because drivers before the "clocks event" rename know only it.
LABEL = "label"
NUMBER = "number"
STATE = "state"
BITMASK = "bitmask"
SMI_FIELDS = (
    ("index", (), "index", LABEL),
    ("uuid", ("gpu_uuid",), "uuid", LABEL),
    ("name", ("gpu_name",), "name", LABEL),
    ("pci.bus_id", ("gpu_bus_id",), "pci_bus_id", LABEL),
    ("driver_version", (), "driver_version", LABEL),
    ("clocks.current.sm", ("clocks.sm",), "sm_clock", NUMBER),
    ("clocks.current.memory", ("clocks.mem",), "mem_clock", NUMBER),
    ("temperature.gpu", (), "gpu_temp", NUMBER),
    ("temperature.memory", (), "memory_temp", NUMBER),
    ("power.draw", (), "power_usage", NUMBER),
    ("utilization.gpu", (), "gpu_util", NUMBER),
    ("utilization.memory", (), "mem_copy_util", NUMBER),
    ("memory.free", (), "fb_free", NUMBER),
    ("memory.used", (), "fb_used", NUMBER),
    ("ecc.errors.corrected.volatile.total", (), "ecc_sbe_vol", NUMBER),
    ("ecc.errors.uncorrected.volatile.total", (), "ecc_dbe_vol", NUMBER),
    ("ecc.errors.corrected.aggregate.total", (), "ecc_sbe_agg", NUMBER),
    ("ecc.errors.uncorrected.aggregate.total", (), "ecc_dbe_agg", NUMBER),
    ("remapped_rows.correctable", ("remapped_rows.sbe",), "rows_correctable", NUMBER),
    ("remapped_rows.uncorrectable", ("remapped_rows.dbe",), "rows_uncorrectable", NUMBER),
    ("remapped_rows.pending", (), "row_remap_pending", STATE),
    ("remapped_rows.failure", (), "row_remap_failure", STATE),
    ("clocks_throttle_reasons.active", ("clocks_event_reasons.active",), "clocks_event_reasons", BITMASK),
)
SMI_QUERY_FIELDS = tuple(field for field, _aliases, _key, _kind in SMI_FIELDS)
SMI_REQUIRED = ("index", "uuid")
SMI_COMPUTE_APPS = ["--query-compute-apps=gpu_bus_id", "--format=csv,noheader"]
SMI_VERSION_MISMATCH = "Driver/library version mismatch"
SMI_LIB_RM_VERSION_MISMATCH = 18  # NVML_ERROR_LIB_RM_VERSION_MISMATCH as nvidia-smi's exit code
SMI_BAD_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')
SMI_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
HEADER_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")


def _smi_names():
    names = {}
    for field, aliases, key, kind in SMI_FIELDS:
        for name in (field,) + aliases:
            names[name] = (field, key, kind)
    return names


SMI_NAMES = _smi_names()


class NvidiaSmiFieldError(Exception):
    """nvidia-smi does not know a field we asked for (an older driver, or the lab's simulation)."""

    def __init__(self, field):
        super(NvidiaSmiFieldError, self).__init__('nvidia-smi does not know the field "%s"' % field)
        self.field = field


def sample(source, up=True, reason="", driver_version=None, gpus=None, library_missing=False):
    """One reading of the host: the source that answered, whether it could, and every GPU."""
    return {
        "source": source,
        "up": up,
        "reason": reason,
        "driver_version": driver_version,
        "gpus": gpus or [],
        "library_missing": library_missing,
    }


def gpu_reading(index, uuid, name=None, pci_bus_id=None, values=None):
    """One GPU: its labels and ``values``, a dict holding only what the source could read."""
    return {
        "index": int(index),
        "uuid": uuid,
        "name": name,
        "pci_bus_id": pci_bus_id,
        "values": dict((key, value) for key, value in (values or {}).items() if value is not None),
    }


# ---------------------------------------------------------------- NVML


def _nvml_error_text(exc):
    text = str(exc).strip()
    name = type(exc).__name__
    return "%s (%s)" % (text, name) if text and text != name else name


def _field_values(handle, call):
    """NVML_FI_DEV_* values of one GPU in one nvmlDeviceGetFieldValues call; failed fields are left out."""
    answer = call.optional("nvmlDeviceGetFieldValues", handle, [field for field, _key in NVML_FIELDS])
    if answer is None:
        return {}
    values = {}
    for (_field, key), entry in zip(NVML_FIELDS, answer):
        if int(entry.nvmlReturn) != 0:
            continue
        member = NVML_VALUE_MEMBERS.get(int(entry.valueType))
        if member is not None:
            values[key] = getattr(entry.value, member)
    return values


def _nvlink_links_active(call, handle):
    """Active links, asking link after link until NVML says there are no more; None without NVLink."""
    active = None
    for link in range(NVLINK_MAX_LINKS):
        state = call.optional("nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            break
        active = (active or 0) + (1 if int(state) == NVLINK_STATE_ACTIVE else 0)
    return active


def _memory_mib(call, handle):
    """(used, free) in MiB. nvmlMemory_v2 leaves the driver's reserved memory out of "used", as
    nvidia-smi and DCGM do; NVML v1 (older drivers) counts it as used."""
    version = call.constant("nvmlMemory_v2", None)
    memory = call.optional("nvmlDeviceGetMemoryInfo", handle, version=version) if version else None
    if memory is None:
        memory = call.optional("nvmlDeviceGetMemoryInfo", handle)
    if memory is None:
        return None, None
    return int(memory.used) // MIB, int(memory.free) // MIB


def _remapped_rows(call, handle):
    rows = call.optional("nvmlDeviceGetRemappedRows", handle)
    if rows is None:
        return {}
    return {
        "rows_correctable": int(rows[0]),
        "rows_uncorrectable": int(rows[1]),
        "row_remap_pending": 1 if rows[2] else 0,
        "row_remap_failure": 1 if rows[3] else 0,
    }


def _nvml_gpu(pynvml, index, any_error):
    """One GPU read in the open NVML session; ``(None, why)`` when it cannot even be named
    (fallen off the bus, needing a reset): such a GPU is left out, as a missing one."""
    call = _Reader(pynvml, "GPU %d" % index)
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(pynvml.nvmlDeviceGetUUID(handle))
    except any_error as exc:
        return None, "GPU %d: %s" % (index, _nvml_error_text(exc))
    pci = call.optional("nvmlDeviceGetPciInfo", handle)
    utilization = call.optional("nvmlDeviceGetUtilizationRates", handle)
    used, free = _memory_mib(call, handle)
    power = call.optional("nvmlDeviceGetPowerUsage", handle)
    reasons = call.optional("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = call.optional("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    processes = call.optional("nvmlDeviceGetComputeRunningProcesses", handle)
    values = {
        "sm_clock": call.optional("nvmlDeviceGetClockInfo", handle, call.constant("NVML_CLOCK_SM", 1)),
        "mem_clock": call.optional("nvmlDeviceGetClockInfo", handle, call.constant("NVML_CLOCK_MEM", 2)),
        "gpu_temp": call.optional("nvmlDeviceGetTemperature", handle, call.constant("NVML_TEMPERATURE_GPU", 0)),
        "power_usage": None if power is None else power / 1000.0,
        "gpu_util": None if utilization is None else utilization.gpu,
        "mem_copy_util": None if utilization is None else utilization.memory,
        "fb_used": used,
        "fb_free": free,
        "clocks_event_reasons": reasons,
        "compute_processes": None if processes is None else len(processes),
        "nvlink_links_active": _nvlink_links_active(call, handle),
    }
    values.update(_remapped_rows(call, handle))
    values.update(_field_values(handle, call))
    return gpu_reading(index, uuid, name=_text(call.optional("nvmlDeviceGetName", handle)),
                       pci_bus_id=None if pci is None else _text(pci.busId), values=values), None


def read_nvml(pynvml):
    """Every GPU through NVML, in one session: nvmlInit, the queries, nvmlShutdown.

    NVML that cannot start (no driver, a driver/library version mismatch, no library) gives
    a sample with ``up`` False and the reason; ``library_missing`` tells the caller that
    nvidia-smi may still know a driver. A GPU that is lost is left out of the sample.
    """
    any_error = getattr(pynvml, "NVMLError", Exception)
    try:
        pynvml.nvmlInit()
    except any_error as exc:
        missing = isinstance(exc, _error_classes(pynvml, NVML_LIBRARY_MISSING))
        return sample("nvml", up=False, reason="NVML cannot start: %s" % _nvml_error_text(exc),
                      library_missing=missing)
    try:
        try:
            count = pynvml.nvmlDeviceGetCount()
        except any_error as exc:
            return sample("nvml", up=False, reason="NVML cannot count the GPUs: %s" % _nvml_error_text(exc))
        driver = _Reader(pynvml, "NVML").optional("nvmlSystemGetDriverVersion")
        gpus = []
        lost = []
        for index in range(int(count)):
            gpu, why = _nvml_gpu(pynvml, index, any_error)
            if gpu is None:
                lost.append(why)
            else:
                gpus.append(gpu)
        return sample("nvml", driver_version=_text(driver), gpus=gpus,
                      reason="left out, not answering: %s" % "; ".join(lost) if lost else "")
    finally:
        try:
            pynvml.nvmlShutdown()
        except any_error:
            # The sample is complete; a failing shutdown changes nothing for it.
            pass


# ---------------------------------------------------------------- nvidia-smi CSV


def _smi_value(raw, kind):
    value = available(raw)
    if value is None or value.startswith("["):
        return None
    if kind == LABEL:
        return value
    if kind == STATE:
        state = to_state(value)
        if state is None and value.lower() in ("true", "false"):
            state = value.lower() == "true"
        return None if state is None else int(state)
    if kind == BITMASK:
        try:
            return int(value, 16) if value.lower().startswith("0x") else int(value)
        except ValueError:
            return None
    number = value.split(" ", 1)[0]
    if not SMI_NUMBER.match(number):
        return None
    return float(number) if "." in number else int(number)


def _smi_says(rc, text):
    """What an nvidia-smi answer means before its CSV is read: ok, driver-gone, no-device or error."""
    if rc in (SMI_DRIVER_NOT_LOADED, SMI_NVML_NOT_FOUND, SMI_LIB_RM_VERSION_MISMATCH) or SMI_VERSION_MISMATCH in text \
            or any(message in text for message in SMI_DRIVER_MESSAGES):
        return "driver-gone"
    if rc == SMI_NO_DEVICE or SMI_NO_DEVICE_MESSAGE in text:
        return "no-device"
    return "ok" if rc == 0 else "error"


def _first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def parse_query_csv(text, fields=None):
    """GPUs from ``nvidia-smi --query-gpu`` CSV.

    FIELDS are the fields asked for (no header in the text); without them the first line is
    the header (``--format=csv``: ``memory.used [MiB]``, aliases such as ``gpu_name`` and
    fields we do not use are fine). Units in the values are stripped; N/A and
    ``[Not Supported]`` leave the value out. Rows that do not have one value per column (an
    error line between the rows) are skipped. Returns ``(driver_version, [gpu_reading])``.
    """
    rows = [row for row in csv.reader((text or "").splitlines(), skipinitialspace=True) if row]
    if fields is None:
        if not rows:
            raise ValueError("no nvidia-smi --query-gpu CSV header")
        header = [HEADER_UNIT.sub("", name.strip()) for name in rows.pop(0)]
    else:
        header = list(fields)
    columns = [SMI_NAMES.get(name) for name in header]
    known = set(column[0] for column in columns if column is not None)
    missing = [name for name in SMI_REQUIRED if name not in known]
    if missing:
        raise ValueError("nvidia-smi --query-gpu CSV without %s (columns: %s)" % (", ".join(missing), ", ".join(header)))
    driver = None
    gpus = []
    for row in rows:
        if len(row) != len(header):
            continue
        values = {}
        for column, raw in zip(columns, row):
            if column is not None:
                values[column[1]] = _smi_value(raw, column[2])
        if values.get("index") is None or not str(values["index"]).isdigit() or not values.get("uuid"):
            continue
        driver = driver or values.pop("driver_version", None)
        labels = [values.pop(key, None) for key in ("index", "uuid", "name", "pci_bus_id", "driver_version")]
        gpus.append(gpu_reading(labels[0], labels[1], labels[2], labels[3], values))
    return driver, gpus


def smi_answer(source, rc, out, err, fields=None):
    """A sample from what nvidia-smi printed (FIELDS asked for), or from a replayed capture.

    Raises NvidiaSmiFieldError when nvidia-smi refuses a field, so the caller can ask again
    without it.
    """
    text = "%s\n%s" % (out or "", err or "")
    verdict = _smi_says(rc, text)
    if verdict == "driver-gone":
        return sample(source, up=False, reason="nvidia-smi: %s" % _first_line(text))
    if verdict == "no-device":
        return sample(source, reason="nvidia-smi: %s" % SMI_NO_DEVICE_MESSAGE)
    bad = SMI_BAD_FIELD.search(text)
    if bad and fields is not None:
        raise NvidiaSmiFieldError(bad.group(1))
    try:
        driver, gpus = parse_query_csv(out, fields)
    except ValueError as exc:
        reason = "nvidia-smi exited %s: %s" % (rc, _first_line(text)) if verdict == "error" else str(exc)
        return sample(source, up=False, reason=reason)
    if verdict == "error" and not gpus:
        return sample(source, up=False, reason="nvidia-smi exited %s: %s" % (rc, _first_line(text)))
    reason = "nvidia-smi exited %s: %s" % (rc, _first_line(text)) if verdict == "error" else ""
    return sample(source, driver_version=driver, gpus=gpus, reason=reason)


def _compute_processes(run_smi, gpus):
    """Compute processes per GPU from one --query-compute-apps call; unknown when it fails."""
    answer = run_smi(SMI_COMPUTE_APPS)
    if answer is None or answer[0] != 0:
        return
    counts = {}
    for line in (answer[1] or "").splitlines():
        key = pci_key(line.strip())
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    for gpu in gpus:
        key = pci_key(gpu["pci_bus_id"])
        if key is not None:
            gpu["values"]["compute_processes"] = counts.get(key, 0)


def read_smi(run_smi, fields=SMI_QUERY_FIELDS):
    """Every GPU through nvidia-smi. Returns ``(sample, fields)``: the fields nvidia-smi
    accepted, to ask for next time (a field it refuses is dropped and the query repeated)."""
    fields = list(fields)
    while True:
        answer = run_smi(["--query-gpu=%s" % ",".join(fields), "--format=csv,noheader,nounits"])
        if answer is None:
            return sample("nvidia-smi", up=False, reason="nvidia-smi is not installed"), fields
        try:
            result = smi_answer("nvidia-smi", answer[0], answer[1], answer[2], fields)
        except NvidiaSmiFieldError as exc:
            if exc.field not in fields or exc.field in SMI_REQUIRED:
                return sample("nvidia-smi", up=False, reason=str(exc)), fields
            fields.remove(exc.field)
            continue
        if result["up"] and result["gpus"]:
            _compute_processes(run_smi, result["gpus"])
        return result, fields


def read_replay(text, path=""):
    """A replayed capture: ``nvidia-smi --query-gpu=... --format=csv`` output with its header,
    or what nvidia-smi printed when it failed (the driver-gone message replays as up 0)."""
    if text is None:
        return sample("replay", up=False, reason="replay file %s cannot be read" % path)
    return smi_answer("replay", 0, text, "")


# ---------------------------------------------------------------- Xid from the kernel log


def pci_key(bus_id):
    """(domain, bus, device) of a PCI address in NVML's ``00000000:3B:00.0``, the kernel's
    ``0000:3b:00.0`` or the Xid line's ``0000:3b:00`` form; None when it is not one."""
    parts = (bus_id or "").strip().split(":")
    if len(parts) not in (2, 3):
        return None
    try:
        domain = int(parts[0], 16) if len(parts) == 3 else 0
        return domain, int(parts[-2], 16), int(parts[-1].split(".")[0], 16)
    except ValueError:
        return None


class XidTracker:
    """The last Xid code seen per GPU (by PCI address) in the kernel log text fed to it."""

    def __init__(self):
        self.last = {}

    def feed(self, text):
        for event in parse_xid_events(text):
            key = pci_key(event["pci"])
            if key is not None:
                self.last[key] = event["code"]

    def value(self, bus_id):
        """DCGM_FI_DEV_XID_ERRORS: the last Xid of the GPU, 0 when it had none; None when the
        GPU's PCI address is unknown, so that nothing can be said of it."""
        key = pci_key(bus_id)
        return None if key is None else self.last.get(key, 0)


def canonical_bus_id(key):
    """NVML's form of a :func:`pci_key` (``00000000:18:00.0``), the Xid counter's pci_bus_id label."""
    return "%08X:%02X:%02X.0" % key


# /dev/kmsg's record prefix "priority,sequence,microseconds,flags;" (Documentation/ABI/testing/dev-kmsg).
KMSG_RECORD = re.compile(r"^\d+,(?P<seq>\d+),")


class XidCounter:
    """Xid events per GPU (by PCI address) and code since boot: gpucloud_gpu_xid_events_total.

    Fed the kernel log text read since the last call. A /dev/kmsg record whose sequence number
    is not above the last one counted is skipped, so a restarted collector that reads the ring
    buffer from its oldest record again, with its state loaded, does not count an event twice.
    ``gpus`` remembers each GPU's index by PCI address, so that a GPU which fell off the bus
    (gone from NVML, still in the kernel log) keeps its gpu label.
    """

    def __init__(self):
        self.counts = {}
        self.seq = -1
        self.gpus = {}

    def feed(self, text):
        for line in (text or "").splitlines():
            events = parse_xid_events(line)
            record = KMSG_RECORD.match(line) if events else None
            if record:
                # Only Xid records move the saved position: the state file changes with an Xid,
                # not with every kernel message.
                seq = int(record.group("seq"))
                if seq <= self.seq:
                    continue
                self.seq = seq
            for event in events:
                key = pci_key(event["pci"])
                if key is not None:
                    self.counts[(key, event["code"])] = self.counts.get((key, event["code"]), 0) + 1

    def learn(self, gpus):
        """Remember the index of every GPU of a sample by its PCI address."""
        for gpu in gpus:
            key = pci_key(gpu["pci_bus_id"])
            if key is not None:
                self.gpus[key] = str(gpu["index"])

    def samples(self):
        """``[(labels, count)]`` in GPU and code order; gpu is "" for an address never sampled."""
        return [([("gpu", self.gpus.get(key, "")), ("pci_bus_id", canonical_bus_id(key)), ("xid", str(code)),
                  ("class", meaning(code)["kind"])], count)
                for (key, code), count in sorted(self.counts.items())]

    def dump(self):
        return {"seq": self.seq,
                "counts": [[canonical_bus_id(key), code, count] for (key, code), count in sorted(self.counts.items())],
                "gpus": dict((canonical_bus_id(key), index) for key, index in sorted(self.gpus.items()))}

    def load(self, data):
        self.seq = int(data.get("seq", -1))
        self.counts = dict(((pci_key(bus), int(code)), int(count)) for bus, code, count in data.get("counts", ())
                           if pci_key(bus) is not None)
        self.gpus = dict((pci_key(bus), str(index)) for bus, index in data.get("gpus", {}).items()
                         if pci_key(bus) is not None)


class KernelLog:
    """New kernel log text since the last call, from /dev/kmsg or a regular file.

    /dev/kmsg is opened non-blocking and read from the oldest record the ring buffer still
    holds, so a restarted collector finds the Xid events of this boot again; each read()
    returns one record, EAGAIN means no more, EPIPE that records were overwritten before
    we read them. A regular file (the lab's stand-in) is read from where the last call
    stopped, from the start again when it was truncated or replaced. A path that cannot
    be opened gives None, and is tried again next time.
    """

    CHUNK = 8192

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.inode = None
        self.rest = ""
        self.error = None
        self.resume_at = None

    def _open(self):
        try:
            self.fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            self.error = "%s: %s" % (self.path, exc.strerror or exc)
            return False
        info = os.fstat(self.fd)
        self.inode = info.st_ino if stat.S_ISREG(info.st_mode) else None
        self.rest = ""
        self.error = None
        if self.inode is not None and self.resume_at is not None:
            inode, offset = self.resume_at
            if inode == self.inode and 0 <= offset <= info.st_size:
                os.lseek(self.fd, offset, os.SEEK_SET)
        self.resume_at = None
        return True

    def position(self):
        """``[inode, offset]`` of the next unread line of a regular file; None for a device
        (/dev/kmsg is resumed by sequence number) or a file not open."""
        if self.fd is None or self.inode is None:
            return None
        return [self.inode, os.lseek(self.fd, 0, os.SEEK_CUR) - len(self.rest.encode("utf-8"))]

    def resume(self, position):
        """Start the next open at POSITION (from :meth:`position`) if it is still the same file."""
        self.resume_at = tuple(position) if position else None

    def _replaced(self):
        if self.inode is None:
            return False
        try:
            info = os.stat(self.path)
        except OSError:
            return False
        return info.st_ino != self.inode or info.st_size < os.lseek(self.fd, 0, os.SEEK_CUR)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read_new(self):
        if self.fd is not None and self._replaced():
            self.close()
        if self.fd is None and not self._open():
            return None
        chunks = []
        while True:
            try:
                data = os.read(self.fd, self.CHUNK)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            except OSError as exc:
                self.error = "%s: %s" % (self.path, exc.strerror or exc)
                self.close()
                break
            if not data:
                break
            chunks.append(data.decode("utf-8", "replace"))
        text = self.rest + "".join(chunks)
        complete, _newline, self.rest = text.rpartition("\n")
        return complete + "\n" if complete else ""


# ---------------------------------------------------------------- Prometheus text


def _escape_label(value):
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _escape_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(int(value))


def _labels(pairs):
    return "{%s}" % ",".join('%s="%s"' % (name, _escape_label(value)) for name, value in pairs)


def gpu_labels(gpu, hostname, driver_version):
    """dcgm-exporter's labels of one GPU, in its order."""
    values = (str(gpu["index"]), gpu["uuid"], gpu["pci_bus_id"] or "", "nvidia%d" % gpu["index"],
              gpu["name"] or "", hostname, driver_version or "")
    return list(zip(LABELS, values))


def _family(lines, name, kind, help_text, samples):
    if not samples:
        return
    lines.append("# HELP %s %s" % (name, _escape_help(help_text)))
    lines.append("# TYPE %s %s" % (name, kind))
    for labels, value in samples:
        lines.append("%s%s %s" % (name, _labels(labels) if labels else "", _number(value)))


def render(reading, hostname, now, xid=None, dcgm_series=True, xid_events=None):
    """The textfile: health series always; GPU series only when the sample is up.

    XID is an :class:`XidTracker` when the kernel log could be read (DCGM_FI_DEV_XID_ERRORS
    is then written for every GPU, 0 when it had none), None otherwise. ``dcgm_series``
    False leaves the DCGM_FI_* series to dcgm-exporter and writes only the gpucloud_* ones.
    XID_EVENTS is an :class:`XidCounter` when the kernel log could be read: its counter is
    written even when the sample is down, since a GPU that fell off the bus is the case it
    matters most.
    """
    lines = []
    if reading["reason"]:
        lines.append("# gpucloud-gpu-collector: %s" % " ".join(str(reading["reason"]).split()))
    _family(lines, UP, "gauge", UP_HELP, [([("source", reading["source"])], 1 if reading["up"] else 0)])
    _family(lines, LAST_SAMPLE, "gauge", LAST_SAMPLE_HELP, [([], float(now))])
    if reading["up"]:
        gpus = []
        for gpu in reading["gpus"]:
            values = dict(gpu["values"])
            if xid is not None:
                values["xid"] = xid.value(gpu["pci_bus_id"])
            gpus.append((gpu_labels(gpu, hostname, reading["driver_version"]), values))
        series = (DCGM_SERIES if dcgm_series else ()) + GPUCLOUD_GPU_SERIES
        for name, kind, help_text, key in series:
            _family(lines, name, kind, help_text,
                    [(labels, values[key]) for labels, values in gpus if values.get(key) is not None])
    if xid_events is not None:
        _family(lines, XID_EVENTS, "counter", XID_EVENTS_HELP, xid_events.samples())
    return "\n".join(lines) + "\n"


def write_textfile(path, text):
    """Write PATH atomically: a temporary file in the same directory, renamed over it.

    The temporary name does not end in .prom, so node exporter never reads half a file.
    """
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path), suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


# ---------------------------------------------------------------- the collector's state


class Collector:
    """What the long-running collector keeps between samples: the source, the nvidia-smi
    fields the driver accepts, and the Xid tracker and counter with the kernel log position.

    ``pynvml`` is the imported module or None, ``run_smi(args)`` returns ``(rc, out, err)``,
    ``read_file(path)`` returns the text or None, ``kernel_log`` is a :class:`KernelLog`
    (or anything with ``read_new()``) or None. ``xid_state`` is the path of the JSON file
    that keeps the Xid counts and the read position across collector restarts, tagged with
    ``boot_id`` (the kernel's /proc/sys/kernel/random/boot_id): a state of another boot is
    dropped, so the counter starts again from the log of this boot, as counters do.
    """

    def __init__(self, source="auto", pynvml=None, run_smi=None, replay_path=None, read_file=None,
                 kernel_log=None, dcgm_series=True, xid_state=None, boot_id=None):
        if source not in SOURCES:
            raise ValueError("source must be one of %s, got %r" % (", ".join(SOURCES), source))
        if source == "replay" and not replay_path:
            raise ValueError("source replay needs the path of a replay file")
        self.source = source
        self.pynvml = pynvml
        self.run_smi = run_smi
        self.replay_path = replay_path
        self.read_file = read_file
        self.kernel_log = kernel_log
        self.dcgm_series = dcgm_series
        self.smi_fields = list(SMI_QUERY_FIELDS)
        self.xid = XidTracker()
        self.xid_events = XidCounter()
        self.xid_readable = False
        self.xid_state = xid_state
        self.boot_id = boot_id
        self.state_error = None
        self._saved = None
        self._load_state()

    def _state(self):
        return {"boot_id": self.boot_id, "kernel_log": getattr(self.kernel_log, "path", None),
                "position": self.kernel_log.position() if hasattr(self.kernel_log, "position") else None,
                "last": [[canonical_bus_id(key), code] for key, code in sorted(self.xid.last.items())],
                "events": self.xid_events.dump()}

    def _load_state(self):
        if not self.xid_state or self.kernel_log is None:
            return
        text = self.read_file(self.xid_state) if self.read_file else None
        try:
            state = json.loads(text) if text else None
        except ValueError:
            state = None
        if not isinstance(state, dict) or state.get("boot_id") != self.boot_id or \
                state.get("kernel_log") != getattr(self.kernel_log, "path", None):
            return
        try:
            self.xid_events.load(state.get("events", {}))
            self.xid.last = dict((pci_key(bus), int(code)) for bus, code in state.get("last", ())
                                 if pci_key(bus) is not None)
        except (TypeError, ValueError, AttributeError):
            self.xid_events = XidCounter()
            self.xid.last = {}
            return
        if hasattr(self.kernel_log, "resume"):
            self.kernel_log.resume(state.get("position"))
        self._saved = json.dumps(self._state(), sort_keys=True)

    def save_state(self):
        """Write the Xid state when it changed; an error is kept in ``state_error``, not raised."""
        if not self.xid_state or not self.xid_readable:
            return
        text = json.dumps(self._state(), sort_keys=True)
        if text == self._saved:
            return
        try:
            write_textfile(self.xid_state, text + "\n")
        except OSError as exc:
            self.state_error = "cannot write %s: %s" % (self.xid_state, exc)
            return
        self.state_error = None
        self._saved = text

    def read(self):
        """One sample from the configured source (auto: NVML, else nvidia-smi)."""
        if self.source == "replay":
            return read_replay(self.read_file(self.replay_path), self.replay_path)
        if self.source in ("auto", "nvml") and self.pynvml is not None:
            reading = read_nvml(self.pynvml)
            if self.source == "nvml" or not reading["library_missing"]:
                return reading
        elif self.source == "nvml":
            return sample("nvml", up=False,
                          reason="the nvidia-ml-py Python package (module pynvml) is not installed")
        if self.run_smi is None:
            return sample("nvidia-smi", up=False, reason="nvidia-smi is not installed")
        reading, self.smi_fields = read_smi(self.run_smi, self.smi_fields)
        return reading

    def read_kernel_log(self):
        if self.kernel_log is None:
            self.xid_readable = False
            return
        text = self.kernel_log.read_new()
        self.xid_readable = text is not None
        if text:
            self.xid.feed(text)
            self.xid_events.feed(text)

    def collect(self, hostname, now):
        """One sample and its textfile text: ``(sample, text)``."""
        reading = self.read()
        if reading["up"]:
            self.xid_events.learn(reading["gpus"])
        self.read_kernel_log()
        self.save_state()
        xid = self.xid if self.dcgm_series and self.xid_readable else None
        events = self.xid_events if self.xid_readable else None
        return reading, render(reading, hostname, now, xid=xid, dcgm_series=self.dcgm_series, xid_events=events)
