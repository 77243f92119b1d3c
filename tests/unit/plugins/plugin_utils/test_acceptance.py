# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Node acceptance on real captures (H200 nvidia-smi -q -x, DGX A100 topo -m) with injected faults."""


import copy
import json

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import node_observation
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import facts_from_capture
from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import analyze
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

H200 = "h200-ubuntu2404-driver580"
DGX_A100_TOPO = ("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
HOST = "gpu-h200-017"

# The captured H200 host as a one-GPU profile: what it is, not what a rack of HGX boards is.
PROFILE = {
    "name": "h200_capture",
    "gpu_model": "H200",
    "gpu_count": 1,
    "gpu_memory_mib_min": 140000,
    "persistence": True,
    "ecc": True,
    "mig": False,
    "topology": {"gpu_count": 1},
    "ib": {},
    "tang_bound": False,
    "firewall": False,
    "burn_in": {"bf16_tflops_min": 700, "copy_gbps_min": 3800},
}
LOCK = {"driver": "580.159.04", "cuda": "13.0", "cudnn": "9.19", "nccl": "2.28.9"}


def h200_facts():
    return facts_from_capture(fixture_text(H200, "nvidia-smi_-q_-x.xml"))


def h200_observed():
    topo = analyze(fixture_text(H200, "nvidia-smi_topo_-m.txt"), PROFILE["topology"])
    return {
        "nvidia": h200_facts(),
        "stack": node_observation.parse_stack_versions(fixture_text(H200, "stack-versions.txt")),
        "topology": {"mismatches": topo["mismatches"]},
        "burn_in": json.loads(fixture_text(H200, "burn-in.json")),
    }


def by_name(checks):
    return dict((c["check"], c) for c in checks)


def failed(checks):
    return [c for c in checks if not c["ok"]]


def test_healthy_h200_capture_passes_every_check():
    checks = acceptance.evaluate(HOST, PROFILE, LOCK, h200_observed())
    assert failed(checks) == []
    assert [c["check"] for c in checks] == list(acceptance.CHECKS)
    named = by_name(checks)
    assert named["driver.version"]["detail"] == "loaded driver 580.159.04 matches locked 580.159.04"
    assert named["stack.cudnn"]["detail"] == "cudnn 9.19.0 matches locked 9.19"
    assert named["burn_in.bf16_gemm"]["detail"] == "802.3 TFLOP/s, minimum 700 TFLOP/s"
    assert named["ib.ports"]["status"] == "n/a"
    assert all(c["host"] == HOST for c in checks)


def test_injected_uncorrectable_ecc_error_fails_naming_host():
    observed = h200_observed()
    observed["nvidia"]["gpus"][0]["ecc"]["uncorrected_volatile"] = 2
    checks = acceptance.evaluate(HOST, PROFILE, LOCK, observed)
    assert [(c["host"], c["check"]) for c in failed(checks)] == [(HOST, "gpu.ecc_errors")]
    assert "GPU0 has uncorrectable ECC errors (volatile 2" in by_name(checks)["gpu.ecc_errors"]["detail"]


def test_injected_pending_and_failed_row_remap_fails():
    observed = h200_observed()
    observed["nvidia"]["gpus"][0]["remapped_rows"].update(pending=True, failure=True, uncorrectable=3)
    check = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, observed))["gpu.row_remap"]
    assert not check["ok"]
    assert "row remapping pending and failure (uncorrectable rows 3)" in check["detail"]


def test_missing_nvlink_pair_in_dgx_a100_topology_fails():
    text = fixture_text(*DGX_A100_TOPO)
    lines = text.splitlines()
    # GPU2 loses its NVLinks to GPU5 (both directions): the board falls back to PCIe.
    for index, line in enumerate(lines):
        cells = line.split()
        if cells and cells[0] in ("GPU2", "GPU5"):
            other = 6 if cells[0] == "GPU2" else 3
            cells[other] = "SYS"
            lines[index] = "\t".join(cells)
    profile = dict(PROFILE, topology={"gpu_count": 8, "min_nvlinks": 12, "max_nic_distance": "PXB"})
    healthy = analyze(text, profile["topology"])
    broken = analyze("\n".join(lines) + "\n", profile["topology"])
    assert healthy["mismatches"] == []
    observed = dict(h200_observed(), topology={"mismatches": broken["mismatches"]})
    check = by_name(acceptance.evaluate(HOST, profile, LOCK, observed))["topology"]
    assert check["status"] == "fail" and check["host"] == HOST
    assert check["detail"] == "GPU2-GPU5: SYS, expected at least NV12"


def test_drifted_driver_version_fails():
    lock = dict(LOCK, driver="580.95.05")
    checks = acceptance.evaluate(HOST, PROFILE, lock, h200_observed())
    assert [(c["host"], c["check"], c["detail"]) for c in failed(checks)] == [
        (HOST, "driver.version", "loaded driver 580.159.04 differs from locked 580.95.05")]


