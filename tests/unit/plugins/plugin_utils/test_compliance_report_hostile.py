# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 28 items 11, 12 and 17 (compliance) and issue 27 (Ubuntu's Allowed-Origins): hostile
and unexpected input gives a clear verdict or a clear error, never a false pass, a traceback or
an unbounded regex on the controller."""


import os
import re
import subprocess
import sys
import time

import pytest

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_report import (
    FAIL,
    NO_EVIDENCE,
    PASS,
    BlacklistPattern,
    ComplianceError,
    evidence_file_name,
    evidence_records,
    node_report,
    parse_lynis_report,
    parse_ss_listen,
    run_checks,
    volume_probes,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def rec(stdout, rc=0):
    return {"command": "probe", "rc": rc, "stdout": stdout, "stderr": "", "start": "2026-12-03T09:00:00+00:00"}


def sshd(allow_groups):
    return {"sshd_effective": rec("passwordauthentication no\nallowgroups %s\n" % allow_groups)}


# ---------------------------------------------------------------- item 12: AllowGroups


@pytest.mark.parametrize("groups", ["*", "fleet-*", "adm?n", "!wheel *", "fleet-ssh *"])
def test_allow_groups_pattern_never_passes(groups):
    for expected in ([], ["fleet-ssh"]):
        check = run_checks(sshd(groups), {"ssh_allow_groups": expected}, ["ssh_allow_groups"])["ssh_allow_groups"]
        assert check["status"] == FAIL, (groups, expected, check)
        assert "pattern" in check["detail"]


def test_allow_groups_without_inventory_groups_is_not_a_pass():
    check = run_checks(sshd("fleet-ssh"), {}, ["ssh_allow_groups"])["ssh_allow_groups"]
    assert check["status"] == NO_EVIDENCE and "host_hardening_ssh_allow_groups" in check["detail"]
    assert run_checks(sshd("fleet-ssh"), {"ssh_allow_groups": ["fleet-ssh"]},
                      ["ssh_allow_groups"])["ssh_allow_groups"]["status"] == PASS


# ---------------------------------------------------------------- item 12: blacklist regexes


def blacklist_conf(*entries):
    return rec("\n".join('Unattended-Upgrade::Package-Blacklist:: "%s";' % e for e in entries))


def holds_check(held, *entries):
    ev = {"apt_holds": rec("\n".join(held)), "apt_config": blacklist_conf(*entries)}
    return run_checks(ev, {}, ["unattended_respects_holds"])["unattended_respects_holds"]


CATASTROPHIC_NAME = "a" * 30 + "-x"


def test_catastrophic_host_regex_is_refused_fast():
    """^(a+)+$ on 30 a's: Python's re needs about 2**30 steps (minutes); the check must answer at once."""
    start = time.monotonic()
    check = holds_check([CATASTROPHIC_NAME], "^(a+)+$", "^(a|aa)+$", "(a*)*b")
    assert time.monotonic() - start < 1
    assert check["status"] == FAIL and "not judged" in check["detail"] and "^(a+)+$" in check["detail"]


def test_the_check_runs_in_a_bounded_time_in_a_fresh_interpreter():
    """The same in a child process with a time limit, so that a regression fails instead of hanging."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_report import run_checks\n"
            "ev = {'apt_holds': {'rc': 0, 'stdout': %r}, 'apt_config': {'rc': 0, 'stdout': %r}}\n"
            "print(run_checks(ev, {}, ['unattended_respects_holds'])['unattended_respects_holds']['status'])\n"
            % (os.path.join(ROOT, ".cache", "collections"), CATASTROPHIC_NAME,
               'Unattended-Upgrade::Package-Blacklist:: "^(a+)+$";'))
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=10, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the blacklist check ran a host regex for more than 10 s")
    assert out.stdout.strip() == FAIL


@pytest.mark.parametrize("pattern", [
    "^nvidia\\-driver$", "^cuda\\-", "nvidia", "^lib[a-z]+[0-9]?$", "^linux-image-.*", "a{2,3}b", "[^x]y",
    "^libnvidia-[a-z0-9]+\\.?[0-9]*$", "^nvidia-dkms-5[0-9][0-9]", "x?nvidia.*", "\\d+", "^[-a-z.+]+$",
])
def test_blacklist_patterns_match_as_unattended_upgrades_does(pattern):
    # unattended-upgrades 2.9.1 (is_pkgname_in_blacklist): re.match(entry, package name)
    names = ["nvidia-driver", "nvidia-driver-libs", "cuda-toolkit-12-4", "libnvidia-ml1", "libnvidia-ml1.5",
             "libfoo", "libfoo1", "libfoo12", "linux-image-6.1.0-28-amd64", "aab", "aaab", "ab", "zy", "xy",
             "nvidia-dkms-580", "xnvidia", "123abc", "g++-12", "zlib1g"]
    matcher = BlacklistPattern(pattern)
    for name in names:
        assert matcher.matches(name) == bool(re.match(pattern, name)), (pattern, name)


