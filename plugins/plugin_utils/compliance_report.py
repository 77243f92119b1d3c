# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Compliance evidence, judged on the controller: parsers of what playbooks/compliance.yml reads
from a node, the checks judged on it, the join of those checks against the control map
(playbooks/files/compliance/control_map.yml), the reports and the probes of the encrypted
volumes. The node side, running the probes, is plugins/module_utils/compliance.py.

Pure functions, no Ansible. A check is pass, fail or no_evidence; a control passes only
when every one of its checks passes, fails as soon as one fails, and is "not covered"
otherwise (no check, or a check without evidence). Nothing here may turn missing evidence
into a pass.
"""


import hashlib
import re

PASS = "pass"
FAIL = "fail"
NO_EVIDENCE = "no_evidence"
NOT_COVERED = "not covered"

# OpenSSH algorithms the checks accept (what the hardening role sets by default). Sources:
# dev-sec/ansible-collection-hardening roles/ssh_hardening/vars/Debian_12.yml (ciphers, MACs,
# KEX for OpenSSH 9) and ssh-audit's policy for OpenSSH 9 (no CBC, no SHA-1, no NIST curves).
MODERN_CIPHERS = (
    "chacha20-poly1305@openssh.com", "aes256-gcm@openssh.com", "aes128-gcm@openssh.com",
    "aes256-ctr", "aes192-ctr", "aes128-ctr",
)
MODERN_MACS = (
    "hmac-sha2-512-etm@openssh.com", "hmac-sha2-256-etm@openssh.com", "umac-128-etm@openssh.com",
)
MODERN_KEX = (
    "sntrup761x25519-sha512@openssh.com", "sntrup761x25519-sha512", "mlkem768x25519-sha256",
    "curve25519-sha256", "curve25519-sha256@libssh.org",
    "diffie-hellman-group16-sha512", "diffie-hellman-group18-sha512",
    "diffie-hellman-group-exchange-sha256",
)
ROOT_WITHOUT_PASSWORD = ("no", "prohibit-password", "without-password", "forced-commands-only")

# What the audit rules must watch, by category: each alternative is a list of patterns that
# must all appear in one rule line (ComplianceAsCode rule families audit_rules_usergroup_modification,
# audit_rules_privileged_commands / sysadmin_actions, audit_rules_kernel_module_loading,
# audit_rules_time_*).
AUDIT_CATEGORIES = {
    "identity": [[r"/etc/passwd\b"], [r"/etc/shadow\b"], [r"/etc/group\b"], [r"/etc/gshadow\b"]],
    "privilege": [[r"/etc/sudoers\b"], [r"(path=|-w )/usr/bin/sudo\b"]],
    "modules": [[r"\binit_module\b"], [r"\bfinit_module\b"], [r"\bdelete_module\b"]],
    "time": [[r"\badjtimex\b"], [r"\bsettimeofday\b"], [r"\bclock_settime\b"], [r"/etc/localtime\b"]],
}


class ComplianceError(Exception):
    """Input that cannot be judged (a malformed control map or evidence record)."""


def sha256_text(text):
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def _whole(text):
    """TEXT as a non-negative int when it is ASCII digits only, else None (str.isdigit() also
    takes '²', which int() refuses)."""
    text = (text or "").strip()
    return int(text) if re.fullmatch(r"[0-9]{1,18}", text) else None


# Evidence file names: letters, digits and . _ - only, never hidden, never . or .., at most
# EVIDENCE_NAME_MAX characters; a name that had to change carries a hash of the original so
# that two names never share a file (luks_/dev/sda and luks__dev_sda).
EVIDENCE_NAME_MAX = 96


def evidence_file_name(name):
    """The file name (without extension) that evidence NAME is written under on the controller."""
    if not isinstance(name, str) or not name:
        raise ComplianceError("evidence name must be a non-empty string, got %r" % (name,))
    safe = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9._-]+", "_", name)).strip("._-")
    if safe == name and len(safe) <= EVIDENCE_NAME_MAX:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    return "%s-%s" % (safe[:EVIDENCE_NAME_MAX - 13] or "evidence", digest)


# ---------------------------------------------------------------------------- parsers


def parse_sshd_t(text):
    """`sshd -T`: {keyword: [values...]} (keywords lower case; repeated keywords accumulate)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _sep, value = line.partition(" ")
        out.setdefault(key.lower(), []).append(value.strip())
    return out


def parse_lynis_report(text):
    """lynis-report.dat: key=value lines; keys ending in [] collect lists. Warnings and
    suggestions are "TEST-ID|text|details|solution|"; they come back as dicts."""
    values = {}
    for line in (text or "").splitlines():
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _sep, value = line.partition("=")
        if key.endswith("[]"):
            values.setdefault(key[:-2], []).append(value)
        else:
            values[key] = value

    def findings(name):
        items = []
        for raw in values.get(name, []):
            parts = raw.split("|")
            items.append({"test": parts[0], "text": parts[1] if len(parts) > 1 else "",
                          "details": parts[2] if len(parts) > 2 else ""})
        return items

    executed = [t for t in values.get("tests_executed", "").split("|") if t]
    skipped = [t for t in values.get("tests_skipped", "").split("|") if t]
    index = values.get("hardening_index")
    return {
        "lynis_version": values.get("lynis_version", ""),
        "report_datetime_start": values.get("report_datetime_start", ""),
        "report_datetime_end": values.get("report_datetime_end", ""),
        "hardening_index": _whole(index),
        "tests_executed": executed,
        "tests_skipped": skipped,
        "warnings": findings("warning"),
        "suggestions": findings("suggestion"),
        "complete": "report_datetime_end" in values,
    }


def parse_oscap_stdout(text):
    """`oscap xccdf eval` standard output: {rule id: result} from its Rule/Result lines
    (oscap writes "Rule\r\t<id>": the carriage return is its progress display)."""
    results = {}
    rule = None
    # split on newlines only: str.splitlines() would also cut at those carriage returns
    for line in (text or "").split("\n"):
        key, _sep, value = line.partition("\t")
        key, value = key.strip(), value.strip()
        if key == "Rule":
            rule = value
        elif key == "Result" and rule:
            results[rule] = value
            rule = None
    return results


def oscap_summary(results):
    counts = {}
    for result in results.values():
        counts[result] = counts.get(result, 0) + 1
    return {
        "counts": counts,
        "failed": sorted(r for r, v in results.items() if v in ("fail", "error")),
        "evaluated": sum(v for k, v in counts.items() if k in ("pass", "fail", "error")),
    }