def test_drifted_nccl_and_missing_cudnn_fail():
    observed = h200_observed()
    observed["stack"].update(nccl="2.27.3", cudnn=None)
    named = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, observed))
    assert named["stack.nccl"]["detail"] == "nccl 2.27.3 differs from locked 2.28.9"
    assert named["stack.cudnn"]["detail"] == "cudnn is not installed, locked 9.19"
    assert named["stack.cuda"]["ok"]


def test_wrong_model_count_memory_persistence_mig():
    observed = h200_observed()
    gpu = observed["nvidia"]["gpus"][0]
    gpu.update(persistence_mode=False, memory_total_mib=81559, name="NVIDIA H100 80GB HBM3")
    gpu["mig"] = {"current": True, "pending": True}
    profile = dict(PROFILE, gpu_count=8)
    named = by_name(acceptance.evaluate(HOST, profile, LOCK, observed))
    assert named["gpu.count"]["detail"] == "expected 8 x H200, found 1"
    assert named["gpu.model"]["detail"] == "GPU0 is NVIDIA H100 80GB HBM3, expected H200"
    assert named["gpu.memory"]["detail"] == "GPU0 has 81559 MiB, expected at least 140000 MiB"
    assert named["gpu.persistence"]["detail"] == "GPU0 persistence mode is off"
    assert named["gpu.mig"]["detail"] == "GPU0 MIG current=True pending=True, expected MIG disabled"


def test_ecc_disabled_is_a_failure_when_profile_wants_it():
    observed = h200_observed()
    observed["nvidia"]["gpus"][0]["ecc"].update(current=False, pending=False)
    check = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, observed))["gpu.ecc_mode"]
    assert check["detail"] == "GPU0 ECC current=False pending=False, expected on"


def test_slow_burn_in_fails_and_missing_burn_in_is_skipped():
    observed = dict(h200_observed(), burn_in={"bf16_gemm_tflops": 512.0, "d2d_copy_GBps_rw": 4238.7})
    named = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, observed))
    assert named["burn_in.bf16_gemm"]["status"] == "fail"
    assert named["burn_in.memory_copy"]["status"] == "pass"
    observed.pop("burn_in")
    named = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, observed))
    assert named["burn_in.bf16_gemm"]["status"] == "skipped"


LAB = {"name": "lab", "gpu_count": 0, "tang_bound": True, "firewall": True}
NO_GPU = {"source": "nvidia-smi", "driver_loaded": False, "driver_version": None, "cuda_driver_version": None,
          "nvml_version": None, "gpu_count": 0, "gpus": []}


def test_gpu_less_lab_node_says_no_gpu_present_plainly():
    observed = {"nvidia": NO_GPU, "stack": {"driver": None, "cuda": None, "cudnn": None, "nccl": None},
                "tang": {"device": "/srv/data.img", "luks": True, "bound": True, "servers": ["http://lab-tang"]},
                "firewall": {"active": True, "detail": "nftables table inet gpucloud loaded"}}
    checks = acceptance.evaluate("lab-gpu-1", LAB, {"driver": "535.261.03"}, observed)
    named = by_name(checks)
    assert failed(checks) == []
    assert named["gpu.count"]["detail"] == ("no GPU present, as profile lab expects (gpu_count 0; "
                                            "no NVIDIA driver loaded)")
    assert named["gpu.ecc_errors"]["status"] == "n/a"
    assert named["driver.version"]["status"] == "n/a"
    report = acceptance.fleet_report({"lab-gpu-1": checks})
    assert report["gpu_less_hosts"] == ["lab-gpu-1"]
    assert "No GPU present on lab-gpu-1" in acceptance.fleet_markdown(report)


def test_installed_driver_package_is_compared_when_no_driver_is_loaded():
    observed = {"nvidia": NO_GPU, "stack": {"driver": "535.261.03-1~deb12u1"}}
    check = by_name(acceptance.evaluate("lab-gpu-1", LAB, {"driver": "535.261.03"}, observed))["driver.version"]
    assert check["status"] == "pass"
    assert "driver not loaded; installed package 535.261.03-1~deb12u1 matches" in check["detail"]


def test_gpu_profile_on_gpu_less_node_fails_plainly():
    checks = acceptance.evaluate("gpu-h100-001", dict(PROFILE, gpu_count=8), LOCK, {"nvidia": NO_GPU})
    named = by_name(checks)
    assert named["gpu.count"]["status"] == "fail"
    assert named["gpu.count"]["detail"].startswith("driver not loaded: the GPUs cannot be counted")
    assert named["gpu.count"]["detail"].endswith("expected 8 x H200")
    assert (named["gpu.ecc_errors"]["status"], named["gpu.ecc_errors"]["detail"]) == ("skipped", "driver not loaded")
    assert named["driver.version"]["detail"] == "no NVIDIA driver loaded or installed, locked 580.159.04"


def test_driver_loaded_without_gpus_still_says_no_gpu_present():
    loaded = dict(NO_GPU, driver_loaded=True, driver_version="580.159.04")
    named = by_name(acceptance.evaluate("gpu-h100-001", dict(PROFILE, gpu_count=8), LOCK, {"nvidia": loaded}))
    assert named["gpu.count"]["detail"] == "no GPU present (driver loaded); expected 8 x H200, found 0"
    assert named["gpu.ecc_errors"]["detail"] == "no GPU present to check"


