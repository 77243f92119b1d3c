# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvsim's busy fault: nvidia-smi --query-compute-apps lists a compute process on the GPU, as gpu_diagnostics reads it."""

import os
import sys

from ansible_collections.gpucloud.fleet.plugins.module_utils import gpu_diagnostics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "nvsim"))

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_fault  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_smi  # noqa: E402  pylint: disable=wrong-import-position


def smi(argv, faults):
    state = nvsim_smi.empty_state("580.95.05")
    state.update(module_version="580.95.05", profile="h200-hgx8", persistenced=True, faults=faults)
    data = {}
    for key in ("xml", "q", "table", "topo_legend"):
        path = nvsim_smi.PROFILES["h200-hgx8"][key]
        with open(os.path.join(ROOT, "tests", "fixtures", build_repo.CAPTURES[path]), encoding="utf-8") as handle:
            data[key] = handle.read()
    return nvsim_smi.answer(argv, state, data)


def test_an_idle_gpu_lists_no_process():
    out = smi(gpu_diagnostics.SMI_APPS[1:], {})
    assert (out["rc"], out["stdout"]) == (0, "")


def test_busy_gpu_is_refused_by_the_modules_parsers():
    faults = nvsim_fault.apply({}, "busy", gpu=3, pid=31337, name="python3 train.py")
    uuids = gpu_diagnostics.parse_gpu_uuids(smi(gpu_diagnostics.SMI_GPUS[1:], faults)["stdout"])
    apps = gpu_diagnostics.parse_compute_apps(smi(gpu_diagnostics.SMI_APPS[1:], faults)["stdout"])
    assert gpu_diagnostics.busy_gpus(apps, uuids) == [{"gpu": 3, "pid": 31337, "name": "python3 train.py"}]
    assert gpu_diagnostics.busy_gpus(apps, uuids, [0, 1]) == []
    assert nvsim_fault.apply(faults, "clear") == {}


def test_header_units_and_selection():
    faults = nvsim_fault.apply(nvsim_fault.apply({}, "busy", gpu=1), "busy", gpu=1, pid=7)
    out = smi(["--query-compute-apps=pid,used_memory", "--format=csv"], faults)["stdout"].splitlines()
    assert out == ["pid, used_gpu_memory [MiB]", "4242, 1024 MiB", "7, 1024 MiB"]
    assert smi(["-i", "0", "--query-compute-apps=pid", "--format=csv,noheader"], faults)["stdout"] == ""
    assert smi(["--query-compute-apps=bogus", "--format=csv"], faults)["rc"] == nvsim_smi.EXIT_INVALID_ARGUMENT


def test_the_command_line_takes_busy_options():
    args = nvsim_fault.parse_args(["busy", "--gpu", "2", "--pid", "99", "--name", "x"])
    assert (args.command, args.gpu, args.pid, args.name) == ("busy", 2, 99, "x")
