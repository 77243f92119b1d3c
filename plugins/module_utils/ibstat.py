# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parse ``ibstat`` (rdma-core infiniband-diags) and check a fabric against expectations.

Pure functions: text in, plain data out, ``ValueError`` for text that is not
ibstat output. Field names and values follow ``infiniband-diags/ibstat.c``:
``CA 'mlx5_0'`` (or ``Switch``/``Router``/``iWARP RNIC``) opens a device, its
keys are indented one level, ``Port N:`` opens a port whose keys are indented
two levels. The parser does not rely on the indentation (tabs, spaces or none,
as pasted text often has): a key belongs to the port when it is a port key.
Error lines that ibstat interleaves (``ibwarn: ...``, ``ibpanic: ...``) and any
other unrecognised line are skipped.
"""


import re

from ansible_collections.gpucloud.fleet.plugins.module_utils.text_lines import stripped_lines

_CA_RE = re.compile(r"^(CA|Switch|Router|iWARP RNIC|\?\?\?):?\s+'([^']+)'$")
_PORT_RE = re.compile(r"^Port\s+(\d+):$")
_KEY_RE = re.compile(r"^([A-Za-z][A-Za-z ]*?)\s*:\s*(.*)$")

# ibstat label -> (key, converter); "<node type> type" is handled separately.
_CA_KEYS = {
    "number of ports": ("number_of_ports", "int"),
    "firmware version": ("firmware", "str"),
    "hardware version": ("hardware_version", "str"),
    "node guid": ("node_guid", "str"),
    "system image guid": ("system_image_guid", "str"),
}
_PORT_KEYS = {
    "state": ("state", "str"),
    "physical state": ("physical_state", "str"),
    "rate": ("rate", "rate"),
    "effective speed": ("effective_speed", "float"),
    "base lid": ("base_lid", "int"),
    "lmc": ("lmc", "int"),
    "sm lid": ("sm_lid", "int"),
    "capability mask": ("capability_mask", "str"),
    "port guid": ("port_guid", "str"),
    "link layer": ("link_layer", "str"),
}
# Keys every port dict carries, None when ibstat did not print them.
_PORT_REQUIRED = ("state", "physical_state", "rate", "link_layer", "base_lid", "sm_lid", "port_guid")

FABRIC_DEFAULTS = {"state": "Active", "physical_state": "LinkUp"}
_EXPECT_KEYS = ("hca_count", "state", "physical_state", "rate", "link_layer", "ca_names", "ca_pattern", "ports")


def _number(value):
    """Return an int for integral text, a float for '2.5' (1x SDR), else raise."""
    number = float(value)
    return int(number) if number.is_integer() else number


def _convert(kind, value, label, lineno):
    try:
        if kind == "int":
            return int(value, 0) if value.lower().startswith("0x") else int(value)
        if kind == "float":
            return float(value)
        if kind == "rate":
            return _number(value.split()[0])
    except (ValueError, IndexError):
        raise ValueError("line %d: %s %r is not a number" % (lineno, label, value))
    return value


def _snake(label):
    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def parse_ibstat(text):
    """Parse ``ibstat`` output into ``{ca_name: {..., "ports": {"1": {...}}}}``.

    A CA carries ``node_type`` (``CA``, ``Switch`` ...), ``ca_type``,
    ``firmware``, ``number_of_ports``, ``hardware_version``, ``node_guid``,
    ``system_image_guid`` and any other key it printed (snake_case). A port
    carries ``state``, ``physical_state``, ``rate`` (int, or 2.5 for 1x SDR;
    ``rate_note`` holds ``FDR10`` when ibstat printed ``Rate: 40 (FDR10)``),
    ``link_layer``, ``base_lid``, ``sm_lid``, ``lmc``, ``capability_mask``,
    ``port_guid`` and ``effective_speed`` where printed. Port keys are strings
    (``"1"``) so the data survives a round trip through JSON unchanged.
    """
    cas = {}
    ca = None
    port = None
    for lineno, line in stripped_lines(text, "ibstat"):
        match = _CA_RE.match(line)
        if match:
            ca = {"node_type": match.group(1), "ca_type": None, "firmware": None, "ports": {}}
            cas[match.group(2)] = ca
            port = None
            continue
        if ca is None:
            continue
        match = _PORT_RE.match(line)
        if match:
            port = dict((key, None) for key in _PORT_REQUIRED)
            ca["ports"][str(int(match.group(1)))] = port
            continue
        match = _KEY_RE.match(line)
        if not match or line.lower().startswith(("ibwarn", "ibpanic", "iberror", "ibdebug")):
            continue
        label, value = match.group(1).strip().lower(), match.group(2).strip()
        if label.endswith(" type") and label[:-5] == ca["node_type"].lower():
            ca["ca_type"] = value
        elif label in _PORT_KEYS and port is not None:
            key, kind = _PORT_KEYS[label]
            if key == "rate":
                note = re.search(r"\(([^)]*)\)", value)
                if note:
                    port["rate_note"] = note.group(1)
            port[key] = _convert(kind, value, label, lineno)
        elif label in _CA_KEYS:
            key, kind = _CA_KEYS[label]
            ca[key] = _convert(kind, value, label, lineno)
        elif port is not None:
            port[_snake(label)] = value
        else:
            ca[_snake(label)] = value

    if not cas:
        raise ValueError("no \"CA '<name>'\" line found: not ibstat output")
    return cas


def _selected(name, expect):
    names = expect.get("ca_names")
    pattern = expect.get("ca_pattern")
    if names is not None:
        return name in names
    if pattern is not None:
        return re.fullmatch(pattern, name) is not None
    return True


def _same(actual, wanted):
    if isinstance(wanted, str) and isinstance(actual, str):
        return actual.lower() == wanted.lower()
    if isinstance(wanted, (int, float)) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return float(actual) == float(wanted)
    return actual == wanted


def check_fabric(parsed, expect=None):
    """Compare parsed ibstat data with ``expect`` and list every mismatch.

    ``expect`` keys (all optional):

    * ``hca_count``: exact number of CAs considered;
    * ``state`` (default ``Active``) and ``physical_state`` (default
      ``LinkUp``): every considered port must be in it; ``None`` skips;
    * ``rate`` (e.g. 400 for NDR 4x) and ``link_layer`` (``InfiniBand`` or
      ``Ethernet``): checked on every considered port when given;
    * ``ca_names`` (list of exact names) or ``ca_pattern`` (regular
      expression that must match the whole name): the CAs to consider, e.g.
      ``mlx5_[0-7]`` to leave out the Ethernet-only NICs; a name listed in
      ``ca_names`` that is absent is a mismatch;
    * ``ports``: port numbers to check on each CA (default every port).

    A port dict that lacks a key altogether (``ibv_devinfo`` without ``-v``
    knows no physical state or rate) skips the default state checks and
    reports explicitly requested ones as not reported; a key present with
    the value None is a mismatch. String comparisons ignore case. No CA
    considered is a mismatch unless ``hca_count`` says how many are expected. Returns a list of messages, empty when
    everything matches. Raises ValueError for an unknown key.
    """
    expect = dict(expect or {})
    unknown = sorted(set(expect) - set(_EXPECT_KEYS))
    if unknown:
        raise ValueError("unknown fabric expectation(s): %s; known: %s"
                         % (", ".join(unknown), ", ".join(_EXPECT_KEYS)))
    if expect.get("ca_names") is not None and expect.get("ca_pattern") is not None:
        raise ValueError("ca_names and ca_pattern are mutually exclusive")
    if expect.get("ca_pattern") is not None:
        try:
            re.compile(expect["ca_pattern"])
        except re.error as exc:
            raise ValueError("ca_pattern %r is not a valid regular expression: %s" % (expect["ca_pattern"], exc))
    explicit = set(key for key in expect if expect[key] is not None)
    for key, default in FABRIC_DEFAULTS.items():
        if key not in expect:
            expect[key] = default

    mismatches = []
    considered = sorted((name for name in parsed if _selected(name, expect)), key=_natural_key)
    for name in expect.get("ca_names") or []:
        if name not in parsed:
            mismatches.append("%s: CA not found" % name)

    count = expect.get("hca_count")
    if not considered and count is None:
        # Nothing to check is no pass: an empty capture or a ca_pattern that matches
        # nothing would otherwise report a healthy fabric.
        selection = ("matching ca_pattern %r" % expect["ca_pattern"] if expect.get("ca_pattern") is not None
                     else "among ca_names" if expect.get("ca_names") else "at all")
        mismatches.append("no HCA found %s (the capture lists: %s), so nothing was checked; set hca_count: 0 "
                          "if none is expected" % (selection, ", ".join(sorted(parsed, key=_natural_key)) or "none"))
    elif count is not None and len(considered) != count:
        mismatches.append("expected %d HCA(s), found %d (%s)"
                          % (count, len(considered), ", ".join(considered) or "none"))

    wanted_ports = expect.get("ports")
    for name in considered:
        ports = parsed[name].get("ports") or {}
        numbers = [str(p) for p in wanted_ports] if wanted_ports else sorted(ports, key=_natural_key)
        if not numbers:
            mismatches.append("%s: no ports reported" % name)
        for number in numbers:
            port = ports.get(number)
            if port is None:
                mismatches.append("%s port %s: not found" % (name, number))
                continue
            for key, label in (("state", "state"), ("physical_state", "physical state"),
                               ("rate", "rate"), ("link_layer", "link layer")):
                wanted = expect.get(key)
                if wanted is None:
                    continue
                if key not in port:
                    if key in explicit:
                        mismatches.append("%s port %s: %s not reported" % (name, number, label))
                    continue
                actual = port.get(key)
                if not _same(actual, wanted):
                    mismatches.append("%s port %s: %s is %s, expected %s" % (name, number, label, actual, wanted))
    return mismatches


def _natural_key(name):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name))]
