# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MIG layouts: hardware profile -> nvidia-mig-parted config, and "does the GPU match it?".

Pure functions over plain data and command output; no Ansible objects, standard library only.

The profile keys are those of ``device_plugin_config.py``: ``mig: false`` (MIG off) or
``mig: {strategy: none|single|mixed, layout: <name>, profiles: [...]}``. ``layout`` names a
layout the way nvidia-mig-parted's own config does:

- ``all-disabled`` / ``all-enabled`` (MIG mode on, no instances);
- ``all-<profile>``: as many instances of one profile as the GPU holds (``all-1g.10gb`` is
  7 x 1g.10gb on an A100 80GB, ``all-3g.71gb`` 2 x 3g.71gb on an H200); a trailing ``.me``
  means the ``+me`` profile (``all-1g.10gb.me``), as in mig-parted;
- ``all-balanced``: 2 x 1g, 1 x 2g, 1 x 3g of the GPU's family.

Sources, each read at the version named:

- mig-parted v0.15.0 (github.com/NVIDIA/mig-parted, commit
  e2d5ad1fc72b9d298ea6d04b885cf2d7dbe56941):
  api/spec/v1/spec.go lines 30-44 (Spec, MigConfigSpec), 47-99 (version must be v1, at least
  one config and one entry, unknown top-level fields refused), 102-181 (devices and
  mig-enabled required, devices "all" or a list of ints, unknown fields refused, mig-devices
  required when enabled and empty when disabled); pkg/types/mig_config.go lines 28-59
  (MigConfig map[string]int, counts >= 0, not all zero); api/spec/v1/helpers.go line 40
  (a device-filter that does not parse is silently dropped: that entry matches no GPU);
  cmd/nvidia-mig-parted/assert/assert.go lines 171-195 (the file is read with
  sigs.k8s.io/yaml, i.e. through the UnmarshalJSON above) and 215-247 (entries whose filter or
  indexes match no GPU are skipped without a word); deployments/systemd/config-default.yaml
  lines 105-118 (all-1g.10gb: 7 on A100/H100 80GB, 4 on A100 40GB), 291-345 (all-balanced
  per GPU), 394-398 (all-1g.18gb), 440 (all-3g.71gb) and the PCI device IDs in its
  device-filters.
- NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
  (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html):
  profile names and instance counts of A100 40GB/80GB, H100 80GB and H200 141GB.
