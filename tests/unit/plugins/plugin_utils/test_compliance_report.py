# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import gzip
import hashlib
import os

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.compliance_report import (
    CHECKS,
    FAIL,
    NO_EVIDENCE,
    NOT_COVERED,
    PASS,
    ComplianceError,
    control_status,
    fleet_markdown,
    fleet_report,
    node_markdown,
    node_report,
    parse_aa_status,
    parse_apt_simulate,
    parse_lynis_report,
    parse_oscap_stdout,
    parse_sshd_t,
    run_checks,
    validate_control_map,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CONTROL_MAP = os.path.join(ROOT, "playbooks", "files", "compliance", "control_map.yml")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "compliance")


def fx(name):
    if name.endswith(".gz"):
        with gzip.open(os.path.join(FIXTURES, name), "rt", newline="") as handle:
            return handle.read()
    return fixture_text("compliance", name)


def rec(stdout, rc=0, command="probe"):
    return {"command": command, "rc": rc, "stdout": stdout.rstrip("\n"), "stderr": "", "start": "2026-12-01T20:59:01+00:00"}


def hardened_evidence():
    """What playbooks/compliance.yml read from the hardened Debian 12 lab container."""
    return {
        "sshd_effective": rec(fx("sshd-T-debian12-hardened.txt")),
        "audit_rules_file": rec(fx("audit.rules-debian12-hardened.txt")),
        "auditd_active": {"skipped": True, "reason": "a container"},
        "auditctl_rules": {"skipped": True, "reason": "a container shares the host's kernel"},
        "journald_conf": rec(fx("journald-cat-config-debian12-hardened.txt")),
        "journal_files": rec("/var/log/journal/0123/system.journal"),
        "chrony_conf": rec(fx("chrony-conf-debian12-hardened.txt")),
        "chrony_tracking": {"skipped": True, "reason": "a container's clock is the host's"},
        "firewall_rules": {"command": "iptables -w -S", "rc": 127, "stdout": "", "stderr": "iptables: not found", "start": ""},
        "listening_ports": rec(fx("ss-H-ltnp-debian12.txt")),
        "apt_holds": rec("iproute2"),
        "apt_config": rec(fx("apt-config-dump-debian12-hardened.txt")),
        "apt_policy": rec(fx("apt-cache-policy-debian12.txt")),
        "apt_upgrade_simulation": rec(fx("apt-get-s-dist-upgrade-debian12.txt")),
        "accounts": rec(fx("getent-passwd-debian12.txt")),
        "login_shells": rec(fx("shells-debian12.txt")),
        "openscap": rec(fx("oscap-eval-debian12-tailored.txt.gz"), rc=2),
        "lynis_report": rec(fx("lynis-report-debian12.dat")),
    }


CONTEXT = {"ssh_allow_groups": ["fleet-ssh"], "time_servers": ["192.0.2.10", "ntp.example.net"], "tcp_ports": [22],
           "held_packages": ["iproute2"], "login_accounts": ["root", "hh-password"], "banner_expected": True}


@pytest.fixture(name="control_map")
def control_map_fixture():
    with open(CONTROL_MAP) as handle:
        return yaml.safe_load(handle)


# ---------------------------------------------------------------------------- the join


def test_a_control_without_checks_is_not_covered():
    assert control_status([]) == NOT_COVERED


def test_a_control_with_a_check_without_evidence_is_not_covered():
    assert control_status([{"status": PASS}, {"status": NO_EVIDENCE}]) == NOT_COVERED


def test_a_failed_check_fails_its_control_whatever_the_others_say():
    assert control_status([{"status": PASS}, {"status": NO_EVIDENCE}, {"status": FAIL}]) == FAIL


def test_every_check_passing_passes_the_control():
    assert control_status([{"status": PASS}, {"status": PASS}]) == PASS


def test_control_map_names_only_known_checks_and_cites_soc2_and_gdpr_text(control_map):
    validate_control_map(control_map)
    ids = {fw["id"] for fw in control_map["frameworks"]}
    assert ids == {"iso27001_2022", "soc2_tsc", "gdpr_art32"}
    for fw in control_map["frameworks"]:
        for control in fw["controls"]:
            if fw["id"] != "iso27001_2022":
                assert control.get("text") and control.get("source"), control["id"]
    soc2 = {c["id"] for fw in control_map["frameworks"] if fw["id"] == "soc2_tsc" for c in fw["controls"]}
    assert {"CC6.1", "CC6.6", "CC7.1", "CC7.2", "CC8.1"} <= soc2