def test_ubuntu_server_driver_installed_but_not_loaded_is_driver_not_loaded():
    """Ubuntu 24.04 with Ubuntu's 580 server packages and no kernel module (molecule/nvidia_driver):
    the real nvidia-smi exits 9, nvidia_gpu_info says driver_loaded false, dpkg lists the -server packages."""
    from ansible_collections.gpucloud.fleet.plugins.module_utils import nvml
    smi = nvml.collect_smi(lambda args: (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                            "driver. Make sure that the latest NVIDIA driver is installed and running.\n", ""))
    import os
    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
    with open(os.path.join(root, "roles", "node_acceptance", "defaults", "main.yml"), encoding="utf-8") as handle:
        patterns = yaml.safe_load(handle)["node_acceptance_stack_packages"]
    stack = node_observation.stack_from_packages(
        "nvidia-utils-580-server 580.178.04-0ubuntu0.24.04.1 installed\n"
        "libnvidia-compute-580-server 580.178.04-0ubuntu0.24.04.1 installed\n"
        "nvidia-fabricmanager-580 580.178.04-0ubuntu0.24.04.1 installed\n", patterns)
    named = by_name(acceptance.evaluate("gpu-h200-001", dict(PROFILE, gpu_count=8), {"driver": "580.178.04"},
                                        {"nvidia": smi, "stack": stack}))
    assert named["gpu.count"]["detail"].startswith("driver not loaded")
    assert "found 0" not in named["gpu.count"]["detail"]
    assert named["driver.version"]["status"] == "pass"
    assert named["driver.version"]["detail"].startswith("driver not loaded; installed package 580.178.04-0ubuntu0.24.04.1")


def test_storage_and_firewall_failures_and_read_errors():
    profile = dict(LAB)
    observed = {"nvidia": NO_GPU, "tang": {"device": "/dev/nvme1n1", "luks": True, "bound": False},
                "firewall": {"active": False, "detail": "nft list ruleset is empty"},
                "topology": {"error": "nvidia-smi not found"}}
    profile["topology"] = {"gpu_count": 0}
    named = by_name(acceptance.evaluate("n1", profile, {}, observed))
    assert named["storage.tang"]["detail"] == "/dev/nvme1n1 has no clevis tang binding"
    assert named["firewall"]["detail"] == "nft list ruleset is empty"
    assert named["topology"]["detail"] == "the GPU/NIC topology could not be read: nvidia-smi not found"


def test_fleet_report_lists_every_failure_by_host_and_markdown_escapes():
    good = acceptance.evaluate("a", PROFILE, LOCK, h200_observed())
    bad_obs = h200_observed()
    bad_obs["nvidia"]["gpus"][0]["ecc"]["uncorrected_aggregate"] = 1
    bad = acceptance.evaluate("b", PROFILE, dict(LOCK, driver="570.1"), bad_obs)
    report = acceptance.fleet_report({"b": bad, "a": good})
    assert report["hosts"] == ["a", "b"]
    assert report["failed_hosts"] == ["b"]
    assert [(f["host"], f["check"]) for f in report["failures"]] == [("b", "driver.version"), ("b", "gpu.ecc_errors")]
    text = acceptance.fleet_markdown(report)
    assert "| b | gpu.ecc_errors | GPU0 has uncorrectable ECC errors" in text
    assert "2 host(s): 1 accepted, 1 failed" in text
    assert "| gpu.ecc_errors | FAIL |" in acceptance.host_markdown("b", bad)
    assert "a\\|b" in acceptance._cell("a|b")


@pytest.mark.parametrize("locked, found, ok", [
    ("13.0", "13.0.2-1", True),
    ("13.0", "13.1.0", False),
    ("580.159.04", "580.159.04", True),
    ("580.159.04", "580.159.4", True),
    ("2.28", "2.28.9-1+cuda13.0", True),
    ("9.19.0", "9.19.0.56-1", True),
    ("535.261.03", "1:535.261.03-1~deb12u1", True),
    ("11.8", "11.8.89~11.8.0-5~deb12u1", True),
    ("12", None, False),
])
def test_version_matches(locked, found, ok):
    assert node_observation.version_matches(locked, found) is ok


def test_stack_versions_and_cudnn_integers():
    assert node_observation.parse_stack_versions(fixture_text(H200, "stack-versions.txt")) == {
        "cuda": "13.0", "cudnn": "9.19.0", "nccl": "2.28.9"}
    assert node_observation.cudnn_version_text(8902) == "8.9.2"
    assert node_observation.parse_stack_versions("junk\ncuda\n") == {"cuda": None, "cudnn": None, "nccl": None}


def test_bad_profile_is_rejected():
    with pytest.raises(acceptance.AcceptanceError, match="host x: the hardware profile must be a dict"):
        acceptance.evaluate("x", {"name": "no count"})


