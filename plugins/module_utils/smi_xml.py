# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure parsers for ``nvidia-smi -q -x`` (XML) and ``nvidia-smi -q`` (text).

Both return the GPU facts in the shape the NVML path of
``gpucloud.fleet.nvidia_gpu_facts`` returns (see :func:`gpu_record`), so a
playbook does not care which source answered.  "N/A", "Not Supported" and
friends become None.
"""


import re
from xml.etree import ElementTree

NOT_AVAILABLE = frozenset((
    "",
    "n/a",
    "na",
    "[n/a]",
    "not supported",
    "[not supported]",
    "not available",
    "unknown error",
    "[unknown error]",
    "requested functionality has been deprecated",
))
TRUE_WORDS = frozenset(("enabled", "yes", "active", "on"))
FALSE_WORDS = frozenset(("disabled", "no", "not active", "off"))
NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
Q_KEY_VALUE = re.compile(r"^(\S.*?)\s+:(?:\s(.*))?$")
# The header row of the plain `nvidia-smi` table: "| NVIDIA-SMI 580.159.04   Driver Version: ...".
SMI_TABLE = re.compile(r"^\s*\|\s*NVIDIA-SMI\s+\S+.*Driver Version:", re.MULTILINE)
Q_GPU_SECTION = re.compile(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$")

# Where each fact lives: (paths in the XML, paths in the -q text), tried in
# order, first available value wins.  Newer drivers first.
FIELDS = {
    "name": (["product_name"], ["Product Name"]),
    "uuid": (["uuid"], ["GPU UUID"]),
    "serial": (["serial"], ["Serial Number"]),
    "pci_bus_id": (["pci/pci_bus_id"], ["PCI/Bus Id"]),
    "architecture": (["product_architecture"], ["Product Architecture"]),
    "vbios_version": (["vbios_version"], ["VBIOS Version"]),
    "memory_total": (["fb_memory_usage/total"], ["FB Memory Usage/Total"]),
    "memory_used": (["fb_memory_usage/used"], ["FB Memory Usage/Used"]),
    "persistence_mode": (["persistence_mode"], ["Persistence Mode"]),
    "compute_mode": (["compute_mode"], ["Compute Mode"]),
    "mig_current": (["mig_mode/current_mig"], ["MIG Mode/Current"]),
    "mig_pending": (["mig_mode/pending_mig"], ["MIG Mode/Pending"]),
    "ecc_current": (["ecc_mode/current_ecc"], ["ECC Mode/Current"]),
    "ecc_pending": (["ecc_mode/pending_ecc"], ["ECC Mode/Pending"]),
    "remapped_correctable": (["remapped_rows/remapped_row_corr"], ["Remapped Rows/Correctable Error"]),
    "remapped_uncorrectable": (["remapped_rows/remapped_row_unc"], ["Remapped Rows/Uncorrectable Error"]),
    "remapped_pending": (["remapped_rows/remapped_row_pending"], ["Remapped Rows/Pending"]),
    "remapped_failure": (["remapped_rows/remapped_row_failure"], ["Remapped Rows/Remapping Failure Occurred"]),
    "retired_single_bit": (
        ["retired_pages/multiple_single_bit_retirement/retired_count"],
        ["Retired Pages/Single Bit ECC"],
    ),
    "retired_double_bit": (
        ["retired_pages/double_bit_retirement/retired_count"],
        ["Retired Pages/Double Bit ECC"],
    ),
    "retired_pending": (
        ["retired_pages/pending_retirement", "retired_pages/pending_blacklist"],
        ["Retired Pages/Pending Page Retirement", "Retired Pages/Pending Page Blacklist"],
    ),
    "power_draw": (
        ["gpu_power_readings/instant_power_draw", "gpu_power_readings/power_draw", "power_readings/power_draw"],
        [
            "GPU Power Readings/Instantaneous Power Draw",
            "GPU Power Readings/Power Draw",
            "Power Readings/Power Draw",
        ],
    ),
    # NVML's "power management limit" is what nvidia-smi >= 535 calls "Requested".
    "power_limit": (
        ["gpu_power_readings/requested_power_limit", "power_readings/power_limit"],
        ["GPU Power Readings/Requested Power Limit", "Power Readings/Power Limit"],
    ),
    "power_default_limit": (
        ["gpu_power_readings/default_power_limit", "power_readings/default_power_limit"],
        ["GPU Power Readings/Default Power Limit", "Power Readings/Default Power Limit"],
    ),
    "power_enforced_limit": (
        ["gpu_power_readings/current_power_limit", "power_readings/enforced_power_limit"],
        ["GPU Power Readings/Current Power Limit", "Power Readings/Enforced Power Limit"],
    ),
    "temperature": (["temperature/gpu_temp"], ["Temperature/GPU Current Temp"]),
    "clock_sm": (["clocks/sm_clock"], ["Clocks/SM"]),
    "clock_sm_max": (["max_clocks/sm_clock"], ["Max Clocks/SM"]),
    "clock_memory": (["clocks/mem_clock"], ["Clocks/Memory"]),
    "clock_memory_max": (["max_clocks/mem_clock"], ["Max Clocks/Memory"]),
    "pcie_gen": (["pci/pci_gpu_link_info/pcie_gen/current_link_gen"], ["PCI/GPU Link Info/PCIe Generation/Current"]),
    "pcie_gen_max": (["pci/pci_gpu_link_info/pcie_gen/max_link_gen"], ["PCI/GPU Link Info/PCIe Generation/Max"]),
    # What the GPU itself supports; "Max" above is capped by the host's root port or switch.
    "pcie_gen_device_max": (
        ["pci/pci_gpu_link_info/pcie_gen/max_device_link_gen"],
        ["PCI/GPU Link Info/PCIe Generation/Device Max"],
    ),
    "pcie_width": (
        ["pci/pci_gpu_link_info/link_widths/current_link_width"],
        ["PCI/GPU Link Info/Link Width/Current"],
    ),
    "pcie_width_max": (
        ["pci/pci_gpu_link_info/link_widths/max_link_width"],
        ["PCI/GPU Link Info/Link Width/Max"],
    ),
    # The clocks are low because nothing runs ("throttle" until driver 530, "event" since).
    "idle": (
        ["clocks_event_reasons/clocks_event_reason_gpu_idle", "clocks_throttle_reasons/clocks_throttle_reason_gpu_idle"],
        ["Clocks Event Reasons/Idle", "Clocks Throttle Reasons/Idle"],
    ),
    # NVSwitch systems: the GPU's registration with Fabric Manager (N/A elsewhere).
    "fabric_state": (["fabric/state"], ["Fabric/State"]),
    "fabric_status": (["fabric/status"], ["Fabric/Status"]),
}

# Uncorrected ECC error counters: the per-memory layout changed with Ampere
# (SRAM/DRAM) and again with Hopper (parity/SEC-DED); older GPUs report a
# double-bit total.  Only one layout is present, so summing all works.
ECC_UNCORRECTED = {
    "volatile": (
        [
            "ecc_errors/volatile/sram_uncorrectable",
            "ecc_errors/volatile/sram_uncorrectable_parity",
            "ecc_errors/volatile/sram_uncorrectable_secded",
            "ecc_errors/volatile/dram_uncorrectable",
            "ecc_errors/volatile/double_bit/total",
        ],
        [
            "ECC Errors/Volatile/SRAM Uncorrectable",
            "ECC Errors/Volatile/SRAM Uncorrectable Parity",
            "ECC Errors/Volatile/SRAM Uncorrectable SEC-DED",
            "ECC Errors/Volatile/DRAM Uncorrectable",
            "ECC Errors/Volatile/Double Bit/Total",
        ],
    ),
    "aggregate": (
        [
            "ecc_errors/aggregate/sram_uncorrectable",
            "ecc_errors/aggregate/sram_uncorrectable_parity",
            "ecc_errors/aggregate/sram_uncorrectable_secded",
            "ecc_errors/aggregate/dram_uncorrectable",
            "ecc_errors/aggregate/double_bit/total",
        ],
        [
            "ECC Errors/Aggregate/SRAM Uncorrectable",
            "ECC Errors/Aggregate/SRAM Uncorrectable Parity",
            "ECC Errors/Aggregate/SRAM Uncorrectable SEC-DED",
            "ECC Errors/Aggregate/DRAM Uncorrectable",
            "ECC Errors/Aggregate/Double Bit/Total",
        ],
    ),
}

XML = 0
TEXT = 1


def available(raw):
    """The stripped value, or None for N/A, Not Supported and the like."""
    if raw is None:
        return None
    value = " ".join(str(raw).split())
    if value.lower() in NOT_AVAILABLE:
        return None
    return value


def to_number(raw, kind=int):
    """Leading number of a value such as ``143771 MiB``, ``16x`` or ``700.00 W``."""
    value = available(raw)
    if value is None:
        return None
    match = NUMBER.match(value)
    if match is None:
        return None
    return kind(float(match.group(1))) if kind is int else kind(match.group(1))


def to_state(raw):
    """True for Enabled/Yes, False for Disabled/No, None otherwise."""
    value = available(raw)
    if value is None:
        return None
    value = value.lower()
    if value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    return None


def _grouped(values):
    """None when nothing in a group is known (the feature is not supported)."""
    return values if any(value is not None for value in values.values()) else None


def gpu_record(index, name=None, uuid=None, serial=None, pci_bus_id=None, architecture=None,
               compute_capability=None, memory_total_mib=None, memory_used_mib=None,
               persistence_mode=None, compute_mode=None, mig=None, ecc=None, remapped_rows=None,
               retired_pages=None, power=None, temperature_c=None, clocks_mhz=None, pcie=None,
               vbios_version=None, numa_node=None, gpu_numa_id=None, cpu_affinity=None, idle=None, fabric=None):
    """One GPU's facts, the same keys whichever source answered."""
    return {
        "index": index,
        "name": name,
        "uuid": uuid,
        "serial": serial,
        "pci_bus_id": pci_bus_id,
        "architecture": architecture,
        "compute_capability": compute_capability,
        "memory_total_mib": memory_total_mib,
        "memory_used_mib": memory_used_mib,
        "persistence_mode": persistence_mode,
        "compute_mode": compute_mode,
        "mig": mig or {"current": None, "pending": None},
        "ecc": ecc or {"current": None, "pending": None, "uncorrected_volatile": None, "uncorrected_aggregate": None},
        "remapped_rows": _grouped(remapped_rows) if remapped_rows else None,
        "retired_pages": _grouped(retired_pages) if retired_pages else None,
        "power": power or {"draw_w": None, "limit_w": None, "default_limit_w": None, "enforced_limit_w": None},
        "temperature_c": temperature_c,
        "clocks_mhz": clocks_mhz or {"sm": None, "sm_max": None, "memory": None, "memory_max": None},
        "pcie": pcie or {"gen": None, "gen_max": None, "gen_device_max": None, "width": None, "width_max": None},
        "idle": idle,
        "fabric": fabric or {"state": None, "status": None},
        "vbios_version": vbios_version,
        "numa_node": numa_node,
        "gpu_numa_id": gpu_numa_id,
        "cpu_affinity": cpu_affinity,
    }