def parse_key_colon(text):
    """`chronyc tracking` style "Key   : value" lines."""
    out = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_ss_listen(text):
    """`ss -H -ltn` (or -ltnp): [{address, port, process}] for TCP sockets in LISTEN."""
    out = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[0] == "State":
            continue
        if fields[0] != "LISTEN":
            continue
        local = fields[3]
        address, _sep, port = local.rpartition(":")
        if _whole(port) is None:
            continue
        process = " ".join(fields[5:]) if len(fields) > 5 else ""
        out.append({"address": address.strip("[]"), "port": _whole(port), "process": process})
    return out


def is_loopback(address):
    address = address.split("%", 1)[0]
    return address.startswith("127.") or address in ("::1", "localhost")


def parse_login_accounts(passwd_text, shells_text):
    """Accounts whose shell is a login shell listed in /etc/shells (getent passwd lines)."""
    shells = set()
    for line in (shells_text or "").splitlines():
        line = line.strip()
        if line and not line.startswith("#") and not re.search(r"/(nologin|false)$", line):
            shells.add(line)
    accounts = []
    for line in (passwd_text or "").splitlines():
        parts = line.split(":")
        if len(parts) >= 7 and parts[6] in shells:
            accounts.append({"name": parts[0], "uid": parts[2] if _whole(parts[2]) is None else _whole(parts[2]),
                             "shell": parts[6]})
    return accounts


def parse_apt_config_list(text, key):
    """Values of KEY (e.g. Unattended-Upgrade::Package-Blacklist) in `apt-config dump`."""
    values = []
    prefix = key + ":: "
    for line in (text or "").splitlines():
        if line.startswith(prefix):
            values.append(line[len(prefix):].rstrip(";").strip('"'))
    return values


def parse_apt_config_value(text, key):
    for line in (text or "").splitlines():
        if line.startswith(key + " "):
            return line[len(key) + 1:].rstrip(";").strip('"')
    return None


def parse_apt_simulate(text):
    """`apt-get -s upgrade`/`dist-upgrade`: [{package, version, origin, security}] per Inst line."""
    out = []
    for line in (text or "").splitlines():
        m = re.match(r"^Inst (\S+) (?:\[[^\]]*\] )?\((\S+) ([^\[\)]*?)(?: \[[^\]]*\])?\)", line)
        if m:
            origin = m.group(3)
            out.append({"package": m.group(1), "version": m.group(2), "origin": origin,
                        "security": "security" in origin.lower()})
    return out


def parse_effective_conf(text):
    """`systemd-analyze cat-config` output: the last value of each key wins (sections ignored)."""
    out = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line[0] in "#;[":
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def audit_categories_missing(rules_text):
    """The AUDIT_CATEGORIES (and their alternatives) no rule line covers."""
    lines = [line for line in (rules_text or "").splitlines() if line.strip() and not line.lstrip().startswith("#")]
    missing = []
    for category, alternatives in AUDIT_CATEGORIES.items():
        for patterns in alternatives:
            if not any(all(re.search(p, line) for p in patterns) for line in lines):
                missing.append("%s (%s)" % (category, " ".join(patterns).replace("\\b", "")))
    return missing


# ---------------------------------------------------------------------------- checks


def _result(status, detail, evidence):
    return {"status": status, "detail": detail, "evidence": list(evidence)}


def _ok(ev, name):
    """The evidence record NAME when the probe ran and exited 0, else None."""
    rec = ev.get(name)
    if rec and not rec.get("skipped") and rec.get("rc") == 0:
        return rec
    return None


def _missing(ev, name):
    rec = ev.get(name) or {}
    if rec.get("skipped"):
        return rec.get("reason") or "%s was not collected" % name
    if not rec:
        return "%s was not collected" % name
    return "%s: rc %s %s" % (name, rec.get("rc"), (rec.get("stderr") or "").strip()[:200])


def check_ssh_key_only(ev, ctx):
    rec = _ok(ev, "sshd_effective")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "sshd_effective"), [])
    conf = parse_sshd_t(rec["stdout"])
    want = {"passwordauthentication": "no", "kbdinteractiveauthentication": "no",
            "pubkeyauthentication": "yes", "permitemptypasswords": "no"}
    bad = ["%s %s (want %s)" % (k, (conf.get(k) or ["?"])[0], v) for k, v in want.items()
           if (conf.get(k) or [""])[0] != v]
    return _result(FAIL if bad else PASS, "; ".join(bad) or "keys only: " + ", ".join(
        "%s %s" % kv for kv in sorted(want.items())), ["sshd_effective"])


def check_ssh_root_login(ev, ctx):
    rec = _ok(ev, "sshd_effective")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "sshd_effective"), [])
    value = (parse_sshd_t(rec["stdout"]).get("permitrootlogin") or ["?"])[0]
    ok = value in ROOT_WITHOUT_PASSWORD
    return _result(PASS if ok else FAIL, "permitrootlogin %s" % value, ["sshd_effective"])


def check_ssh_crypto(ev, ctx):
    rec = _ok(ev, "sshd_effective")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "sshd_effective"), [])
    conf = parse_sshd_t(rec["stdout"])
    bad = []
    for key, allowed in (("ciphers", MODERN_CIPHERS), ("macs", MODERN_MACS), ("kexalgorithms", MODERN_KEX)):
        offered = [a for a in (conf.get(key) or [""])[0].split(",") if a]
        if not offered:
            bad.append("%s not reported" % key)
        weak = [a for a in offered if a not in allowed]
        if weak:
            bad.append("%s offers %s" % (key, ",".join(weak)))
    return _result(FAIL if bad else PASS, "; ".join(bad) or "ciphers, MACs and KEX all modern",
                   ["sshd_effective"])


def check_ssh_allow_groups(ev, ctx):
    rec = _ok(ev, "sshd_effective")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "sshd_effective"), [])
    groups = " ".join(parse_sshd_t(rec["stdout"]).get("allowgroups") or []).split()
    expected = ctx.get("ssh_allow_groups") or []
    if not groups:
        return _result(FAIL, "no AllowGroups: every account with a key may log in", ["sshd_effective"])
    # sshd matches AllowGroups entries as patterns (* ? and !negation): "*" admits every group.
    patterns = [g for g in groups if re.search(r"[*?!]", g)]
    if patterns:
        return _result(FAIL, "AllowGroups %s holds pattern(s) %s, which admit groups nobody named"
                       % (" ".join(groups), " ".join(patterns)), ["sshd_effective"])
    if not expected:
        return _result(NO_EVIDENCE, "AllowGroups %s; the inventory names no groups "
                       "(host_hardening_ssh_allow_groups) to compare with" % " ".join(groups), [])
    if sorted(set(groups)) != sorted(set(expected)):
        return _result(FAIL, "AllowGroups %s, inventory says %s" % (" ".join(groups), " ".join(expected)),
                       ["sshd_effective"])
    return _result(PASS, "AllowGroups %s" % " ".join(groups), ["sshd_effective"])


