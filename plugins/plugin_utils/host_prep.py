# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""host_prep's decisions, on the controller: the input checks argument specs cannot express
and the derived sysctl profile (plan), and what the node's read says (node_state).

Each error names the variable (or the node's state) it is about; roles/host_prep calls
plan() once in tasks/validate.yml, before anything changes the host.
"""

import json
import numbers
import re

TIMEOUTS = ("host_prep_reboot_timeout", "host_prep_bmc_timeout")
# `key` or `key=value`: no spaces, quotes, `$`, backslashes or shell operators.
CMDLINE_ENTRY = re.compile(r'[A-Za-z0-9_.-]+(=[^\s"\'`$\\;|&<>()]+)?\Z')
SYSCTL_KEY = re.compile(r'[a-z0-9_]+(\.[A-Za-z0-9_/-]+)+\Z')
BMC_ADDRESS = re.compile(r'[A-Za-z0-9.:\[\]-]+\Z')
# Loose mode: with several rails on one subnet, replies arrive on another NIC than the route
# back; strict mode (1) drops them. The kernel uses max(all, interface).
RP_FILTER_LOOSE = {"net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.default.rp_filter": 2}
SQUASHFS_BLOCK = re.compile(r"(install squashfs |blacklist squashfs$)")


class HostPrepError(ValueError):
    """A setting (named first in the message) that host_prep refuses."""


def _json(value):
    return json.dumps(value, sort_keys=True, default=str)


def _as_int(value, default=0):
    """Jinja's `int` filter: a number or numeric string, else the default."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return default


def _truth(value):
    """Ansible's `bool` filter on the values a role variable takes."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        value = value.lower()
    return value in ("yes", "on", "1", "true", 1)


def _check_timeouts(settings):
    for name in TIMEOUTS:
        value = settings[name]
        if isinstance(value, bool) or not re.fullmatch(r"[0-9]+", str(value)) or int(str(value)) <= 0:
            raise HostPrepError(
                "%s: %s must be a whole number of seconds greater than 0 "
                "(0 would give up at once, before the host could come back)" % (name, _json(value)))


def _check_os(settings):
    family = settings["os_family"]
    if not _truth(settings["supported"]) or (family == "RedHat" and _as_int(settings["distribution_major_version"]) < 9):
        raise HostPrepError(
            "host_prep supports Debian 12/13, Ubuntu 22.04/24.04 and the RHEL family 9; %s runs %s %s"
            % (settings["inventory_hostname"], settings["distribution"], settings["distribution_version"]))


def _check_cmdline(entries):
    bad = [entry for entry in entries if not isinstance(entry, str) or not CMDLINE_ENTRY.match(entry)]
    if bad:
        raise HostPrepError(
            "host_prep_kernel_cmdline: malformed entries %s (each must be `key` or `key=value`: no spaces, "
            "quotes, `$`, backslashes or shell operators)" % _json(bad))


def _sysctl(settings):
    effective = dict(settings["host_prep_sysctl"])
    if _truth(settings["host_prep_fabric_multi_nic"]):
        effective.update(RP_FILTER_LOOSE)
    effective.update(settings["host_prep_sysctl_extra"])
    bad_keys = [key for key in effective if not isinstance(key, str) or not SYSCTL_KEY.match(key)]
    bad_values = [key for key, value in effective.items() if isinstance(value, str) and re.search(r"[\n\r=]", value)]
    bad_values += [key for key, value in effective.items()
                   if not isinstance(value, str) and not isinstance(value, numbers.Number)]
    if bad_keys or bad_values:
        raise HostPrepError(
            "host_prep_sysctl / host_prep_sysctl_extra: malformed keys %s or values %s (keys are dotted sysctl "
            "names; values are numbers or strings without newlines)" % (_json(bad_keys), _json(bad_values)))
    if (_as_int(effective.get("kernel.yama.ptrace_scope", 1)) > 1
            or _as_int(effective.get("net.ipv4.ip_forward", 1)) == 0
            or (_truth(settings["host_prep_fabric_multi_nic"])
                and _as_int(effective.get("net.ipv4.conf.all.rp_filter", 2)) == 1)):
        raise HostPrepError(
            "host_prep_sysctl / host_prep_sysctl_extra break GPU nodes: kernel.yama.ptrace_scope must be at "
            "most 1 (MPI/UCX cross-memory attach), net.ipv4.ip_forward must not be 0 (container networking), "
            "and with host_prep_fabric_multi_nic reverse-path filtering must not be strict (1).")
    return effective


def _check_bmc(settings):
    address = settings["host_prep_bmc_address"]
    if ((settings["host_prep_bios_attributes"] and not address)
            or (address and not BMC_ADDRESS.match(address))
            or (address and not (settings["host_prep_bmc_username"] and settings["host_prep_bmc_password"]))):
        raise HostPrepError(
            "host_prep_bios_attributes needs host_prep_bmc_address (host or host:port, no scheme), and "
            "host_prep_bmc_address needs host_prep_bmc_username and host_prep_bmc_password (from Ansible Vault); "
            "%s has address '%s'" % (settings["inventory_hostname"], address))


def plan(settings):
    """Check host_prep's settings in the order the role's checks ran; return what it derives.

    settings: the role variables named in the messages plus the facts (os_family,
    distribution, distribution_version, distribution_major_version), `supported` (the per-OS
    vars' verdict) and inventory_hostname. Returns {"sysctl": the effective sysctl profile}.
    """
    _check_timeouts(settings)
    _check_os(settings)
    _check_cmdline(settings["host_prep_kernel_cmdline"])
    sysctl = _sysctl(settings)
    _check_bmc(settings)
    return {"sysctl": sysctl}


# The node read of roles/host_prep/tasks/read_node.yml: one command, sections headed "@@name".
SECTIONS = ("secure-boot", "modprobe", "files", "cpufreq", "governors-available", "governors")


def _sections(text):
    sections, seen, current = {name: [] for name in SECTIONS}, set(), None
    for line in text.splitlines():
        if line.startswith("@@"):
            tag, rest = (line[2:].split(" ", 1) + [""])[:2]
            if tag == "secure-boot-rc":
                sections[tag], current = rest, None
            elif tag in SECTIONS:
                current = tag
            else:
                raise HostPrepError("node read: unknown section %r" % line)
            seen.add(tag)
        elif current is None:
            raise HostPrepError("node read: output outside a section: %r" % line)
        else:
            sections[current].append(line)
    missing = [name for name in SECTIONS + ("secure-boot-rc",) if name not in seen]
    if missing:
        raise HostPrepError("node read: sections %s missing (an interrupted read?)" % ", ".join(missing))
    return sections


def _mtime(value):
    return None if value == "-" else float(value)


def node_state(text):
    """What one read of the node says (read_node.yml), as the role's tasks use it.

    secure_boot_state: enabled | disabled | not_supported | unknown, from `mokutil --sb-state`
    (exit status 0 and "SecureBoot enabled/disabled"; "not supported" whatever the status;
    anything else unknown, never guessed); squashfs_blocks: modprobe rules that keep squashfs
    from loading; files: mtime (seconds, or None when absent) of grub_cfg, grub_fragment,
    governor_unit and ondemand; cpufreq: whether the CPUs expose cpufreq governors, the
    governors offered and those set now.
    """
    sections = _sections(text)
    sb_out = "\n".join(sections["secure-boot"])
    try:
        sb_rc = int(sections["secure-boot-rc"])
    except ValueError:
        raise HostPrepError("node read: mokutil exit status %r is not a number" % sections["secure-boot-rc"])
    if sb_rc == 0 and "SecureBoot enabled" in sb_out:
        state = "enabled"
    elif sb_rc == 0 and "SecureBoot disabled" in sb_out:
        state = "disabled"
    elif "not supported" in sb_out:
        state = "not_supported"
    else:
        state = "unknown"
    files = {}
    for line in sections["files"]:
        name, mtime = (line.split(" ", 1) + [""])[:2]
        try:
            files[name] = _mtime(mtime)
        except ValueError:
            raise HostPrepError("node read: %s has no mtime: %r" % (name, line))
    available = [line for line in sections["governors-available"] if line.strip()]
    return {
        "secure_boot_state": state,
        "secure_boot_detail": " ".join(sb_out.split()),
        "squashfs_blocks": [line for line in sections["modprobe"] if SQUASHFS_BLOCK.match(line)],
        "files": files,
        "cpufreq": any(line.strip() for line in sections["cpufreq"]),
        "governors_available": available[0].split() if available else [],
        "governors_offered": available[0].strip() if available else "",
        "governors": [line.strip() for line in sections["governors"] if line.strip()],
    }