def test_control_map_refuses_an_unknown_check_and_a_duplicate():
    with pytest.raises(ComplianceError, match="unknown check"):
        validate_control_map({"frameworks": [{"id": "x", "controls": [{"id": "1", "title": "t", "checks": ["nope"]}]}]})
    with pytest.raises(ComplianceError, match="twice"):
        validate_control_map({"frameworks": [{"id": "x", "controls": [{"id": "1", "title": "t"}, {"id": "1", "title": "u"}]}]})


def _controls(report):
    return {(fw["id"], c["id"]): c for fw in report["frameworks"] for c in fw["controls"]}


def test_hardened_lab_node_report(control_map):
    report = node_report("hh-d12", hardened_evidence(), control_map, CONTEXT, "2026-12-01T21:00:00Z")
    controls = _controls(report)
    # backed by checks that all passed on real output
    for key in [("iso27001_2022", "A.5.15"), ("iso27001_2022", "A.8.5"), ("iso27001_2022", "A.8.15"),
                ("iso27001_2022", "A.8.21"), ("soc2_tsc", "CC6.7")]:
        assert controls[key]["status"] == PASS, (key, controls[key]["checks"])
    # no check in the collection: not covered, with the reason
    for key in [("iso27001_2022", "A.8.7"), ("iso27001_2022", "A.8.13"), ("gdpr_art32", "Art.32(1)(c)")]:
        assert controls[key]["status"] == NOT_COVERED and controls[key]["reason"]
    # auditd cannot run in a container: loaded rules have no evidence, so monitoring is not covered
    assert controls[("iso27001_2022", "A.8.16")]["status"] == NOT_COVERED
    # no firewall on the node: the check fails and fails the controls it backs
    assert report["checks"]["firewall_default_deny"]["status"] == FAIL
    assert controls[("iso27001_2022", "A.8.20")]["status"] == FAIL
    assert controls[("soc2_tsc", "CC6.6")]["status"] == FAIL
    # SSG rules failed on the lab node: configuration management fails with them named
    assert report["checks"]["openscap_no_failures"]["status"] == FAIL
    assert "sudo_add_noexec" in report["checks"]["openscap_no_failures"]["detail"]
    assert controls[("iso27001_2022", "A.8.9")]["status"] == FAIL
    # every control's status is what its checks say
    for c in controls.values():
        assert c["status"] == control_status(c["checks"])
    assert sum(report["totals"].values()) == len(controls)


def test_evidence_is_hashed_and_timestamped(control_map):
    ev = hardened_evidence()
    report = node_report("hh-d12", ev, control_map, CONTEXT)
    record = report["evidence"]["sshd_effective"]
    assert record["sha256"] == hashlib.sha256(ev["sshd_effective"]["stdout"].encode("utf-8")).hexdigest()
    assert record["collected_at"] == "2026-12-01T20:59:01+00:00"
    assert report["evidence"]["auditctl_rules"] == {"skipped": True, "reason": "a container shares the host's kernel"}


def test_no_evidence_at_all_covers_nothing(control_map):
    report = node_report("empty", {}, control_map, {})
    assert report["totals"][PASS] == 0
    assert report["totals"][FAIL] > 0  # a missing compiled audit rule file, firewall are failures
    assert all(c["status"] != PASS for c in _controls(report).values())


# ---------------------------------------------------------------------------- checks on real output


def test_debian_default_sshd_fails_key_only_and_crypto():
    ev = {"sshd_effective": rec(fx("sshd-T-debian12-default.txt"))}
    checks = run_checks(ev, {"ssh_allow_groups": ["fleet-ssh"]})
    assert checks["ssh_key_only"]["status"] == FAIL and "passwordauthentication yes" in checks["ssh_key_only"]["detail"]
    assert checks["ssh_modern_crypto"]["status"] == FAIL
    assert "hmac-sha1" in checks["ssh_modern_crypto"]["detail"] and "ecdh-sha2-nistp256" in checks["ssh_modern_crypto"]["detail"]
    assert checks["ssh_allow_groups"]["status"] == FAIL
    assert checks["ssh_root_no_password"]["status"] == PASS  # Debian's default: without-password