@pytest.mark.parametrize("pattern", ["^(a+)+$", "a|b", "(?i)nvidia", "nvidia(?=-)", "\\1", "a**", "x{1000}",
                                     "[a-", "a\\", "mid^dle", "mid$dle", "n" * 300])
def test_blacklist_patterns_outside_the_judged_subset_are_refused_by_name(pattern):
    with pytest.raises(ComplianceError) as err:
        BlacklistPattern(pattern)
    assert repr(pattern)[:20] in str(err.value) or "longer than" in str(err.value)


def test_an_unreadable_entry_never_covers_a_hold_but_a_readable_one_does():
    assert holds_check(["nvidia-driver"], "(nvidia|cuda)-.*")["status"] == FAIL
    assert holds_check(["nvidia-driver"], "(nvidia|cuda)-.*", "^nvidia\\-")["status"] == PASS
    # re.search would call "nvidia" a cover of libnvidia-ml1; unattended-upgrades' re.match does not
    assert holds_check(["libnvidia-ml1"], "nvidia")["status"] == FAIL


# ---------------------------------------------------------------- issue 27: Allowed-Origins


def test_ubuntu_stock_allowed_origins_count_as_security_updates():
    """Ubuntu 24.04's stock 50unattended-upgrades (unattended-upgrades 2.9.1+nmu4ubuntu1) names its
    origins with Allowed-Origins "${distro_id}:${distro_codename}-security"."""
    dump = fixture_text("compliance", "apt-config-dump-ubuntu2404-stock.txt")
    stock = fixture_text("compliance", "50unattended-upgrades-ubuntu2404.txt")
    assert '"${distro_id}:${distro_codename}-security";' in stock
    check = run_checks({"apt_config": rec(dump)}, {}, ["unattended_security_updates"])["unattended_security_updates"]
    assert check["status"] == PASS, check
    assert "${distro_id}:${distro_codename}-security" in check["detail"]


@pytest.mark.parametrize("entries, status", [
    (['"Ubuntu:noble-security"'], PASS),
    (['"Ubuntu noble-security"'], PASS),
    (['"${distro_id}:${distro_codename}"', '"${distro_id}:${distro_codename}-updates"'], FAIL),
    # "security" in the origin, not the archive: not a security pocket
    (['"SecurityVendor:stable"'], FAIL),
])
def test_allowed_origins_forms(entries, status):
    dump = 'APT::Periodic::Unattended-Upgrade "1";\n' + "\n".join(
        "Unattended-Upgrade::Allowed-Origins:: %s;" % e for e in entries)
    assert run_checks({"apt_config": rec(dump)}, {}, ["unattended_security_updates"])[
        "unattended_security_updates"]["status"] == status


def test_debian_origins_pattern_still_passes():
    dump = fixture_text("compliance", "apt-config-dump-debian12-hardened.txt")
    assert run_checks({"apt_config": rec(dump)}, {}, ["unattended_security_updates"])[
        "unattended_security_updates"]["status"] == PASS


# ---------------------------------------------------------------- item 17: numbers


@pytest.mark.parametrize("ports", [["ssh"], ["22a"], [True], [0], [70000], ["²"], "22", [22.5], [None]])
def test_non_numeric_expected_ports_are_refused_by_name(ports):
    ev = {"listening_ports": rec("LISTEN 0 128 0.0.0.0:22 0.0.0.0:*")}
    with pytest.raises(ComplianceError, match="compliance_expected_tcp_ports"):
        run_checks(ev, {"tcp_ports": ports}, ["listening_ports"])


def test_numeric_strings_are_ports():
    ev = {"listening_ports": rec("LISTEN 0 128 0.0.0.0:22 0.0.0.0:*")}
    assert run_checks(ev, {"tcp_ports": ["22"]}, ["listening_ports"])["listening_ports"]["status"] == PASS


@pytest.mark.parametrize("minlen", ["fourteen", "14\n", [14], True, -1, "²"])
def test_non_numeric_password_length_is_refused_by_name(minlen):
    with pytest.raises(ComplianceError, match="host_hardening_password_minlen"):
        run_checks({}, {"password_minlen": minlen}, ["password_policy"])


def test_context_lists_must_hold_names():
    with pytest.raises(ComplianceError, match="compliance_expected_holds"):
        run_checks({}, {"held_packages": "iproute2"}, ["packages_held"])