def check_ssh_banner(ev, ctx):
    if not ctx.get("banner_expected"):
        return _result(NO_EVIDENCE, "the inventory asks for no login banner", [])
    rec = _ok(ev, "sshd_effective")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "sshd_effective"), [])
    banner = (parse_sshd_t(rec["stdout"]).get("banner") or ["none"])[0]
    return _result(FAIL if banner == "none" else PASS, "banner %s" % banner, ["sshd_effective"])


def check_password_policy(ev, ctx):
    minlen = ctx.get("password_minlen")
    if not minlen:
        return _result(NO_EVIDENCE, "the inventory asks for no password policy", [])
    rec = _ok(ev, "pwquality_conf")
    if not rec:
        return _result(FAIL, "no pwquality configuration: " + _missing(ev, "pwquality_conf"), ["pwquality_conf"])
    conf = parse_effective_conf(rec["stdout"])
    have = conf.get("minlen", "")
    ok = _whole(have) is not None and _whole(have) >= minlen
    pam = _ok(ev, "pam_password")
    uses = bool(pam and re.search(r"^\s*password\s+\S+\s+pam_pwquality\.so", pam["stdout"], re.M))
    bad = []
    if not ok:
        bad.append("minlen %s < %s" % (have or "unset", minlen))
    if not uses:
        bad.append("pam_pwquality not in /etc/pam.d/common-password")
    return _result(FAIL if bad else PASS, "; ".join(bad) or "pam_pwquality minlen %s" % have,
                   ["pwquality_conf", "pam_password"])


def check_audit_rules_configured(ev, ctx):
    rec = _ok(ev, "audit_rules_file")
    if not rec:
        return _result(FAIL, "no compiled audit rules: " + _missing(ev, "audit_rules_file"), ["audit_rules_file"])
    missing = audit_categories_missing(rec["stdout"])
    return _result(FAIL if missing else PASS,
                   "not watched: " + ", ".join(missing) if missing
                   else "identity, privilege use, module loading and time changes watched",
                   ["audit_rules_file"])


def check_audit_rules_loaded(ev, ctx):
    active = ev.get("auditd_active") or {}
    rec = _ok(ev, "auditctl_rules")
    if active.get("skipped") or (ev.get("auditctl_rules") or {}).get("skipped"):
        return _result(NO_EVIDENCE, _missing(ev, "auditctl_rules"), [])
    if (active.get("stdout") or "").strip() != "active":
        return _result(FAIL, "auditd is %s" % ((active.get("stdout") or "not reported").strip()), ["auditd_active"])
    if not rec:
        return _result(FAIL, _missing(ev, "auditctl_rules"), ["auditd_active", "auditctl_rules"])
    missing = audit_categories_missing(rec["stdout"])
    return _result(FAIL if missing else PASS,
                   "loaded rules miss: " + ", ".join(missing) if missing else "auditd active, rules loaded",
                   ["auditd_active", "auditctl_rules"])


def check_journald_persistent(ev, ctx):
    conf_rec = _ok(ev, "journald_conf")
    files = ev.get("journal_files") or {}
    if not conf_rec:
        return _result(NO_EVIDENCE, _missing(ev, "journald_conf"), [])
    conf = parse_effective_conf(conf_rec["stdout"])
    bad = []
    if conf.get("Storage") != "persistent":
        bad.append("Storage=%s" % conf.get("Storage", "auto (default)"))
    if not conf.get("SystemMaxUse"):
        bad.append("no SystemMaxUse cap")
    if not (files.get("rc") == 0 and (files.get("stdout") or "").strip()):
        bad.append("no journal file under /var/log/journal")
    return _result(FAIL if bad else PASS, "; ".join(bad) or "Storage=persistent, SystemMaxUse=%s, journal files in /var/log/journal"
                   % conf.get("SystemMaxUse"), ["journald_conf", "journal_files"])


def check_time_configured(ev, ctx):
    expected = ctx.get("time_servers") or []
    if not expected:
        return _result(NO_EVIDENCE, "the inventory names no time servers to compare with", [])
    rec = _ok(ev, "chrony_conf")
    if not rec:
        return _result(FAIL, "no chrony configuration: " + _missing(ev, "chrony_conf"), ["chrony_conf"])
    sources = set(re.findall(r"^\s*(?:server|pool)\s+(\S+)", rec["stdout"], re.M))
    missing = [s for s in expected if s not in sources]
    extra = sorted(sources - set(expected))
    bad = (["missing " + ", ".join(missing)] if missing else []) + (["unexpected " + ", ".join(extra)] if extra else [])
    return _result(FAIL if bad else PASS, "; ".join(bad) or "chrony uses " + ", ".join(expected), ["chrony_conf"])


def check_time_synchronized(ev, ctx):
    rec = ev.get("chrony_tracking") or {}
    if rec.get("skipped"):
        return _result(NO_EVIDENCE, _missing(ev, "chrony_tracking"), [])
    if rec.get("rc") != 0:
        return _result(FAIL, "chronyc tracking: rc %s %s" % (rec.get("rc"), (rec.get("stdout") or rec.get("stderr") or "").strip()[:200]),
                       ["chrony_tracking"])
    data = parse_key_colon(rec.get("stdout"))
    leap = data.get("Leap status", "")
    stratum = data.get("Stratum", "0")
    ok = leap == "Normal" and _whole(stratum) is not None and 0 < _whole(stratum) < 16
    return _result(PASS if ok else FAIL, "leap status %s, stratum %s, reference %s"
                   % (leap or "?", stratum, data.get("Reference ID", "?")), ["chrony_tracking"])


def check_firewall_default_deny(ev, ctx):
    rec = ev.get("firewall_rules") or {}
    if rec.get("skipped"):
        return _result(NO_EVIDENCE, _missing(ev, "firewall_rules"), [])
    if rec.get("rc") != 0:
        return _result(FAIL, "no readable iptables policy: " + _missing(ev, "firewall_rules"), ["firewall_rules"])
    chain = ctx.get("firewall_chain") or "GPUCLOUD-INPUT"
    lines = (rec.get("stdout") or "").splitlines()
    policy_drop = "-P INPUT DROP" in lines
    jumps = "-A INPUT -j %s" % chain in lines
    own = [line for line in lines if line.startswith("-A %s " % chain)]
    ends_deny = bool(own) and re.search(r"-j (DROP|REJECT)\b", own[-1]) is not None
    ok = policy_drop or (jumps and ends_deny)
    return _result(PASS if ok else FAIL,
                   "INPUT policy DROP" if policy_drop else
                   ("INPUT jumps to %s, which ends in %s" % (chain, own[-1]) if ok else
                    "neither INPUT policy DROP nor a %s chain ending in DROP/REJECT" % chain),
                   ["firewall_rules"])


