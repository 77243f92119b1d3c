# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import types

import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import disk_preflight
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    FakeCommands,
    fixture_text,
    run_module,
)

WIPEFS = "/usr/sbin/wipefs"


def capture(name):
    return fixture_text("disk_encryption", name)


def commands(answers):
    return FakeCommands(dict(((WIPEFS, "--json", device), answer) for device, answer in answers.items()))


@pytest.fixture
def md_exists(monkeypatch):
    """Whether /dev/md/<name> exists, as the module sees it."""
    present = set()
    fake_os = types.SimpleNamespace(path=types.SimpleNamespace(lexists=lambda path: path in present))
    monkeypatch.setattr(disk_preflight, "os", fake_os)
    return present


@pytest.mark.parametrize("check_mode", [False, True])
def test_reads_every_device_and_changes_nothing(check_mode, md_exists):
    fake = commands({
        "/dev/loop1": (0, capture("wipefs-json-luks2.json"), ""),
        "/dev/nvme0n1": (0, capture("wipefs-json-md-member.json"), ""),
        "/dev/nvme1n1": (0, capture("wipefs-json-empty.json"), ""),
    })
    result = run_module(disk_preflight, {
        "volume_devices": ["/dev/loop1", "/dev/md/checkpoints"],
        "md_devices": ["/dev/nvme0n1", "/dev/nvme1n1"],
        "allow_format": ["/dev/nvme0n1"],
    }, check_mode=check_mode, commands=fake)
    assert result["changed"] is False and not result.get("failed")
    assert result["signatures"] == {"/dev/loop1": ["crypto_LUKS"], "/dev/nvme0n1": ["linux_raid_member"],
                                    "/dev/nvme1n1": []}
    assert (result["md_path"], result["md_exists"]) == ("/dev/md/checkpoints", False)
    # wipefs --json only lists; nothing else ran, under the C locale.
    assert [argv for argv, env in fake.calls] == [[WIPEFS, "--json", d] for d in result["probed"]]
    assert all(env == {"LC_ALL": "C"} for argv, env in fake.calls)


def test_an_existing_array_is_probed_instead_of_its_members(md_exists):
    md_exists.add("/dev/md/ckpt")
    fake = commands({"/dev/md/ckpt": (0, capture("wipefs-json-md-array-new.json"), "")})
    result = run_module(disk_preflight, {
        "volume_devices": ["/dev/md/ckpt"], "md_devices": ["/dev/nvme0n1", "/dev/nvme1n1"], "md_name": "ckpt",
    }, commands=fake)
    assert (result["md_exists"], result["probed"], result["signatures"]) == (True, ["/dev/md/ckpt"], {"/dev/md/ckpt": []})


def test_refuses_an_ext4_disk_not_allowed(md_exists):
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-ext4.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"]}, commands=fake)
    assert result["failed"] is True
    assert result["msg"].startswith("Refusing to format /dev/loop3 (ext4): ")
    assert "disk_encryption_allow_format. No device was changed." in result["msg"]


def test_the_same_disk_listed_in_allow_format_passes(md_exists):
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-ext4.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"], "allow_format": ["/dev/loop3"]},
                        commands=fake)
    assert result["signatures"] == {"/dev/loop3": ["ext4"]}


def test_an_unreadable_device_fails(md_exists):
    fake = commands({"/dev/gone": (1, "", capture("wipefs-json-missing.stderr"))})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/gone"]}, commands=fake)
    assert result["failed"] is True
    assert result["msg"].startswith("Cannot probe /dev/gone (wipefs: error: ")
    assert result["msg"].endswith(": no device was changed")


def test_without_wipefs_the_module_fails_before_probing(md_exists):
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"]}, commands=FakeCommands())
    assert result["failed"] is True and "wipefs" in result["msg"]
