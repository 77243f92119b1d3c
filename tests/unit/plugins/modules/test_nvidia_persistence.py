# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import nvidia_persistence
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    UBUNTU_EXEC_START,
    FakeGpuHost,
    run_module,
)

BINARIES = ("nvidia-smi", "systemctl")


def run(host, args, check_mode=False, binaries=BINARIES):
    return run_module(nvidia_persistence, args, check_mode=check_mode, commands=host, binaries=binaries)


def test_enable_then_second_run_changes_nothing():
    host = FakeGpuHost(persistence=(False, False))
    first = run(host, {"state": "enabled"})
    assert first["changed"] is True
    assert host.changes() == ["systemctl enable nvidia-persistenced", "systemctl start nvidia-persistenced"]
    assert host.persistence() == [True, True]
    assert first["diff"]["before"]["service"] == "nvidia-persistenced: inactive, disabled"
    assert first["diff"]["after"]["service"] == "nvidia-persistenced: active, enabled"
    assert first["warnings"] == []

    host.commands = []
    second = run(host, {"state": "enabled"})
    assert second["changed"] is False
    assert host.changes() == []
    assert second["diff"]["before"] == second["diff"]["after"]


def test_check_mode_reports_per_gpu_and_changes_nothing():
    host = FakeGpuHost(persistence=(True, False, False), exec_start=UBUNTU_EXEC_START)
    result = run(host, {"state": "enabled"}, check_mode=True)
    assert result["changed"] is True
    assert host.changes() == []
    assert host.persistence() == [True, False, False]
    assert [(gpu["index"], gpu["before"], gpu["after"]) for gpu in result["gpus"]] == [
        (0, "enabled", "enabled"), (1, "disabled", "enabled"), (2, "disabled", "enabled")]
    assert result["commands"] == [
        "enable nvidia-persistenced",
        "start nvidia-persistenced",
        "nvidia-smi -i 1 -pm 1",
        "nvidia-smi -i 2 -pm 1",
    ]
    assert result["diff"]["after"]["gpus"]["2 (GPU-00000002-0000-0000-0000-000000000002)"] == "enabled"
    assert any("--no-persistence-mode" in warning for warning in result["warnings"])


def test_check_mode_on_a_correct_host_is_unchanged():
    host = FakeGpuHost(persistence=(True,), active=True, enabled=True)
    result = run(host, {}, check_mode=True)
    assert (result["changed"], result["commands"]) == (False, [])


def test_check_mode_then_real_run_agree():
    planned = run(FakeGpuHost(persistence=(False, True), exec_start=UBUNTU_EXEC_START), {}, check_mode=True)
    host = FakeGpuHost(persistence=(False, True), exec_start=UBUNTU_EXEC_START)
    done = run(host, {})
    assert planned["gpus"] == done["gpus"]
    assert planned["commands"] == done["commands"]
    assert planned["diff"] == done["diff"]


def test_disable_selected_gpus_by_uuid_and_index():
    host = FakeGpuHost(persistence=(True, True, True), active=True, enabled=True)
    result = run(host, {"state": "disabled", "gpus": ["GPU-00000002-0000-0000-0000-000000000002", "0"]})
    assert host.changes() == ["nvidia-smi -i 0 -pm 0", "nvidia-smi -i 2 -pm 0"]
    assert host.persistence() == [False, True, False]
    assert [gpu["target"] for gpu in result["gpus"]] == [True, False, True]
    assert result["warnings"] and "next boot" in result["warnings"][0]
    host.commands = []
    # Indexes may be given as numbers too.
    assert run(host, {"state": "disabled", "gpus": [0, 2]})["changed"] is False


def test_legacy_method_warns_and_needs_no_systemd():
    host = FakeGpuHost(persistence=(False,))
    result = run(host, {"method": "legacy"}, binaries=("nvidia-smi",))
    assert host.changes() == ["nvidia-smi -i 0 -pm 1"]
    assert result["service"] is None
    assert "diff" in result and "service" not in result["diff"]["after"]
    assert len(result["warnings"]) == 1 and "deprecated" in result["warnings"][0]
    assert "nvidia-persistenced" in result["warnings"][0]


@pytest.mark.parametrize("host, message", [
    (FakeGpuHost(driver="not-loaded"), "the NVIDIA driver is not loaded (nvidia-smi rc=9)"),
    (FakeGpuHost(driver="no-gpu"), "no NVIDIA GPU found"),
    (FakeGpuHost(unit="not-found"), "the nvidia-persistenced unit is not installed"),
])
def test_clear_failures(host, message):
    result = run(host, {})
    assert result["failed"] is True
    assert result["msg"].startswith(message)
    assert host.changes() == []


def test_no_driver_installed():
    result = run(FakeGpuHost(), {}, binaries=("systemctl",))
    assert result["msg"] == "nvidia-smi not found: the NVIDIA driver is not installed"


def test_no_systemd():
    result = run(FakeGpuHost(), {}, binaries=("nvidia-smi",))
    assert result["msg"] == "systemctl not found: method=daemon needs systemd; use method=legacy"


def test_permission_denied_is_reported_with_what_ran():
    host = FakeGpuHost(persistence=(False,), root=False)
    result = run(host, {})
    assert result["failed"] is True
    assert result["msg"] == ("systemctl enable nvidia-persistenced failed (rc=1): "
                             "Failed to enable nvidia-persistenced: Access denied")
    assert result["commands"] == ["enable nvidia-persistenced"]


def test_custom_unit_name():
    host = FakeGpuHost(persistence=(False,))
    result = run(host, {"service_name": "nvidia-persistenced-custom"})
    assert host.changes() == ["systemctl enable nvidia-persistenced-custom", "systemctl start nvidia-persistenced-custom"]
    assert result["service"]["name"] == "nvidia-persistenced-custom"


@pytest.mark.parametrize("args, message", [
    ({"state": "on"}, "value of state must be one of: enabled, disabled, got: on"),
    ({"method": "nvidia-smi"}, "value of method must be one of: daemon, legacy, got: nvidia-smi"),
    ({"gpus": ["7"]}, "no GPU with index or UUID 7; this host has 0 (GPU-00000000-0000-0000-0000-000000000000)"),
    ({"persistence": True}, "Unsupported parameters"),
])
def test_bad_arguments(args, message):
    host = FakeGpuHost(persistence=(False,))
    result = run(host, args)
    assert result["failed"] is True
    assert message in result["msg"]
    assert host.changes() == []


def test_every_command_runs_the_found_program_in_the_c_locale():
    host = FakeGpuHost(persistence=(False,))
    seen = []

    def record(argv, environ_update):
        seen.append((argv[0], environ_update))
        return host(argv, environ_update)

    run(record, {"state": "enabled"})
    assert {program for program, _env in seen} == {"/usr/bin/nvidia-smi", "/usr/bin/systemctl"}
    assert all(env == {"LC_ALL": "C"} for _program, env in seen)
