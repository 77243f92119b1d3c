# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu_diagnostics module end to end over faked commands: refusal, check mode, DCGM, own checks."""

from ansible_collections.gpucloud.fleet.plugins.module_utils import gpu_diagnostics as diag
from ansible_collections.gpucloud.fleet.plugins.modules import gpu_diagnostics
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    FakeCommands,
    fixture_text,
    run_module,
)

SMI = "/usr/bin/nvidia-smi"
DCGMI = "/usr/bin/dcgmi"
UUID0 = "GPU-00000000-1111-2222-3333-444444444444"


def table(apps="", dcgm=None):
    answers = {
        (SMI,) + tuple(diag.SMI_GPUS[1:]): (0, "0, %s\n" % UUID0, ""),
        (SMI,) + tuple(diag.SMI_APPS[1:]): (0, apps, ""),
    }
    if dcgm is not None:
        answers[(DCGMI, "discovery", "-l")] = (0, "1 GPU found.\n", "")
        answers[(DCGMI, "diag", "-r", "1", "-j")] = dcgm
    return FakeCommands(answers)


def test_busy_gpu_fails_the_module_naming_gpu_and_pid():
    commands = table(apps="%s, 31337, python3\n" % UUID0, dcgm=(0, "", ""))
    result = run_module(gpu_diagnostics, {}, commands=commands)
    assert result["failed"] and "GPU 0: PID 31337 (python3)" in result["msg"]
    assert result["refused"] is True and result["busy"] == [{"gpu": 0, "pid": 31337, "name": "python3"}]
    assert not any(argv[1:2] == ["diag"] for argv, _env in commands.calls)


def test_check_mode_names_the_dcgm_command_and_runs_it_not():
    commands = table(dcgm=(0, "", ""))
    result = run_module(gpu_diagnostics, {}, check_mode=True, commands=commands)
    assert (result["ran"], result["command"], result["source"]) == (False, ["dcgmi", "diag", "-r", "1", "-j"], "dcgm")
    assert not any(argv[1:2] == ["diag"] for argv, _env in commands.calls)
    assert all(env.get("LC_ALL") == "C" for _argv, env in commands.calls)


def test_dcgm_failure_fails_nothing_but_reports_it():
    commands = table(dcgm=(226, fixture_text("dcgm_diag", "dcgm4_gb10_r1.json"), ""))
    result = run_module(gpu_diagnostics, {}, commands=commands)
    assert not result.get("failed") and result["changed"] is False
    assert result["passed"] is False and result["failures"][0]["test"] == "software"


def test_without_dcgmi_the_own_checks_read_the_gpus():
    commands = table()
    commands.table[(SMI, "-q", "-x")] = (0, fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"), "")
    commands.table[(SMI, "--query-gpu=index,compute_cap", "--format=csv,noheader")] = (0, "0, 9.0\n", "")
    commands.table["/usr/bin/dpkg-query"] = (0, "", "")
    result = run_module(gpu_diagnostics, {"profile": {"name": "h200", "gpu_count": 1}}, commands=commands)
    assert not result.get("failed"), result
    assert result["source"] == "own"
    assert result["source_reason"] == "dcgmi is not installed: the collection's own checks run instead"
    assert result["observation"]["nvidia"]["gpu_count"] == 1
    assert result["checks"] == list(diag.QUICK_CHECKS)