def check_listening_ports(ev, ctx):
    rec = _ok(ev, "listening_ports")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "listening_ports"), [])
    expected = ctx.get("tcp_ports")
    if expected is None or expected == []:
        return _result(NO_EVIDENCE, "listening ports recorded; the inventory names no expected ports to judge them", [])
    exposed = sorted({s["port"] for s in parse_ss_listen(rec["stdout"]) if not is_loopback(s["address"])})
    unexpected = [p for p in exposed if p not in expected]
    return _result(FAIL if unexpected else PASS,
                   "unexpected ports answering: %s" % unexpected if unexpected else "answering ports %s all expected" % exposed,
                   ["listening_ports"])


def check_packages_held(ev, ctx):
    expected = ctx.get("held_packages") or []
    if not expected:
        return _result(NO_EVIDENCE, "the inventory locks no package version to compare with", [])
    rec = _ok(ev, "apt_holds")
    if not rec:
        return _result(FAIL, _missing(ev, "apt_holds"), ["apt_holds"])
    held = set(rec["stdout"].split())
    missing = [p for p in expected if p not in held]
    return _result(FAIL if missing else PASS, "not held: " + ", ".join(missing) if missing
                   else "held: " + ", ".join(expected), ["apt_holds"])


def check_unattended_respects_holds(ev, ctx):
    holds = _ok(ev, "apt_holds")
    conf = _ok(ev, "apt_config")
    if not holds or not conf:
        return _result(NO_EVIDENCE, _missing(ev, "apt_holds" if not holds else "apt_config"), [])
    held = holds["stdout"].split()
    if not held:
        return _result(NO_EVIDENCE, "no package is held: nothing for unattended-upgrades to leave alone", [])
    matchers, unjudged = [], []
    for pattern in parse_apt_config_list(conf["stdout"], "Unattended-Upgrade::Package-Blacklist"):
        try:
            matchers.append(BlacklistPattern(pattern))
        except ComplianceError as exc:
            unjudged.append(str(exc))
    uncovered = [name for name in held if not any(m.matches(name) for m in matchers)]
    detail = ("held but not blacklisted for unattended-upgrades: " + ", ".join(uncovered) if uncovered
              else "every held package (%d) is in Unattended-Upgrade::Package-Blacklist" % len(held))
    if unjudged and uncovered:
        detail += "; not judged: " + "; ".join(unjudged)
    return _result(FAIL if uncovered else PASS, detail, ["apt_holds", "apt_config"])


# --------------------------------------------------------------- blacklist patterns
#
# unattended-upgrades matches each Package-Blacklist entry with Python's re.match (from the
# start of the package name). The entries come from the node, and Python's re backtracks: an
# entry like ^(a+)+$ runs for minutes on the controller. BlacklistPattern accepts the part of
# the regex language a package blacklist needs (literals, escapes, ., classes, ^ at the start,
# $ at the end, * + ? and {m,n} on one atom) and matches it in linear time; anything else
# (groups, alternation, back references, look-around, flags) is refused, so the check never
# runs a host's regex and never counts an entry it cannot read as covering a package.

BLACKLIST_PATTERN_MAX = 256
_REPEAT_MAX = 64
_CLASS_ESCAPES = {"d": "0123456789"}


def _one_of(chars):
    def pred(ch):
        return ch in chars
    return pred


def _any_but_newline(ch):
    return ch != "\n"


class BlacklistPattern(object):
    """A Package-Blacklist entry, matched as unattended-upgrades would (re.match), in linear time."""

    def __init__(self, pattern):
        self.pattern = pattern
        if not isinstance(pattern, str) or len(pattern) > BLACKLIST_PATTERN_MAX:
            raise ComplianceError("%r: longer than %d characters" % (str(pattern)[:40] + "...", BLACKLIST_PATTERN_MAX))
        self.items, self.anchored_end = self._parse(pattern)

    def _fail(self, why):
        raise ComplianceError("%r: %s" % (self.pattern, why))

    def _parse(self, p):
        items = []  # [(predicate, kind)], kind: one, opt or star
        i = 1 if p.startswith("^") else 0
        end = len(p)
        anchored_end = False
        if p.endswith("$") and not p.endswith("\\$"):
            anchored_end, end = True, end - 1
        while i < end:
            c = p[i]
            if c == "\\":
                pred, i = _one_of(self._escape(p, i, end)), i + 2
            elif c == ".":
                pred, i = _any_but_newline, i + 1
            elif c == "[":
                pred, i = self._parse_class(p, i + 1, end)
            elif c in "()|^$*+?{}":
                self._fail("%s is not judged (only literals, ., [classes], ^ at the start, $ at the end, "
                           "and * + ? {m,n} after one character)" % c)
            else:
                pred, i = _one_of(c), i + 1
            low, high, i = self._parse_quantifier(p, i, end)
            items += [(pred, "one")] * low
            items += [(pred, "star")] if high is None else [(pred, "opt")] * (high - low)
        return items, anchored_end

    def _escape(self, p, i, end):
        """The characters the escape at p[i] (a backslash) stands for; refuses what is not judged."""
        if i + 1 >= end:
            self._fail("ends in a lone backslash")
        e = p[i + 1]
        if e.isalnum() and e not in _CLASS_ESCAPES:
            self._fail("escape \\%s is not judged" % e)
        return _CLASS_ESCAPES.get(e, e)

    def _parse_quantifier(self, p, i, end):
        if i >= end or p[i] not in "*+?{":
            return 1, 1, i
        c = p[i]
        if c == "{":
            close = p.find("}", i, end)
            m = re.fullmatch(r"([0-9]{1,3})(?:(,)([0-9]{0,3}))?", p[i + 1:close]) if close > 0 else None
            if not m:
                self._fail("{ is not a repeat count")
            low = int(m.group(1))
            high = low if not m.group(2) else (int(m.group(3)) if m.group(3) else None)
            if low > _REPEAT_MAX or (high is not None and (high > _REPEAT_MAX or high < low)):
                self._fail("repeat counts above %d are not judged" % _REPEAT_MAX)
            i = close + 1
        else:
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            i += 1
        if i < end and p[i] == "?":  # lazy: the same names match
            i += 1
        if i < end and p[i] in "*+?{":
            self._fail("a repeated repeat is not judged")
        return low, high, i

    def _parse_class(self, p, i, end):
        negate = i < end and p[i] == "^"
        i += negate
        chars, ranges, first = set(), [], True
        while i < end and (p[i] != "]" or first):
            first = False
            c = p[i]
            if c == "\\":
                chars.update(self._escape(p, i, end))
                i += 2
                continue
            if c == "[":
                self._fail("[ inside a class is not judged")
            if i + 2 < end and p[i + 1] == "-" and p[i + 2] != "]":
                if p[i + 2] == "\\" or ord(p[i + 2]) < ord(c):
                    self._fail("class range %s-%s is not judged" % (c, p[i + 2]))
                ranges.append((c, p[i + 2]))
                i += 3
                continue
            chars.add(c)
            i += 1
        if i >= end:
            self._fail("[ without ]")

        def pred(ch, chars=frozenset(chars), ranges=tuple(ranges), negate=negate):
            inside = ch in chars or any(a <= ch <= b for a, b in ranges)
            return inside != negate
        return pred, i + 1

    def matches(self, name):
        """Whether re.match(pattern, name) would match, by walking all states at once."""
        items, last = self.items, len(self.items)

        def closure(states):
            out, todo = set(), list(states)
            while todo:
                s = todo.pop()
                if s in out:
                    continue
                out.add(s)
                if s < last and items[s][1] in ("opt", "star"):
                    todo.append(s + 1)
            return out

        states = closure({0})
        for ch in name:
            if last in states and not self.anchored_end:
                return True
            nxt = set()
            for s in states:
                if s < last and items[s][0](ch):
                    nxt.add(s if items[s][1] == "star" else s + 1)
            states = closure(nxt)
            if not states:
                return False
        # $ also matches before one final newline, as in Python; package names have none
        return last in states


