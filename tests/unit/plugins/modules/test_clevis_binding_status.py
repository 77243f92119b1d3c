# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest
from ansible.module_utils import basic

from ansible_collections.gpucloud.fleet.plugins.modules import clevis_binding_status
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    FakeCommands,
    fixture_text,
    run_module,
)

CRYPTSETUP = "/usr/sbin/cryptsetup"
CLEVIS = "/usr/bin/clevis"
DEV = "/dev/loop2"
A = "http://127.0.0.1:18761"
B = "http://127.0.0.1:18762"
ARGS = {
    "device": DEV, "keyslot": 1, "servers": [A, B + "/"], "threshold": 2,
    "recovery_keyslot": 0, "recovery_passphrase": "lab-recovery-passphrase-not-secret",
}
RECOVERY = (CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "0", "--key-file", "-", DEV)
LIST = (CLEVIS, "luks", "list", "-d", DEV, "-s", "1")
REPORT = (CLEVIS, "luks", "report", "-q", "-d", DEV, "-s", "1")
PASS = (CLEVIS, "luks", "pass", "-d", DEV, "-s", "1")
UNLOCK = (CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "1", "--key-file", "-", DEV)
UUID = (CRYPTSETUP, "luksUUID", DEV)


def capture(name):
    return fixture_text("disk_encryption", name)


def host(report="clevis-luks-report-current.txt", report_rc=0, recovery_rc=0):
    return FakeCommands({
        RECOVERY: (recovery_rc, "", ""),
        LIST: (0, capture("clevis-luks-list-sss-two-tang-t2.txt"), ""),
        REPORT: (report_rc, capture(report), ""),
        PASS: (0, "generated-key", ""),
        UNLOCK: (0, "", ""),
        UUID: (0, capture("cryptsetup-luksUUID.txt"), ""),
    })


@pytest.mark.parametrize("check_mode", [False, True])
def test_current_binding(check_mode):
    fake = host()
    result = run_module(clevis_binding_status, ARGS, check_mode=check_mode, commands=fake)
    assert result["changed"] is False and not result.get("failed")
    assert (result["bound"], result["matches"], result["rebind_reason"], result["unlocks"]) == (True, True, "", True)
    assert result["uuid"] == capture("cryptsetup-luksUUID.txt").strip()
    # The same read-only commands in check mode as in a real run.
    assert [tuple(argv) for argv, env in fake.calls] == [RECOVERY, LIST, REPORT, PASS, UNLOCK, UUID]


def test_rotated_keys_give_the_rebind_reason():
    fake = host(report="clevis-luks-report-rotated.txt", report_rc=1)
    result = run_module(clevis_binding_status, ARGS, commands=fake)
    assert (result["rebind_reason"], result["unlocks"]) == ("Tang keys rotated", None)
    assert len(result["rotated_keys"]) == 2
    assert PASS not in [tuple(argv) for argv, env in fake.calls]


def test_require_current_after_a_rebind_that_did_not_take():
    fake = host(report="clevis-luks-report-rotated.txt", report_rc=1)
    result = run_module(clevis_binding_status, dict(ARGS, require_current=True), commands=fake)
    assert result["failed"] is True
    assert "still not as wanted" in result["msg"]


def test_a_wrong_recovery_passphrase_fails_and_is_not_shown():
    fake = host(recovery_rc=2)
    result = run_module(clevis_binding_status, ARGS, commands=fake)
    assert result["failed"] is True
    assert "does not open with disk_encryption_recovery_passphrase (cryptsetup rc=2)" in result["msg"]
    assert ARGS["recovery_passphrase"] not in repr(result)
    assert [tuple(argv) for argv, env in fake.calls] == [RECOVERY]


def test_the_recovery_passphrase_is_no_log(monkeypatch):
    specs = []
    init = basic.AnsibleModule.__init__

    def recording_init(self, argument_spec, **kwargs):
        specs.append(argument_spec)
        init(self, argument_spec, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "__init__", recording_init)
    run_module(clevis_binding_status, ARGS, commands=host())
    assert specs[0]["recovery_passphrase"].get("no_log") is True
