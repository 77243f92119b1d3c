# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.persistence import (
    LEGACY_WARNING,
    Persistence,
    PersistenceError,
    diff,
    parse_persistence_csv,
    parse_systemctl_show,
    plan,
    select_gpus,
    service_status,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    UBUNTU_EXEC_START,
    FakeGpuHost,
    fixture_text,
)


def manager(host, systemctl=True):
    return Persistence(
        run=host,
        smi="/usr/bin/nvidia-smi",
        systemctl="/usr/bin/systemctl" if systemctl else None,
    )


def states(result, side):
    return [gpu[side] for gpu in result["gpus"]]


def test_parse_the_h200_query_csv_answer():
    # The same columns as the real capture's index/uuid/persistence_mode.
    header, line = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_query-gpu.csv").splitlines()
    fields = [field.strip() for field in header.split(",")]
    values = [value.strip() for value in line.split(",")]
    row = dict(zip(fields, values))
    csv = "%s, %s, %s\n" % (row["index"], row["uuid"], row["persistence_mode"])
    assert parse_persistence_csv(csv) == [
        {"index": 0, "uuid": "GPU-4fc604de-9030-742c-d69f-594418e871d5", "persistence": True}]


def test_parse_csv_variants():
    assert parse_persistence_csv("0, GPU-a, Disabled\r\n1, GPU-b, [N/A]\n\n") == [
        {"index": 0, "uuid": "GPU-a", "persistence": False},
        {"index": 1, "uuid": "GPU-b", "persistence": None},
    ]
    with pytest.raises(ValueError, match="unexpected nvidia-smi --query-gpu line"):
        parse_persistence_csv("No devices were found\n")


def test_parse_systemctl_show():
    props = parse_systemctl_show("LoadState=loaded\nActiveState=active\nUnitFileState=enabled\nExecStart=%s\n"
                                 % UBUNTU_EXEC_START)
    assert props["ExecStart"].startswith("{ path=/usr/bin/nvidia-persistenced ; argv[]=")
    assert service_status(props) == {
        "installed": True, "active": True, "enabled": True, "masked": False, "no_persistence_mode": True}
    assert service_status(parse_systemctl_show("LoadState=not-found\nActiveState=inactive\nUnitFileState=\n")) == {
        "installed": False, "active": False, "enabled": False, "masked": False, "no_persistence_mode": False}


GPUS = [
    {"index": 0, "uuid": "GPU-aaaa", "persistence": False},
    {"index": 1, "uuid": "GPU-bbbb", "persistence": True},
    {"index": 2, "uuid": "GPU-cccc", "persistence": False},
]


def test_select_gpus_by_index_and_uuid():
    assert select_gpus(GPUS, None) == GPUS
    assert select_gpus(GPUS, ["2", "gpu-AAAA", "0"]) == [GPUS[0], GPUS[2]]
    with pytest.raises(PersistenceError) as error:
        select_gpus(GPUS, ["7", "GPU-zzzz", "1"])
    assert str(error.value) == (
        "no GPU with index or UUID 7, GPU-zzzz; this host has 0 (GPU-aaaa), 1 (GPU-bbbb), 2 (GPU-cccc)")


SERVICE_OFF = {"installed": True, "active": False, "enabled": False, "masked": False, "no_persistence_mode": False}


def test_plan_daemon_start_enables_every_gpu():
    assert plan(GPUS, GPUS, "enabled", "daemon", SERVICE_OFF, True) == (
        ["enable", "start"], [], {0: True, 1: True, 2: True})


def test_plan_daemon_with_no_persistence_flag_switches_gpus_through_it():
    service = dict(SERVICE_OFF, no_persistence_mode=True)
    assert plan(GPUS, GPUS, "enabled", "daemon", service, True) == (
        ["enable", "start"], [0, 2], {0: True, 1: True, 2: True})


def test_plan_daemon_disable_whole_host_and_subset():
    service = dict(SERVICE_OFF, active=True, enabled=True)
    assert plan(GPUS, GPUS, "disabled", "daemon", service, True) == (
        ["stop", "disable"], [], {0: False, 1: False, 2: False})
    assert plan(GPUS, [GPUS[1]], "disabled", "daemon", service, False) == ([], [1], {0: False, 1: False, 2: False})


