# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""verify passes a healthy node of every profile of inventories/example (issue 28 item 10).

A healthy node is simulated from the H200 capture (tests/fixtures/h200-ubuntu2404-driver580):
its GPU record copied gpu_count times with the profile's model and that model's memory, every
other observation as a healthy node reports it (versions at the lock, no topology or port
mismatch, Tang open, firewall on, Fabric Manager active, CUDA contexts made). Burn-in numbers
are the GPU's published dense BF16 peak and memory bandwidth times the efficiency the captured
H200 reached (802.3 of 989 TFLOP/s, 4239 of 4800 GB/s). On a MIG node a CUDA process sees one
MIG device, so burn-in measures one slice: the numbers times its compute (g/7) and memory (m/8)
fractions.
"""


import copy
import glob
import json
import os

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import facts_from_capture
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

H200 = "h200-ubuntu2404-driver580"
GEMM_EFFICIENCY = 802.3 / 989
COPY_EFFICIENCY = 4239 / 4800
# family -> (product name nvidia-smi prints, memory MiB, dense BF16 TFLOP/s, memory GB/s), from
# NVIDIA's A100, H100 and H200 datasheets; the H200 memory is the capture's.
GPUS = {
    "A100-80GB": ("NVIDIA A100 80GB PCIe", 81920, 312, 1935),
    "A100-40GB": ("NVIDIA A100-SXM4-40GB", 40960, 312, 1555),
    "H100-80GB": ("NVIDIA H100 80GB HBM3", 81559, 989, 3350),
    "H200-141GB": ("NVIDIA H200", 143771, 989, 4800),
}


def example_inventory():
    """{profile name: (gpucloud_profile, gpucloud_version_lock)} of inventories/example."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "example", "group_vars", "*.yml"))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        if "gpucloud_profile" in data:
            found[data["gpucloud_profile"]["name"]] = (data["gpucloud_profile"], data.get("gpucloud_version_lock", {}))
    return found


def _lgi(profile, family, count):
    devices = mig_layout.desired_layout(profile, family)["devices"]
    rows = ["+----+", "| GPU instances:                                     |",
            "| GPU   Name          Profile  Instance   Placement  |", "|=====|"]
    for gpu in range(count):
        instance = 0
        for name, number in sorted(devices.items()):
            for _copy in range(number):
                instance += 1
                rows.append("|   %d  MIG %s       19       %d          %d:1     |" % (gpu, name, instance, instance - 1))
    return "\n".join(rows) + "\n"