def _allowed_origin_archive(entry):
    """The archive of an Allowed-Origins entry: "origin:archive" (an unescaped colon) or
    "origin archive", as unattended-upgrades reads it."""
    parts = re.split(r"(?<!\\):", entry, maxsplit=1)
    if len(parts) == 1:
        parts = entry.split(None, 1)
    return parts[1].strip() if len(parts) == 2 else ""


def check_unattended_enabled(ev, ctx):
    conf = _ok(ev, "apt_config")
    if not conf:
        return _result(NO_EVIDENCE, _missing(ev, "apt_config"), [])
    value = parse_apt_config_value(conf["stdout"], "APT::Periodic::Unattended-Upgrade")
    # unattended-upgrades takes both: Origins-Pattern (Debian's file) and the older
    # Allowed-Origins "origin:archive" list (Ubuntu's stock 50unattended-upgrades).
    patterns = parse_apt_config_list(conf["stdout"], "Unattended-Upgrade::Origins-Pattern")
    allowed = parse_apt_config_list(conf["stdout"], "Unattended-Upgrade::Allowed-Origins")
    security = ([o for o in patterns if "security" in o.lower()]
                + [o for o in allowed if "security" in _allowed_origin_archive(o).lower()])
    bad = []
    if value != "1":
        bad.append("APT::Periodic::Unattended-Upgrade %s" % (value or "unset"))
    if not security:
        bad.append("no security origin in Unattended-Upgrade::Origins-Pattern or Allowed-Origins")
    return _result(FAIL if bad else PASS, "; ".join(bad) or "unattended security upgrades on (%s)" % "; ".join(security),
                   ["apt_config"])


def check_security_updates(ev, ctx):
    policy = _ok(ev, "apt_policy")
    sim = _ok(ev, "apt_upgrade_simulation")
    if not policy or not sim:
        return _result(NO_EVIDENCE, _missing(ev, "apt_policy" if not policy else "apt_upgrade_simulation"), [])
    if not re.search(r"security", policy["stdout"], re.I):
        return _result(NO_EVIDENCE, "no security repository configured: pending security updates cannot be told",
                       ["apt_policy"])
    pending = [p["package"] for p in parse_apt_simulate(sim["stdout"]) if p["security"]]
    return _result(FAIL if pending else PASS,
                   "%d security update(s) pending: %s" % (len(pending), ", ".join(pending[:20])) if pending
                   else "no pending security update", ["apt_policy", "apt_upgrade_simulation"])


# aa-status's counting lines, as AppArmor's binutils/aa_status.c prints them: "%zd profiles are
# in %s mode.", "%zd processes are in %s mode." (older releases: "mode :") and "%zd processes are
# unconfined but have a profile defined."
_AA_PROFILES = re.compile(r"([0-9]+) profiles are in ([a-z]+) mode\s*[.:]")
_AA_PROCESSES = re.compile(r"([0-9]+) processes are in ([a-z]+) mode\s*[.:]")
_AA_UNCONFINED = re.compile(r"([0-9]+) processes are unconfined but have a profile defined\.")


def parse_aa_status(text):
    """aa-status (text): {module_loaded, profiles: {mode: n}, processes: {mode: n},
    unconfined_with_profile: n or None}."""
    out = {"module_loaded": False, "profiles": {}, "processes": {}, "unconfined_with_profile": None}
    for line in (text or "").splitlines():
        line = line.strip()
        if line == "apparmor module is loaded.":
            out["module_loaded"] = True
        for pattern, key in ((_AA_PROFILES, "profiles"), (_AA_PROCESSES, "processes")):
            match = pattern.fullmatch(line)
            if match:
                out[key][match.group(2)] = int(match.group(1))
        match = _AA_UNCONFINED.fullmatch(line)
        if match:
            out["unconfined_with_profile"] = int(match.group(1))
    return out


def check_apparmor_enforcing(ev, ctx):
    enabled = ev.get("apparmor_enabled") or {}
    if enabled.get("skipped") or not enabled:
        return _result(NO_EVIDENCE, _missing(ev, "apparmor_enabled"), [])
    if enabled.get("rc") != 0:
        return _result(FAIL, "no AppArmor in this kernel (%s)" % _missing(ev, "apparmor_enabled"), ["apparmor_enabled"])
    if (enabled.get("stdout") or "").strip() != "Y":
        return _result(FAIL, "AppArmor is disabled (/sys/module/apparmor/parameters/enabled: %s)"
                       % (enabled.get("stdout") or "").strip()[:20], ["apparmor_enabled"])
    rec = _ok(ev, "apparmor_status")
    if not rec:
        return _result(FAIL, "AppArmor is enabled but its profiles cannot be read: " + _missing(ev, "apparmor_status"),
                       ["apparmor_enabled", "apparmor_status"])
    status = parse_aa_status(rec["stdout"])
    enforce = status["profiles"].get("enforce", 0)
    unconfined = status["unconfined_with_profile"]
    bad = []
    if not status["module_loaded"]:
        bad.append("aa-status does not say the module is loaded")
    if not enforce:
        bad.append("no profile in enforce mode")
    if unconfined is None:
        bad.append("aa-status gives no count of unconfined processes")
    elif unconfined:
        bad.append("%d process(es) unconfined although a profile is defined for them (restart them)" % unconfined)
    detail = "%d profile(s) in enforce mode, %d in complain mode, %s process(es) unconfined with a profile" % (
        enforce, status["profiles"].get("complain", 0), "?" if unconfined is None else unconfined)
    return _result(FAIL if bad else PASS, "; ".join(bad + [detail]) if bad else detail,
                   ["apparmor_enabled", "apparmor_status"])


