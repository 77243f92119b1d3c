# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import ctypes

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import (
    LibraryMissing,
    NvidiaError,
    add_sysfs_affinity,
    collect_nvml,
    collect_smi,
    cuda_version_text,
    facts_from_capture,
    format_cpulist,
    gather,
    mask_bits,
    missing_reason,
    sysfs_pci_address,
)
from ansible_collections.gpucloud.fleet.plugins.module_utils.smi_xml import parse_smi_xml
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    FakeNvml,
    fake_h200_nvml,
    fixture_text,
    h200_dump,
    h200_extra,
)

H200_XML = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")
H200_UUID = "GPU-4fc604de-9030-742c-d69f-594418e871d5"
SYSFS = {
    "/sys/bus/pci/devices/0000:00:06.0/numa_node": "0\n",
    "/sys/bus/pci/devices/0000:00:06.0/local_cpulist": "0-15\n",
}
DRIVER_NOT_LOADED = (
    9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n", "")


def smi(answers):
    """A fake nvidia-smi: argv tail -> (rc, out, err); records the calls."""
    calls = []

    def run(args):
        calls.append(list(args))
        return answers[" ".join(args)]

    run.calls = calls
    return run


def h200_smi():
    return smi({
        "-q -x": (0, H200_XML, ""),
        "--query-gpu=index,compute_cap --format=csv,noheader": (0, "0, 9.0\n", ""),
    })


def test_h200_through_nvml_with_its_real_answers():
    nvml = fake_h200_nvml()
    facts = collect_nvml(nvml, cpu_count=16)
    assert nvml.shutdowns == 1
    assert dict((k, v) for k, v in facts.items() if k != "gpus") == {
        "source": "nvml",
        "driver_loaded": True,
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "nvml_version": "13.580.159.04",
        "gpu_count": 1,
    }
    assert facts["gpus"] == [{
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": H200_UUID,
        "serial": "1654024076551",
        "pci_bus_id": "00000000:00:06.0",
        "architecture": "Hopper",
        "compute_capability": "9.0",
        "memory_total_mib": 143771,
        # NVML v1 memory info counts the 616 MiB the driver reserves as used.
        "memory_used_mib": 615,
        "persistence_mode": True,
        "compute_mode": "Default",
        "mig": {"current": False, "pending": False},
        "ecc": {"current": True, "pending": True, "uncorrected_volatile": 0, "uncorrected_aggregate": 0},
        "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
        # NVMLError_NotSupported on the real host.
        "retired_pages": None,
        "power": {"draw_w": 77.079, "limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0},
        "temperature_c": 31,
        "clocks_mhz": {"sm": 345, "sm_max": 1980, "memory": 3201, "memory_max": 3201},
        "pcie": {"gen": 5, "gen_max": 5, "gen_device_max": 5, "width": 16, "width_max": 16},
        "vbios_version": "96.00.A5.00.1A",
        "numa_node": 0,
        # NumaNodeId: NVMLError_NotSupported on the real host.
        "gpu_numa_id": None,
        "cpu_affinity": "0-15",
        # CurrentClocksEventReasons 0x1 (GpuIdle) on the real host.
        "idle": True,
        # This pynvml stand-in has no fabric info struct: as a pynvml older than the call.
        "fabric": {"state": None, "status": None},
    }]


def test_nvml_and_nvidia_smi_agree_on_the_h200():
    through_nvml = collect_nvml(fake_h200_nvml(), cpu_count=16)["gpus"][0]
    through_xml = parse_smi_xml(H200_XML)["gpus"][0]
    live = ("memory_used_mib", "temperature_c", "power", "clocks_mhz", "compute_capability", "numa_node",
            "cpu_affinity")
    for key in through_nvml:
        if key not in live:
            assert through_nvml[key] == through_xml[key], key
    assert through_nvml["power"]["limit_w"] == through_xml["power"]["limit_w"]
    assert through_nvml["clocks_mhz"]["sm_max"] == through_xml["clocks_mhz"]["sm_max"]


def test_every_not_supported_answer_of_the_capture_becomes_null():
    nvml = fake_h200_nvml()
    gpu = collect_nvml(nvml, cpu_count=16)["gpus"][0]
    asked = set(call[0] for call in nvml.calls)
    refused = set(key for key, entry in h200_dump()["devices"][0].items()
                  if isinstance(entry, dict) and entry.get("error") == "NVMLError_NotSupported")
    assert asked & refused == {"NumaNodeId", "RetiredPages"}
    assert gpu["gpu_numa_id"] is None
    assert gpu["retired_pages"] is None


@pytest.mark.parametrize("error", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_library_or_no_driver_is_a_normal_answer(error):
    nvml = fake_h200_nvml(init_error=error)
    facts = collect_nvml(nvml)
    assert facts == {
        "source": "nvml",
        "driver_loaded": False,
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "gpu_count": 0,
        "gpus": [],
    }
    assert nvml.shutdowns == 0
    assert missing_reason(facts) == "no NVIDIA driver loaded (source nvml)"


def test_other_init_errors_fail():
    with pytest.raises(NvidiaError, match="NVML initialisation failed"):
        collect_nvml(fake_h200_nvml(init_error="NVMLError_NoPermission"))


def _proc(loaded):
    """read_file for /proc/driver/nvidia/version: a loaded module publishes its version."""
    text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n" if loaded else None
    return lambda path: text if path == "/proc/driver/nvidia/version" else None


def test_init_error_without_kernel_module_is_no_driver():
    # A host with only the userspace installed (a container, or before the first
    # reboot): NVML's init fails with "Unknown Error"; that is "no driver", not a fault.
    facts = collect_nvml(fake_h200_nvml(init_error="NVMLError_Unknown"), read_file=_proc(False))
    assert (facts["driver_loaded"], facts["gpu_count"]) == (False, 0)
    with pytest.raises(NvidiaError, match="NVML initialisation failed"):
        collect_nvml(fake_h200_nvml(init_error="NVMLError_Unknown"), read_file=_proc(True))


def test_smi_failure_without_kernel_module_is_no_driver():
    failing = smi({"-q -x": (255, "Failed to initialize NVML: Unknown Error\n", "")})
    facts = collect_smi(failing, read_file=_proc(False))
    assert (facts["driver_loaded"], facts["gpu_count"], facts["source"]) == (False, 0, "nvidia-smi")
    with pytest.raises(NvidiaError, match=r"rc=255\): Failed to initialize NVML: Unknown Error"):
        collect_smi(failing, read_file=_proc(True))


def test_driver_without_gpu():
    dump = h200_dump()
    dump["system"]["count"] = {"ok": 0}
    facts = collect_nvml(FakeNvml(dump))
    assert (facts["driver_loaded"], facts["gpu_count"], facts["gpus"]) == (True, 0, [])
    assert facts["driver_version"] == "580.159.04"
    assert missing_reason(facts) == "NVIDIA driver 580.159.04 is loaded but sees no GPU"


def test_lost_gpu_fails_and_still_shuts_nvml_down():
    extra = h200_extra()
    extra[(0, "Temperature")] = {"error": "NVMLError_GpuIsLost"}
    nvml = FakeNvml(h200_dump(), extra=extra)
    with pytest.raises(NvidiaError, match="GPU 0: nvmlDeviceGetTemperature failed"):
        collect_nvml(nvml, cpu_count=16)
    assert nvml.shutdowns == 1


def test_failing_shutdown_does_not_lose_the_facts():
    facts = collect_nvml(fake_h200_nvml(shutdown_error="NVMLError_Uninitialized"), cpu_count=16)
    assert facts["gpu_count"] == 1


@pytest.mark.parametrize("error", [
    "NVMLError_NotSupported", "NVMLError_NotFound", "NVMLError_NoPermission", "NVMLError_FunctionNotFound"])
def test_cannot_tell_errors_become_null(error):
    extra = h200_extra()
    extra[(0, "Serial")] = {"error": error}
    extra[(0, "RemappedRows")] = {"error": error}
    extra[(0, "MigMode")] = {"error": error}
    gpu = collect_nvml(FakeNvml(h200_dump(), extra=extra), cpu_count=16)["gpus"][0]
    assert gpu["serial"] is None
    assert gpu["remapped_rows"] is None
    assert gpu["mig"] == {"current": None, "pending": None}


def test_old_bindings_without_a_call_give_null():
    class OldBindings(FakeNvml):
        def __getattr__(self, name):
            if name in ("nvmlDeviceGetNumaNodeId", "nvmlDeviceGetRemappedRows", "nvmlSystemGetCudaDriverVersion_v2"):
                raise AttributeError(name)
            return FakeNvml.__getattr__(self, name)

        nvmlSystemGetCudaDriverVersion_v2 = property(lambda self: None)

    nvml = OldBindings(h200_dump(), extra=h200_extra())
    facts = collect_nvml(nvml, cpu_count=16)
    assert facts["gpus"][0]["remapped_rows"] is None
    assert facts["gpus"][0]["gpu_numa_id"] is None
    assert facts["cuda_driver_version"] == "13.0"


def test_memory_info_v2_is_preferred_when_the_bindings_have_it():
    extra = h200_extra()
    extra[(0, "MemoryInfo")] = {"ok": {"total": 150754820096, "reserved": 645922816, "free": 150108897280, "used": 0}}
    nvml = FakeNvml(h200_dump(), extra=extra)
    nvml.nvmlMemory_v2 = 0x02000028
    original = nvml.__getattr__("nvmlDeviceGetMemoryInfo")

    def memory_info(handle, version=None):
        assert version == 0x02000028
        return original(handle)

    nvml.nvmlDeviceGetMemoryInfo = memory_info
    gpu = collect_nvml(nvml, cpu_count=16)["gpus"][0]
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"]) == (143771, 0)


def test_memory_info_v2_refused_falls_back_to_v1():
    nvml = fake_h200_nvml()
    nvml.nvmlMemory_v2 = 0x02000028
    original = nvml.__getattr__("nvmlDeviceGetMemoryInfo")

    def memory_info(handle, version=None):
        if version:
            raise nvml.NVMLError_ArgumentVersionMismatch()
        return original(handle)

    nvml.nvmlDeviceGetMemoryInfo = memory_info
    assert collect_nvml(nvml, cpu_count=16)["gpus"][0]["memory_used_mib"] == 615


def test_bytes_from_old_bindings_are_decoded():
    extra = h200_extra()
    extra[(0, "Name")] = {"ok": b"NVIDIA H200"}
    nvml = FakeNvml(h200_dump(), extra=extra)
    assert collect_nvml(nvml, cpu_count=16)["gpus"][0]["name"] == "NVIDIA H200"


def test_affinity_masks_on_a_two_socket_host():
    extra = h200_extra()
    extra[(0, "CpuAffinity")] = lambda words: [0xFFFFFFFF00000000, 0xFFFFFFFF00000000][:words] + [0] * (words - 2)
    extra[(0, "MemoryAffinity")] = lambda words, scope: [0b10] + [0] * (words - 1)
    gpu = collect_nvml(FakeNvml(h200_dump(), extra=extra), cpu_count=128)["gpus"][0]
    assert gpu["cpu_affinity"] == "32-63,96-127"
    assert gpu["numa_node"] == 1


def test_mask_and_list_helpers():
    assert mask_bits([0xFFFF, 0]) == list(range(16))
    assert mask_bits([0, 1]) == [64]
    assert mask_bits(None) == []
    assert format_cpulist([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    assert format_cpulist([]) is None
    assert cuda_version_text(13000) == "13.0"
    assert cuda_version_text(12040) == "12.4"
    assert cuda_version_text(None) is None
    assert sysfs_pci_address("00000000:00:06.0") == "0000:00:06.0"
    assert sysfs_pci_address("00000000:1B:00.0") == "0000:1b:00.0"
    assert sysfs_pci_address("00010000:01:00.0") == "10000:01:00.0"
    assert sysfs_pci_address("garbage") is None


def test_h200_through_nvidia_smi():
    run = h200_smi()
    facts = collect_smi(run, SYSFS.get)
    assert run.calls == [["-q", "-x"], ["--query-gpu=index,compute_cap", "--format=csv,noheader"]]
    assert (facts["source"], facts["driver_loaded"], facts["driver_version"], facts["gpu_count"]) == (
        "nvidia-smi", True, "580.159.04", 1)
    gpu = facts["gpus"][0]
    assert (gpu["compute_capability"], gpu["numa_node"], gpu["cpu_affinity"]) == ("9.0", 0, "0-15")
    assert gpu["uuid"] == H200_UUID


def test_sysfs_without_numa():
    facts = add_sysfs_affinity(parse_smi_xml(H200_XML), {
        "/sys/bus/pci/devices/0000:00:06.0/numa_node": "-1\n",
    }.get)
    assert (facts["gpus"][0]["numa_node"], facts["gpus"][0]["cpu_affinity"]) == (None, None)


def test_old_driver_without_compute_cap_field():
    run = smi({
        "-q -x": (0, H200_XML, ""),
        "--query-gpu=index,compute_cap --format=csv,noheader": (
            2, 'Field "compute_cap" is not a valid field to query.\n', ""),
    })
    assert collect_smi(run)["gpus"][0]["compute_capability"] is None


def test_nvidia_smi_missing_or_driver_not_loaded():
    assert collect_smi(None)["driver_loaded"] is False
    facts = collect_smi(smi({"-q -x": DRIVER_NOT_LOADED}))
    assert (facts["source"], facts["driver_loaded"], facts["gpu_count"]) == ("nvidia-smi", False, 0)
    assert collect_smi(smi({"-q -x": (12, "NVIDIA-SMI has failed because the NVML Shared Library Not Found", "")}))[
        "driver_loaded"] is False


def test_nvidia_smi_without_gpu():
    facts = collect_smi(smi({"-q -x": (6, "No devices were found\n", "")}))
    assert (facts["driver_loaded"], facts["gpu_count"]) == (True, 0)


def test_nvidia_smi_other_failures_fail():
    with pytest.raises(NvidiaError, match=r"rc=15\): Unable to determine the device handle for GPU0000:00:06.0: GPU is lost"):
        collect_smi(smi({"-q -x": (15, "", "Unable to determine the device handle for GPU0000:00:06.0: GPU is lost\n")}))
    with pytest.raises(NvidiaError, match="not XML"):
        collect_smi(smi({"-q -x": (0, "garbage", "")}))


def test_gather_auto_prefers_nvml():
    facts = gather("auto", fake_h200_nvml(), run_smi=None, cpu_count=16)
    assert facts["source"] == "nvml"


def test_gather_auto_without_pynvml_falls_back_to_nvidia_smi():
    facts = gather("auto", None, h200_smi(), SYSFS.get)
    assert facts["source"] == "nvidia-smi"
    assert facts["gpus"][0]["numa_node"] == 0


def test_gather_auto_double_checks_a_missing_nvml_library_with_nvidia_smi():
    facts = gather("auto", fake_h200_nvml(init_error="NVMLError_LibraryNotFound"), h200_smi(), SYSFS.get)
    assert (facts["source"], facts["gpu_count"]) == ("nvidia-smi", 1)


def test_gather_auto_keeps_the_nvml_answer_when_nvidia_smi_agrees_there_is_no_driver():
    facts = gather("auto", fake_h200_nvml(init_error="NVMLError_DriverNotLoaded"), smi({"-q -x": DRIVER_NOT_LOADED}))
    assert (facts["source"], facts["driver_loaded"]) == ("nvml", False)


def test_gather_nvml_only():
    run = h200_smi()
    facts = gather("nvml", fake_h200_nvml(init_error="NVMLError_LibraryNotFound"), run)
    assert (facts["source"], facts["driver_loaded"]) == ("nvml", False)
    assert run.calls == []
    with pytest.raises(LibraryMissing, match="nvidia-ml-py"):
        gather("nvml", None, run)


def test_gather_nvidia_smi_only_never_touches_nvml():
    nvml = fake_h200_nvml()
    facts = gather("nvidia-smi", nvml, h200_smi(), SYSFS.get)
    assert facts["source"] == "nvidia-smi"
    assert nvml.calls == [] and nvml.shutdowns == 0


def test_gather_rejects_unknown_source():
    with pytest.raises(ValueError, match="source must be"):
        gather("dcgm", None, None)


def test_facts_from_a_captured_text():
    facts = facts_from_capture(fixture_text("public", "smi_q", "h100-sxm-8gpu-565-thamada.txt"))
    assert (facts["source"], facts["driver_loaded"], facts["gpu_count"]) == ("nvidia-smi", True, 8)


class FabricInfo(ctypes.Structure):
    """The fields of pynvml's c_nvmlGpuFabricInfoV_t that the code reads."""

    _fields_ = [("status", ctypes.c_uint), ("state", ctypes.c_uint)]


def _fabric_answer(state, status=0):
    def fill(reference):
        reference._obj.state = state
        reference._obj.status = status
        return 0
    return fill


@pytest.mark.parametrize("answer, expected", [
    (_fabric_answer(3), {"state": "Completed", "status": "Success"}),
    (_fabric_answer(2), {"state": "In Progress", "status": "Success"}),
    (_fabric_answer(1), {"state": "Not Started", "status": "Success"}),
    (_fabric_answer(3, 999), {"state": "Completed", "status": "NVML error 999"}),
    # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED and NVMLError_NotSupported: no fabric, null.
    (_fabric_answer(0), {"state": None, "status": None}),
    ({"error": "NVMLError_NotSupported"}, {"state": None, "status": None}),
])
def test_fabric_info_through_nvml(answer, expected):
    extra = h200_extra()
    extra[(0, "GpuFabricInfoV")] = answer
    nvml = FakeNvml(h200_dump(), extra=extra)
    nvml.c_nvmlGpuFabricInfoV_t = FabricInfo
    assert collect_nvml(nvml, cpu_count=16)["gpus"][0]["fabric"] == expected


def test_idle_from_the_throttle_reasons_of_older_drivers():
    extra = h200_extra()
    extra[(0, "CurrentClocksEventReasons")] = {"error": "NVMLError_FunctionNotFound"}
    extra[(0, "CurrentClocksThrottleReasons")] = {"ok": 0x4}
    assert collect_nvml(FakeNvml(h200_dump(), extra=extra), cpu_count=16)["gpus"][0]["idle"] is False