@pytest.mark.parametrize("value", ["²", "1²", "٣"])
def test_node_output_with_unicode_digits_is_no_traceback(value):
    # str.isdigit() takes these; int() does not
    assert parse_ss_listen("LISTEN 0 128 0.0.0.0:%s 0.0.0.0:*" % value) == []
    assert parse_lynis_report("hardening_index=%s\n" % value)["hardening_index"] is None
    pw = run_checks({"pwquality_conf": rec("minlen = %s" % value), "pam_password": rec("")},
                    {"password_minlen": 14}, ["password_policy"])["password_policy"]
    assert pw["status"] == FAIL
    tracking = run_checks({"chrony_tracking": rec("Leap status : Normal\nStratum : %s" % value)}, {},
                          ["time_synchronized"])["time_synchronized"]
    assert tracking["status"] == FAIL


# ---------------------------------------------------------------- item 11: volumes and names


def test_volume_probes_keep_the_device_an_argument():
    probes = volume_probes([{"device": "/dev/nvme1n1"}, {"device": '/dev/disk/by-id/we"ird\\1 name'}, "/dev/sdb"])
    assert probes[0] == {"name": "luks_/dev/nvme1n1", "argv": ["cryptsetup", "isLuks", "/dev/nvme1n1"], "skip": ""}
    assert probes[1]["argv"] == ["clevis", "luks", "list", "-d", "/dev/nvme1n1"]
    assert probes[2]["argv"][-1] == '/dev/disk/by-id/we"ird\\1 name'
    assert [p["name"] for p in probes[4:]] == ["luks_/dev/sdb", "clevis_/dev/sdb"]
    assert volume_probes(None) == [] and volume_probes([]) == []


@pytest.mark.parametrize("volumes, where", [
    ("/dev/sda", "disk_encryption_volumes"), ([{"device": "sda"}], r"disk_encryption_volumes\[0\]\.device"),
    ([{}], r"\[0\]\.device"), ([{"device": "/dev/a"}, {"device": 5}], r"\[1\]\.device"),
    ([{"device": "/dev/a\nb"}], r"\[0\]\.device"),
])
def test_bad_volumes_are_refused_by_name(volumes, where):
    with pytest.raises(ComplianceError, match=where):
        volume_probes(volumes)


HOSTILE_NAMES = ["luks_/dev/nvme1n1", "luks__dev_nvme1n1", "../../etc/passwd", "..", ".", ".hidden", "a/../b",
                 "clevis_/dev/disk/by-id/nvme-Samsung SSD 990 PRO_S6Z1NJ0W", "tab\there", "ünïcödé", "x" * 500,
                 "x" * 500 + "y", "-leading-dash", "a\\b", "$(reboot)", "name;rm -rf /", "\udcff"]


def test_evidence_file_names_are_safe_and_distinct():
    seen = {}
    for name in HOSTILE_NAMES:
        safe = evidence_file_name(name)
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}", safe), (name, safe)
        assert safe not in (".", "..") and "/" not in safe
        assert safe not in seen, (name, seen.get(safe))
        seen[safe] = name
    for plain in ("sshd_effective", "apt_config", "lynis_report"):
        assert evidence_file_name(plain) == plain
    assert evidence_file_name("luks_/dev/nvme1n1").startswith("luks_dev_nvme1n1-")
    with pytest.raises(ComplianceError):
        evidence_file_name("")


def test_report_of_a_node_with_volumes_names_safe_files():
    ev = {"luks_/dev/nvme1n1": rec(""), "clevis_/dev/nvme1n1": rec("1: tang '{\"url\":\"http://t\"}'")}
    records = evidence_records(ev)
    assert records["luks_/dev/nvme1n1"]["stdout_file"] == "evidence/%s.txt" % evidence_file_name("luks_/dev/nvme1n1")
    report = node_report("n1", ev, {"frameworks": [{"id": "x", "controls": [
        {"id": "1", "title": "t", "checks": ["luks_tang"]}]}]}, {"data_volumes": ["/dev/nvme1n1"]})
    assert report["checks"]["luks_tang"]["status"] == PASS


def test_filters_wrap_the_probes_and_names_with_chained_errors():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpucloud.fleet.plugins.filter.compliance import FilterModule
    filters = FilterModule().filters()
    assert filters["compliance_volume_probes"]([{"device": "/dev/nvme1n1"}])[0]["name"] == "luks_/dev/nvme1n1"
    assert filters["compliance_evidence_file_name"]("luks_/dev/nvme1n1") == evidence_file_name("luks_/dev/nvme1n1")
    with pytest.raises(AnsibleFilterError, match=r"compliance_volume_probes: disk_encryption_volumes\[0\]") as err:
        filters["compliance_volume_probes"]([{"device": "nvme1n1"}])
    assert isinstance(err.value.__cause__, ComplianceError)
    with pytest.raises(AnsibleFilterError, match="compliance_node_report: compliance_expected_tcp_ports"):
        filters["compliance_node_report"]({}, {"frameworks": []}, "n1", {"tcp_ports": ["ssh"]})