def test_plan_legacy():
    assert plan(GPUS, GPUS, "enabled", "legacy", None, True) == ([], [0, 2], {0: True, 1: True, 2: True})


def test_plan_refuses_a_missing_or_masked_unit():
    with pytest.raises(PersistenceError, match="not installed"):
        plan(GPUS, GPUS, "enabled", "daemon", dict(SERVICE_OFF, installed=False), True)
    with pytest.raises(PersistenceError, match="masked"):
        plan(GPUS, GPUS, "enabled", "daemon", dict(SERVICE_OFF, masked=True), True)


def test_enable_through_the_daemon_then_nothing_to_do():
    host = FakeGpuHost(persistence=(False, False))
    first = manager(host).ensure("enabled")
    assert host.changes() == ["systemctl enable nvidia-persistenced", "systemctl start nvidia-persistenced"]
    assert first["changed"] is True
    assert first["commands"] == ["enable nvidia-persistenced", "start nvidia-persistenced"]
    assert (states(first, "before"), states(first, "after")) == (["disabled"] * 2, ["enabled"] * 2)
    assert first["service"] == {
        "name": "nvidia-persistenced",
        "before": {"active": False, "enabled": False},
        "after": {"active": True, "enabled": True},
    }
    assert host.dmesg == []

    host.commands = []
    second = manager(host).ensure("enabled")
    assert second["changed"] is False
    assert second["commands"] == []
    assert host.changes() == []
    assert states(second, "before") == states(second, "after") == ["enabled", "enabled"]


def test_check_mode_predicts_and_changes_nothing():
    host = FakeGpuHost(persistence=(False, True))
    result = manager(host).ensure("enabled", check_mode=True)
    assert host.changes() == []
    assert host.persistence() == [False, True]
    assert result["changed"] is True
    assert result["commands"] == ["enable nvidia-persistenced", "start nvidia-persistenced"]
    assert states(result, "after") == ["enabled", "enabled"]
    assert result["service"]["after"] == {"active": True, "enabled": True}
    assert diff(result) == {
        "before": {
            "gpus": {"0 (GPU-00000000-0000-0000-0000-000000000000)": "disabled",
                     "1 (GPU-00000001-0000-0000-0000-000000000001)": "enabled"},
            "service": "nvidia-persistenced: inactive, disabled",
        },
        "after": {
            "gpus": {"0 (GPU-00000000-0000-0000-0000-000000000000)": "enabled",
                     "1 (GPU-00000001-0000-0000-0000-000000000001)": "enabled"},
            "service": "nvidia-persistenced: active, enabled",
        },
    }


def test_ubuntu_unit_with_no_persistence_mode():
    host = FakeGpuHost(persistence=(False, False), exec_start=UBUNTU_EXEC_START)
    result = manager(host).ensure("enabled")
    assert host.changes() == [
        "systemctl enable nvidia-persistenced",
        "systemctl start nvidia-persistenced",
        "nvidia-smi -i 0 -pm 1",
        "nvidia-smi -i 1 -pm 1",
    ]
    assert host.persistence() == [True, True]
    # Served by the running daemon, not the deprecated driver mode.
    assert host.dmesg == []
    assert any("--no-persistence-mode" in warning for warning in result["warnings"])


def test_disable_whole_host_stops_the_daemon():
    host = FakeGpuHost(persistence=(False, False))
    manager(host).ensure("enabled")
    host.commands = []
    result = manager(host).ensure("disabled")
    assert host.changes() == ["systemctl stop nvidia-persistenced", "systemctl disable nvidia-persistenced"]
    assert host.persistence() == [False, False]
    assert (host.active, host.enabled) == (False, False)
    assert states(result, "after") == ["disabled", "disabled"]
    host.commands = []
    assert manager(host).ensure("disabled")["changed"] is False


def test_disable_one_gpu_keeps_the_daemon_and_warns_about_the_next_boot():
    host = FakeGpuHost(persistence=(True, True), active=True, enabled=True)
    result = manager(host).ensure("disabled", wanted=["1"])
    assert host.changes() == ["nvidia-smi -i 1 -pm 0"]
    assert host.persistence() == [True, False]
    assert [gpu["target"] for gpu in result["gpus"]] == [False, True]
    assert any("next boot" in warning for warning in result["warnings"])


