# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nccl_fabric role's plan: every check validate.yml made and this host's IPoIB addresses.

One call (filter ``nccl_fabric_plan``, in ``roles/nccl_fabric/tasks/validate.yml``) replaces the
role's asserts, its settings check and its set_fact loop over the IPoIB interfaces. Errors raise
``NcclFabricPlanError``; each names the variable it is about.
"""

import json
import re


class NcclFabricPlanError(ValueError):
    """An input of the nccl_fabric role that the role refuses."""


try:
    import netaddr
    HAS_NETADDR = True
except ImportError:
    HAS_NETADDR = False


# [0-9], not isdigit(): '²'.isdigit() is true, yet int('²') raises.
_WHOLE_RE = re.compile(r"\s*[+-]?[0-9]+\s*")


def _whole(value, name):
    if isinstance(value, bool):
        raise NcclFabricPlanError("ipoib_address: %s must be an integer, got %r" % (name, value))
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _WHOLE_RE.fullmatch(value):
        number = int(value.strip())
    else:
        raise NcclFabricPlanError("ipoib_address: %s must be an integer, got %r" % (name, value))
    if number < 0:
        raise NcclFabricPlanError("ipoib_address: %s must not be negative, got %d" % (name, number))
    return number


def _usable_range(network):
    """First and last address a host may take, as integers."""
    first, last = int(network.network), int(network.network) + network.size - 1
    full = 32 if network.version == 4 else 128
    if network.prefixlen >= full - 1:
        # /31 and /127 point-to-point links (RFC 3021, RFC 6164) and single addresses.
        return first, last
    if network.version == 4:
        return first + 1, last - 1
    # IPv6 has no broadcast; the all-zeros address is the Subnet-Router anycast.
    return first + 1, last


def ipoib_address(subnet, index, offset=0):
    """ADDRESS/PREFIX of usable host number INDEX + OFFSET of SUBNET, counting from 0 at the first usable address.

    IPv4 up to /30 and IPv6 up to /126 start after the network address (IPv4 never returns the
    broadcast address); /31, /127 (point-to-point, RFC 3021 / RFC 6164), /32 and /128 start at
    the network address. A subnet with host bits set is taken as its network.
    """
    if not HAS_NETADDR:
        raise NcclFabricPlanError("ipoib_address: the Python library netaddr is required on the controller "
                                  "(pip install netaddr)")
    if not isinstance(subnet, str):
        raise NcclFabricPlanError("ipoib_address: subnet must be a CIDR string such as 10.10.0.0/16, got %r"
                                  % (subnet,))
    index = _whole(index, "index")
    offset = _whole(offset, "offset")
    if "/" not in subnet:
        raise NcclFabricPlanError("ipoib_address: subnet %r has no prefix length; write it as CIDR, e.g. 10.10.0.0/16"
                                  % subnet)
    try:
        network = netaddr.IPNetwork(subnet.strip()).cidr
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise NcclFabricPlanError("ipoib_address: subnet %r is not a valid CIDR: %s" % (subnet, exc)) from exc
    first, last = _usable_range(network)
    address = first + index + offset
    if address > last:
        raise NcclFabricPlanError(
            "ipoib_address: index %d + offset %d is past the end of %s, which has %d usable addresses "
            "(index + offset must be below %d)" % (index, offset, network, last - first + 1, last - first + 1))
    return "%s/%d" % (netaddr.IPAddress(address, network.version), network.prefixlen)


TIMEOUTS = ("nccl_fabric_reboot_timeout", "nccl_fabric_nccl_tests_timeout")
_SECONDS_RE = re.compile(r"[0-9]+")
# fullmatch: NCCL exports every line of nccl.conf, so a newline in a name or value could add
# LD_PRELOAD=... to every job.
_ENV_NAME_RE = re.compile(r"NCCL_[A-Z0-9_]+")
_ENV_BAD_VALUE_RE = re.compile(r"[\n\r\x00]")
MTU_MAX = {"datagram": 4092, "connected": 65520}


def _check_timeouts(settings):
    for name in TIMEOUTS:
        value = settings.get(name)
        if isinstance(value, bool) or not _SECONDS_RE.fullmatch(str(value)) or int(str(value)) <= 0:
            raise NcclFabricPlanError("%s: %s must be a whole number of seconds greater than 0 (0 would give up at "
                                      "once, before the host could come back)" % (name, json.dumps(value)))


def _settings_problems(settings, host, renderer):
    env = settings.get("nccl_fabric_nccl_extra_env") or {}
    if not isinstance(env, dict):
        return ["nccl_fabric_nccl_extra_env: must be a mapping of NCCL_* names to values, got %r" % (env,)]
    bad_names = [str(name) for name in env if not _ENV_NAME_RE.fullmatch(str(name))]
    bad_values = [name for name, value in env.items() if not isinstance(value, (str, int, float))] + [
        name for name, value in env.items() if isinstance(value, str) and _ENV_BAD_VALUE_RE.search(value)]
    renderers = host.get("renderer_packages") or {}
    interfaces = settings.get("nccl_fabric_ipoib_interfaces") or []
    devices = [iface.get("device") if isinstance(iface, dict) else iface for iface in interfaces]
    stack = settings.get("nccl_fabric_rdma_stack")
    checks = [
        ("nccl_fabric_ipoib_renderer", renderer in renderers,
         "'%s' is not available on %s (allowed: auto, %s)"
         % (settings.get("nccl_fabric_ipoib_renderer"), host.get("distribution"), ", ".join(renderers))),
        ("nccl_fabric_doca_repo_url",
         stack != "doca" or (bool(settings.get("nccl_fabric_doca_repo_url"))
                             and bool(settings.get("nccl_fabric_doca_repo_key_url"))),
         "nccl_fabric_rdma_stack=doca needs nccl_fabric_doca_repo_url and nccl_fabric_doca_repo_key_url"),
        ("nccl_fabric_nccl_ib_gid_index",
         settings.get("nccl_fabric_link_layer") != "roce" or settings.get("nccl_fabric_nccl_ib_gid_index") is not None,
         "RoCE needs a GID index (3 is RoCEv2 over IPv4 on most hosts; check with show_gids)"),
        ("nccl_fabric_nccl_extra_env", not bad_names,
         "names must match NCCL_[A-Z0-9_]+ in full (no newline, NUL or '='), got %s"
         % ", ".join(json.dumps(name) for name in bad_names)),
        ("nccl_fabric_nccl_extra_env", not bad_values,
         "the values of %s must be one-line strings or numbers (no newline, carriage return or NUL: NCCL "
         "exports every line of nccl.conf)" % bad_values),
        ("nccl_fabric_group", settings.get("nccl_fabric_group") in (host.get("groups") or {}),
         "'%s' is not an inventory group" % settings.get("nccl_fabric_group")),
        ("nccl_fabric_ipoib_interfaces", len(set(map(str, devices))) == len(devices), "each device may appear once"),
    ]
    return ["%s: %s" % (name, msg) for name, ok, msg in checks if not ok]


def _whole_setting(value, name):
    if isinstance(value, bool):
        raise NcclFabricPlanError("%s must be a whole number, got %r" % (name, value))
    try:
        return int(str(value).strip())
    except ValueError as exc:
        raise NcclFabricPlanError("%s must be a whole number, got %r" % (name, value)) from exc


def _ipoib(settings, host):
    interfaces = settings.get("nccl_fabric_ipoib_interfaces") or []
    if not interfaces:
        return []
    group = settings.get("nccl_fabric_group")
    members = (host.get("groups") or {}).get(group) or []
    host_index = settings.get("nccl_fabric_ipoib_host_index")
    for iface in interfaces:
        mtu = iface.get("mtu") or settings.get("nccl_fabric_ipoib_mtu")
        mode = iface.get("mode") or settings.get("nccl_fabric_ipoib_mode")
        if _whole_setting(mtu, "nccl_fabric_ipoib_interfaces %s: mtu" % iface.get("device")) > MTU_MAX.get(mode, 65520):
            raise NcclFabricPlanError(
                "nccl_fabric_ipoib_interfaces %s: MTU %s is too large for %s mode (datagram carries at most 4092, "
                "connected at most 65520)." % (iface.get("device"), mtu, mode))
    if host_index is None and host.get("inventory_hostname") not in members:
        raise NcclFabricPlanError("%s is not in nccl_fabric_group '%s': add it to the group or set "
                                  "nccl_fabric_ipoib_host_index for it." % (host.get("inventory_hostname"), group))
    index = host_index if host_index is not None else members.index(host.get("inventory_hostname"))
    planned = []
    for iface in interfaces:
        try:
            address = ipoib_address(iface.get("subnet"), index, iface.get("offset") or 0)
        except NcclFabricPlanError as exc:
            raise NcclFabricPlanError("nccl_fabric_ipoib_interfaces: %s" % exc) from exc
        planned.append({"device": iface.get("device"), "address": address,
                        "mtu": int(str(iface.get("mtu") or settings.get("nccl_fabric_ipoib_mtu")).strip()),
                        "mode": iface.get("mode") or settings.get("nccl_fabric_ipoib_mode")})
    return planned


def nccl_fabric_plan(settings, host):
    """Check the role's settings against each other and this host; return what the tasks read.

    SETTINGS maps the role's variables (nccl_fabric_*) to their values. HOST holds what comes from
    the inventory and the OS: ``supported`` (the OS vars' __nccl_fabric_supported),
    ``distribution``, ``distribution_version``, ``renderer_default`` and ``renderer_packages``
    (the OS vars' renderers), ``groups`` (the inventory's groups) and ``inventory_hostname``.
    Returns ``renderer`` (the IPoIB renderer, ``auto`` resolved) and ``ipoib`` (one
    ``{device, address, mtu, mode}`` per interface, the address from its subnet and the host's index).
    """
    if not isinstance(settings, dict) or not isinstance(host, dict):
        raise NcclFabricPlanError("the settings and the host facts must be mappings")
    _check_timeouts(settings)
    if not host.get("supported"):
        raise NcclFabricPlanError("nccl_fabric supports Debian, Ubuntu and the RedHat family 9; this host runs %s %s."
                                  % (host.get("distribution"), host.get("distribution_version")))
    renderer = settings.get("nccl_fabric_ipoib_renderer")
    if renderer == "auto":
        renderer = host.get("renderer_default")
    problems = _settings_problems(settings, host, renderer)
    if problems:
        raise NcclFabricPlanError("; ".join(problems))
    return {"renderer": renderer, "ipoib": _ipoib(settings, host)}