def test_evaluate_does_not_modify_its_input():
    observed = h200_observed()
    before = copy.deepcopy(observed)
    acceptance.evaluate(HOST, PROFILE, LOCK, observed)
    assert observed == before


PACKAGES = """\
nvidia-smi\t535.261.03-1~deb12u1\tinstalled
libnvidia-ml1\t535.261.03-1~deb12u1\tinstalled
cuda-toolkit-12-8\t12.8.1-1\tinstalled
cuda-toolkit-13-0\t13.0.2-1\tinstalled
cuda-toolkit-config-common\t13.0.96-1\tinstalled
libcudnn9-cuda-13\t9.19.0.56-1\tinstalled
libnccl2\t2.28.9-1+cuda13.0\tconfig-files
"""
PATTERNS = {"driver": ["nvidia-open", "nvidia-smi"], "cuda": ["cuda-toolkit-[0-9]*", "nvidia-cuda-toolkit"],
            "cudnn": ["libcudnn[0-9]-cuda-*"], "nccl": ["libnccl2"]}


def test_stack_from_packages_picks_installed_highest_and_ignores_removed():
    assert node_observation.stack_from_packages(PACKAGES, PATTERNS) == {
        "driver": "535.261.03-1~deb12u1", "cuda": "13.0.2-1", "cudnn": "9.19.0.56-1", "nccl": None}
    assert node_observation.stack_from_packages("", PATTERNS)["cuda"] is None


def test_fleet_report_names_hosts_that_never_reached_a_verdict():
    good = acceptance.evaluate("a", PROFILE, LOCK, h200_observed())
    report = acceptance.fleet_report({"a": good}, expected=["a", "c"])
    assert report["failed_hosts"] == ["c"]
    assert report["failures"] == [{"host": "c", "check": "verify.reached",
                                   "detail": "no verdict: the host was unreachable or failed before verify"}]


def test_site_summary_rows_skips_and_gpu_less_sentence():
    nodes = {
        "lab-gpu-1": {"profile": "lab_gpu", "os": "Debian 12.12", "stages": ["host_prep", "verify"],
                      "reboot_required": True, "reboot_allowed": False, "verdict": "accepted"},
    }
    fleet = {"gpu_less_hosts": ["lab-gpu-1"]}
    text = acceptance.site_summary_markdown(nodes, ["host_prep", "cuda_toolkit", "verify"], ["host_prep", "verify"],
                                            {"cuda_toolkit": "no CUDA repository in the lab"}, fleet, check_mode=True,
                                            expected=["lab-gpu-1", "lab-gpu-2"])
    assert text.startswith("# Rollout summary (CHECK MODE: nothing was changed)")
    assert "| lab-gpu-1 | lab_gpu | Debian 12.12 | host_prep, verify | REQUIRED, not allowed" in text
    # The setting it names is the one the rollout role reads (rollout_allow_reboot, not site_*).
    assert "rerun with rollout_allow_reboot=true" in text
    assert "| lab-gpu-2 | - | - | - | - | NOT RUN" in text
    assert "Stages skipped by rollout_stages: cuda_toolkit (no CUDA repository in the lab)." in text
    assert "No GPU present on lab-gpu-1" in text
    assert "Not rolled out: lab-gpu-2." in text


NVSWITCH = dict(PROFILE, name="h100_capture", gpu_model="H100 80GB HBM3", gpu_count=8, gpu_memory_mib_min=80000,
                topology={}, burn_in={}, nvswitch=True, pcie_acs=False)


def h100_observed():
    """The public 8 x H100 SXM capture (Fabric Completed/Success, Gen5 x16 at idle) on an NVSwitch profile."""
    return {
        "reboot_required": False,
        "nvidia": facts_from_capture(fixture_text("public", "smi_q", "h100-sxm-8gpu-565-thamada.txt")),
        "fabric_manager": {"state": "active"},
        "cuda": acceptance.parse_cuda_context(json.dumps({"error": None, "devices": [
            {"index": i, "error": None} for i in range(8)]})),
    }


def nvswitch_failures(observed):
    return [(c["check"], c["detail"]) for c in failed(acceptance.evaluate(HOST, NVSWITCH, {}, observed))]


def test_healthy_h100_nvswitch_capture_passes_fabric_link_and_cuda():
    named = by_name(acceptance.evaluate(HOST, NVSWITCH, {}, h100_observed()))
    assert failed(named.values()) == []
    assert named["gpu.fabric"]["detail"] == "every GPU's fabric state is Completed, status Success"
    assert named["gpu.pcie_link"]["status"] == "pass"
    assert named["fabric.manager"]["status"] == "pass"
    assert named["cuda.context"]["detail"] == "a CUDA context was created on each of 8 GPU(s)"


def test_injected_fabric_state_not_completed_fails():
    observed = h100_observed()
    observed["nvidia"]["gpus"][3]["fabric"] = {"state": "In Progress", "status": None}
    assert nvswitch_failures(observed) == [("gpu.fabric", "GPU3 fabric state In Progress, status None (expected "
                                            "Completed/Success: is nvidia-fabricmanager running at the driver's "
                                            "exact version?)")]


