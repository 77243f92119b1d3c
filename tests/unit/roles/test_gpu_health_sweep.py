# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node's quick health sweep (roles/gpu_monitoring/files/health_sweep.py) and the
collector program's --health-sweep mode, on captured nvidia-smi output and the collector's
Xid state."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.roles.test_gpu_metrics import (
    COLLECTOR,
    GPU_METRICS,
    H200_BUS,
    H200_CSV,
    ROLE,
    collector_argv,
    gpu_metrics,
    parse_exposition,
    promtool_check,
)

sys.path.insert(0, os.path.join(ROLE, "files"))
import health_sweep  # noqa: E402  pylint: disable=wrong-import-position

HGX_CSV = open(os.path.join(ROLE, "files", "replay", "nvsim-h200-hgx8-query-gpu.csv"), encoding="utf-8").read()
NOW = 1764600000.0
BOOT = "3f7c1a52-0000-4000-8000-000000000001"


def replay(text):
    return gpu_metrics.read_replay(text, "replay.csv")


def families_of(text):
    families = parse_exposition(text)
    promtool_check(text)
    return families


def checks(families):
    return dict(((labels["check"], labels["gpu"]), value)
                for labels, value in families[health_sweep.CHECK_OK]["samples"])


def xid_state(counts, boot_id=BOOT, gpus=None):
    return {"boot_id": boot_id, "events": {"counts": counts, "gpus": gpus or {}}}


def test_a_healthy_eight_gpu_node_passes_every_check():
    state, text = health_sweep.sweep(replay(HGX_CSV), NOW, expected_gpus=8, xid_state=xid_state([]), boot_id=BOOT)
    families = families_of(text)
    ok = checks(families)
    assert ok[("nvml", "all")] == 1 and ok[("gpu_count", "all")] == 1
    assert [ok[("ecc_uncorrectable_volatile", str(i))] for i in range(8)] == [1] * 8
    assert [ok[("xid_fatal", str(i))] for i in range(8)] == [1] * 8
    assert set(ok.values()) == {1}
    # The replayed capture has no row remapper columns: that check is left out, not passed.
    assert not [key for key in ok if key[0] == "row_remap"]
    passes = dict(((labels["check"], labels["gpu"]), value) for labels, value in families[health_sweep.LAST_PASS]["samples"])
    assert set(passes) == set(ok) and set(passes.values()) == {NOW}
    assert families[health_sweep.SWEEP]["samples"] == [({}, NOW)]
    assert families[health_sweep.SKIPPED]["samples"] == [({"reason": "busy"}, 0.0)]
    assert state["skipped"] is None


def test_a_missing_gpu_and_uncorrectable_ecc_fail_their_checks_and_keep_the_last_pass():
    state, _text = health_sweep.sweep(replay(HGX_CSV), NOW, expected_gpus=8, boot_id=BOOT)
    lines = HGX_CSV.splitlines()
    broken = lines[0] + "\n" + lines[1].rsplit(",", 2)[0] + ", 2, 0\n" + "\n".join(lines[2:8]) + "\n"
    _state, text = health_sweep.sweep(replay(broken), NOW + 900, state=state, expected_gpus=8, boot_id=BOOT)
    families = families_of(text)
    ok = checks(families)
    assert ok[("gpu_count", "all")] == 0 and ok[("ecc_uncorrectable_volatile", "0")] == 0
    assert ok[("ecc_uncorrectable_volatile", "1")] == 1
    passes = dict(((labels["check"], labels["gpu"]), value) for labels, value in families[health_sweep.LAST_PASS]["samples"])
    assert passes[("gpu_count", "all")] == NOW and passes[("ecc_uncorrectable_volatile", "0")] == NOW
    assert passes[("ecc_uncorrectable_volatile", "1")] == NOW + 900
    assert "# gpucloud-health-sweep: gpu_count failed on gpu all: 7 GPUs, the profile expects 8" in text


def test_row_remap_pending_or_failed_fails_the_gpu():
    reading = gpu_metrics.sample("nvml", driver_version="580.95.05", gpus=[
        gpu_metrics.gpu_reading(0, "GPU-a", "H200", "00000000:18:00.0", {"row_remap_pending": 0, "row_remap_failure": 0}),
        gpu_metrics.gpu_reading(1, "GPU-b", "H200", "00000000:2A:00.0", {"row_remap_pending": 1, "row_remap_failure": 0}),
        gpu_metrics.gpu_reading(2, "GPU-c", "H200", "00000000:3A:00.0", {"row_remap_pending": 0, "row_remap_failure": 1}),
    ])
    results = health_sweep.quick_checks(reading)
    assert [(check, gpu, ok) for check, gpu, ok, _detail in results] == [
        ("nvml", "all", True), ("row_remap", "0", True), ("row_remap", "1", False), ("row_remap", "2", False)]