class _TextNode:
    """A section of ``nvidia-smi -q`` text: its value and its sub-sections."""

    def __init__(self, value=None):
        self.value = value
        self.children = {}

    def find(self, path):
        node = self
        for part in path.split("/"):
            node = node.children.get(part)
            if node is None:
                return None
        return node


def _lookup(kind, node, path):
    if kind == XML:
        element = node.find(path)
        if element is None or len(element):
            return None
        return element.text
    found = node.find(path)
    return None if found is None or found.children else found.value


def _first(kind, node, paths):
    for path in paths:
        value = available(_lookup(kind, node, path))
        if value is not None:
            return value
    return None


def _sum(kind, node, paths):
    counts = [to_number(_lookup(kind, node, path)) for path in paths]
    known = [count for count in counts if count is not None]
    return sum(known) if known else None


def _gpu_from(kind, node, index, bus_id_hint=None):
    def get(field):
        return _first(kind, node, FIELDS[field][kind])

    return gpu_record(
        index,
        name=get("name"),
        uuid=get("uuid"),
        serial=get("serial"),
        pci_bus_id=get("pci_bus_id") or available(bus_id_hint),
        architecture=get("architecture"),
        memory_total_mib=to_number(get("memory_total")),
        memory_used_mib=to_number(get("memory_used")),
        persistence_mode=to_state(get("persistence_mode")),
        compute_mode=get("compute_mode"),
        mig={"current": to_state(get("mig_current")), "pending": to_state(get("mig_pending"))},
        ecc={
            "current": to_state(get("ecc_current")),
            "pending": to_state(get("ecc_pending")),
            "uncorrected_volatile": _sum(kind, node, ECC_UNCORRECTED["volatile"][kind]),
            "uncorrected_aggregate": _sum(kind, node, ECC_UNCORRECTED["aggregate"][kind]),
        },
        remapped_rows={
            "correctable": to_number(get("remapped_correctable")),
            "uncorrectable": to_number(get("remapped_uncorrectable")),
            "pending": to_state(get("remapped_pending")),
            "failure": to_state(get("remapped_failure")),
        },
        retired_pages={
            "single_bit_ecc": to_number(get("retired_single_bit")),
            "double_bit_ecc": to_number(get("retired_double_bit")),
            "pending": to_state(get("retired_pending")),
        },
        power={
            "draw_w": to_number(get("power_draw"), float),
            "limit_w": to_number(get("power_limit"), float),
            "default_limit_w": to_number(get("power_default_limit"), float),
            "enforced_limit_w": to_number(get("power_enforced_limit"), float),
        },
        temperature_c=to_number(get("temperature")),
        clocks_mhz={
            "sm": to_number(get("clock_sm")),
            "sm_max": to_number(get("clock_sm_max")),
            "memory": to_number(get("clock_memory")),
            "memory_max": to_number(get("clock_memory_max")),
        },
        pcie={
            "gen": to_number(get("pcie_gen")),
            "gen_max": to_number(get("pcie_gen_max")),
            "gen_device_max": to_number(get("pcie_gen_device_max")),
            "width": to_number(get("pcie_width")),
            "width_max": to_number(get("pcie_width_max")),
        },
        vbios_version=get("vbios_version"),
        idle=to_state(get("idle")),
        fabric={"state": get("fabric_state"), "status": get("fabric_status")},
    )