def test_fabric_manager_inactive_fails():
    observed = h100_observed()
    observed["fabric_manager"] = {"state": "inactive"}
    assert [failure[0] for failure in nvswitch_failures(observed)] == ["fabric.manager"]


def test_injected_pcie_width_degraded_fails_and_idle_generation_does_not():
    observed = h100_observed()
    observed["nvidia"]["gpus"][5]["pcie"]["width"] = 8
    observed["nvidia"]["gpus"][2]["pcie"]["gen"] = 1
    checks = by_name(acceptance.evaluate(HOST, NVSWITCH, {}, observed))
    assert [c["check"] for c in failed(checks.values())] == ["gpu.pcie_link"]
    assert checks["gpu.pcie_link"]["detail"] == (
        "GPU5 runs at x8 of x16 (not judged, the GPU is idle or does not say: GPU2 Gen1 of Gen5)")


def test_busy_gpu_below_its_generation_and_a_capped_slot_fail():
    observed = h100_observed()
    observed["nvidia"]["gpus"][1].update(idle=False)
    observed["nvidia"]["gpus"][1]["pcie"]["gen"] = 3
    observed["nvidia"]["gpus"][6]["pcie"].update(gen=4, gen_max=4)
    detail = dict(nvswitch_failures(observed))["gpu.pcie_link"]
    assert detail == ("GPU1 runs at Gen3 of Gen5 while busy; GPU6 the system caps the link at Gen4, "
                      "the GPU supports Gen5")


def test_non_nvswitch_profile_skips_fabric_link_cuda_and_acs_checks():
    named = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, h200_observed()))
    assert [named[n]["status"] for n in ("gpu.fabric", "gpu.pcie_link", "fabric.manager", "cuda.context",
                                         "pcie.acs")] == ["n/a"] * 5


CUDA_802 = json.dumps({"error": None, "devices": [
    {"index": 0, "error": None},
    {"index": 1, "error": "CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet initialized"}]})


@pytest.mark.parametrize("text, expected", [
    (json.dumps({"error": None, "devices": [{"index": 0, "error": None}, {"index": 1, "error": None}]}),
     {"error": None, "devices": [{"index": 0, "ok": True, "error": None}, {"index": 1, "ok": True, "error": None}]}),
    (CUDA_802, {"error": None, "devices": [
        {"index": 0, "ok": True, "error": None},
        {"index": 1, "ok": False, "error": "CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet initialized"}]}),
    (json.dumps({"error": "libcuda.so.1 not found: libcuda.so.1: cannot open shared object file", "devices": []}),
     {"error": "libcuda.so.1 not found: libcuda.so.1: cannot open shared object file", "devices": []}),
])
def test_parse_cuda_context(text, expected):
    assert acceptance.parse_cuda_context(text) == expected


@pytest.mark.parametrize("text", ["", "Traceback (most recent call last):", "[]", '{"devices": [{"error": null}]}'])
def test_parse_cuda_context_refuses_other_output(text):
    with pytest.raises(acceptance.AcceptanceError):
        acceptance.parse_cuda_context(text)


def test_cuda_error_802_and_missing_libcuda_fail():
    observed = h100_observed()
    observed["cuda"] = acceptance.parse_cuda_context(CUDA_802)
    detail = dict(nvswitch_failures(observed))["cuda.context"]
    assert detail == ("GPU1: CUDA_ERROR_SYSTEM_NOT_READY (802): system not yet initialized; "
                      "CUDA sees 2 device(s), profile expects 8")
    observed["cuda"] = acceptance.parse_cuda_context(json.dumps({"error": "libcuda.so.1 not found", "devices": []}))
    assert dict(nvswitch_failures(observed))["cuda.context"] == "CUDA did not start: libcuda.so.1 not found"


@pytest.mark.parametrize("wanted, name, ok", [
    ("H20", "NVIDIA H200", False),
    ("H200", "NVIDIA H20", False),
    ("H20", "NVIDIA H20", True),
    ("H100", "NVIDIA H100 80GB HBM3", True),
    ("H100 80GB HBM3", "NVIDIA H100 80GB HBM3", True),
    ("H100 80GB HBM3", "NVIDIA H100", False),
    ("H100 80GB HBM3", "NVIDIA H100 PCIe", False),
    ("h200", "NVIDIA  H200", True),
    ("A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", True),
    ("A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", False),
    ("A100 80GB PCIe", "NVIDIA A100 80GB PCIe", True),
    ("A100", "NVIDIA A100-SXM4-80GB", True),
])
def test_gpu_model_matches_whole_words(wanted, name, ok):
    assert acceptance.model_matches(wanted, name) is ok


def test_h20_profile_refuses_the_h200_capture():
    checks = by_name(acceptance.evaluate(HOST, dict(PROFILE, gpu_model="H20"), LOCK, h200_observed()))
    assert checks["gpu.model"]["status"] == "fail"
    assert checks["gpu.model"]["detail"] == "GPU0 is NVIDIA H200, expected H20"