- Real ``nvidia-smi mig -lgip`` tables (tests/fixtures/*/...lgip*.txt with .source): the H200
  host's own capture (1g.18gb 7/7 ... 7g.141gb 1/1) and a published H100 80GB one.

Memory-slice counts (the second number of each entry of _FAMILIES) are the "Fraction of
Memory" column of the user guide's tables, in eighths.
"""


import re
import xml.etree.ElementTree as ET

SPEC_VERSION = "v1"
STRATEGIES = ("none", "single", "mixed")
MIG_KEYS = ("strategy", "layout", "profiles")
COMPUTE_SLICES = 7
MEMORY_SLICES = 8

# Used with fullmatch: "$" would let a trailing newline through into mig-parted's argv and config.
_PROFILE_RE = re.compile(r"(?:(?P<c>[1-9][0-9]*)c\.)?(?P<g>[1-9][0-9]*)g\.(?P<gb>[1-9][0-9]*)gb"
                         r"(?P<attr>\+me|\+me\.all|\+gfx|-me)?")
_DEVICE_ID_RE = re.compile(r"0x[0-9A-Fa-f]{8}(?::0x[0-9A-Fa-f]{8})?")
_LAYOUT_RE = re.compile(r"all-(?P<profile>.+?)(?P<me>\.me)?")

# family -> {pci device ids, name pattern, profiles: name -> (compute slices, memory slices, max)}
_FAMILIES = {
    "A100-40GB": {
        "pci": ("0x20B010DE", "0x20B110DE"),
        "name": re.compile(r"\bA100\b.*\b40GB\b", re.I),
        "profiles": {"1g.5gb": (1, 1, 7), "1g.5gb+me": (1, 1, 1), "1g.10gb": (1, 2, 4),
                     "2g.10gb": (2, 2, 3), "3g.20gb": (3, 4, 2), "4g.20gb": (4, 4, 1),
                     "7g.40gb": (7, 8, 1)},
        "balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    },
    "A100-80GB": {
        "pci": ("0x20B210DE", "0x20B510DE"),
        "name": re.compile(r"\bA100\b.*\b80GB\b", re.I),
        "profiles": {"1g.10gb": (1, 1, 7), "1g.10gb+me": (1, 1, 1), "1g.20gb": (1, 2, 4),
                     "2g.20gb": (2, 2, 3), "3g.40gb": (3, 4, 2), "4g.40gb": (4, 4, 1),
                     "7g.80gb": (7, 8, 1)},
        "balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    },
    "H100-80GB": {
        "pci": ("0x233010DE", "0x233110DE"),
        "name": re.compile(r"\bH100\b(?!.*\b(?:NVL|94GB|96GB)\b)", re.I),
        "profiles": {"1g.10gb": (1, 1, 7), "1g.10gb+me": (1, 1, 1), "1g.20gb": (1, 2, 4),
                     "2g.20gb": (2, 2, 3), "3g.40gb": (3, 4, 2), "4g.40gb": (4, 4, 1),
                     "7g.80gb": (7, 8, 1)},
        "balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    },
    "H200-141GB": {
        "pci": ("0x233510DE", "0x233B10DE"),
        "name": re.compile(r"\bH200\b", re.I),
        "profiles": {"1g.18gb": (1, 1, 7), "1g.18gb+me": (1, 1, 1), "1g.35gb": (1, 2, 4),
                     "2g.35gb": (2, 2, 3), "3g.71gb": (3, 4, 2), "4g.71gb": (4, 4, 1),
                     "7g.141gb": (7, 8, 1)},
        "balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    },
}
FAMILIES = tuple(_FAMILIES)


class MigLayoutError(ValueError):
    """A profile, a config or a command's output that cannot be used."""


def family_of(name=None, pci_device_id=None):
    """The MIG family ('A100-80GB', 'H200-141GB', ...) of a GPU, or None when unknown.

    The PCI device ID (``233510DE`` or ``0x233510DE`` as nvidia-smi -q -x prints it) wins;
    otherwise the product name (``NVIDIA A100 80GB PCIe``) or a profile's ``gpu_model``.
    """
    if pci_device_id:
        pci = str(pci_device_id).upper().replace("0X", "")
        for family, data in _FAMILIES.items():
            if any(item.upper().replace("0X", "") == pci for item in data["pci"]):
                return family
    if name:
        for family, data in _FAMILIES.items():
            if data["name"].search(" ".join(str(name).split())):
                return family
    return None


def profiles_of(family):
    """{profile name: max instances} of a family."""
    return {name: data[2] for name, data in _family(family)["profiles"].items()}


def _family(family):
    if family not in _FAMILIES:
        raise MigLayoutError("unknown MIG GPU family %r; known: %s" % (family, ", ".join(FAMILIES)))
    return _FAMILIES[family]


def layout_devices(layout, family):
    """The mig-devices ({profile: count}) of a named layout on a family; None for all-disabled."""
    data = _family(family)
    if layout == "all-disabled":
        return None
    if layout == "all-enabled":
        return {}
    if layout == "all-balanced":
        return dict(data["balanced"])
    match = _LAYOUT_RE.fullmatch(layout) if isinstance(layout, str) else None
    if not match:
        raise MigLayoutError("MIG layout %r is not all-disabled, all-enabled, all-balanced or all-<profile>"
                             % (layout,))
    profile = match.group("profile") + ("+me" if match.group("me") else "")
    if profile not in data["profiles"]:
        raise MigLayoutError("MIG layout %s: %s has no MIG profile %s (it has %s)"
                             % (layout, family, profile, ", ".join(data["profiles"])))
    return {profile: data["profiles"][profile][2]}


def check_devices_fit(devices, family):
    """Raise unless a {profile: count} fits one GPU of the family (profiles, counts, slices).

    The slice sums are a necessary condition only: whether the instances can be placed
    side by side is decided by the driver (``nvidia-smi mig -lgipp`` placements).
    """
    data = _family(family)
    compute = memory = 0
    for profile, count in devices.items():
        if profile not in data["profiles"]:
            raise MigLayoutError("%s has no MIG profile %s (it has %s)" % (family, profile, ", ".join(data["profiles"])))
        g, mem, most = data["profiles"][profile]
        if not isinstance(count, int) or isinstance(count, bool) or count < 0 or count > most:
            raise MigLayoutError("%s holds at most %d x %s, asked for %r" % (family, most, profile, count))
        compute += g * count
        memory += mem * count
    if compute > COMPUTE_SLICES or memory > MEMORY_SLICES:
        raise MigLayoutError("MIG devices %s need %d/%d compute and %d/%d memory slices of a %s"
                             % (_fmt(devices), compute, COMPUTE_SLICES, memory, MEMORY_SLICES, family))


def desired_layout(profile, family):
    """{name, enabled, devices, strategy} the hardware profile asks of every GPU of a family.

    ``profile`` is gpucloud_profile; only ``mig`` (and ``name`` for messages) is read.
    """
    if not isinstance(profile, dict):
        raise MigLayoutError("the hardware profile must be a mapping, got %r" % (profile,))
    label = "profile %s" % profile.get("name", "?")
    mig = profile.get("mig", False)
    if mig is None or mig is False:
        return {"name": "all-disabled", "enabled": False, "devices": {}, "strategy": "none"}
    if not isinstance(mig, dict):
        raise MigLayoutError("%s: mig must be false or {strategy, layout, profiles}, got %r" % (label, mig))
    unknown = sorted(str(key) for key in mig if key not in MIG_KEYS)
    if unknown:
        raise MigLayoutError("%s: mig has unknown key(s) %s; allowed: %s" % (label, ", ".join(unknown), ", ".join(MIG_KEYS)))
    if mig.get("strategy") not in STRATEGIES:
        raise MigLayoutError("%s: mig.strategy must be one of %s, got %r" % (label, ", ".join(STRATEGIES), mig.get("strategy")))
    layout = mig.get("layout")
    if not isinstance(layout, str) or not layout:
        raise MigLayoutError("%s: mig.layout must name the layout to apply (e.g. all-1g.10gb), got %r" % (label, layout))
    try:
        devices = layout_devices(layout, family)
    except MigLayoutError as exc:
        raise MigLayoutError("%s: %s" % (label, exc)) from exc
    if devices is None:
        raise MigLayoutError("%s: mig.layout all-disabled contradicts a mig mapping; write mig: false" % label)
    check_devices_fit(devices, family)
    if mig["strategy"] == "single" and len(devices) > 1:
        raise MigLayoutError("%s: mig.strategy single needs one MIG profile per GPU, layout %s has %s"
                             % (label, layout, ", ".join(sorted(devices))))
    for item in mig.get("profiles") or []:
        if item not in devices:
            raise MigLayoutError("%s: mig.profiles names %s, which layout %s does not create on %s"
                                 % (label, item, layout, family))
    return {"name": layout, "enabled": True, "devices": devices, "strategy": mig["strategy"]}


def mig_parted_config(profile, family):
    """The nvidia-mig-parted config (api/spec/v1) holding the profile's one layout, as data."""
    want = desired_layout(profile, family)
    entry = {"devices": "all", "mig-enabled": want["enabled"]}
    if want["enabled"]:
        entry["mig-devices"] = dict(want["devices"])
    config = {"version": SPEC_VERSION, "mig-configs": {want["name"]: [entry]}}
    validate_mig_parted_config(config, family)
    return config


def render_mig_parted_config(config):
    """YAML text of a config from mig_parted_config (keys quoted, order kept)."""
    lines = ["version: %s" % config["version"], "mig-configs:"]
    for name, entries in config["mig-configs"].items():
        lines.append('  "%s":' % name)
        for entry in entries:
            lines.append('    - devices: %s' % (entry["devices"] if entry["devices"] == "all"
                                                else "[%s]" % ", ".join(str(i) for i in entry["devices"])))
            lines.append("      mig-enabled: %s" % ("true" if entry["mig-enabled"] else "false"))
            if "mig-devices" in entry:
                if entry["mig-devices"]:
                    lines.append("      mig-devices:")
                    for profile, count in entry["mig-devices"].items():
                        lines.append('        "%s": %d' % (profile, count))
                else:
                    lines.append("      mig-devices: {}")
    return "\n".join(lines) + "\n"


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def validate_mig_parted_config(config, family=None):
    """Raise MigLayoutError where a mig-parted v1 config is wrong; the same rules as the JSON Schema
    (files/schemas/mig-parted-config-v1.schema.json), and with ``family`` every profile must exist
    on that GPU and fit it. Returns the list of config names."""
    if not isinstance(config, dict):
        raise MigLayoutError("a mig-parted config must be a mapping")
    unknown = sorted(str(k) for k in config if k not in ("version", "mig-configs"))
    if unknown:
        raise MigLayoutError("unexpected field(s) %s at the top level" % ", ".join(unknown))
    if config.get("version") != SPEC_VERSION:
        raise MigLayoutError("version must be %s, got %r" % (SPEC_VERSION, config.get("version")))
    configs = config.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        raise MigLayoutError("mig-configs must hold at least one config")
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            raise MigLayoutError("mig-configs.%s must be a non-empty list" % name)
        for number, entry in enumerate(entries):
            _validate_entry(entry, "mig-configs.%s[%d]" % (name, number), family)
    return list(configs)


def _validate_entry(entry, where, family):
    if not isinstance(entry, dict):
        raise MigLayoutError("%s must be a mapping" % where)
    allowed = ("device-filter", "devices", "mig-enabled", "mig-devices")
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise MigLayoutError("%s: unexpected field(s) %s; allowed: %s" % (where, ", ".join(unknown), ", ".join(allowed)))
    for key in ("devices", "mig-enabled"):
        if key not in entry:
            raise MigLayoutError("%s: missing required field %s" % (where, key))
    if "device-filter" in entry:
        filters = entry["device-filter"]
        filters = [filters] if isinstance(filters, str) else filters
        if not isinstance(filters, list) or not filters:
            raise MigLayoutError("%s: device-filter must be a device ID or a non-empty list of them" % where)
        bad = [item for item in filters if not isinstance(item, str) or not _DEVICE_ID_RE.fullmatch(item)]
        if bad:
            raise MigLayoutError("%s: device-filter %r is not 0x<8 hex digits> (mig-parted would match no GPU "
                                 "with it and say nothing)" % (where, bad[0]))
    devices = entry["devices"]
    if devices != "all":
        if (not isinstance(devices, list) or not devices or not all(_is_int(i) and i >= 0 for i in devices)
                or len(set(devices)) != len(devices)):
            raise MigLayoutError("%s: devices must be 'all' or a list of distinct GPU indexes, got %r" % (where, devices))
    if not isinstance(entry["mig-enabled"], bool):
        raise MigLayoutError("%s: mig-enabled must be true or false, got %r" % (where, entry["mig-enabled"]))
    mig_devices = entry.get("mig-devices")
    if entry["mig-enabled"] and mig_devices is None:
        raise MigLayoutError("%s: mig-devices is required when mig-enabled is true" % where)
    if mig_devices is None:
        return
    if not isinstance(mig_devices, dict):
        raise MigLayoutError("%s: mig-devices must map MIG profiles to counts" % where)
    if not entry["mig-enabled"] and mig_devices:
        raise MigLayoutError("%s: MIG devices given while mig-enabled is false" % where)
    for profile, count in mig_devices.items():
        if not isinstance(profile, str) or not _PROFILE_RE.fullmatch(profile):
            raise MigLayoutError("%s: %r is not a MIG profile such as 1g.10gb or 1g.10gb+me" % (where, profile))
        if not _is_int(count) or count < 0:
            raise MigLayoutError("%s: the count of %s must be an integer >= 0, got %r" % (where, profile, count))
    if mig_devices and not any(mig_devices.values()):
        raise MigLayoutError("%s: all counts in mig-devices are 0" % where)
    if family is not None:
        check_devices_fit({p: c for p, c in mig_devices.items() if c}, family)


# --- nvidia-smi output -------------------------------------------------------------------

_LGIP_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+([0-9.]+)\s")
_LGI_ROW = re.compile(r"^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|")
# What nvidia-smi prints instead of a table. NOT seen in a capture of ours: the wording
# comes from public reports and is matched loosely; anything else raises.
_NO_TABLE = re.compile(r"No (?:MIG-enabled devices|GPU instances?(?: profiles)?) found", re.I)


def _table(text, banner, row, what):
    text = text or ""
    if banner not in text:
        if _NO_TABLE.search(text):
            return []
        raise MigLayoutError("not an `nvidia-smi mig %s` table: %r" % (what, text.strip()[:200]))
    return [match.groups() for match in (row.match(line) for line in text.splitlines()) if match]


def parse_lgip(text):
    """``nvidia-smi mig -lgip`` -> [{gpu, profile, id, free, total, memory_gib}]."""
    return [{"gpu": int(g), "profile": p, "id": int(i), "free": int(f), "total": int(t), "memory_gib": float(m)}
            for g, p, i, f, t, m in _table(text, "GPU instance profiles:", _LGIP_ROW, "-lgip")]


def parse_lgi(text):
    """``nvidia-smi mig -lgi`` -> [{gpu, profile, profile_id, instance_id, start, size}]."""
    return [{"gpu": int(g), "profile": p, "profile_id": int(pid), "instance_id": int(iid),
             "start": int(s), "size": int(z)}
            for g, p, pid, iid, s, z in _table(text, "GPU instances:", _LGI_ROW, "-lgi")]


def _state(value):
    value = (value or "").strip().lower()
    return {"enabled": True, "disabled": False}.get(value)


def parse_smi_xml(text):
    """``nvidia-smi -q -x`` -> [{index, name, pci_bus_id, uuid, minor_number, pci_device_id, family,
    mig_current, mig_pending, mig_devices}].

    ``index`` is nvidia-smi's own: the document order of the ``<gpu>`` elements (PCI bus order),
    which ``nvidia-smi -i`` and the GPU column of ``nvidia-smi mig -lgi`` use. ``minor_number``
    (/dev/nvidiaN) is NOT the index: NVIDIA's MIG user guide warns that on A100 systems it may
    follow another order. ``mig_current``/``mig_pending`` are booleans, None where the GPU has no
    MIG (N/A); ``mig_devices`` is the number of MIG devices listed (0 for "None"); the XML names
    no profile.
    """
    try:
        root = ET.fromstring(text or "")
    except ET.ParseError as exc:
        raise MigLayoutError("nvidia-smi -q -x output is not XML: %s" % exc) from exc
    gpus = []
    for number, gpu in enumerate(root.findall("gpu")):
        minor = (gpu.findtext("minor_number") or "").strip()
        pci = (gpu.findtext("pci/pci_device_id") or "").strip()
        name = (gpu.findtext("product_name") or "").strip()
        gpus.append({
            "index": number,
            "name": name,
            "pci_bus_id": (gpu.findtext("pci/pci_bus_id") or gpu.get("id") or "").strip() or None,
            "uuid": (gpu.findtext("uuid") or "").strip() or None,
            "minor_number": int(minor) if minor.isdigit() else None,
            "pci_device_id": pci,
            "family": family_of(name, pci),
            "mig_current": _state(gpu.findtext("mig_mode/current_mig")),
            "mig_pending": _state(gpu.findtext("mig_mode/pending_mig")),
            "mig_devices": len(gpu.findall("mig_devices/mig_device")),
        })
    return gpus


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader`` -> [{pid, name, gpu_uuid}]."""
    apps = []
    for line in (text or "").splitlines():
        if not line.strip() or line.lower().startswith("no running"):
            continue
        parts = [part.strip() for part in line.split(",")]
        apps.append({"pid": parts[0], "name": parts[1] if len(parts) > 1 else "",
                     "gpu_uuid": parts[2] if len(parts) > 2 else ""})
    return apps


def _fmt(devices):
    return ", ".join("%d x %s" % (count, profile) for profile, count in sorted(devices.items()) if count) or "none"


def compare(profile, gpus, instances=None):
    """Judge every GPU against the profile's layout.

    gpus: parse_smi_xml output; instances: parse_lgi output (None when not read: then only
    MIG mode and the number of MIG devices are judged). Returns {matches, layout, gpus: [{index,
    family, ok, reasons, want, have, mode_change, reset_required}]}. ``mode_change`` is the MIG
    mode to set (True/False) or None; ``reset_required`` says the mode is set but pending
    (a GPU reset or reboot makes it current).
    """
    results = []
    layout = None
    for gpu in gpus:
        reasons = []
        family = gpu.get("family")
        want_mig = bool(profile.get("mig", False))
        if family is None:
            if want_mig:
                reasons.append("GPU %s (%s) is not a MIG GPU this collection knows" % (gpu["index"], gpu.get("name")))
                results.append(_result(gpu, family, reasons, {}, None, None, False))
                continue
            want = {"name": "all-disabled", "enabled": False, "devices": {}}
        else:
            want = desired_layout(profile, family)
        layout = layout or want["name"]
        current, pending = gpu.get("mig_current"), gpu.get("mig_pending")
        mode_change = None
        reset = False
        if current is None and pending is None:
            if want["enabled"]:
                reasons.append("MIG is not supported (N/A)")
        else:
            if pending is not None and pending != want["enabled"]:
                mode_change = want["enabled"]
                reasons.append("MIG mode pending %s, want %s" % (_on(pending), _on(want["enabled"])))
            if current != want["enabled"]:
                if mode_change is None:
                    reset = True
                    reasons.append("MIG mode %s now, %s pending: a GPU reset or reboot makes it current"
                                   % (_on(current), _on(want["enabled"])))
        have = None
        if instances is not None:
            have = {}
            for item in instances:
                if item["gpu"] == gpu["index"]:
                    have[item["profile"]] = have.get(item["profile"], 0) + 1
            if current and want["enabled"] and have != {p: c for p, c in want["devices"].items() if c}:
                reasons.append("GPU instances %s, want %s" % (_fmt(have), _fmt(want["devices"])))
        elif current and want["enabled"] and gpu.get("mig_devices") is not None:
            count = sum(want["devices"].values())
            if gpu["mig_devices"] != count:
                reasons.append("%d MIG device(s), want %d (%s)" % (gpu["mig_devices"], count, _fmt(want["devices"])))
        results.append(_result(gpu, family, reasons, want["devices"], have, mode_change, reset))
    return {"matches": all(item["ok"] for item in results), "layout": layout or "all-disabled", "gpus": results}


def _on(value):
    return {True: "enabled", False: "disabled"}.get(value, "unknown")


def _result(gpu, family, reasons, want, have, mode_change, reset):
    return {"index": gpu["index"], "family": family, "ok": not reasons, "reasons": reasons, "want": want,
            "have": have, "mode_change": mode_change, "reset_required": reset}


def plan_nvidia_smi(judged, lgip=None):
    """The ``nvidia-smi`` argv lists that bring every GPU to its layout, in order.

    MIG mode changes first; a GPU whose mode is (or becomes) pending gets no instance
    commands: instances can only be made once the mode is current. A GPU with other
    instances loses all of them (``-dci`` then ``-dgi``) before ``-cgi <profiles> -C``
    creates the layout with one full compute instance each. Profile names are given to
    ``-cgi`` as names, which nvidia-smi accepts as well as IDs (MIG user guide, "Creating
    GPU Instances"). ``lgip`` is unused except to refuse a profile the GPU does not list.
    """
    listed = None
    if lgip is not None:
        listed = {}
        for row in lgip:
            listed.setdefault(row["gpu"], set()).add(row["profile"])
    commands = []
    for gpu in judged["gpus"]:
        if gpu["ok"]:
            continue
        index = str(gpu["index"])
        if gpu["mode_change"] is not None:
            commands.append(["nvidia-smi", "-i", index, "-mig", "1" if gpu["mode_change"] else "0"])
            continue
        if gpu["reset_required"] or gpu["have"] is None:
            continue
        if gpu["have"]:
            commands.append(["nvidia-smi", "mig", "-i", index, "-dci"])
            commands.append(["nvidia-smi", "mig", "-i", index, "-dgi"])
        wanted = []
        for profile, count in sorted(gpu["want"].items(), key=lambda item: -_slices(item[0])):
            if listed is not None and profile not in listed.get(gpu["index"], set()):
                raise MigLayoutError("GPU %s does not list MIG profile %s in nvidia-smi mig -lgip" % (index, profile))
            wanted.extend([profile] * count)
        if wanted:
            commands.append(["nvidia-smi", "mig", "-i", index, "-cgi", ",".join(wanted), "-C"])
    return commands


def plan_mig_parted(judged, config_file, config_name, mig_parted="nvidia-mig-parted"):
    """The ``nvidia-mig-parted apply`` argv that brings the GPUs one step closer to the layout.

    Always ``--skip-reset``: without NVIDIA's hooks file, a reset fails on GPUs that
    nvidia-persistenced, DCGM or Fabric Manager hold open, and the run would stop there instead
    of reaching the collection's shared reboot. A MIG mode change is applied alone
    (``--mode-only``): instances can only be made once the mode is current, which a reboot (or a
    driver that switches at once) brings; then a second apply makes them
    (mig-parted cmd/nvidia-mig-parted/apply/apply.go, ApplyMigConfigWithHooks; mode.go,
    ApplyMigMode: with SkipReset the pending mode is left for the reboot).
    """
    if not config_file or not config_name:
        raise MigLayoutError("tool mig-parted needs the config file and the config name")
    argv = [mig_parted, "apply", "--skip-reset", "-f", config_file, "-c", config_name]
    if any(gpu["mode_change"] is not None for gpu in judged["gpus"]):
        argv.insert(2, "--mode-only")
    return argv


def _slices(profile):
    match = _PROFILE_RE.fullmatch(profile)
    return int(match.group("g")) if match else 0


# --- applying ----------------------------------------------------------------------------

SMI_XML = ["nvidia-smi", "-q", "-x"]
SMI_LGI = ["nvidia-smi", "mig", "-lgi"]
SMI_LGIP = ["nvidia-smi", "mig", "-lgip"]
SMI_APPS = ["nvidia-smi", "--query-compute-apps=pid,process_name,gpu_uuid", "--format=csv,noheader"]


def _run(run, argv, commands=None):
    rc, out, err = run(argv)
    if commands is not None:
        commands.append(" ".join(argv))
    if rc != 0:
        raise MigLayoutError("%s failed (rc %s): %s" % (" ".join(argv), rc, (err or out or "").strip()[-300:]))
    return out


def observe(run):
    """(gpus, instances) of the host: -q -x, and -lgi where a GPU runs MIG now."""
    gpus = parse_smi_xml(_run(run, SMI_XML))
    if not gpus:
        raise MigLayoutError("nvidia-smi lists no GPU")
    instances = parse_lgi(_run(run, SMI_LGI)) if any(gpu["mig_current"] for gpu in gpus) else []
    return gpus, instances


def ensure(run, profile, tool="nvidia-smi", config_file=None, config_name=None, mig_parted="nvidia-mig-parted",
           allow_busy=False, check_mode=False):
    """Bring the GPUs to the profile's MIG layout; nothing runs unless the layout differs.

    run(argv) -> (rc, stdout, stderr). Refuses while compute processes run on the GPUs unless
    ``allow_busy``. Returns {changed, before, after, commands, reset_required, busy}; in check
    mode ``commands`` are those that would run first (mode changes before instances).
    """
    gpus, instances = observe(run)
    before = compare(profile, gpus, instances)
    result = {"changed": False, "layout": before["layout"], "before": before, "after": before, "commands": [],
              "reset_required": any(gpu["reset_required"] for gpu in before["gpus"]), "busy": []}
    if before["matches"]:
        return result
    pending_only = all(gpu["ok"] or (gpu["reset_required"] and gpu["mode_change"] is None) for gpu in before["gpus"])
    if pending_only:
        # The mode is set; only a GPU reset or reboot is missing. Nothing to run.
        return result
    busy = parse_compute_apps(_run(run, SMI_APPS))
    result["busy"] = busy
    if busy and not allow_busy:
        raise MigLayoutError(
            "refusing to change the MIG layout to %s while %d compute process(es) run on the GPUs (%s): drain the "
            "node first, or allow it explicitly" % (before["layout"], len(busy),
                                                    ", ".join("%s %s" % (app["pid"], app["name"]) for app in busy)))
    if tool == "mig-parted":
        planned = [plan_mig_parted(before, config_file, config_name, mig_parted)]
    else:
        planned = plan_nvidia_smi(before, parse_lgip(_run(run, SMI_LGIP)) if any(
            gpu["mode_change"] is None and not gpu["ok"] for gpu in before["gpus"]) else None)
    result["changed"] = True
    if check_mode:
        result["commands"] = [" ".join(argv) for argv in planned]
        return result
    commands = []
    for argv in planned:
        _run(run, argv, commands)
    gpus, instances = observe(run)
    after = compare(profile, gpus, instances)
    if not after["matches"] and not any(g["reset_required"] for g in after["gpus"]):
        # Mode changes took effect at once (the driver reset the GPU): make the instances now.
        if tool == "mig-parted":
            again = [plan_mig_parted(after, config_file, config_name, mig_parted)]
        else:
            again = plan_nvidia_smi(after, parse_lgip(_run(run, SMI_LGIP)))
        for argv in again:
            _run(run, argv, commands)
        gpus, instances = observe(run)
        after = compare(profile, gpus, instances)
    result.update(after=after, commands=commands, layout=after["layout"],
                  reset_required=any(gpu["reset_required"] for gpu in after["gpus"]))
    if not after["matches"] and not result["reset_required"]:
        raise MigLayoutError("the MIG layout still differs after %s: %s" % (
            "; ".join(commands), "; ".join("GPU%s %s" % (g["index"], ", ".join(g["reasons"]))
                                           for g in after["gpus"] if not g["ok"])))
    return result