def test_legacy_switches_each_gpu_and_warns():
    host = FakeGpuHost(persistence=(False, True))
    result = manager(host, systemctl=False).ensure("enabled", method="legacy")
    assert host.changes() == ["nvidia-smi -i 0 -pm 1"]
    assert result["service"] is None
    assert result["warnings"] == [LEGACY_WARNING]
    assert len(host.dmesg) == 1
    host.commands = []
    again = manager(host, systemctl=False).ensure("enabled", method="legacy")
    assert again["changed"] is False
    assert again["warnings"] == [LEGACY_WARNING]


def test_legacy_check_mode():
    host = FakeGpuHost(persistence=(True, False, False))
    result = manager(host, systemctl=False).ensure("disabled", wanted=["0", "2"], method="legacy", check_mode=True)
    assert result["commands"] == ["nvidia-smi -i 0 -pm 0"]
    assert states(result, "after") == ["disabled", "disabled", "disabled"]
    assert host.changes() == []


@pytest.mark.parametrize("driver, message", [
    ("not-loaded", "the NVIDIA driver is not loaded"),
    ("no-gpu", "no NVIDIA GPU found"),
])
def test_no_driver_or_no_gpu_fails_clearly(driver, message):
    with pytest.raises(PersistenceError, match=message):
        manager(FakeGpuHost(driver=driver)).ensure("enabled")


def test_no_nvidia_smi_or_no_systemd():
    with pytest.raises(PersistenceError, match="nvidia-smi not found"):
        Persistence(run=FakeGpuHost(), smi=None).ensure("enabled")
    with pytest.raises(PersistenceError, match="systemctl not found"):
        manager(FakeGpuHost(), systemctl=False).ensure("enabled")


def test_missing_unit_fails_for_enabled_but_not_for_disabled():
    with pytest.raises(PersistenceError, match="unit is not installed"):
        manager(FakeGpuHost(unit="not-found")).ensure("enabled")
    host = FakeGpuHost(persistence=(True,), unit="not-found")
    manager(host).ensure("disabled")
    assert host.changes() == ["nvidia-smi -i 0 -pm 0"]


def test_unsupported_gpu_cannot_be_switched():
    host = FakeGpuHost(persistence=(None,), active=True, enabled=True)
    with pytest.raises(PersistenceError, match=r"GPU 0: no persistence mode reported \(N/A\)"):
        manager(host).ensure("enabled")
    assert host.changes() == []


def test_state_not_reached_is_an_error():
    host = FakeGpuHost(persistence=(False,), active=True, enabled=True)

    def refuse(argv, environ_update=None):
        if "-pm" in argv:
            host.commands.append(argv)
            return 0, "", ""
        return host(argv)

    with pytest.raises(PersistenceError, match="persistence is still not enabled on GPU 0 after nvidia-smi -i 0 -pm 1"):
        Persistence(run=refuse, smi="/usr/bin/nvidia-smi", systemctl="/usr/bin/systemctl").ensure("enabled")


def test_failing_command_is_reported_with_its_output():
    host = FakeGpuHost(persistence=(False,), active=True, enabled=True, exec_start=UBUNTU_EXEC_START, root=False)
    with pytest.raises(PersistenceError) as error:
        manager(host).ensure("enabled")
    assert str(error.value) == (
        "nvidia-smi -i 0 -pm 1 failed (rc=4): Unable to set persistence mode for GPU 00000000:18:00.0: "
        "Insufficient Permissions Terminating early due to previous errors.")


def test_unknown_gpu_is_rejected_before_anything_changes():
    host = FakeGpuHost(persistence=(False,))
    with pytest.raises(PersistenceError, match="no GPU with index or UUID 3"):
        manager(host).ensure("enabled", wanted=["3"])
    assert host.changes() == []


def test_bad_state_or_method():
    with pytest.raises(PersistenceError, match="state must be"):
        manager(FakeGpuHost()).ensure("on")
    with pytest.raises(PersistenceError, match="method must be"):
        manager(FakeGpuHost()).ensure("enabled", method="udev")