def test_hardened_sshd_passes_and_parses():
    conf = parse_sshd_t(fx("sshd-T-debian12-hardened.txt"))
    assert conf["allowgroups"] == ["fleet-ssh"]
    checks = run_checks({"sshd_effective": rec(fx("sshd-T-debian12-hardened.txt"))}, CONTEXT,
                        ["ssh_key_only", "ssh_modern_crypto", "ssh_allow_groups", "ssh_root_no_password", "ssh_banner"])
    assert {k: v["status"] for k, v in checks.items()} == dict.fromkeys(checks, PASS)


def test_allow_groups_differing_from_inventory_fail():
    checks = run_checks({"sshd_effective": rec(fx("sshd-T-debian12-hardened.txt"))}, {"ssh_allow_groups": ["admins"]},
                        ["ssh_allow_groups"])
    assert checks["ssh_allow_groups"]["status"] == FAIL


def test_audit_rules_missing_a_category_fail():
    full = fx("audit.rules-debian12-hardened.txt")
    assert run_checks({"audit_rules_file": rec(full)}, {}, ["audit_rules_configured"])["audit_rules_configured"]["status"] == PASS
    without_modules = "\n".join(line for line in full.splitlines() if "module" not in line)
    result = run_checks({"audit_rules_file": rec(without_modules)}, {}, ["audit_rules_configured"])["audit_rules_configured"]
    assert result["status"] == FAIL and "modules" in result["detail"]


def test_oscap_stdout_with_carriage_returns():
    results = parse_oscap_stdout(fx("oscap-eval-debian12-tailored.txt.gz"))
    assert len(results) == fx("oscap-eval-debian12-tailored.txt.gz").count("\nRule")
    assert results["xccdf_org.ssgproject.content_rule_sudo_add_noexec"] == "fail"
    assert "pass" in results.values() and "notapplicable" in results.values()


def test_lynis_report_parsed():
    report = parse_lynis_report(fx("lynis-report-debian12.dat"))
    assert report["lynis_version"] == "3.0.8"
    assert report["complete"] and len(report["tests_executed"]) == 80
    assert report["hardening_index"] == 58 and report["warnings"] == []
    assert all(s["test"] for s in report["suggestions"])


def test_lynis_cut_short_fails():
    text = "\n".join(line for line in fx("lynis-report-debian12.dat").splitlines() if not line.startswith("report_datetime_end"))
    assert run_checks({"lynis_report": rec(text)}, {}, ["lynis_audit"])["lynis_audit"]["status"] == FAIL


def test_pending_security_updates_fail_and_without_security_source_no_evidence():
    pending = {"apt_policy": rec(fx("apt-cache-policy-debian12-security.txt")),
               "apt_upgrade_simulation": rec(fx("apt-get-s-dist-upgrade-debian12-security-pending.txt"))}
    result = run_checks(pending, {}, ["no_pending_security_updates"])["no_pending_security_updates"]
    assert result["status"] == FAIL and result["detail"].startswith("25 security update(s)")
    assert len([p for p in parse_apt_simulate(fx("apt-get-s-dist-upgrade-debian12-security-pending.txt")) if p["security"]]) == 25
    lab = {"apt_policy": rec(fx("apt-cache-policy-debian12.txt")),
           "apt_upgrade_simulation": rec(fx("apt-get-s-dist-upgrade-debian12.txt"))}
    assert run_checks(lab, {}, ["no_pending_security_updates"])["no_pending_security_updates"]["status"] == NO_EVIDENCE


def test_unattended_blacklist_must_cover_every_hold():
    conf = rec(fx("apt-config-dump-debian12-hardened.txt"))
    ok = run_checks({"apt_holds": rec("iproute2\nnvidia-driver"), "apt_config": conf}, {}, ["unattended_respects_holds"])
    assert ok["unattended_respects_holds"]["status"] == PASS
    bad = run_checks({"apt_holds": rec("iproute2\nzlib1g"), "apt_config": conf}, {}, ["unattended_respects_holds"])
    assert bad["unattended_respects_holds"]["status"] == FAIL and "zlib1g" in bad["unattended_respects_holds"]["detail"]
    assert run_checks({"apt_config": conf}, {}, ["unattended_security_updates"])["unattended_security_updates"]["status"] == PASS