def healthy_observation(profile, lock):
    family = mig_layout.family_of(profile["gpu_model"])
    product, memory, tflops, gbps = GPUS[family]
    facts = facts_from_capture(fixture_text(H200, "nvidia-smi_-q_-x.xml"))
    template = facts["gpus"][0]
    mig = bool(profile.get("mig"))
    gpus = []
    for index in range(profile["gpu_count"]):
        gpu = copy.deepcopy(template)
        gpu.update(index=index, name=product, memory_total_mib=memory, pci_bus_id="00000000:%02X:00.0" % (0x18 + index))
        gpu["mig"] = {"current": mig, "pending": mig}
        gpu["fabric"] = ({"state": "Completed", "status": "Success"} if profile.get("nvswitch")
                         else {"state": None, "status": None})
        gpus.append(gpu)
    facts.update(gpus=gpus, gpu_count=len(gpus), driver_version=lock["driver"])
    gemm, copy_rate = tflops * GEMM_EFFICIENCY, gbps * COPY_EFFICIENCY
    observed = {
        "reboot_required": False,
        "nvidia": facts,
        "stack": {"driver": lock["driver"], "cuda": lock["cuda"], "cudnn": lock["cudnn"], "nccl": lock["nccl"]},
        "kernel_log": {"text": "", "source": "journalctl -k -b"},
        "fabric_manager": {"state": "active"},
        "cuda": {"error": None, "devices": [{"index": i, "ok": True, "error": None} for i in range(len(gpus))]},
        "pcie_acs": {"redirecting": [], "ports": 8},
        "topology": {"mismatches": []},
        "ib": {"mismatches": []},
        "tang": {"device": "/dev/nvme1n1", "luks": True, "bound": True, "servers": ["http://tang-01"],
                 "check_open": True, "name": "data", "lsblk": "crypt data\n", "mount_point": "/data",
                 "mounted_from": "/dev/mapper/data"},
        "firewall": {"active": True, "detail": "nftables policy active"},
    }
    if mig:
        smallest = min(mig_layout.desired_layout(profile, family)["devices"],
                       key=lambda name: mig_layout._FAMILIES[family]["profiles"][name][0])
        compute, memory_slices, _most = mig_layout._FAMILIES[family]["profiles"][smallest]
        gemm, copy_rate = gemm * compute / 7, copy_rate * memory_slices / 8
        observed["mig_instances"] = {"text": _lgi(profile, family, len(gpus))}
        measured = [{"index": 0, "name": "%s MIG %s" % (product, smallest)}]
    else:
        measured = [{"index": i, "name": product} for i in range(len(gpus))]
    for gpu in measured:
        gpu.update(bf16_gemm_tflops=round(gemm, 1), d2d_copy_GBps_rw=round(copy_rate, 1))
    observed["burn_in"] = json.loads(json.dumps({"gpus": measured, "bf16_gemm_tflops": round(gemm, 1),
                                                 "d2d_copy_GBps_rw": round(copy_rate, 1)}))
    return observed


EXAMPLES = example_inventory()


def test_the_example_fleet_has_its_four_profiles():
    assert sorted(EXAMPLES) == ["a100_40g_sxm", "a100_80g_pcie", "h100_sxm", "h200_sxm"]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_verify_passes_a_healthy_node_of_every_example_profile(name):
    profile, lock = EXAMPLES[name]
    checks = acceptance.evaluate("gpu-%s-001" % name, profile, lock, healthy_observation(profile, lock))
    assert [check for check in checks if check["status"] == acceptance.FAIL] == []
    judged = dict((check["check"], check["status"]) for check in checks)
    # The floors are judged where the profile sets them: a skipped check would prove nothing.
    assert judged["gpu.count"] == judged["gpu.model"] == judged["gpu.mig"] == acceptance.PASS
    if not profile.get("mig"):
        assert judged["burn_in.bf16_gemm"] == judged["burn_in.memory_copy"] == acceptance.PASS


def test_a_healthy_mig_node_is_not_failed_by_whole_gpu_floors():
    """The a100_80g_pcie profile as it was: all-1g.10gb slices beside whole-GPU burn-in floors."""
    profile, lock = copy.deepcopy(EXAMPLES["a100_80g_pcie"])
    profile["mig"] = {"strategy": "single", "layout": "all-1g.10gb"}
    observed = healthy_observation(profile, lock)
    checks = dict((c["check"], c) for c in acceptance.evaluate("gpu-a100p-001", profile, lock, observed))
    assert [c for c in checks.values() if c["status"] == acceptance.FAIL] == []
    assert checks["gpu.mig"]["status"] == acceptance.PASS
    assert checks["burn_in.bf16_gemm"]["status"] == acceptance.NA
    assert "serves MIG slices (layout all-1g.10gb)" in checks["burn_in.bf16_gemm"]["detail"]
    # A MIG profile still fails a node whose MIG layout is not the profile's.
    observed = healthy_observation(profile, lock)
    observed["mig_instances"]["text"] = observed["mig_instances"]["text"].replace("1g.10gb", "3g.40gb", 2)
    assert dict((c["check"], c["status"]) for c in acceptance.evaluate(
        "gpu-a100p-001", profile, lock, observed))["gpu.mig"] == acceptance.FAIL