def test_reboot_pending_skips_gpu_checks_and_is_neither_pass_nor_failure():
    observed = h200_observed()
    observed["reboot_required"] = True
    # Installed, not loaded: the package listing still answers for the driver.
    observed["stack"]["driver"] = "580.159.04-0ubuntu1"
    checks = acceptance.evaluate(HOST, NVSWITCH, LOCK, observed)
    assert failed(checks) == []
    named = by_name(checks)
    assert named["reboot"]["status"] == "pending"
    assert named["reboot"]["ok"] is True
    assert named["reboot"]["detail"].startswith("reboot required: GPU checks skipped")
    for name in ("gpu.count", "gpu.model", "gpu.ecc_errors", "gpu.fabric", "gpu.pcie_link", "fabric.manager",
                 "cuda.context"):
        assert named[name]["status"] == "skipped", name
        assert named[name]["detail"] == "reboot required: GPU checks skipped"
    report = acceptance.fleet_report({HOST: checks, "ok-host": acceptance.evaluate(
        "ok-host", PROFILE, LOCK, dict(h200_observed(), reboot_required=False))})
    assert report["pending_hosts"] == [HOST]
    assert report["passed_hosts"] == ["ok-host"]
    assert report["failed_hosts"] == []
    assert report["counts"]["pending"] == 1
    fleet = acceptance.fleet_markdown(report)
    assert "2 host(s): 1 accepted, 1 pending a reboot, 0 failed" in fleet
    assert "Reboot pending on %s" % HOST in fleet
    host = acceptance.host_markdown(HOST, checks)
    assert "**PENDING REBOOT**" in host
    assert "| reboot | PENDING | reboot required: GPU checks skipped" in host


# --- gpu.xid: the NVRM Xid lines of this boot, in the driver's own format ---
XID_79 = "NVRM: Xid (PCI:0000:18:00): 79, pid=2011, name=python3, GPU has fallen off the bus.\n"
XID_13 = ("[ 812.4] NVRM: Xid (PCI:0000:00:06): 13, pid=3120, name=python3, Graphics SM Warp Exception on "
          "(GPC 0, TPC 0, SM 0): Out Of Range Address\n")
XID_43 = "NVRM: Xid (PCI:0000:00:06): 43, pid=3120, name=python3, Ch 00000008\n"


def xid_check(text, profile=None, **observed):
    profile = PROFILE if profile is None else profile
    observed = dict(h200_observed(), kernel_log={"text": text, "source": "journalctl -k -b"}, **observed)
    return by_name(acceptance.evaluate(HOST, profile, LOCK, observed))["gpu.xid"]


def test_fatal_xid_fails_naming_gpu_bus_code_and_meaning():
    check = xid_check(XID_13 + XID_79 + XID_79)
    assert check["status"] == "fail"
    assert check["detail"].startswith("kernel log since boot (journalctl -k -b): Xid 79 x2 on 0000:18:00: "
                                      "GPU has fallen off the bus (drain the node;")
    # The captured H200 sits at 00000000:00:06.0: its Xid lines name it as GPU0.
    assert ("reported, not failed (application or accepted codes): Xid 13 x1 on GPU0 (0000:00:06): "
            "Graphics engine exception") in check["detail"]


@pytest.mark.parametrize("code", [48, 63, 64, 74, 79, 94, 95, 119, 154])
def test_every_hardware_xid_class_fails(code):
    assert xid_check("NVRM: Xid (PCI:0000:00:06): %d, pid=1, name=x, text\n" % code)["status"] == "fail"


def test_unknown_xid_fails_unless_the_profile_accepts_it():
    line = "NVRM: Xid (PCI:0000:00:06): 999, pid=1, name=x, something new\n"
    assert "not in this table" in xid_check(line)["detail"]
    assert xid_check(line)["status"] == "fail"
    check = xid_check(line, dict(PROFILE, xid_ignore=[999]))
    assert check["status"] == "pass" and "Xid 999 x1 on GPU0 (0000:00:06)" in check["detail"]


def test_only_informational_xid_passes_with_a_note():
    check = xid_check(XID_13 + XID_43 + XID_43)
    assert check["status"] == "pass"
    assert check["detail"] == (
        "no actionable Xid since boot (journalctl -k -b); reported, not failed (application or accepted codes): "
        "Xid 43 x2 on GPU0 (0000:00:06): GPU stopped processing (channel reset by the driver); "
        "Xid 13 x1 on GPU0 (0000:00:06): Graphics engine exception")


def test_no_xid_passes_on_the_healthy_h200_kernel_log():
    check = xid_check(fixture_text(H200, "dmesg_nvrm.txt"))
    assert (check["status"], check["detail"]) == ("pass", "no Xid since boot (journalctl -k -b)")
    assert xid_check("")["status"] == "pass"