def test_listening_ports_against_inventory():
    ev = {"listening_ports": rec(fx("ss-H-ltnp-debian12.txt"))}
    assert run_checks(ev, {"tcp_ports": [22]}, ["listening_ports"])["listening_ports"]["status"] == PASS
    assert run_checks(ev, {"tcp_ports": [9100]}, ["listening_ports"])["listening_ports"]["status"] == FAIL
    assert run_checks(ev, {}, ["listening_ports"])["listening_ports"]["status"] == NO_EVIDENCE


def test_login_accounts_and_time_servers_against_inventory():
    ev = {"accounts": rec(fx("getent-passwd-debian12.txt")), "login_shells": rec(fx("shells-debian12.txt")),
          "chrony_conf": rec(fx("chrony-conf-debian12-hardened.txt"))}
    checks = run_checks(ev, {"login_accounts": ["root"], "time_servers": ["192.0.2.10"]}, ["login_accounts", "time_configured"])
    assert checks["login_accounts"]["status"] == FAIL and "hh-password" in checks["login_accounts"]["detail"]
    assert checks["time_configured"]["status"] == FAIL and "ntp.example.net" in checks["time_configured"]["detail"]


def test_container_chronyc_refusal_is_a_failure_when_it_was_asked():
    ev = {"chrony_tracking": {"command": "chronyc -n tracking", "rc": 1, "stdout": "506 Cannot talk to daemon", "stderr": "", "start": ""}}
    assert run_checks(ev, {}, ["time_synchronized"])["time_synchronized"]["status"] == FAIL


def test_luks_without_volumes_is_not_covered_and_unbound_volume_fails():
    assert run_checks({}, {}, ["luks_tang"])["luks_tang"]["status"] == NO_EVIDENCE
    ev = {"luks_/dev/nvme1n1": rec(""), "clevis_/dev/nvme1n1": rec("")}
    result = run_checks(ev, {"data_volumes": ["/dev/nvme1n1"]}, ["luks_tang"])["luks_tang"]
    assert result["status"] == FAIL and "no Tang binding" in result["detail"]


def test_unknown_check_is_refused():
    with pytest.raises(ComplianceError):
        run_checks({}, {}, ["no_such_check"])
    assert "openscap_scan" in CHECKS


# ---------------------------------------------------------------------------- fleet, Markdown


def test_fleet_fails_a_control_failing_on_one_host_and_keeps_not_covered(control_map):
    good = node_report("a", hardened_evidence(), control_map, CONTEXT)
    ev = hardened_evidence()
    ev["sshd_effective"] = rec(fx("sshd-T-debian12-default.txt"))
    bad = node_report("b", ev, control_map, CONTEXT)
    fleet = fleet_report([good, bad], "now")
    rows = {(c["framework"], c["id"]): c for c in fleet["controls"]}
    assert rows[("iso27001_2022", "A.8.5")]["status"] == FAIL
    assert rows[("iso27001_2022", "A.8.5")]["hosts"][FAIL] == ["b"]
    assert rows[("iso27001_2022", "A.8.15")]["status"] == PASS
    assert rows[("iso27001_2022", "A.8.7")]["status"] == NOT_COVERED
    text = fleet_markdown(fleet)
    assert "| iso27001_2022 | A.8.5 Secure authentication | **fail** | b |" in text
    node_text = node_markdown(bad)
    assert "**fail**" in node_text and "sha256" in node_text and "## Lynis" in node_text


# aa-status text written by hand to the format strings of AppArmor's binutils/aa_status.c (the
# lab's kernel has no AppArmor, so no capture could be made here): a node with enforcing profiles,
# and the older "mode :" spelling.
AA_STATUS_ENFORCING = """apparmor module is loaded.
3 profiles are loaded.
2 profiles are in enforce mode.
   /usr/bin/man
   nvidia_modprobe
1 profiles are in complain mode.
   /usr/sbin/sssd
0 profiles are in kill mode.
0 profiles are in unconfined mode.
1 processes have profiles defined.
1 processes are in enforce mode.
   /usr/sbin/chronyd (812)
0 processes are in complain mode.
0 processes are unconfined but have a profile defined.
0 processes are in mixed mode.
0 processes are in kill mode.
"""


def apparmor(enabled="Y", status=AA_STATUS_ENFORCING, status_rc=0, userns=None, userns_rc=0):
    ev = {"apparmor_enabled": rec(enabled), "apparmor_status": rec(status, rc=status_rc)}
    if userns is not None or userns_rc:
        ev["apparmor_userns"] = rec(userns or "", rc=userns_rc)
    return ev