def check_userns_restricted(ev, ctx):
    rec = ev.get("apparmor_userns") or {}
    if rec.get("skipped") or not rec:
        return _result(NO_EVIDENCE, _missing(ev, "apparmor_userns"), [])
    value = (rec.get("stdout") or "").strip() if rec.get("rc") == 0 else None
    seen = ("kernel.apparmor_restrict_unprivileged_userns = %s" % value if value is not None else
            "this kernel has no kernel.apparmor_restrict_unprivileged_userns (Ubuntu's kernels have it from 23.10)")
    expected = ctx.get("userns_restricted")
    if expected is None:
        return _result(NO_EVIDENCE, "%s; the inventory states no expectation (%s)"
                       % (seen, CONTEXT_INPUTS["userns_restricted"]), ["apparmor_userns"])
    ok = value == "1" if expected else value in ("0", None)
    return _result(PASS if ok else FAIL, "%s; expected %s" % (
        seen, "restricted (1)" if expected else "unprivileged user namespaces allowed (0, or no such setting)"),
        ["apparmor_userns"])


def check_luks_tang(ev, ctx):
    volumes = ctx.get("data_volumes") or []
    if not volumes:
        return _result(NO_EVIDENCE, "the inventory lists no encrypted data volume", [])
    bad, names = [], []
    for device in volumes:
        luks_name, clevis_name = "luks_%s" % device, "clevis_%s" % device
        names += [luks_name, clevis_name]
        luks = ev.get(luks_name) or {}
        clevis = ev.get(clevis_name) or {}
        if luks.get("rc") != 0:
            bad.append("%s is not LUKS (%s)" % (device, _missing(ev, luks_name)))
        elif clevis.get("rc") != 0 or "tang" not in (clevis.get("stdout") or ""):
            bad.append("%s has no Tang binding" % device)
    return _result(FAIL if bad else PASS, "; ".join(bad) or "LUKS with a Tang binding: " + ", ".join(volumes), names)


def check_login_accounts(ev, ctx):
    passwd = _ok(ev, "accounts")
    shells = _ok(ev, "login_shells")
    if not passwd or not shells:
        return _result(NO_EVIDENCE, _missing(ev, "accounts" if not passwd else "login_shells"), [])
    expected = ctx.get("login_accounts")
    names = [a["name"] for a in parse_login_accounts(passwd["stdout"], shells["stdout"])]
    if not expected:
        return _result(NO_EVIDENCE, "accounts with login shells recorded (%s); the inventory names none to judge them"
                       % ", ".join(names), [])
    extra = [n for n in names if n not in expected]
    return _result(FAIL if extra else PASS, "unexpected login accounts: " + ", ".join(extra) if extra
                   else "login accounts %s all expected" % ", ".join(names), ["accounts", "login_shells"])


def check_openscap_ran(ev, ctx):
    rec = ev.get("openscap") or {}
    if rec.get("skipped") or not rec:
        return _result(NO_EVIDENCE, _missing(ev, "openscap"), [])
    summary = oscap_summary(parse_oscap_stdout(rec.get("stdout")))
    # oscap: 0 all passed, 2 some rule failed, 1 an error.
    ok = rec.get("rc") in (0, 2) and summary["evaluated"] > 0
    return _result(PASS if ok else FAIL, "rc %s, %d rule(s) evaluated: %s" % (
        rec.get("rc"), summary["evaluated"], ", ".join("%s %d" % kv for kv in sorted(summary["counts"].items()))),
        ["openscap"])


def check_openscap_clean(ev, ctx):
    rec = ev.get("openscap") or {}
    if rec.get("skipped") or rec.get("rc") not in (0, 2):
        return _result(NO_EVIDENCE, _missing(ev, "openscap"), [])
    summary = oscap_summary(parse_oscap_stdout(rec.get("stdout")))
    if not summary["evaluated"]:
        return _result(NO_EVIDENCE, "no rule evaluated", ["openscap"])
    failed = [r.replace("xccdf_org.ssgproject.content_rule_", "") for r in summary["failed"]]
    return _result(FAIL if failed else PASS, "%d failed: %s" % (len(failed), ", ".join(failed)) if failed
                   else "every evaluated rule passed", ["openscap"])


def check_lynis_ran(ev, ctx):
    rec = _ok(ev, "lynis_report")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "lynis_report"), [])
    report = parse_lynis_report(rec["stdout"])
    ok = report["complete"] and len(report["tests_executed"]) > 0
    return _result(PASS if ok else FAIL, "Lynis %s: %d test(s) run, %d warning(s), %d suggestion(s), hardening index %s"
                   % (report["lynis_version"], len(report["tests_executed"]), len(report["warnings"]),
                      len(report["suggestions"]), report["hardening_index"]), ["lynis_report"])


def check_lynis_warnings(ev, ctx):
    rec = _ok(ev, "lynis_report")
    if not rec:
        return _result(NO_EVIDENCE, _missing(ev, "lynis_report"), [])
    warnings = parse_lynis_report(rec["stdout"])["warnings"]
    return _result(FAIL if warnings else PASS, "; ".join("%s %s" % (w["test"], w["text"]) for w in warnings)
                   or "no Lynis warning", ["lynis_report"])


CHECKS = {
    "ssh_key_only": ("SSH accepts keys only (sshd -T)", check_ssh_key_only),
    "ssh_root_no_password": ("root cannot log in with a password (sshd -T)", check_ssh_root_login),
    "ssh_modern_crypto": ("SSH offers only modern ciphers, MACs and key exchanges (sshd -T)", check_ssh_crypto),
    "ssh_allow_groups": ("SSH logins limited to the inventory's groups (sshd -T AllowGroups)", check_ssh_allow_groups),
    "ssh_banner": ("A login banner is shown (sshd -T Banner), where the inventory asks", check_ssh_banner),
    "password_policy": ("pam_pwquality enforces the inventory's minimum length", check_password_policy),
    "audit_rules_configured": ("Compiled audit rules watch identity, privilege use, module loading and time changes "
                               "(/etc/audit/audit.rules)", check_audit_rules_configured),
    "audit_rules_loaded": ("auditd runs with those rules in the kernel (auditctl -l)", check_audit_rules_loaded),
    "journald_persistent": ("The journal is persistent and capped (journald.conf, /var/log/journal)", check_journald_persistent),
    "time_configured": ("chrony uses exactly the inventory's time servers", check_time_configured),
    "time_synchronized": ("The clock is synchronised (chronyc tracking)", check_time_synchronized),
    "firewall_default_deny": ("Inbound traffic is denied by default (iptables -S)", check_firewall_default_deny),
    "listening_ports": ("Only the expected TCP ports answer (ss -ltnp)", check_listening_ports),
    "packages_held": ("The version lock's packages are held (apt-mark showhold)", check_packages_held),
    "unattended_respects_holds": ("unattended-upgrades leaves every held package alone (apt-config dump)",
                                  check_unattended_respects_holds),
    "unattended_security_updates": ("Security updates are applied unattended (apt-config dump)", check_unattended_enabled),
    "no_pending_security_updates": ("No security update is pending (apt-get -s dist-upgrade)", check_security_updates),
    "luks_tang": ("Every data volume is LUKS with a Tang binding (cryptsetup isLuks, clevis luks list)", check_luks_tang),
    "login_accounts": ("Only the expected accounts have login shells (getent passwd)", check_login_accounts),
    "openscap_scan": ("An OpenSCAP scan with the tailored SSG profile ran (oscap xccdf eval)", check_openscap_ran),
    "openscap_no_failures": ("No rule of the tailored SSG profile fails", check_openscap_clean),
    "lynis_audit": ("A Lynis audit ran and its report was parsed (lynis-report.dat)", check_lynis_ran),
    "lynis_no_warnings": ("Lynis reports no warning", check_lynis_warnings),
    "apparmor_enforcing": ("AppArmor is enabled, with profiles in enforce mode and no process that escapes its profile "
                           "(aa-status)", check_apparmor_enforcing),
    "unprivileged_userns_restricted": ("Unprivileged user namespaces are restricted as the inventory expects "
                                       "(kernel.apparmor_restrict_unprivileged_userns)", check_userns_restricted),
}


