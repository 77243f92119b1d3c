# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Install what is missing of a package list, in one transaction, and hold it (apt or dnf).

The one home of the package recipe every role used to copy (gpucloud.fleet.packages_present).
Commands run through an injected ``run(argv) -> (rc, stdout, stderr)``; ``sleep`` and
``now`` are injected too, so the lock retry and the freshness of apt's lists are tested
without waiting. Parsing and planning are pure functions.
"""


import fnmatch
import os
import re

APT = "apt"
DNF = "dnf"
MANAGERS = (APT, DNF)

DPKG_FORMAT = "${db:Status-Abbrev}|${Package}|${Version}\\n"
RPM_FORMAT = "%{NAME}|%{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n"
APT_LISTS = "/var/lib/apt/lists"
# Written by apt's own APT::Update::Post-Invoke-Success hook where update-notifier-common is
# installed, read by Ansible's apt module (cache_valid_time): the module writes it too after
# a refresh, since apt keeps the server's time on list files that did not change.
APT_STAMP = "/var/lib/apt/periodic/update-success-stamp"
LOCK_RETRY_DELAY = 10
# What apt and dpkg say while another apt, dpkg or unattended-upgrades holds a lock.
LOCK_MESSAGES = ("Could not get lock", "Unable to acquire the dpkg frontend lock", "Unable to lock directory")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*(:[a-z0-9]+)?\Z")
_VERSION_RE = re.compile(r"^[A-Za-z0-9.+~:*_-]+\Z")


class PackagesError(Exception):
    """Bad input, or a package manager that did not do what was asked."""


def parse_entries(names):
    """[(name, version or None)] of NAMES (``name`` or ``name=version``, version may end in ``*``)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise PackagesError("name: expected a list of packages (name or name=version), got %r" % (names,))
    entries = []
    seen = {}
    for item in names:
        if not isinstance(item, str) or not item.strip():
            raise PackagesError("name: entry %r is not a package (name or name=version)" % (item,))
        name, sep, version = item.strip().partition("=")
        if not _NAME_RE.match(name):
            raise PackagesError("name: %r is not a package name (letters, digits and + . _ - only, "
                                "optionally :arch)" % (name,))
        if sep and not _VERSION_RE.match(version):
            raise PackagesError("name: %r: the version %r is empty or has characters no package version has"
                                % (item, version))
        version = version if sep else None
        if name in seen and seen[name] != version:
            raise PackagesError("name: %s is asked for twice, at %s and at %s"
                                % (name, seen[name] or "any version", version or "any version"))
        if name not in seen:
            seen[name] = version
            entries.append((name, version))
    return entries


def entry_text(entry):
    name, version = entry
    return name if version is None else "%s=%s" % (name, version)


def _lines(text):
    return [line for line in re.split(r"\r\n|\r|\n", text or "") if line.strip()]


def parse_dpkg_query(stdout):
    """{package: (version, held)} of what ``dpkg-query --show --showformat DPKG_FORMAT`` shows installed.

    Status ``ii`` (install, installed) and ``hi`` (hold, installed); half-installed,
    unpacked and config-files states are not installed.
    """
    installed = {}
    for line in _lines(stdout):
        parts = line.split("|")
        if len(parts) != 3:
            continue
        status, package, version = (part.strip() for part in parts)
        if len(status) >= 2 and status[1] == "i" and status[0] in "ih":
            installed[package.split(":", 1)[0]] = (version, status[0] == "h")
    return installed


def parse_rpm_query(stdout):
    """{package: (epoch:version-release, False)} of ``rpm -q --queryformat RPM_FORMAT``; "not installed" lines skipped."""
    installed = {}
    for line in _lines(stdout):
        parts = line.split("|")
        if len(parts) == 2 and parts[0].strip():
            installed[parts[0].strip()] = (parts[1].strip(), False)
    return installed


def parse_versionlock(stdout):
    """Names locked by ``dnf versionlock list`` (dnf 4: ``name-[epoch:]version-release.*``; dnf 5: ``Package name: name``)."""
    names = set()
    for line in _lines(stdout):
        line = line.strip()
        if line.startswith("Package name:"):
            names.add(line.split(":", 1)[1].strip())
            continue
        if line.startswith("#") or " " in line or line.count("-") < 2:
            continue
        names.add(line.lstrip("!").rsplit("-", 2)[0])
    return names


