# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU facts from NVML (``nvidia-ml-py``'s ``pynvml``) with an nvidia-smi fallback.

The pynvml module object, the nvidia-smi runner and the file reader are
passed in, so everything here is testable without a GPU. The modules that read GPUs
(nvidia_gpu_facts, node_observation) take ``import_pynvml`` and ``read_text`` from here.
"""


import ctypes
import io
import os
import traceback

from ansible_collections.gpucloud.fleet.plugins.module_utils.smi_xml import (
    gpu_record,
    parse_compute_cap_csv,
    parse_smi_output,
    parse_smi_xml,
)

# NVML answers that mean "this GPU, driver or user cannot tell": the value is null.
NULL_ERRORS = (
    "NVMLError_NotSupported",
    "NVMLError_NotFound",
    "NVMLError_NoPermission",
    "NVMLError_FunctionNotFound",
)
# NVML answers to nvmlInit() that mean "no driver here": a normal answer, not a failure.
MISSING_ERRORS = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")

ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
}
# NVML_GPU_FABRIC_STATE_*: 0 (NOT_SUPPORTED) means no fabric here, a null state.
FABRIC_STATES = {1: "Not Started", 2: "In Progress", 3: "Completed"}
# nvmlClocksEventReasonGpuIdle (nvmlClocksThrottleReasonGpuIdle before driver 530).
CLOCKS_EVENT_GPU_IDLE = 0x1
COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}

# nvidia-smi exit codes (nvidia-smi(1), RETURN VALUE).
SMI_NO_DEVICE = 6
SMI_DRIVER_NOT_LOADED = 9
SMI_NVML_NOT_FOUND = 12
SMI_DRIVER_MESSAGES = ("couldn't communicate with the NVIDIA driver", "NVML Shared Library Not Found")
SMI_NO_DEVICE_MESSAGE = "No devices were found"

SMI_QUERY_XML = ["-q", "-x"]
SMI_QUERY_COMPUTE_CAP = ["--query-gpu=index,compute_cap", "--format=csv,noheader"]

MASK_BITS = 64
SYSFS_PCI = "/sys/bus/pci/devices"


class NvidiaError(Exception):
    """Reading GPU facts failed in a way the operator must look at."""


class LibraryMissing(NvidiaError):
    """source=nvml was asked for but pynvml cannot be imported."""


def empty_facts(source, driver_loaded=False):
    """The answer for a host without driver (or without GPU)."""
    return {
        "source": source,
        "driver_loaded": driver_loaded,
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "gpu_count": 0,
        "gpus": [],
    }


def import_pynvml():
    """``(pynvml, None)``, or ``(None, the ImportError's traceback)`` when ``nvidia-ml-py`` is not installed."""
    try:
        import pynvml
    except ImportError:
        return None, traceback.format_exc()
    return pynvml, None


def read_text(path):
    """The text of the file at PATH (UTF-8, undecodable bytes replaced), or None when it cannot be read."""
    try:
        with io.open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def missing_reason(facts):
    """Why a host counts as having no usable GPU, or None when it has one."""
    if not facts["driver_loaded"]:
        return "no NVIDIA driver loaded (source %s)" % facts["source"]
    if not facts["gpu_count"]:
        return "NVIDIA driver %s is loaded but sees no GPU" % (facts["driver_version"] or "(unknown version)")
    return None


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def format_cpulist(numbers):
    """Compress sorted integers into the kernel's list format: ``0-15,32-47``."""
    ranges = []
    for number in sorted(numbers):
        if ranges and number == ranges[-1][1] + 1:
            ranges[-1][1] = number
        else:
            ranges.append([number, number])
    return ",".join(str(low) if low == high else "%d-%d" % (low, high) for low, high in ranges) or None


def mask_bits(words):
    """Indexes of the bits set in an NVML affinity mask (an array of 64-bit words)."""
    if words is None:
        return []
    return [
        position * MASK_BITS + bit
        for position, word in enumerate(words)
        for bit in range(MASK_BITS)
        if int(word) >> bit & 1
    ]


def cuda_version_text(version):
    """NVML's CUDA driver version integer (13000, 12040) as ``13.0`` / ``12.4``."""
    if version is None:
        return None
    return "%d.%d" % (version // 1000, version % 1000 // 10)


class _Reader:
    """Calls pynvml, turning "cannot tell" errors into None and others into NvidiaError."""

    def __init__(self, pynvml, context):
        self.pynvml = pynvml
        self.context = context
        self.nullable = _error_classes(pynvml, NULL_ERRORS)
        self.any_error = getattr(pynvml, "NVMLError", Exception)

    def __call__(self, name, *args, **kwargs):
        function = getattr(self.pynvml, name, None)
        if function is None:
            # nvidia-ml-py older than the call: same as a driver without it.
            return None
        try:
            return function(*args, **kwargs)
        except self.any_error as exc:
            if isinstance(exc, self.nullable):
                return None
            raise NvidiaError("%s: %s failed: %s" % (self.context, name, exc))

    def optional(self, name, *args, **kwargs):
        """Like a call, but any NVML error means "use the other way"."""
        try:
            return self(name, *args, **kwargs)
        except NvidiaError:
            return None

    def constant(self, name, default):
        return getattr(self.pynvml, name, default)


def _error_classes(pynvml, names):
    return tuple(
        error for error in (getattr(pynvml, name, None) for name in names) if isinstance(error, type)
    )


def _pair(value, index):
    if value is None:
        return None
    return bool(value[index])


def _memory(call, handle):
    version = call.constant("nvmlMemory_v2", None)
    # v2 leaves the driver-reserved memory out of "used", as nvidia-smi does;
    # v1 counts it as used.
    memory = call.optional("nvmlDeviceGetMemoryInfo", handle, version=version) if version else None
    if memory is None:
        memory = call("nvmlDeviceGetMemoryInfo", handle)
    if memory is None:
        return None, None
    return int(memory.total) // 1048576, int(memory.used) // 1048576


def _watts(milliwatts):
    return None if milliwatts is None else milliwatts / 1000.0


def _retired_pages(call, handle):
    single = call("nvmlDeviceGetRetiredPages", handle, call.constant(
        "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0))
    double = call("nvmlDeviceGetRetiredPages", handle, call.constant(
        "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))
    pending = call("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    return {
        "single_bit_ecc": None if single is None else len(single),
        "double_bit_ecc": None if double is None else len(double),
        "pending": None if pending is None else bool(pending),
    }


def _remapped_rows(call, handle):
    rows = call("nvmlDeviceGetRemappedRows", handle)
    if rows is None:
        return None
    return {
        "correctable": int(rows[0]),
        "uncorrectable": int(rows[1]),
        "pending": bool(rows[2]),
        "failure": bool(rows[3]),
    }


def _numa_node(call, handle):
    nodes = mask_bits(call("nvmlDeviceGetMemoryAffinity", handle, 4, call.constant("NVML_AFFINITY_SCOPE_NODE", 0)))
    return nodes[0] if len(nodes) == 1 else None


def _cpu_affinity(call, handle, cpu_count):
    words = (cpu_count + MASK_BITS - 1) // MASK_BITS
    return format_cpulist(mask_bits(call("nvmlDeviceGetCpuAffinity", handle, words)))


def _fabric(call, handle):
    """Fabric Manager's registration of the GPU on an NVSwitch system: {state, status}.

    Both calls fill a struct passed by reference; GpuFabricInfoV (driver >= 550) first, the
    deprecated GpuFabricInfo otherwise. A GPU or driver without a fabric answers
    NotSupported (or state NOT_SUPPORTED): both values are null then, as nvidia-smi's N/A.
    """
    for function, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                                  ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
        struct = call.constant(struct_name, None)
        if struct is None:
            continue
        info = struct()
        if call(function, handle, ctypes.byref(info)) is None:
            continue
        state = FABRIC_STATES.get(int(info.state))
        if state is None:
            break
        status = int(info.status)
        return {"state": state, "status": "Success" if status == 0 else "NVML error %d" % status}
    return {"state": None, "status": None}


def _idle(call, handle):
    reasons = call("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    return None if reasons is None else bool(int(reasons) & CLOCKS_EVENT_GPU_IDLE)


def collect_device(pynvml, index, cpu_count):
    """One GPU's facts read through NVML."""
    call = _Reader(pynvml, "GPU %d" % index)
    handle = call("nvmlDeviceGetHandleByIndex", index)
    if handle is None:
        raise NvidiaError("GPU %d: NVML gives no handle for it" % index)

    capability = call("nvmlDeviceGetCudaComputeCapability", handle)
    pci = call("nvmlDeviceGetPciInfo", handle)
    memory_total, memory_used = _memory(call, handle)
    persistence = call("nvmlDeviceGetPersistenceMode", handle)
    mig = call("nvmlDeviceGetMigMode", handle)
    ecc = call("nvmlDeviceGetEccMode", handle)
    uncorrected = call.constant("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    gpu_numa_id = call("nvmlDeviceGetNumaNodeId", handle)
    clock_sm = call.constant("NVML_CLOCK_SM", 1)
    clock_mem = call.constant("NVML_CLOCK_MEM", 2)
    return gpu_record(
        index,
        name=_text(call("nvmlDeviceGetName", handle)),
        uuid=_text(call("nvmlDeviceGetUUID", handle)),
        serial=_text(call("nvmlDeviceGetSerial", handle)),
        pci_bus_id=None if pci is None else _text(pci.busId),
        architecture=ARCHITECTURES.get(call("nvmlDeviceGetArchitecture", handle)),
        compute_capability=None if capability is None else "%d.%d" % tuple(capability),
        memory_total_mib=memory_total,
        memory_used_mib=memory_used,
        persistence_mode=None if persistence is None else bool(persistence),
        compute_mode=COMPUTE_MODES.get(call("nvmlDeviceGetComputeMode", handle)),
        mig={"current": _pair(mig, 0), "pending": _pair(mig, 1)},
        ecc={
            "current": _pair(ecc, 0),
            "pending": _pair(ecc, 1),
            "uncorrected_volatile": call(
                "nvmlDeviceGetTotalEccErrors", handle, uncorrected, call.constant("NVML_VOLATILE_ECC", 0)),
            "uncorrected_aggregate": call(
                "nvmlDeviceGetTotalEccErrors", handle, uncorrected, call.constant("NVML_AGGREGATE_ECC", 1)),
        },
        remapped_rows=_remapped_rows(call, handle),
        retired_pages=_retired_pages(call, handle),
        power={
            "draw_w": _watts(call("nvmlDeviceGetPowerUsage", handle)),
            "limit_w": _watts(call("nvmlDeviceGetPowerManagementLimit", handle)),
            "default_limit_w": _watts(call("nvmlDeviceGetPowerManagementDefaultLimit", handle)),
            "enforced_limit_w": _watts(call("nvmlDeviceGetEnforcedPowerLimit", handle)),
        },
        temperature_c=call("nvmlDeviceGetTemperature", handle, call.constant("NVML_TEMPERATURE_GPU", 0)),
        clocks_mhz={
            "sm": call("nvmlDeviceGetClockInfo", handle, clock_sm),
            "sm_max": call("nvmlDeviceGetMaxClockInfo", handle, clock_sm),
            "memory": call("nvmlDeviceGetClockInfo", handle, clock_mem),
            "memory_max": call("nvmlDeviceGetMaxClockInfo", handle, clock_mem),
        },
        pcie={
            "gen": call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "gen_max": call("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "gen_device_max": call("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
            "width": call("nvmlDeviceGetCurrPcieLinkWidth", handle),
            "width_max": call("nvmlDeviceGetMaxPcieLinkWidth", handle),
        },
        vbios_version=_text(call("nvmlDeviceGetVbiosVersion", handle)),
        numa_node=_numa_node(call, handle),
        gpu_numa_id=gpu_numa_id if gpu_numa_id is not None and gpu_numa_id >= 0 else None,
        cpu_affinity=_cpu_affinity(call, handle, cpu_count),
        idle=_idle(call, handle),
        fabric=_fabric(call, handle),
    )


def collect_nvml(pynvml, cpu_count=None, read_file=None):
    """All facts through NVML: init, query every GPU, shutdown.

    No NVML library or no driver gives ``driver_loaded: false`` rather than
    an error; so does any failed initialisation while no NVIDIA kernel module
    is loaded (``read_file`` reads /proc).
    """
    missing = _error_classes(pynvml, MISSING_ERRORS)
    any_error = getattr(pynvml, "NVMLError", Exception)
    try:
        pynvml.nvmlInit()
    except any_error as exc:
        if isinstance(exc, missing) or (read_file is not None and not kernel_driver_loaded(read_file)):
            return empty_facts("nvml")
        raise NvidiaError("NVML initialisation failed: %s" % exc)
    try:
        call = _Reader(pynvml, "NVML")
        count = call("nvmlDeviceGetCount") or 0
        cuda = call("nvmlSystemGetCudaDriverVersion_v2")
        if cuda is None:
            cuda = call("nvmlSystemGetCudaDriverVersion")
        facts = empty_facts("nvml", driver_loaded=True)
        facts.update(
            driver_version=_text(call("nvmlSystemGetDriverVersion")),
            cuda_driver_version=cuda_version_text(cuda),
            nvml_version=_text(call("nvmlSystemGetNVMLVersion")),
            gpu_count=count,
            gpus=[collect_device(pynvml, index, cpu_count or os.cpu_count() or MASK_BITS) for index in range(count)],
        )
        return facts
    finally:
        try:
            pynvml.nvmlShutdown()
        except any_error:
            # The facts are complete; a failing shutdown changes nothing for the caller.
            pass


def sysfs_pci_address(bus_id):
    """nvidia-smi's ``00000000:00:06.0`` as the kernel's ``0000:00:06.0``."""
    parts = (bus_id or "").split(":")
    if len(parts) != 3:
        return None
    try:
        domain = int(parts[0], 16)
    except ValueError:
        return None
    return "%04x:%s:%s" % (domain, parts[1].lower(), parts[2].lower())


def add_sysfs_affinity(facts, read_file):
    """Fill NUMA node and CPU list from sysfs, as NVML would report them."""
    for gpu in facts["gpus"]:
        address = sysfs_pci_address(gpu["pci_bus_id"])
        if address is None:
            continue
        base = "%s/%s/" % (SYSFS_PCI, address)
        node = (read_file(base + "numa_node") or "").strip()
        if node.lstrip("-").isdigit() and int(node) >= 0:
            gpu["numa_node"] = int(node)
        cpus = (read_file(base + "local_cpulist") or "").strip()
        gpu["cpu_affinity"] = cpus or None
    return facts


PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"


def kernel_driver_loaded(read_file):
    """True when the NVIDIA kernel module is loaded (it publishes its version in /proc)."""
    return bool((read_file(PROC_DRIVER_VERSION) or "").strip())


def _smi_says(rc, out, err):
    text = "%s\n%s" % (out or "", err or "")
    if rc in (SMI_DRIVER_NOT_LOADED, SMI_NVML_NOT_FOUND) or any(message in text for message in SMI_DRIVER_MESSAGES):
        return "no-driver"
    if rc == SMI_NO_DEVICE or SMI_NO_DEVICE_MESSAGE in text:
        return "no-device"
    return "error" if rc else "ok"


def collect_smi(run_smi, read_file=None):
    """All facts through ``nvidia-smi -q -x`` (plus compute capability and sysfs affinity).

    ``run_smi(args)`` returns ``(rc, stdout, stderr)``; None means the
    binary is not installed.
    """
    if run_smi is None:
        return empty_facts("nvidia-smi")
    rc, out, err = run_smi(SMI_QUERY_XML)
    verdict = _smi_says(rc, out, err)
    if verdict == "no-driver":
        return empty_facts("nvidia-smi")
    if verdict == "no-device":
        return empty_facts("nvidia-smi", driver_loaded=True)
    if verdict == "error":
        if read_file is not None and not kernel_driver_loaded(read_file):
            # e.g. "Failed to initialize NVML: Unknown Error" in a container or on a
            # host where only the userspace is installed: no kernel driver, no GPU facts.
            return empty_facts("nvidia-smi")
        raise NvidiaError("nvidia-smi -q -x failed (rc=%s): %s" % (rc, (err or out or "").strip()))
    try:
        parsed = parse_smi_xml(out)
    except ValueError as exc:
        raise NvidiaError(str(exc))
    facts = empty_facts("nvidia-smi", driver_loaded=True)
    facts.update(parsed)
    if facts["gpus"]:
        rc, out, _err = run_smi(SMI_QUERY_COMPUTE_CAP)
        # Drivers before ~510 do not know the field: capability stays null.
        capabilities = parse_compute_cap_csv(out) if rc == 0 else {}
        for gpu in facts["gpus"]:
            gpu["compute_capability"] = capabilities.get(gpu["index"])
        if read_file is not None:
            add_sysfs_affinity(facts, read_file)
    return facts


def facts_from_capture(text):
    """Facts from a captured ``nvidia-smi -q -x`` or ``nvidia-smi -q`` (no live host)."""
    facts = empty_facts("nvidia-smi", driver_loaded=True)
    facts.update(parse_smi_output(text))
    return facts


def gather(source, pynvml=None, run_smi=None, read_file=None, cpu_count=None):
    """GPU facts from the requested source.

    ``source`` is ``auto`` (NVML when pynvml imports, else nvidia-smi),
    ``nvml`` or ``nvidia-smi``.  ``pynvml`` is the imported module or None.
    In ``auto`` mode an NVML that finds no library or driver is double
    checked with nvidia-smi, which may know a driver path pynvml does not.
    """
    if source not in ("auto", "nvml", "nvidia-smi"):
        raise ValueError("source must be auto, nvml or nvidia-smi, got %r" % (source,))
    if source == "nvml" and pynvml is None:
        raise LibraryMissing("source=nvml needs the nvidia-ml-py Python package (module pynvml) on the target")
    if source == "nvidia-smi" or pynvml is None:
        return collect_smi(run_smi, read_file)
    facts = collect_nvml(pynvml, cpu_count, read_file)
    if facts["driver_loaded"] or source == "nvml" or run_smi is None:
        return facts
    second = collect_smi(run_smi, read_file)
    return second if second["driver_loaded"] else facts