# The context's inventory inputs: what each is called in the inventory, for the messages.
CONTEXT_INPUTS = {
    "tcp_ports": "compliance_expected_tcp_ports",
    "password_minlen": "host_hardening_password_minlen",
    "ssh_allow_groups": "host_hardening_ssh_allow_groups",
    "time_servers": "host_hardening_chrony_servers",
    "held_packages": "compliance_expected_holds",
    "login_accounts": "compliance_expected_login_accounts",
    "data_volumes": "disk_encryption_volumes",
    "userns_restricted": "compliance_expected_userns_restricted",
}


def _context_number(key, value, low, high):
    """VALUE as an int in LOW..HIGH: an int (not a bool) or a string of ASCII digits."""
    number = value if isinstance(value, int) and not isinstance(value, bool) else (
        int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]{1,6}", value) else None)
    if number is None or not low <= number <= high:
        raise ComplianceError("%s (%s): %r is not a whole number from %d to %d"
                              % (CONTEXT_INPUTS[key], key, value, low, high))
    return number


def normalize_context(context):
    """The inventory's expectations, checked: whole numbers where numbers are meant and lists of
    strings where names are. Raises ComplianceError naming the inventory variable."""
    ctx = dict(context or {})
    for key in ("ssh_allow_groups", "time_servers", "held_packages", "login_accounts", "data_volumes"):
        value = ctx.get(key)
        if value is None:
            continue
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ComplianceError("%s (%s): a list of names is required, got %r" % (CONTEXT_INPUTS[key], key, value))
        ctx[key] = list(value)
    userns = ctx.get("userns_restricted")
    if userns is not None and not isinstance(userns, bool):
        raise ComplianceError("%s (userns_restricted): true, false or unset is required, got %r"
                              % (CONTEXT_INPUTS["userns_restricted"], userns))
    ports = ctx.get("tcp_ports")
    if ports is not None:
        if not isinstance(ports, (list, tuple)):
            raise ComplianceError("%s (tcp_ports): a list of TCP ports is required, got %r"
                                  % (CONTEXT_INPUTS["tcp_ports"], ports))
        ctx["tcp_ports"] = [_context_number("tcp_ports", p, 1, 65535) for p in ports]
    if ctx.get("password_minlen") not in (None, ""):
        ctx["password_minlen"] = _context_number("password_minlen", ctx["password_minlen"], 1, 4096)
    else:
        ctx["password_minlen"] = None
    return ctx


def run_checks(evidence, context, wanted=None):
    """{check id: {title, status, detail, evidence}} for WANTED (default: every check)."""
    context = normalize_context(context)
    out = {}
    for check_id in wanted or sorted(CHECKS):
        if check_id not in CHECKS:
            raise ComplianceError("unknown check %r (known: %s)" % (check_id, ", ".join(sorted(CHECKS))))
        title, func = CHECKS[check_id]
        result = func(evidence or {}, context or {})
        result["title"] = title
        out[check_id] = result
    return out


# ---------------------------------------------------------------------------- the join


def validate_control_map(control_map):
    """The control map's frameworks and controls, refused with a clear message when malformed."""
    if not isinstance(control_map, dict) or not isinstance(control_map.get("frameworks"), list):
        raise ComplianceError("control map: a mapping with a 'frameworks' list is required")
    seen = set()
    for fw in control_map["frameworks"]:
        if not isinstance(fw, dict) or not fw.get("id") or not isinstance(fw.get("controls"), list):
            raise ComplianceError("control map: every framework needs an id and a controls list: %r" % (fw,))
        for control in fw["controls"]:
            key = (fw["id"], control.get("id"))
            if not control.get("id") or not control.get("title"):
                raise ComplianceError("control map: %s has a control without id or title" % fw["id"])
            if key in seen:
                raise ComplianceError("control map: %s %s appears twice" % key)
            seen.add(key)
            for check_id in control.get("checks") or []:
                if check_id not in CHECKS:
                    raise ComplianceError("control map: %s %s names unknown check %r" % (fw["id"], control["id"], check_id))
    return control_map


def control_status(check_results):
    """fail if any check failed; pass if there are checks and every one passed; else not covered."""
    statuses = [c["status"] for c in check_results]
    if FAIL in statuses:
        return FAIL
    if statuses and all(s == PASS for s in statuses):
        return PASS
    return NOT_COVERED


def evidence_records(evidence):
    """Evidence as the report lists it: what was run or read, rc, sha256 of the output, when."""
    out = {}
    for name, rec in sorted((evidence or {}).items()):
        if rec.get("skipped"):
            out[name] = {"skipped": True, "reason": rec.get("reason", "")}
            continue
        out[name] = {"command": rec.get("command", ""), "rc": rec.get("rc"), "collected_at": rec.get("start", ""),
                     "sha256": sha256_text(rec.get("stdout")), "bytes": len((rec.get("stdout") or "").encode("utf-8")),
                     "file": rec.get("file", ""), "stdout_file": "evidence/%s.txt" % evidence_file_name(name)}
    return out