def parse_apt_policy(stdout):
    """{package: {"candidate": version or None, "versions": [...]}} of ``apt-cache policy NAMES``.

    apt leaves out a package it has never heard of; one it knows only from dpkg's status or a
    dependency has ``Candidate: (none)``.
    """
    packages = {}
    current = None
    in_table = False
    for line in _lines(stdout):
        if not line.startswith(" "):
            current = {"candidate": None, "versions": []}
            packages[line.rstrip().rstrip(":")] = current
            in_table = False
        elif current is None:
            continue
        elif line.strip().startswith("Candidate:"):
            value = line.split(":", 1)[1].strip()
            current["candidate"] = None if value == "(none)" else value
        elif line.strip().startswith("Version table:"):
            in_table = True
        elif in_table:
            # "     11-2+deb12u1 500" or " *** 9.1-1 500" (a version); deeper lines name its sources.
            match = re.match(r"^ (?:\*\*\*| {3}) (\S+) -?[0-9]+$", line)
            if match:
                current["versions"].append(match.group(1))
    return packages


def _strip_epoch(version):
    return version.split(":", 1)[1] if re.match(r"^[0-9]+:", version) else version


def version_matches(have, wanted):
    """Whether installed version HAVE satisfies WANTED (None: any; a glob such as ``580.95.05-*``).

    An epoch on either side is compared only when both carry one.
    """
    if wanted is None:
        return True
    if fnmatch.fnmatchcase(have, wanted):
        return True
    if _strip_epoch(have) != have and _strip_epoch(wanted) != wanted:
        return False
    return fnmatch.fnmatchcase(_strip_epoch(have), _strip_epoch(wanted))


def _key(name):
    """The name dpkg and rpm report: without apt's ``:arch``."""
    return name.split(":", 1)[0]


def missing(entries, installed):
    """The entries not installed, or installed at another version than asked."""
    return [entry for entry in entries
            if _key(entry[0]) not in installed or not version_matches(installed[_key(entry[0])][0], entry[1])]


def not_offered(entries, policy):
    """The entries apt's lists do not offer (no candidate, or no version matching the one asked)."""
    absent = []
    for entry in entries:
        known = policy.get(entry[0])
        if known is None or known["candidate"] is None:
            absent.append(entry)
        elif entry[1] is not None and not any(version_matches(v, entry[1]) for v in known["versions"]):
            absent.append(entry)
    return absent


def resolve_version(entry, policy):
    """ENTRY with a version pattern (``*``, ``?``) replaced by the newest offered version matching it.

    apt-cache policy lists a package's versions newest first.
    """
    name, version = entry
    if version is None or not any(char in version for char in "*?["):
        return entry
    for offered in policy.get(name, {}).get("versions", []):
        if version_matches(offered, version):
            return (name, offered)
    raise PackagesError("name: no configured repository offers %s" % entry_text(entry))


def lists_stale(list_files, newest_mtime, now, valid_time):
    """Whether apt's lists need a refresh: none downloaded yet, or the newest refresh older than VALID_TIME."""
    if not list_files:
        return True
    return newest_mtime is None or now - newest_mtime > valid_time


def _locked(rc, out, err):
    return rc != 0 and any(message in (out or "") + (err or "") for message in LOCK_MESSAGES)


def _describe(installed, names, holding):
    lines = []
    for name in names:
        if _key(name) in installed:
            version, held = installed[_key(name)]
            lines.append("%s %s%s" % (name, version, " (held)" if held or name in holding else ""))
        else:
            lines.append("%s (not installed)" % name)
    return "\n".join(lines) + ("\n" if lines else "")