def test_aa_status_counts_are_parsed_in_both_spellings():
    status = parse_aa_status(AA_STATUS_ENFORCING)
    assert status == {"module_loaded": True, "profiles": {"enforce": 2, "complain": 1, "kill": 0, "unconfined": 0},
                      "processes": {"enforce": 1, "complain": 0, "mixed": 0, "kill": 0}, "unconfined_with_profile": 0}
    old = parse_aa_status("apparmor module is loaded.\n1 profiles are in enforce mode.\n2 processes are in enforce mode :\n"
                          "0 processes are unconfined but have a profile defined.\n")
    assert old["processes"] == {"enforce": 2} and old["unconfined_with_profile"] == 0


def test_apparmor_enforcing_passes_with_enforced_profiles_and_nothing_escaping():
    result = run_checks(apparmor(), {}, ["apparmor_enforcing"])["apparmor_enforcing"]
    assert result["status"] == PASS
    assert result["detail"] == "2 profile(s) in enforce mode, 1 in complain mode, 0 process(es) unconfined with a profile"


@pytest.mark.parametrize("evidence, detail", [
    (apparmor(enabled="N"), "AppArmor is disabled (/sys/module/apparmor/parameters/enabled: N)"),
    ({"apparmor_enabled": rec("", rc=1)}, "no AppArmor in this kernel"),
    (apparmor(status=AA_STATUS_ENFORCING.replace("2 profiles are in enforce", "0 profiles are in enforce")),
     "no profile in enforce mode"),
    (apparmor(status=AA_STATUS_ENFORCING.replace("0 processes are unconfined", "3 processes are unconfined")),
     "3 process(es) unconfined although a profile is defined"),
    (apparmor(status="", status_rc=127), "its profiles cannot be read: apparmor_status: rc 127"),
    (apparmor(status="apparmor module is loaded.\n"), "aa-status gives no count of unconfined processes"),
])
def test_apparmor_enforcing_fails_naming_what_is_wrong(evidence, detail):
    result = run_checks(evidence, {}, ["apparmor_enforcing"])["apparmor_enforcing"]
    assert result["status"] == FAIL
    assert detail in result["detail"]


def test_apparmor_in_a_container_is_no_evidence_with_the_reason():
    ev = {"apparmor_enabled": {"skipped": True, "reason": "hh is a container: AppArmor is the host kernel's"},
          "apparmor_userns": {"skipped": True, "reason": "hh is a container: the setting is the host kernel's"}}
    checks = run_checks(ev, {"userns_restricted": True}, ["apparmor_enforcing", "unprivileged_userns_restricted"])
    assert checks["apparmor_enforcing"] == {"status": NO_EVIDENCE, "evidence": [], "title": CHECKS["apparmor_enforcing"][0],
                                            "detail": "hh is a container: AppArmor is the host kernel's"}
    assert checks["unprivileged_userns_restricted"]["status"] == NO_EVIDENCE


@pytest.mark.parametrize("expected, value, rc, status", [
    (True, "1", 0, PASS),
    (True, "0", 0, FAIL),
    (True, "", 255, FAIL),      # a kernel without the setting cannot restrict
    (False, "0", 0, PASS),      # enroot, rootless containers: namespaces allowed on purpose
    (False, "", 255, PASS),
    (False, "1", 0, FAIL),
    (None, "1", 0, NO_EVIDENCE),
])
def test_userns_restriction_is_judged_against_the_inventory(expected, value, rc, status):
    ev = {"apparmor_userns": rec(value, rc=rc)}
    result = run_checks(ev, {"userns_restricted": expected}, ["unprivileged_userns_restricted"])
    assert result["unprivileged_userns_restricted"]["status"] == status
    if expected is None:
        assert "compliance_expected_userns_restricted" in result["unprivileged_userns_restricted"]["detail"]


@pytest.mark.parametrize("bad", ["true", 1, "yes"])
def test_userns_expectation_must_be_a_boolean_named_in_the_error(bad):
    with pytest.raises(ComplianceError, match="compliance_expected_userns_restricted .userns_restricted.: true, false"):
        run_checks({}, {"userns_restricted": bad}, ["unprivileged_userns_restricted"])