def node_report(host, evidence, control_map, context, collected_at=""):
    validate_control_map(control_map)
    checks = run_checks(evidence, context)
    frameworks = []
    totals = {PASS: 0, FAIL: 0, NOT_COVERED: 0}
    for fw in control_map["frameworks"]:
        controls = []
        for control in fw["controls"]:
            results = [dict(checks[c], id=c) for c in control.get("checks") or []]
            status = control_status(results)
            totals[status] += 1
            entry = {"id": control["id"], "title": control["title"], "status": status,
                     "checked": [r["title"] for r in results], "checks": results}
            for key in ("text", "source", "iso27001_2013", "note"):
                if control.get(key):
                    entry[key] = control[key]
            if not results:
                entry["reason"] = control.get("note") or "no check in this collection backs this control"
            controls.append(entry)
        frameworks.append({"id": fw["id"], "title": fw.get("title", fw["id"]), "controls": controls})
    lynis = parse_lynis_report((evidence.get("lynis_report") or {}).get("stdout")) if _ok(evidence, "lynis_report") else None
    oscap_rec = evidence.get("openscap") or {}
    oscap = oscap_summary(parse_oscap_stdout(oscap_rec.get("stdout"))) if oscap_rec.get("stdout") else None
    return {"host": host, "collected_at": collected_at, "context": context, "totals": totals,
            "checks": checks, "frameworks": frameworks, "evidence": evidence_records(evidence),
            "openscap": oscap,
            "lynis": dict(lynis, tests_executed=len(lynis["tests_executed"]),
                          tests_skipped=len(lynis["tests_skipped"])) if lynis else None}


def fleet_report(reports, generated_at=""):
    """Per control, the hosts in each status; a control passes for the fleet only if it passes everywhere."""
    rows = {}
    order = []
    for rep in reports:
        for fw in rep["frameworks"]:
            for control in fw["controls"]:
                key = (fw["id"], control["id"])
                if key not in rows:
                    order.append(key)
                    rows[key] = {"framework": fw["id"], "id": control["id"], "title": control["title"],
                                 "hosts": {PASS: [], FAIL: [], NOT_COVERED: []}}
                rows[key]["hosts"][control["status"]].append(rep["host"])
    controls = []
    for key in order:
        row = rows[key]
        hosts = row["hosts"]
        row["status"] = FAIL if hosts[FAIL] else (PASS if hosts[PASS] and not hosts[NOT_COVERED] else NOT_COVERED)
        controls.append(row)
    return {"generated_at": generated_at, "hosts": sorted(r["host"] for r in reports), "controls": controls,
            "totals": {s: sum(1 for c in controls if c["status"] == s) for s in (PASS, FAIL, NOT_COVERED)}}


def _md(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _totals_line(totals):
    return "Totals: %d pass, %d fail, %d not covered." % (totals[PASS], totals[FAIL], totals[NOT_COVERED])


def node_markdown(report):
    lines = ["# Compliance evidence: %s" % report["host"], "",
             "Collected %s by playbooks/compliance.yml (read-only). Each control: pass only when every check "
             "behind it passed; fail when one failed; not covered when no check backs it or a check had no "
             "evidence. This report is evidence for an auditor, not a certification." % report["collected_at"], "",
             _totals_line(report["totals"]), ""]
    for fw in report["frameworks"]:
        lines += ["## %s" % fw["title"], "", "| Control | Status | Checked | Result |", "|---|---|---|---|"]
        for c in fw["controls"]:
            detail = "; ".join("%s: %s (%s)" % (r["id"], r["status"], r["detail"]) for r in c["checks"]) or c.get("reason", "")
            checked = _md("; ".join(c["checked"]) or "-")
            lines.append("| %s %s | **%s** | %s | %s |" % (_md(c["id"]), _md(c["title"]), c["status"], checked, _md(detail)))
        lines.append("")
    lines += ["## Evidence", "", "| Name | Command or file | rc | Collected | sha256 |", "|---|---|---|---|---|"]
    for name, rec in report["evidence"].items():
        if rec.get("skipped"):
            lines.append("| %s | skipped: %s | | | |" % (_md(name), _md(rec["reason"])))
        else:
            row = (_md(name), _md(rec["command"]), rec["rc"], rec["collected_at"], rec["sha256"])
            lines.append("| %s | `%s` | %s | %s | `%s` |" % row)
    if report.get("openscap"):
        o = report["openscap"]
        lines += ["", "## OpenSCAP", "", "Results: %s." % ", ".join("%s %d" % kv for kv in sorted(o["counts"].items())),
                  "", "Failed rules: %s" % (", ".join(o["failed"]) or "none")]
    if report.get("lynis"):
        ly = report["lynis"]
        lines += ["", "## Lynis", "", "Lynis %s, %s tests run, hardening index %s." % (
            ly["lynis_version"], ly["tests_executed"], ly["hardening_index"]), ""]
        lines += ["- warning %s: %s" % (w["test"], _md(w["text"])) for w in ly["warnings"]]
        lines += ["- suggestion %s: %s" % (s["test"], _md(s["text"])) for s in ly["suggestions"]]
    return "\n".join(lines) + "\n"


def fleet_markdown(fleet):
    lines = ["# Compliance evidence: fleet", "", "Generated %s over %d host(s): %s." % (
        fleet["generated_at"], len(fleet["hosts"]), ", ".join(fleet["hosts"])), "",
        "A control passes for the fleet only when it passes on every host. Per-host detail and evidence: "
        "<host>.md / <host>.json.", "",
        _totals_line(fleet["totals"]), "",
        "| Framework | Control | Status | Failed on | Not covered on |", "|---|---|---|---|---|"]
    for c in fleet["controls"]:
        lines.append("| %s | %s %s | **%s** | %s | %s |" % (
            _md(c["framework"]), _md(c["id"]), _md(c["title"]), c["status"],
            ", ".join(c["hosts"][FAIL]) or "-", ", ".join(c["hosts"][NOT_COVERED]) or "-"))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- probes


def volume_probes(volumes):
    """The read-only probes of each encrypted data volume (disk_encryption_volumes entries, or
    their device paths): cryptsetup isLuks and clevis luks list, named luks_<device> and
    clevis_<device> as check_luks_tang reads them. Built here, not in Jinja: a device path is an
    argument, never text spliced into JSON."""
    if volumes is None:
        return []
    if not isinstance(volumes, (list, tuple)):
        raise ComplianceError("disk_encryption_volumes: a list is required, got %r" % (volumes,))
    probes, seen = [], set()
    for index, volume in enumerate(volumes):
        device = volume.get("device") if isinstance(volume, dict) else volume
        if not isinstance(device, str) or not device.startswith("/") or "\x00" in device or "\n" in device:
            raise ComplianceError("disk_encryption_volumes[%d].device: an absolute device path is required, got %r"
                                  % (index, device))
        if device in seen:
            continue
        seen.add(device)
        probes.append({"name": "luks_%s" % device, "argv": ["cryptsetup", "isLuks", device], "skip": ""})
        probes.append({"name": "clevis_%s" % device, "argv": ["clevis", "luks", "list", "-d", device], "skip": ""})
    return probes