def test_xid_check_na_skipped_off_and_unreadable():
    lab = acceptance.evaluate("lab-gpu-1", LAB, {}, {"nvidia": NO_GPU, "kernel_log": {"text": XID_79}})
    assert (by_name(lab)["gpu.xid"]["status"], by_name(lab)["gpu.xid"]["detail"]) == (
        "n/a", "no GPU present (profile lab has no GPUs)")
    off = xid_check(XID_79, dict(PROFILE, xid=False))
    assert (off["status"], off["detail"]) == ("n/a", "profile h200_capture does not check Xid events (xid: false)")
    assert by_name(acceptance.evaluate(HOST, PROFILE, LOCK, h200_observed()))["gpu.xid"]["status"] == "skipped"
    unreadable = dict(h200_observed(), kernel_log={"error": "dmesg: read kernel buffer failed: Operation not permitted"})
    check = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, unreadable))["gpu.xid"]
    assert check["status"] == "fail"
    assert check["detail"] == "the kernel log could not be read: dmesg: read kernel buffer failed: Operation not permitted"


def test_xid_is_judged_while_a_reboot_is_pending():
    check = xid_check(XID_79, reboot_required=True)
    assert check["status"] == "fail" and "Xid 79 x1 on 0000:18:00" in check["detail"]


# --- storage.tang: LUKS, bound, and open since boot ---
TANG = {"device": "/dev/md/checkpoints", "luks": True, "bound": True, "servers": ["http://tang1"],
        "check_open": True, "name": "checkpoints", "mount_point": "/data"}
LSBLK_OPEN = "raid0 md127\ncrypt checkpoints\n"
LSBLK_LOCKED = "raid0 md127\n"


def tang_check(**tang):
    observed = {"nvidia": NO_GPU, "tang": dict(TANG, **tang)}
    return by_name(acceptance.evaluate("n1", LAB, {}, observed))["storage.tang"]


def test_locked_data_volume_fails_saying_so():
    check = tang_check(lsblk=LSBLK_LOCKED, mounted_from="")
    assert check["status"] == "fail"
    assert check["detail"] == (
        "/dev/md/checkpoints is LUKS and bound to Tang (http://tang1) but LOCKED: not opened since boot "
        "(is a Tang server reachable? `systemctl status systemd-cryptsetup@checkpoints`)")


def test_open_and_mounted_data_volume_passes():
    check = tang_check(lsblk=LSBLK_OPEN, mounted_from="/dev/mapper/checkpoints\n")
    assert (check["status"], check["detail"]) == (
        "pass", "/dev/md/checkpoints is LUKS and bound to Tang (http://tang1), open as /dev/mapper/checkpoints, "
                "mounted at /data")
    unmounted = tang_check(lsblk=LSBLK_OPEN, mount_point="", mounted_from="")
    assert unmounted["status"] == "pass" and unmounted["detail"].endswith("open as /dev/mapper/checkpoints")


def test_open_but_not_mounted_or_something_else_mounted_fails():
    check = tang_check(lsblk=LSBLK_OPEN, mounted_from="")
    assert check["status"] == "fail"
    assert check["detail"].endswith("open as /dev/mapper/checkpoints, but not mounted at /data "
                                    "(`systemctl status data.mount`)")
    other = tang_check(lsblk=LSBLK_OPEN, mounted_from="/dev/sda3")
    assert other["status"] == "fail" and other["detail"].endswith("but /dev/sda3 is mounted at /data instead")


def test_open_state_unreadable_fails_and_switched_off_passes_honestly():
    check = tang_check(lsblk=None, lsblk_error="lsblk: /dev/md/checkpoints: not a block device")
    assert check["status"] == "fail"
    assert check["detail"].endswith("but whether it is open could not be read: "
                                    "lsblk: /dev/md/checkpoints: not a block device")
    # The container lab: no device-mapper, the volume can never be opened there.
    container = tang_check(check_open=False, name="labdata", device="/dev/loop3")
    assert (container["status"], container["detail"]) == (
        "pass", "/dev/loop3 is LUKS and bound to Tang (http://tang1); whether it is open was not checked "
                "(verify_data_volume_open is false)")


def test_crypt_mappings_from_lsblk():
    assert acceptance.crypt_mappings("loop loop3\ncrypt labdata\n") == ["labdata"]
    assert acceptance.crypt_mappings(LSBLK_LOCKED) == []
    assert acceptance.crypt_mappings("") == []


# --- reboot: the loaded kernel module against the installed driver ---
PROC_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.163.01  Release Build  "
             "(dvs-builder@U16-I3-B03-4-3)  Tue Sep  2 19:52:33 UTC 2025\nGCC version:  gcc version 13.3.0\n")
PROC_PROPRIETARY = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu Sep 25 21:52:04 UTC 2025\n"


@pytest.mark.parametrize("text, version", [
    (PROC_OPEN, "550.163.01"),
    (PROC_PROPRIETARY, "580.95.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build\n", "580.95.05"),
    ("", None),
    ("garbage\n", None),
])
def test_loaded_driver_version(text, version):
    assert node_observation.loaded_driver_version(text) == version


def test_loaded_driver_version_from_the_h200_boot_log():
    assert node_observation.loaded_driver_version(fixture_text(H200, "dmesg_nvrm.txt")) == "580.159.04"