class Packages:
    """Bring a package list to "installed (at these versions), held if asked" with apt or dnf."""

    def __init__(self, run, manager, sleep, now, lists_dir=APT_LISTS, stamp=APT_STAMP):
        if manager not in MANAGERS:
            raise PackagesError("manager: must be one of %s, got %r" % (", ".join(MANAGERS), manager))
        self.run = run
        self.manager = manager
        self.sleep = sleep
        self.now = now
        self.lists_dir = lists_dir
        self.stamp = stamp
        self.commands = []
        self._policy = None

    # -- running -----------------------------------------------------------------------------
    def _run(self, argv, lock_timeout=0):
        """Run ARGV; while another apt/dpkg holds a lock, retry every LOCK_RETRY_DELAY s up to LOCK_TIMEOUT."""
        self.commands.append(" ".join(argv))
        waited = 0
        while True:
            rc, out, err = self.run(argv)
            if not _locked(rc, out, err) or waited >= lock_timeout:
                return rc, out, err
            self.sleep(LOCK_RETRY_DELAY)
            waited += LOCK_RETRY_DELAY

    def _fail(self, what, rc, out, err):
        detail = (err or "").strip() or (out or "").strip()
        raise PackagesError("%s failed (exit status %d): %s" % (what, rc, detail[-2000:]))

    # -- reading -----------------------------------------------------------------------------
    def query(self, names):
        """{name: (version, held)} of the installed packages among NAMES."""
        if not names:
            return {}
        if self.manager == APT:
            argv = ["dpkg-query", "--show", "--showformat", DPKG_FORMAT] + names
            rc, out, err = self.run(argv)
            # 1: some package is unknown to dpkg, which is "not installed".
            if rc not in (0, 1):
                self._fail("dpkg-query", rc, out, err)
            return parse_dpkg_query(out)
        rc, out, err = self.run(["rpm", "-q", "--queryformat", RPM_FORMAT] + names)
        # rpm's exit status is the number of packages not installed.
        if rc != 0 and not out:
            self._fail("rpm -q", rc, out, err)
        return parse_rpm_query(out)

    def locked(self):
        """Names dnf's versionlock holds."""
        rc, out, err = self.run(["dnf", "-q", "versionlock", "list"])
        if rc != 0:
            raise PackagesError("hold: dnf versionlock is not available (install python3-dnf-plugin-versionlock): %s"
                                % ((err or out or "").strip()[-500:]))
        return parse_versionlock(out)

    def lists_state(self):
        """(list files, newest refresh time) of apt's package lists."""
        try:
            files = [name for name in os.listdir(self.lists_dir) if "_Packages" in name]
        except OSError:
            files = []
        times = []
        for path in (self.lists_dir, self.stamp):
            try:
                times.append(os.stat(path).st_mtime)
            except OSError:
                pass
        return files, (max(times) if times else None)

    def policy(self, entries):
        """apt-cache policy of the ENTRIES' packages, parsed."""
        rc, out, err = self.run(["apt-cache", "policy"] + [name for name, _version in entries])
        if rc != 0:
            self._fail("apt-cache policy", rc, out, err)
        return parse_apt_policy(out)

    # -- planning and changing -----------------------------------------------------------------
    def ensure(self, names, hold=False, check_mode=False, update_cache=False, cache_valid_time=3600,
               install_recommends=False, allow_downgrade=False, lock_timeout=600):
        entries = parse_entries(names)
        for option, value in (("cache_valid_time", cache_valid_time), ("lock_timeout", lock_timeout)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise PackagesError("%s: expected a number of seconds (0 or more), got %r" % (option, value))
        names_only = [name for name, _version in entries]
        before = self.query(names_only)
        holding = set()
        if hold and self.manager == DNF:
            holding = self.locked()
        install = missing(entries, before)
        to_hold = [name for name in names_only if hold and not (before.get(_key(name), ("", False))[1] or name in holding)]
        result = {
            "manager": self.manager,
            "packages": [entry_text(entry) for entry in entries],
            "installed": [entry_text(entry) for entry in install],
            "held": to_hold,
            "cache_updated": False,
            "refresh_reason": None,
            "not_offered": [],
        }
        if install:
            reason = self._refresh_reason(install, update_cache, cache_valid_time)
            result["refresh_reason"] = reason
            result["cache_updated"] = reason is not None
            if check_mode:
                result["not_offered"] = [entry_text(e) for e in self._check_mode_not_offered(install, reason)]
            else:
                self._install(install, reason, hold, install_recommends, allow_downgrade, lock_timeout)
        if to_hold and not check_mode:
            self._hold(to_hold, lock_timeout)
        after = dict(before)
        if check_mode:
            for name, version in install:
                after[_key(name)] = (version or "(newest offered)", before.get(_key(name), ("", False))[1])
        else:
            after = self.query(names_only) if (install or to_hold) else before
            if install:
                still = missing(entries, after)
                if still:
                    raise PackagesError("name: %s installed no error but left %s not installed at the version asked"
                                        % (self.manager, ", ".join(entry_text(e) for e in still)))
        result["changed"] = bool(install or to_hold)
        result["diff"] = {
            "before": _describe(before, names_only, holding),
            "after": _describe(after, names_only, holding | set(to_hold)),
        }
        result["commands"] = self.commands
        return result

    def _refresh_reason(self, install, update_cache, cache_valid_time):
        if update_cache:
            return "asked (update_cache)"
        if self.manager == DNF:
            # dnf refreshes expired metadata itself; an unknown package is retried with --refresh.
            return None
        files, newest = self.lists_state()
        if lists_stale(files, newest, self.now(), cache_valid_time):
            return "no package lists yet" if not files else "lists older than %d s" % cache_valid_time
        self._policy = self.policy(install)
        absent = not_offered(install, self._policy)
        if absent:
            return "the lists do not offer %s" % ", ".join(entry_text(e) for e in absent)
        return None

    def _check_mode_not_offered(self, install, reason):
        # Without a refresh (check mode does none) apt may not know the packages yet: say which.
        if self.manager != APT or reason is None:
            return []
        return not_offered(install, self._policy or self.policy(install))

    def _install(self, install, reason, hold, install_recommends, allow_downgrade, lock_timeout):
        specs = [entry_text(entry) for entry in install]
        if self.manager == APT:
            if reason is not None:
                rc, out, err = self._run(["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=%d" % lock_timeout],
                                         lock_timeout)
                if rc != 0:
                    self._fail("apt-get update", rc, out, err)
                self._touch_stamp()
                self._policy = self.policy(install)
                absent = not_offered(install, self._policy)
                if absent:
                    raise PackagesError("name: no configured repository offers %s (after refreshing the apt lists)"
                                        % ", ".join(entry_text(e) for e in absent))
            # apt-get takes exact versions only: a pattern becomes the newest version it matches.
            specs = [entry_text(resolve_version(entry, self._policy)) for entry in install]
            argv = ["apt-get", "install", "-y", "-q", "-o", "DPkg::Lock::Timeout=%d" % lock_timeout,
                    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
            argv += [] if install_recommends else ["--no-install-recommends"]
            argv += ["--allow-downgrades"] if allow_downgrade else []
            # The module owns the hold of what it holds: moving such a package to the version asked is expected.
            argv += ["--allow-change-held-packages"] if hold else []
            rc, out, err = self._run(argv + specs, lock_timeout)
            if rc != 0:
                self._fail("apt-get install " + " ".join(specs), rc, out, err)
            return
        dnf_specs = ["%s-%s" % entry if entry[1] else entry[0] for entry in install]
        argv = ["dnf", "-y", "install"] + ([] if install_recommends else ["--setopt=install_weak_deps=False"])
        refresh = ["--refresh"] if reason is not None else []
        rc, out, err = self._run(argv + refresh + dnf_specs)
        if rc != 0 and "No match for argument" in (out or "") + (err or "") and not refresh:
            rc, out, err = self._run(argv + ["--refresh"] + dnf_specs)
        if rc != 0:
            unknown = re.findall(r"No match for argument: (\S+)", (out or "") + (err or ""))
            if unknown:
                raise PackagesError("name: no enabled repository offers %s (after refreshing dnf's metadata)"
                                    % ", ".join(unknown))
            self._fail("dnf install " + " ".join(dnf_specs), rc, out, err)

    def _hold(self, names, lock_timeout):
        if self.manager == APT:
            rc, out, err = self._run(["apt-mark", "hold"] + names, lock_timeout)
            what = "apt-mark hold"
        else:
            rc, out, err = self._run(["dnf", "-q", "versionlock", "add"] + names)
            what = "dnf versionlock add"
        if rc != 0:
            self._fail(what + " " + " ".join(names), rc, out, err)

    def _touch_stamp(self):
        try:
            os.makedirs(os.path.dirname(self.stamp), exist_ok=True)
            with open(self.stamp, "a"):
                pass
            os.utime(self.stamp, (self.now(), self.now()))
        except OSError:
            pass
