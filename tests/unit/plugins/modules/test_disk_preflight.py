# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import base64
import io
import json
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
    """The paths that exist as the module sees them (/dev/md/<name>, /sys/module/dm_mod)."""
    present = set()
    fake_os = types.SimpleNamespace(path=types.SimpleNamespace(lexists=lambda path: path in present,
                                                               exists=lambda path: path in present))
    monkeypatch.setattr(disk_preflight, "os", fake_os)
    return present


def advertisement(key_ops):
    """A Tang /adv answer in tang's shape (a JWS whose base64url payload, unpadded, is a JWK set);
    hand-built: only the key_ops matter to the check."""
    keys = {"keys": [{"kty": "EC", "crv": "P-521", "key_ops": ops} for ops in key_ops]}
    payload = base64.urlsafe_b64encode(json.dumps(keys).encode()).decode().rstrip("=")
    return json.dumps({"payload": payload, "protected": "eyJhbGciOiJFUzUxMiJ9", "signature": "c2ln"})


TANG_KEYS = advertisement([["verify"], ["deriveKey"]])


@pytest.fixture
def tang(monkeypatch):
    """The Tang servers' answers by /adv URL: (status, body, msg); a URL not listed does not answer."""
    answers = {}
    asked = []

    def fetch_url(module, url, method="GET", timeout=10):
        asked.append((url, method, timeout))
        status, body, msg = answers.get(url, (-1, "", "Request failed: <urlopen error [Errno 111] Connection refused>"))
        response = io.BytesIO(body.encode()) if status == 200 else None
        return response, {"status": status, "msg": msg}
    monkeypatch.setattr(disk_preflight, "fetch_url", fetch_url)
    return types.SimpleNamespace(answers=answers, asked=asked)


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


def test_reports_whether_the_kernel_has_device_mapper(md_exists):
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-empty.json"), "")})
    assert run_module(disk_preflight, {"volume_devices": ["/dev/loop3"]}, commands=fake)["dm_loaded"] is False
    md_exists.add("/sys/module/dm_mod")
    assert run_module(disk_preflight, {"volume_devices": ["/dev/loop3"]}, commands=fake)["dm_loaded"] is True


@pytest.mark.parametrize("check_mode", [False, True])
def test_every_tang_server_answering_with_keys_passes(check_mode, md_exists, tang):
    tang.answers["http://tang1/adv"] = (200, TANG_KEYS, "OK")
    tang.answers["https://tang2:7500/adv"] = (200, advertisement([["verify", "sign"], ["deriveKey"]]), "OK")
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-empty.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"],
                                         "tang_servers": ["http://tang1/", "https://tang2:7500"]},
                        check_mode=check_mode, commands=fake)
    assert not result.get("failed") and result["changed"] is False
    assert result["tang_unreachable"] == [] and not result.get("warnings")
    assert tang.asked == [("http://tang1/adv", "GET", 10), ("https://tang2:7500/adv", "GET", 10)]


def test_a_server_that_does_not_answer_fails_before_any_device_is_read(md_exists, tang):
    tang.answers["http://tang1/adv"] = (200, TANG_KEYS, "OK")
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-empty.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"],
                                         "tang_servers": ["http://tang1", "http://tang2:7500"]}, commands=fake)
    assert result["failed"] is True
    assert result["msg"].startswith("Tang check failed before any device was touched. Unreachable or not answering "
                                    "/adv with 200: http://tang2:7500 (Request failed: ")
    assert "http://tang1" not in result["msg"]
    assert result["msg"].endswith("Every server in disk_encryption_tang_servers must answer, whatever "
                                  "disk_encryption_tang_threshold is.")
    assert fake.calls == []


def test_check_mode_reports_a_server_that_does_not_answer_and_goes_on(md_exists, tang):
    tang.answers["http://tang1/adv"] = (404, "", "HTTP Error 404: Not Found")
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-empty.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"], "tang_servers": ["http://tang1"]},
                        check_mode=True, commands=fake)
    assert not result.get("failed")
    assert result["tang_unreachable"] == ["http://tang1 (HTTP Error 404: Not Found)"]
    assert len(result["warnings"]) == 1
    assert result["warnings"][0].startswith("check mode: not answering /adv now: http://tang1 (HTTP Error 404")
    assert result["signatures"] == {"/dev/loop3": []}


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("body", [
    advertisement([["verify"]]),
    advertisement([["deriveKey"]]),
    advertisement([]),
    json.dumps({"payload": "not base64 json"}),
    "<html>not tang</html>",
])
def test_a_server_without_both_keys_fails_in_both_modes(check_mode, body, md_exists, tang):
    tang.answers["http://tang1/adv"] = (200, TANG_KEYS, "OK")
    tang.answers["http://tang2/adv"] = (200, body, "OK")
    fake = commands({"/dev/loop3": (0, capture("wipefs-json-empty.json"), "")})
    result = run_module(disk_preflight, {"volume_devices": ["/dev/loop3"],
                                         "tang_servers": ["http://tang1", "http://tang2"]},
                        check_mode=check_mode, commands=fake)
    assert result["failed"] is True
    assert ("No signing (verify) and exchange (deriveKey) key advertised by: http://tang2." in result["msg"])
    assert "Unreachable" not in result["msg"] and fake.calls == []