@pytest.mark.parametrize("text, installed, pending", [
    (PROC_OPEN, "580.95.05-1", True),           # upgraded, not rebooted
    (PROC_OPEN, "550.163.01-1", False),
    (PROC_OPEN, "1:550.163.01-0ubuntu1", False),
    (PROC_PROPRIETARY, "580.95.05-1.el9", False),
    (PROC_PROPRIETARY, "580.105.08-1.el9", True),
    ("", "580.95.05-1", None),                  # no module loaded: nothing to compare
    (PROC_OPEN, None, None),                    # no driver package found
])
def test_driver_reboot_pending_decision(text, installed, pending):
    assert node_observation.driver_reboot_pending(text, installed)["pending"] is pending


def test_loaded_module_not_the_installed_driver_is_a_pending_reboot_naming_both():
    mismatch = node_observation.driver_reboot_pending(PROC_OPEN, "580.95.05-1")
    assert mismatch == {"pending": True, "loaded": "550.163.01", "installed": "580.95.05-1"}
    observed = dict(h200_observed(), reboot_required=False, driver_mismatch=mismatch)
    observed["stack"]["driver"] = "580.95.05-1"
    checks = acceptance.evaluate(HOST, NVSWITCH, dict(LOCK, driver="580.95.05"), observed)
    named = by_name(checks)
    assert failed(checks) == []
    assert named["reboot"]["status"] == "pending"
    assert named["reboot"]["detail"] == (
        "reboot required: GPU checks skipped (the loaded NVIDIA kernel module is 550.163.01, the installed driver "
        "is 580.95.05-1: nvidia-smi and NVML would answer 'Driver/library version mismatch'). Reboot into the "
        "installed driver, then verify again")
    for name in ("gpu.count", "gpu.ecc_errors", "gpu.fabric", "fabric.manager", "cuda.context"):
        assert named[name]["status"] == "skipped", name
    assert acceptance.fleet_report({HOST: checks})["pending_hosts"] == [HOST]


# --- the pending-reboot record and what the controller adds to the node's observation ---
def test_recorded_reboot_names_its_reasons_and_skips_the_gpu_checks():
    observed = dict(h200_observed(), reboot_required=True,
                    reboot_reasons=["linux-image-6.8.0-90-generic", "libc6", "nvidia_driver: driver 580 installed"])
    named = by_name(acceptance.evaluate(HOST, NVSWITCH, LOCK, observed))
    assert named["reboot"]["status"] == "pending"
    assert named["reboot"]["detail"] == (
        "reboot required: GPU checks skipped (the host records a pending reboot: linux-image-6.8.0-90-generic; "
        "libc6; nvidia_driver: driver 580 installed). Reboot, then verify again")
    assert named["gpu.count"]["detail"] == "reboot required: GPU checks skipped"
    # Reasons alone (no /run/reboot-required) are not a pending reboot.
    named = by_name(acceptance.evaluate(HOST, PROFILE, LOCK, dict(h200_observed(), reboot_required=False,
                                                                  reboot_reasons=["libc6"])))
    assert named["reboot"] == dict(named["reboot"], status="pass", detail="no reboot pending")


def test_observed_turns_lspci_cuda_and_burn_in_into_what_is_judged():
    lspci = fixture_text("public", "lspci", "plx-pex8725-acs-on-heymeco.txt")
    burn = fixture_text("h200-ubuntu2404-driver580", "burn-in.json")
    result = acceptance.observed(
        {"stack": {"driver": "580.159.04"}, "lspci": {"text": lspci}},
        cuda_text='{"error": null, "devices": [{"index": 0, "error": null}]}',
        burn_in={"rc": 0, "stdout": burn, "stderr": ""})
    assert "lspci" not in result
    assert result["pcie_acs"] == acceptance.pcie_acs.judge(acceptance.pcie_acs.parse_lspci(lspci))
    assert "error" not in result["pcie_acs"]
    assert result["cuda"] == {"error": None, "devices": [{"index": 0, "ok": True, "error": None}]}
    assert result["burn_in"] == json.loads(burn)
    assert result["stack"] == {"driver": "580.159.04"}


def test_observed_keeps_failures_as_observations():
    result = acceptance.observed({"lspci": {"text": ""}}, cuda_text="Traceback (most recent call last):\n",
                                 burn_in={"rc": 2, "stdout": "", "stderr": "loading\ntorch is not installed\n"})
    assert result["pcie_acs"]["redirecting"] == [] and result["pcie_acs"]["error"]
    assert result["cuda"]["error"].startswith("cuda_context.py printed no JSON")
    assert result["burn_in"] == {"error": "torch is not installed"}
    assert acceptance.observed({}, burn_in={"rc": 1, "stdout": "", "stderr": ""}) == {"burn_in": {"error": "rc 1"}}
    assert acceptance.observed({}) == {}
    with pytest.raises(acceptance.AcceptanceError, match="node_observation module's dict"):
        acceptance.observed(None)
