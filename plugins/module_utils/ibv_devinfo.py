# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parse ``ibv_devinfo`` (rdma-core libibverbs) output, default and ``-v``.

Pure functions: text in, plain data out, ``ValueError`` for text that is not
ibv_devinfo output. The format follows ``libibverbs/examples/devinfo.c``:
``hca_id:<TAB>mlx5_0`` opens a device, ``port:<TAB>1`` opens a port, values
are ``key:<TABs>value`` and enumerations print as ``NAME (code)``. Like the
ibstat parser it does not depend on the indentation. With ``-v`` the device
section grows capability blocks (flag names alone on a line, nested
``max_tso:`` style keys); those are kept flat where they are plain
``key: value`` lines and otherwise skipped, the first value of a repeated key
winning. The port's ``-v`` keys are all kept, GIDs as a list.
"""


import re

from ansible_collections.gpucloud.fleet.plugins.module_utils.text_lines import stripped_lines

_HCA_RE = re.compile(r"^hca_id:\s*(\S+)$")
_PORT_RE = re.compile(r"^port:\s*(\d+)$")
_KEY_RE = re.compile(r"^([A-Za-z_][\w ]*?)\s*:\s*(.*)$")
_GID_RE = re.compile(r"^GID\[\s*(\d+)\]:\s*(\S+?)(?:,\s*(.+))?$")
_ENUM_RE = re.compile(r"^(.*?)\s*\((-?\d+)\)$")

_DEVICE_REQUIRED = ("transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id",
                    "vendor_part_id", "hw_ver", "board_id", "phys_port_cnt")
_DEVICE_INT = ("vendor_part_id", "phys_port_cnt")
_PORT_REQUIRED = ("state", "state_code", "max_mtu", "active_mtu", "sm_lid", "port_lid", "port_lmc", "link_layer")
_PORT_INT = ("sm_lid", "port_lid", "port_lmc", "sm_sl", "pkey_tbl_len", "gid_tbl_len",
             "subnet_timeout", "init_type_reply")
# Values printed as "NAME (code)": the name is kept under the key and the code
# under key + "_code" (state_code is part of the documented contract).
_PORT_ENUM = ("state", "phys_state", "active_width", "active_speed", "max_vl_num")
_PORT_MTU = ("max_mtu", "active_mtu")

# ibv_devinfo names -> ibstat's words, so that check_fabric() serves both.
_STATE_WORDS = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active"}
# Very old libibverbs printed "IB" where ibstat and today's ibv_devinfo say "InfiniBand".
_LINK_LAYER_WORDS = {"IB": "InfiniBand"}
_PHYS_STATE_WORDS = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
                     5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}


def _int(value, label, lineno):
    try:
        return int(value, 0)
    except ValueError:
        raise ValueError("line %d: %s %r is not an integer" % (lineno, label, value))


def _enum(value):
    match = _ENUM_RE.match(value)
    if match:
        return match.group(1), int(match.group(2))
    return value, None


def _port_value(port, key, value, lineno):
    if key in _PORT_ENUM:
        name, code = _enum(value)
        port[key] = name
        port[key + "_code"] = code
    elif key in _PORT_MTU:
        name, code = _enum(value)
        port[key] = int(name) if name.isdigit() else None
    elif key in _PORT_INT:
        port[key] = _int(value, key, lineno)
    else:
        port[key] = value


def parse_ibv_devinfo(text):
    """Parse ``ibv_devinfo`` output into ``{hca_id: {..., "ports": {"1": {...}}}}``.

    A device carries ``transport`` (``InfiniBand``; ``transport_code`` holds
    the number), ``fw_ver``, ``node_guid``, ``sys_image_guid``, ``vendor_id``,
    ``vendor_part_id`` (int), ``hw_ver``, ``board_id``, ``phys_port_cnt`` (int)
    and, with ``-v``, the other plain keys. A port carries ``state``
    (``PORT_ACTIVE``), ``state_code`` (4), ``max_mtu``/``active_mtu`` (bytes,
    None for ``invalid MTU``), ``sm_lid``, ``port_lid``, ``port_lmc`` (ints),
    ``link_layer`` and with ``-v`` ``active_width`` (``4X``), ``active_speed``
    (``100.0 Gbps``), ``phys_state`` (``LINK_UP``) with their ``_code`` keys,
    ``effective_speed``, ``gids`` (list of ``{index, gid, type}``) and the rest
    as printed. Missing documented keys are None. Port keys are strings.
    """
    devices = {}
    device = None
    port = None
    for lineno, line in stripped_lines(text, "ibv_devinfo"):
        match = _HCA_RE.match(line)
        if match:
            device = dict((key, None) for key in _DEVICE_REQUIRED)
            device["ports"] = {}
            devices[match.group(1)] = device
            port = None
            continue
        if device is None:
            continue
        match = _PORT_RE.match(line)
        if match:
            port = dict((key, None) for key in _PORT_REQUIRED)
            port["gids"] = []
            device["ports"][str(int(match.group(1)))] = port
            continue
        if port is not None:
            match = _GID_RE.match(line)
            if match:
                port["gids"].append({"index": int(match.group(1)), "gid": match.group(2),
                                     "type": match.group(3)})
                continue
        match = _KEY_RE.match(line)
        if not match:
            continue
        key, value = match.group(1).strip().replace(" ", "_"), match.group(2).strip()
        if port is not None:
            _port_value(port, key, value, lineno)
        elif not value:
            continue
        elif key == "transport":
            device["transport"], device["transport_code"] = _enum(value)
        elif key in _DEVICE_INT:
            device[key] = _int(value, key, lineno)
        elif key in _DEVICE_REQUIRED or key not in device:
            device[key] = value

    if not devices:
        raise ValueError("no 'hca_id:' line found: not ibv_devinfo output")
    return devices


def _rate(port):
    """Link rate in Gb/s as ibstat prints it: lanes x per-lane speed."""
    width = port.get("active_width")
    speed = port.get("active_speed")
    if not width or not speed:
        return None
    lanes = re.match(r"^(\d+)X$", width.strip(), re.IGNORECASE)
    gbps = re.match(r"^(\d+(?:\.\d+)?)\s*Gbps$", speed.strip(), re.IGNORECASE)
    if not lanes or not gbps:
        return None
    rate = int(lanes.group(1)) * float(gbps.group(1))
    return int(rate) if rate.is_integer() else rate


def to_ibstat_view(devices):
    """Map parsed ibv_devinfo data onto parse_ibstat()'s shape for check_fabric().

    ``state``/``physical_state`` use ibstat's words (``Active``, ``LinkUp``).
    ``physical_state`` and ``rate`` come only from ``ibv_devinfo -v`` output
    and are left out otherwise, which check_fabric() understands.
    """
    view = {}
    for name, device in devices.items():
        ports = {}
        for number, port in (device.get("ports") or {}).items():
            view_port = {
                "state": _STATE_WORDS.get(port.get("state_code"), port.get("state")),
                "link_layer": _LINK_LAYER_WORDS.get(port.get("link_layer"), port.get("link_layer")),
                "base_lid": port.get("port_lid"),
                "sm_lid": port.get("sm_lid"),
            }
            if "phys_state" in port:
                view_port["physical_state"] = _PHYS_STATE_WORDS.get(port.get("phys_state_code"),
                                                                    port.get("phys_state"))
            if "active_width" in port or "active_speed" in port:
                view_port["rate"] = _rate(port)
            ports[number] = view_port
        view[name] = {"ca_type": device.get("vendor_part_id"), "firmware": device.get("fw_ver"),
                      "node_guid": device.get("node_guid"), "ports": ports}
    return view