def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x`` (DTD v11 to v13).

    Returns ``{"driver_version", "cuda_driver_version", "nvml_version",
    "gpu_count", "gpus": [gpu_record...]}``; ``nvml_version`` is always None
    (the XML does not carry it).  GPU indexes follow document order, which is
    nvidia-smi's (PCI bus) order, the same as NVML's.  Raises ValueError on
    text that is not XML or whose root is not ``nvidia_smi_log``.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty nvidia-smi -q -x output")
    # nvidia-smi may print warnings (a corrupt infoROM, say) before the document.
    starts = [position for position in (text.find("<?xml"), text.find("<nvidia_smi_log")) if position >= 0]
    end = text.rfind("</nvidia_smi_log>")
    if starts and end > min(starts):
        text = text[min(starts):end + len("</nvidia_smi_log>")]
    try:
        # The DOCTYPE names an external DTD, which ElementTree never fetches.
        root = ElementTree.fromstring(text.strip().encode("utf-8"))
    except ElementTree.ParseError as exc:
        raise ValueError("nvidia-smi -q -x output is not XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("XML root is <%s>, expected <nvidia_smi_log> from nvidia-smi -q -x" % root.tag)
    gpus = [
        _gpu_from(XML, element, index, element.get("id"))
        for index, element in enumerate(root.findall("gpu"))
    ]
    return {
        "driver_version": available(root.findtext("driver_version")),
        "cuda_driver_version": available(root.findtext("cuda_version")),
        "nvml_version": None,
        "gpu_count": len(gpus),
        "gpus": gpus,
    }


def _text_tree(text):
    """Build the section tree of ``nvidia-smi -q`` text.

    Returns the top-level node and the list of (bus id, node) of the GPU sections.
    """
    root = _TextNode()
    gpus = []
    stack = [(-1, root)]
    for line in re.split(r"\r\n|\r|\n", text.expandtabs(4)):
        stripped = line.strip()
        if not stripped or stripped.startswith("====="):
            continue
        indent = len(line) - len(line.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        section = Q_GPU_SECTION.match(stripped)
        if section and parent is root:
            node = _TextNode(section.group(1))
            gpus.append((section.group(1), node))
            stack.append((indent, node))
            continue
        match = Q_KEY_VALUE.match(stripped)
        if match:
            key, value = match.group(1).strip(), (match.group(2) or "").strip()
        else:
            key, value = stripped, None
        node = _TextNode(value)
        # A key repeats only inside lists (processes); the first one is kept.
        parent.children.setdefault(key, node)
        stack.append((indent, node))
    return root, gpus


def parse_smi_q(text):
    """Parse ``nvidia-smi -q`` text into the same shape as :func:`parse_smi_xml`.

    Raises ValueError on text that is not an NVSMI log.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str) or "Driver Version" not in text:
        raise ValueError("not nvidia-smi -q output (no \"Driver Version\" line)")
    if SMI_TABLE.search(text):
        # The plain `nvidia-smi` table names the driver too, but no GPU section: read as -q it
        # would say "driver loaded, 0 GPUs" about a host with eight.
        raise ValueError("this is the plain nvidia-smi table, not nvidia-smi -q output: capture "
                         "`nvidia-smi -q -x` (or `nvidia-smi -q`)")
    root, sections = _text_tree(text)
    attached = to_number(_lookup(TEXT, root, "Attached GPUs"))
    if attached is None:
        raise ValueError("not nvidia-smi -q output (no \"Attached GPUs\" line)")
    if attached != len(sections):
        raise ValueError("nvidia-smi -q output says %d attached GPU(s) but holds %d GPU section(s): "
                         "truncated or filtered capture" % (attached, len(sections)))
    gpus = [_gpu_from(TEXT, node, index, bus_id) for index, (bus_id, node) in enumerate(sections)]
    return {
        "driver_version": available(_lookup(TEXT, root, "Driver Version")),
        "cuda_driver_version": available(_lookup(TEXT, root, "CUDA Version")),
        "nvml_version": None,
        "gpu_count": len(gpus),
        "gpus": gpus,
    }


def parse_smi_output(text):
    """Parse a captured ``nvidia-smi -q -x`` or ``nvidia-smi -q``, whichever it is."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if isinstance(text, str) and (text.lstrip().startswith("<") or "<nvidia_smi_log" in text):
        return parse_smi_xml(text)
    return parse_smi_q(text)


def parse_compute_cap_csv(text):
    """Parse ``nvidia-smi --query-gpu=index,compute_cap --format=csv,noheader``.

    Returns ``{index: "9.0"}``; lines that do not parse are skipped (old
    drivers answer with an error text instead).
    """
    result = {}
    for line in re.split(r"\r\n|\r|\n", text or ""):
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        value = available(parts[1])
        if value is not None and re.match(r"^\d+\.\d+$", value):
            result[int(parts[0])] = value
    return result