def test_no_driver_fails_nvml_and_judges_nothing_else():
    reading = gpu_metrics.read_replay("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                      "Make sure that the latest NVIDIA driver is installed and running.\n")
    results = health_sweep.quick_checks(reading, expected_gpus=8)
    assert [(check, gpu, ok) for check, gpu, ok, _detail in results] == [("nvml", "all", False)]


def test_a_busy_node_is_skipped_and_keeps_its_last_results():
    state, _text = health_sweep.sweep(replay(H200_CSV), NOW, expected_gpus=1, boot_id=BOOT)
    busy = replay(H200_CSV)
    busy["gpus"][0]["values"]["compute_processes"] = 2
    # The ECC column says 3 now: a sweep that ran would fail it; a skipped one judges nothing.
    busy["gpus"][0]["values"]["ecc_dbe_vol"] = 3
    skipped, text = health_sweep.sweep(busy, NOW + 900, state=state, expected_gpus=1, boot_id=BOOT)
    families = families_of(text)
    assert families[health_sweep.SKIPPED]["samples"] == [({"reason": "busy"}, 1.0)]
    assert families[health_sweep.SWEEP]["samples"] == [({}, NOW + 900)]
    assert set(checks(families).values()) == {1}
    assert set(value for _labels, value in families[health_sweep.LAST_PASS]["samples"]) == {NOW}
    assert "# gpucloud-health-sweep: skipped, compute processes on GPU 0" in text
    assert skipped["results"] == state["results"]


def test_a_new_fatal_xid_fails_one_sweep_an_app_xid_none_and_another_boot_is_not_judged():
    bus = "00000000:18:00.0"
    collector = xid_state([[bus, 79, 1], ["00000000:2A:00.0", 13, 4]], gpus={bus: "0", "00000000:2A:00.0": "1"})
    state, text = health_sweep.sweep(replay(HGX_CSV), NOW, xid_state=collector, boot_id=BOOT)
    ok = checks(families_of(text))
    assert ok[("xid_fatal", "0")] == 0 and ok[("xid_fatal", "1")] == 1
    assert "xid_fatal failed on gpu 0: new Xid 79 on 00000000:18:00.0" in text
    # The same count at the next sweep is not new; a second 79 is.
    state, text = health_sweep.sweep(replay(HGX_CSV), NOW + 900, state=state, xid_state=collector, boot_id=BOOT)
    assert checks(families_of(text))[("xid_fatal", "0")] == 1
    collector = xid_state([[bus, 79, 2], ["00000000:2A:00.0", 13, 4]], gpus={bus: "0"})
    state, text = health_sweep.sweep(replay(HGX_CSV), NOW + 1800, state=state, xid_state=collector, boot_id=BOOT)
    assert checks(families_of(text))[("xid_fatal", "0")] == 0
    # A GPU that fell off the bus (gone from the sample) is judged by its bus id from the counts.
    gone = xid_state([["00000000:99:00.0", 79, 1]])
    _state, text = health_sweep.sweep(replay(H200_CSV), NOW, xid_state=gone, boot_id=BOOT)
    assert checks(families_of(text))[("xid_fatal", "00000000:99:00.0")] == 0
    # The collector's state of another boot says nothing about this one.
    _state, text = health_sweep.sweep(replay(H200_CSV), NOW, xid_state=xid_state([[H200_BUS, 79, 1]], boot_id="old"),
                                      boot_id=BOOT)
    assert not [key for key in checks(families_of(text)) if key[0] == "xid_fatal"]


@pytest.fixture
def installed(tmp_path):
    lib = tmp_path / "lib"
    package = lib / "ansible_collections" / "gpucloud" / "fleet" / "plugins" / "module_utils"
    package.mkdir(parents=True)
    shutil.copy(GPU_METRICS, str(lib / "gpu_metrics.py"))
    shutil.copy(os.path.join(ROLE, "files", "health_sweep.py"), str(lib / "health_sweep.py"))
    root = os.path.dirname(os.path.dirname(ROLE))
    for name in ("nvml.py", "smi_xml.py", "xid.py"):
        shutil.copy(os.path.join(root, "plugins", "module_utils", name), str(package / name))
    textfiles = tmp_path / "textfile"
    textfiles.mkdir()
    return {"lib": str(lib), "dir": textfiles, "prom": str(textfiles / "gpucloud-health.prom"), "tmp": tmp_path}


def test_the_collector_program_runs_one_sweep_from_the_xid_state_it_keeps(installed):
    kernel_log = installed["tmp"] / "kern.log"
    kernel_log.write_text("NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    boot_id = installed["tmp"] / "boot_id"
    boot_id.write_text(BOOT + "\n")
    replay_file = os.path.join(ROLE, "files", "replay", "nvsim-h200-hgx8-query-gpu.csv")
    common = ["--source", "replay", "--replay-file", replay_file, "--xid-state", str(installed["tmp"] / "xid.json"),
              "--boot-id-file", str(boot_id)]
    collect = collector_argv(installed, "--once", "--kernel-log", str(kernel_log), *common)
    collect[collect.index("--textfile") + 1] = str(installed["dir"] / "gpucloud-gpu.prom")
    sweep = [sys.executable, "-I", "-B", COLLECTOR, "--lib-dir", installed["lib"], "--textfile", installed["prom"],
             "--health-sweep", "--expected-gpus", "8", "--sweep-state", str(installed["tmp"] / "sweep.json")] + common
    for argv in (collect, sweep):
        run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                             timeout=60, check=False)
        assert run.returncode == 0, run.stderr
    assert run.stderr == "health sweep: failed: xid_fatal on gpu 0\n"
    with open(installed["prom"]) as handle:
        ok = checks(families_of(handle.read()))
    assert ok[("xid_fatal", "0")] == 0 and ok[("gpu_count", "all")] == 1 and ok[("nvml", "all")] == 1
    assert json.loads((installed["tmp"] / "sweep.json").read_text())["xid_seen"] == {"00000000:18:00.0": {"79": 1}}
