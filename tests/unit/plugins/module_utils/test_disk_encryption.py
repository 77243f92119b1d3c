# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""disk_encryption's decisions on captured wipefs, clevis and cryptsetup output
(tests/fixtures/disk_encryption/, each with its .source)."""

import json

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.disk_encryption import (
    ClevisBinding,
    DiskEncryptionError,
    binding_matches,
    devices_to_probe,
    parse_clevis_luks_list,
    parse_clevis_luks_report,
    parse_wipefs_json,
    preflight,
    rebind_reason,
    refused_devices,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

A = "http://127.0.0.1:18761"
B = "http://127.0.0.1:18762"
WIPEFS = "/usr/sbin/wipefs"
CRYPTSETUP = "/usr/sbin/cryptsetup"
CLEVIS = "/usr/bin/clevis"
PASSPHRASE = "lab-recovery-passphrase-not-secret"
ROTATED_KEYS = ["UVcWseaygZeBf-eIbS99D_CbsyJeHG9Upuy8FglMJBg", "6QQ38x0IOk5KguWbQ8qzEG2NxOlhJtfiYnH6WbQSeBs"]


def capture(name):
    return fixture_text("disk_encryption", name)


def wipefs_ok(name):
    return (0, capture(name), "")


MISSING = (1, "", capture("wipefs-json-missing.stderr"))


class Host:
    """Answers commands from a table of argv -> (rc, out, err); records argv and stdin."""

    def __init__(self, table):
        self.table = dict((tuple(argv), answer) for argv, answer in table.items())
        self.calls = []

    def __call__(self, argv, data=None, binary=False):
        self.calls.append((list(argv), data))
        answer = self.table.get(tuple(argv))
        if answer is None:
            raise AssertionError("unexpected command %r" % (argv,))
        rc, out, err = answer
        return rc, (out.encode() if binary else out), err

    def argvs(self):
        return [argv for argv, data in self.calls]


def wipefs_host(answers):
    return Host(dict(((WIPEFS, "--json", device), answer) for device, answer in answers.items()))


# --- wipefs ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, types", [
    ("wipefs-json-empty.json", []),
    ("wipefs-json-md-array-new.json", []),
    ("wipefs-json-ext4.json", ["ext4"]),
    # Primary and secondary LUKS2 headers: one type, once.
    ("wipefs-json-luks2.json", ["crypto_LUKS"]),
    ("wipefs-json-gpt.json", ["gpt", "PMBR"]),
    ("wipefs-json-md-member.json", ["linux_raid_member"]),
])
def test_wipefs_signature_types(name, types):
    text = capture(name)
    assert parse_wipefs_json(text) == types
    # Every type in the capture is kept, none is invented.
    assert set(parse_wipefs_json(text)) == set(s["type"] for s in json.loads(text)["signatures"])


def test_wipefs_empty_output_means_no_signature():
    assert parse_wipefs_json("") == []
    assert parse_wipefs_json("\n") == []


def test_wipefs_output_that_is_not_its_json_is_refused():
    with pytest.raises(DiskEncryptionError, match="wipefs --json"):
        parse_wipefs_json(capture("wipefs-json-missing.stderr"))
    with pytest.raises(DiskEncryptionError):
        parse_wipefs_json('{"devices": []}')


# --- which devices, refused or not ---------------------------------------------------

def test_a_pending_array_is_probed_through_its_members():
    probe = devices_to_probe(["/dev/sda", "/dev/md/ckpt"], ["/dev/nvme0n1", "/dev/nvme1n1"], "ckpt", md_exists=False)
    assert probe == ["/dev/sda", "/dev/nvme0n1", "/dev/nvme1n1"]


def test_an_existing_array_is_probed_itself():
    probe = devices_to_probe(["/dev/sda", "/dev/md/ckpt"], ["/dev/nvme0n1", "/dev/nvme1n1"], "ckpt", md_exists=True)
    assert probe == ["/dev/sda", "/dev/md/ckpt"]


def test_without_an_array_only_the_volumes_are_probed():
    assert devices_to_probe(["/dev/sda"], [], "ckpt", md_exists=False) == ["/dev/sda"]


def test_refused_devices_rules():
    signatures = {
        "/dev/luks-volume": parse_wipefs_json(capture("wipefs-json-luks2.json")),
        "/dev/luks-member": parse_wipefs_json(capture("wipefs-json-luks2.json")),
        "/dev/ext4": parse_wipefs_json(capture("wipefs-json-ext4.json")),
        "/dev/allowed-gpt": parse_wipefs_json(capture("wipefs-json-gpt.json")),
        "/dev/empty": parse_wipefs_json(capture("wipefs-json-empty.json")),
    }
    refused = refused_devices(signatures, ["/dev/luks-volume", "/dev/ext4", "/dev/allowed-gpt", "/dev/empty"],
                              ["/dev/allowed-gpt"])
    # An existing LUKS volume is bound, not formatted; a LUKS header on an array member is
    # somebody's data.
    assert refused == [("/dev/luks-member", ["crypto_LUKS"]), ("/dev/ext4", ["ext4"])]


def test_preflight_refuses_ext4_with_the_operators_message():
    host = wipefs_host({"/dev/loop3": wipefs_ok("wipefs-json-ext4.json")})
    with pytest.raises(DiskEncryptionError) as error:
        preflight(host, WIPEFS, ["/dev/loop3"], [], "checkpoints", [], md_exists=False)
    message = str(error.value)
    # What molecule/disk_encryption/side_effect.yml and operators look for.
    assert message.startswith("Refusing to format /dev/loop3 (ext4): ")
    assert "disk_encryption_allow_format" in message
    assert "No device was changed" in message
    assert host.argvs() == [[WIPEFS, "--json", "/dev/loop3"]]


def test_preflight_names_every_refused_device_and_all_its_signatures():
    host = wipefs_host({
        "/dev/sdb": wipefs_ok("wipefs-json-gpt.json"),
        "/dev/sdc": wipefs_ok("wipefs-json-md-member.json"),
        "/dev/sdd": wipefs_ok("wipefs-json-empty.json"),
    })
    with pytest.raises(DiskEncryptionError) as error:
        preflight(host, WIPEFS, ["/dev/sdb", "/dev/sdc", "/dev/sdd"], [], "checkpoints", [], md_exists=False)
    assert "Refusing to format /dev/sdb (gpt, PMBR); /dev/sdc (linux_raid_member): " in str(error.value)
    assert "/dev/sdd" not in str(error.value)


def test_preflight_passes_allowed_empty_and_existing_luks_devices():
    host = wipefs_host({
        "/dev/loop1": wipefs_ok("wipefs-json-luks2.json"),
        "/dev/nvme0n1": wipefs_ok("wipefs-json-md-member.json"),
        "/dev/nvme1n1": wipefs_ok("wipefs-json-empty.json"),
    })
    result = preflight(host, WIPEFS, ["/dev/loop1", "/dev/md/checkpoints"], ["/dev/nvme0n1", "/dev/nvme1n1"],
                       "checkpoints", ["/dev/nvme0n1"], md_exists=False)
    assert result == {
        "md_path": "/dev/md/checkpoints",
        "md_exists": False,
        "probed": ["/dev/loop1", "/dev/nvme0n1", "/dev/nvme1n1"],
        "signatures": {"/dev/loop1": ["crypto_LUKS"], "/dev/nvme0n1": ["linux_raid_member"], "/dev/nvme1n1": []},
    }


def test_preflight_on_an_existing_array_probes_the_array_not_its_members():
    host = wipefs_host({"/dev/md/checkpoints": wipefs_ok("wipefs-json-luks2.json")})
    result = preflight(host, WIPEFS, ["/dev/md/checkpoints"], ["/dev/nvme0n1", "/dev/nvme1n1"],
                       "checkpoints", [], md_exists=True)
    assert (result["md_exists"], result["probed"]) == (True, ["/dev/md/checkpoints"])
    assert host.argvs() == [[WIPEFS, "--json", "/dev/md/checkpoints"]]


def test_md_exists_means_nothing_without_array_members():
    host = wipefs_host({"/dev/loop1": wipefs_ok("wipefs-json-empty.json")})
    assert preflight(host, WIPEFS, ["/dev/loop1"], [], "checkpoints", [], md_exists=True)["md_exists"] is False


def test_an_unreadable_device_fails_first_and_names_wipefs_error():
    host = wipefs_host({
        "/dev/loop3": wipefs_ok("wipefs-json-ext4.json"),
        "/dev/gpucloud-no-such-disk": MISSING,
    })
    with pytest.raises(DiskEncryptionError) as error:
        preflight(host, WIPEFS, ["/dev/loop3", "/dev/gpucloud-no-such-disk"], [], "checkpoints", [], md_exists=False)
    stderr = capture("wipefs-json-missing.stderr").strip()
    assert str(error.value) == "Cannot probe /dev/gpucloud-no-such-disk (%s): no device was changed" % stderr
    # Every device is probed before deciding, and nothing but wipefs --json runs.
    assert [argv[1] for argv in host.argvs()] == ["--json", "--json"]


# --- clevis luks list / report ---------------------------------------------------------

@pytest.mark.parametrize("name, pin, t, urls", [
    ("clevis-luks-list-sss-one-tang.txt", "sss", 1, [A]),
    ("clevis-luks-list-sss-two-tang-t2.txt", "sss", 2, [A, B]),
    ("clevis-luks-list-sss-two-tang-t1.txt", "sss", 1, [A, B]),
])
def test_parse_sss_bindings(name, pin, t, urls):
    (binding,) = parse_clevis_luks_list(capture(name))
    assert (binding["slot"], binding["pin"], binding["config"]["t"]) == (1, pin, t)
    assert [p["url"] for p in binding["config"]["pins"]["tang"]] == urls


def test_parse_plain_tang_binding_and_unbound_slot():
    (binding,) = parse_clevis_luks_list(capture("clevis-luks-list-tang.txt"))
    assert (binding["pin"], binding["config"]) == ("tang", {"url": A})
    assert parse_clevis_luks_list(capture("clevis-luks-list-unbound.txt")) == []


def test_parse_list_refuses_what_it_does_not_understand():
    with pytest.raises(DiskEncryptionError, match="unexpected clevis luks list line"):
        parse_clevis_luks_list("Usage: clevis luks list -d DEV [-s SLT]\n")
    with pytest.raises(DiskEncryptionError, match="not JSON"):
        parse_clevis_luks_list("1: sss '{\"t\":1,'\n")


def binding(name):
    (found,) = parse_clevis_luks_list(capture(name))
    return found


@pytest.mark.parametrize("name, servers, threshold, expected", [
    ("clevis-luks-list-sss-two-tang-t2.txt", [A, B], 2, True),
    ("clevis-luks-list-sss-two-tang-t2.txt", [B + "/", A], 2, True),
    ("clevis-luks-list-sss-two-tang-t2.txt", [A, B], 1, False),
    ("clevis-luks-list-sss-two-tang-t1.txt", [A, B], 1, True),
    ("clevis-luks-list-sss-two-tang-t1.txt", [A], 1, False),
    ("clevis-luks-list-sss-one-tang.txt", [A], 1, True),
    ("clevis-luks-list-sss-one-tang.txt", [A, B], 1, False),
    ("clevis-luks-list-sss-one-tang.txt", ["http://127.0.0.1:18763"], 1, False),
    # A plain tang pin never matches: the role binds sss.
    ("clevis-luks-list-tang.txt", [A], 1, False),
])
def test_binding_matches(name, servers, threshold, expected):
    assert binding_matches(binding(name), servers, threshold) is expected


def test_no_binding_never_matches():
    assert binding_matches(None, [A], 1) is False


def test_an_sss_binding_with_another_pin_beside_tang_does_not_match():
    found = binding("clevis-luks-list-sss-one-tang.txt")
    found["config"]["pins"]["tpm2"] = [{}]
    assert binding_matches(found, [A], 1) is False


def test_report_current_and_rotated():
    assert parse_clevis_luks_report(0, capture("clevis-luks-report-current.txt"), "") == (False, [])
    assert parse_clevis_luks_report(1, capture("clevis-luks-report-rotated.txt"), "") == (True, ROTATED_KEYS)
    assert parse_clevis_luks_report(1, capture("clevis-luks-report-rotated-one-tang.txt"), "") == (True, ROTATED_KEYS)


def test_report_with_a_server_down_fails_with_its_words():
    with pytest.raises(DiskEncryptionError) as error:
        parse_clevis_luks_report(1, "", capture("clevis-luks-report-server-down.stderr"))
    assert "rc=1" in str(error.value)
    assert "Unable to fetch advertisement (%s/adv)" % B in str(error.value)


@pytest.mark.parametrize("bound, matches, rotated, reason", [
    (False, False, False, "not bound"),
    (True, False, False, "servers or threshold changed"),
    (True, True, True, "Tang keys rotated"),
    (True, True, False, ""),
])
def test_rebind_reason(bound, matches, rotated, reason):
    assert rebind_reason(bound, matches, rotated) == reason


# --- the whole check of one volume -----------------------------------------------------

DEV = "/dev/loop2"
KEY = "clevis-generated-key"


def luks_host(list_answer, report_answer=None, recovery_rc=0, pass_rc=0, unlock_rc=0, key=KEY):
    table = {
        (CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "0", "--key-file", "-", DEV): (recovery_rc, "", ""),
        (CLEVIS, "luks", "list", "-d", DEV, "-s", "1"): list_answer,
        (CLEVIS, "luks", "pass", "-d", DEV, "-s", "1"): (pass_rc, key, ""),
        (CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "1", "--key-file", "-", DEV): (unlock_rc, "", ""),
        (CRYPTSETUP, "luksUUID", DEV): (0, capture("cryptsetup-luksUUID.txt"), ""),
    }
    if report_answer is not None:
        table[(CLEVIS, "luks", "report", "-q", "-d", DEV, "-s", "1")] = report_answer
    return Host(table)


def check(host, servers=(A, B), threshold=2, require_current=False):
    return ClevisBinding(host, CRYPTSETUP, CLEVIS).status(
        DEV, 1, list(servers), threshold, 0, PASSPHRASE, require_current=require_current)


LISTED_T2 = (0, capture("clevis-luks-list-sss-two-tang-t2.txt"), "")
UNBOUND = (1, capture("clevis-luks-list-unbound.txt"), "")
CURRENT = (0, capture("clevis-luks-report-current.txt"), "")
ROTATED = (1, capture("clevis-luks-report-rotated.txt"), "")


def test_a_current_binding_is_proven_and_left_alone():
    host = luks_host(LISTED_T2, CURRENT)
    result = check(host)
    assert result["rebind_reason"] == ""
    assert (result["bound"], result["matches"], result["unlocks"]) == (True, True, True)
    assert result["uuid"] == capture("cryptsetup-luksUUID.txt").strip()
    stdin = dict((tuple(argv[:5]), data) for argv, data in host.calls if data is not None)
    # The recovery passphrase goes to cryptsetup as given: no newline, never on the command line.
    assert stdin[(CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "0")] == PASSPHRASE.encode()
    # What clevis luks pass printed is what unlocks keyslot 1.
    assert stdin[(CRYPTSETUP, "open", "--test-passphrase", "--key-slot", "1")] == KEY.encode()
    assert not any(PASSPHRASE in " ".join(argv) for argv in host.argvs())


def test_rotated_keys_are_rebound_without_proving_the_old_binding():
    host = luks_host(LISTED_T2, ROTATED)
    result = check(host)
    assert (result["rebind_reason"], result["rotated_keys"], result["unlocks"]) == (
        "Tang keys rotated", ROTATED_KEYS, None)
    assert [CLEVIS, "luks", "pass", "-d", DEV, "-s", "1"] not in host.argvs()


def test_a_changed_threshold_is_rebound_and_the_report_not_asked():
    host = luks_host(LISTED_T2)
    result = check(host, threshold=1)
    assert (result["bound"], result["matches"], result["rebind_reason"]) == (True, False, "servers or threshold changed")
    assert result["binding"]["config"]["t"] == 2


def test_an_unbound_keyslot_is_bound():
    host = luks_host(UNBOUND)
    result = check(host)
    assert (result["bound"], result["binding"], result["rebind_reason"]) == (False, None, "not bound")


def test_a_recovery_passphrase_that_does_not_open_stops_everything():
    host = luks_host(LISTED_T2, CURRENT, recovery_rc=2)
    with pytest.raises(DiskEncryptionError) as error:
        check(host)
    assert str(error.value).startswith(
        "%s is a LUKS volume whose keyslot 0 (disk_encryption_recovery_keyslot) does not open with "
        "disk_encryption_recovery_passphrase (cryptsetup rc=2)." % DEV)
    assert len(host.calls) == 1


@pytest.mark.parametrize("pass_rc, key, unlock_rc, rc", [(1, "", 0, 1), (0, KEY, 2, 2), (0, "", 0, 1)])
def test_a_binding_that_does_not_unlock_fails(pass_rc, key, unlock_rc, rc):
    host = luks_host(LISTED_T2, CURRENT, pass_rc=pass_rc, unlock_rc=unlock_rc, key=key)
    with pytest.raises(DiskEncryptionError) as error:
        check(host)
    assert str(error.value) == (
        "Keyslot 1 of %s did not unlock through %s, %s (rc=%d); the recovery keyslot 0 is unchanged." % (DEV, A, B, rc))


def test_a_tang_server_down_fails_the_report():
    host = luks_host(LISTED_T2, (1, "", capture("clevis-luks-report-server-down.stderr")))
    with pytest.raises(DiskEncryptionError, match="Unable to verify whether there are rotated keys"):
        check(host)


def test_require_current_fails_when_still_not_as_wanted():
    with pytest.raises(DiskEncryptionError, match="still not as wanted after binding it: Tang keys rotated"):
        check(luks_host(LISTED_T2, ROTATED), require_current=True)
    assert check(luks_host(LISTED_T2, CURRENT), require_current=True)["unlocks"] is True
