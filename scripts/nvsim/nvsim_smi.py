# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvsim: a simulated nvidia-smi for the lab's QEMU VMs (gpucloud lab stand-in, not NVIDIA software).

Pure functions: ``answer(argv, state, data)`` takes the command line, the host
state (installed userspace version, loaded module version, profile, daemons,
faults) and the captured outputs of a profile, and returns the text and exit
code the real nvidia-smi would give.  ``read_state`` and ``main`` are the thin
layer that reads the VM's files.  scripts/nvsim/README.md says where every
simulated output comes from.
"""

import json
import os
import re
import sys
import time
import uuid
from xml.etree import ElementTree
from xml.sax.saxutils import escape

# nvidia-smi(1), RETURN VALUE; 18 is NVML_ERROR_LIB_RM_VERSION_MISMATCH.
EXIT_OK = 0
EXIT_INVALID_ARGUMENT = 2
EXIT_NO_PERMISSION = 4
EXIT_NO_DEVICE = 6
EXIT_DRIVER_NOT_LOADED = 9
EXIT_VERSION_MISMATCH = 18
# nvidia-smi(1): "255 - Other error or internal driver error occurred"; the code of a refused reset
# of a busy GPU is not in a capture here.
EXIT_IN_USE = 255

DRIVER_NOT_LOADED = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                     "Make sure that the latest NVIDIA driver is installed and running.\n")
NO_DEVICES = "No devices were found\n"
INVALID_ARGUMENTS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

CUDA_BY_BRANCH = {"550": "12.4", "580": "13.0"}
NVSIM_NAMESPACE = uuid.UUID("6f1d2c1e-8f4b-5c55-9a39-6e7673696d00")
PROC_VERSION_RE = re.compile(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+)")

# The profiles: which captures, and what the 8-GPU board adds to them.
PROFILES = {
    "h200-hgx8": {
        "xml": "h200/nvidia-smi_-q_-x.xml",
        "q": "h200/nvidia-smi_-q.txt",
        "table": "h200/nvidia-smi.txt",
        "topo_legend": "h200/nvidia-smi_topo_-m.txt",
        # HGX H100/H200 baseboard bus IDs (GPU0..GPU7).
        "bus": ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"],
        "compute_cap": "9.0",
        "nvlinks": 18,
        "nvlink_rate": "26.562 GB/s",
        # CPU / NUMA affinity of each GPU in the public 8x H100 capture (vllm-project/vllm#29944).
        "affinity": [("0-55,112-167", "0")] * 4 + [("56-111,168-223", "1")] * 4,
        "fabric": True,
    },
    "a100-sxm8": {
        "xml": "a100/nvidia-smi_-q_-x.xml",
        "q": None,
        "table": "h200/nvidia-smi.txt",
        "topo_legend": "h200/nvidia-smi_topo_-m.txt",
        # DGX A100 bus IDs (GPU0..GPU7).
        "bus": ["07", "0f", "47", "4e", "87", "90", "b7", "bd"],
        "compute_cap": "8.0",
        "nvlinks": 12,
        "nvlink_rate": "25 GB/s",
        # CPU / NUMA affinity in tests/fixtures/public/topo/dgx-a100-8gpu-8nic-roce-deepep13.txt.
        "affinity": [("0-31,64-95", "0")] * 4 + [("32-63,96-127", "1")] * 4,
        "fabric": False,
    },
}


def branch_of(version):
    return (version or "").split(".")[0]


def nvml_version(version):
    """NVML prints its library version as the first two parts (580.95.05 -> 580.95)."""
    return ".".join(version.split(".")[:2])


def loaded_version(proc_text):
    """The version in /proc/driver/nvidia/version, or None when no module is loaded."""
    match = PROC_VERSION_RE.search(proc_text or "")
    return match.group(1) if match else None


def gpu_uuid(profile, index):
    """A distinct, deterministic UUID per simulated GPU."""
    return "GPU-%s" % uuid.uuid5(NVSIM_NAMESPACE, "%s/%d" % (profile, index))


# ---------------------------------------------------------------- state

def empty_state(userspace_version):
    return {
        "userspace_version": userspace_version,
        "module_version": None,
        "profile": None,
        "persistenced": None,         # None: not running; True/False: running with/without persistence
        "persistence_overrides": {},  # GPU index (str) -> bool, set by `nvidia-smi -pm`
        "fabricmanager": False,
        "faults": {},
        "root": True,
        "timestamp": "Sun Nov 29 23:03:04 2026",
    }


def persistence_of(state, index):
    overrides = state.get("persistence_overrides") or {}
    if str(index) in overrides:
        return bool(overrides[str(index)])
    return bool(state.get("persistenced"))


# ---------------------------------------------------------------- line editing of captures

LEAF = re.compile(r"^(\s*)<([A-Za-z_][\w]*)((?:\s[^>]*)?)>(.*)</\2>\s*$")
OPEN = re.compile(r"^\s*<([A-Za-z_][\w]*)(?:\s[^>]*)?>\s*$")
CLOSE = re.compile(r"^\s*</([A-Za-z_][\w]*)>\s*$")


def xml_values(lines):
    """{path: text} of every leaf element in an nvidia-smi XML fragment (first one wins)."""
    values = {}
    stack = []
    for line in lines:
        leaf = LEAF.match(line)
        if leaf:
            values.setdefault("/".join(stack + [leaf.group(2)]), leaf.group(4))
            continue
        opened = OPEN.match(line)
        if opened and not line.strip().startswith("<?") and not line.strip().startswith("<!"):
            stack.append(opened.group(1))
        elif CLOSE.match(line) and stack and stack[-1] == CLOSE.match(line).group(1):
            stack.pop()
    return values


def xml_set(lines, values):
    """Lines with the leaf elements at the paths in VALUES given new text."""
    out = []
    stack = []
    for line in lines:
        leaf = LEAF.match(line)
        if leaf:
            path = "/".join(stack + [leaf.group(2)])
            if path in values:
                line = "%s<%s%s>%s</%s>" % (leaf.group(1), leaf.group(2), leaf.group(3),
                                            escape(str(values[path])), leaf.group(2))
            out.append(line)
            continue
        opened = OPEN.match(line)
        if opened:
            stack.append(opened.group(1))
        elif CLOSE.match(line) and stack and stack[-1] == CLOSE.match(line).group(1):
            stack.pop()
        out.append(line)
    return out


Q_LINE = re.compile(r"^(\s*)(\S.*?)(\s+:)(?: (.*))?$")


def q_set(lines, values):
    """-q text lines with the values at the section paths in VALUES replaced."""
    out = []
    stack = []
    for line in lines:
        if not line.strip():
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        match = Q_LINE.match(line)
        key = match.group(2) if match else line.strip()
        path = "/".join([entry[1] for entry in stack] + [key])
        if match and path in values:
            line = "%s%s%s %s" % (match.group(1), match.group(2), match.group(3), values[path])
        out.append(line)
        stack.append((indent, key))
    return out


# ---------------------------------------------------------------- the simulated GPUs

def split_xml(text):
    """(head lines, gpu lines, tail lines) of a single-GPU ``-q -x`` capture, indented with TABs."""
    lines = []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        spaces = len(line) - len(stripped)
        lines.append("\t" * (spaces // 4) + stripped if spaces and not line.startswith("\t") else line)
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("<gpu id="))
    end = next(i for i, line in enumerate(lines) if line.strip() == "</gpu>")
    return lines[:start], lines[start:end + 1], lines[end + 1:]


def without_mig(gpu_lines):
    """The GPU block with MIG disabled and no MIG devices (the lab profiles are not partitioned)."""
    out = []
    skipping = False
    for line in gpu_lines:
        if line.strip() == "<mig_devices>":
            indent = line[:len(line) - len(line.lstrip())]
            out.extend([line, indent + "\tNone", indent + "</mig_devices>"])
            skipping = True
            continue
        if skipping:
            skipping = line.strip() != "</mig_devices>"
            continue
        out.append(line)
    return xml_set(out, {"gpu/mig_mode/current_mig": "Disabled", "gpu/mig_mode/pending_mig": "Disabled"})


def fabric_words(state):
    if state.get("fabricmanager"):
        return "Completed", "Success"
    return "In Progress", "N/A"


def gpus(state, data):
    """One dict per simulated GPU: what differs between the 8 GPUs and what the state changes."""
    profile = PROFILES[state["profile"]]
    _head, gpu_lines, _tail = split_xml(data["xml"])
    base = xml_values(gpu_lines)
    faults = state.get("faults") or {}
    ecc = set(int(i) for i in faults.get("ecc_dbe", []))
    down = {int(k): set(int(link) for link in v) for k, v in (faults.get("nvlink_down") or {}).items()}
    result = []
    for index, bus in enumerate(profile["bus"]):
        serial = base.get("gpu/serial", "0")
        result.append({
            "index": index,
            "bus": bus,
            "bus_id": "00000000:%s:00.0" % bus.upper(),
            "uuid": gpu_uuid(state["profile"], index),
            "serial": str(int(serial) + index) if serial.isdigit() else serial,
            "name": base.get("gpu/product_name", "NVIDIA GPU"),
            "persistence": persistence_of(state, index),
            "ecc_dbe": index in ecc,
            "links_down": down.get(index, set()),
            "apps": list((faults.get("busy") or {}).get(str(index), [])),
            "base": base,
        })
    return result


def gpu_xml_values(state, gpu):
    fabric_state, fabric_status = fabric_words(state)
    dbe = "1" if gpu["ecc_dbe"] else "0"
    values = {
        "gpu/persistence_mode": "Enabled" if gpu["persistence"] else "Disabled",
        "gpu/uuid": gpu["uuid"],
        "gpu/serial": gpu["serial"],
        "gpu/minor_number": str(gpu["index"]),
        "gpu/platformInfo/module_id": str(gpu["index"] + 1),
        "gpu/gpu_module_id": str(gpu["index"] + 1),
        "gpu/gsp_firmware_version": state["userspace_version"],
        "gpu/pci/pci_bus": gpu["bus"].upper(),
        "gpu/pci/pci_device": "00",
        "gpu/pci/pci_bus_id": gpu["bus_id"],
        "gpu/fabric/state": fabric_state,
        "gpu/fabric/status": fabric_status,
        "gpu/remapped_rows/remapped_row_unc": dbe,
        "gpu/remapped_rows/remapped_row_pending": "Yes" if gpu["ecc_dbe"] else "No",
    }
    for scope in ("volatile", "aggregate"):
        for counter in ("sram_correctable", "dram_correctable", "sram_uncorrectable"):
            if gpu["base"].get("gpu/ecc_errors/%s/%s" % (scope, counter)) == "N/A":
                # N/A in the capture only because its GPU was MIG-partitioned; the lab's is not.
                values["gpu/ecc_errors/%s/%s" % (scope, counter)] = "0"
        values["gpu/ecc_errors/%s/dram_uncorrectable" % scope] = dbe
    return values


def render_xml(state, data):
    head, gpu_lines, tail = split_xml(data["xml"])
    gpu_lines = without_mig(gpu_lines)
    body = []
    for gpu in gpus(state, data):
        lines = xml_set(gpu_lines, gpu_xml_values(state, gpu))
        lines[0] = re.sub(r'id="[^"]*"', 'id="%s"' % gpu["bus_id"], lines[0])
        body.extend(lines)
    head = xml_set(head, {
        "nvidia_smi_log/timestamp": state["timestamp"],
        "nvidia_smi_log/driver_version": state["userspace_version"],
        "nvidia_smi_log/cuda_version": CUDA_BY_BRANCH.get(branch_of(state["userspace_version"]), "13.0"),
        "nvidia_smi_log/attached_gpus": str(len(PROFILES[state["profile"]]["bus"])),
    })
    return "\n".join(head + body + tail) + "\n"


# -q text of a GPU without a captured -q: rendered from its XML with nvidia-smi's key names.
Q_KEYS = {
    "product_name": "Product Name", "product_brand": "Product Brand",
    "product_architecture": "Product Architecture", "persistence_mode": "Persistence Mode",
    "mig_mode": "MIG Mode", "current_mig": "Current", "pending_mig": "Pending", "uuid": "GPU UUID",
    "serial": "Serial Number", "minor_number": "Minor Number", "vbios_version": "VBIOS Version",
    "pci": "PCI", "pci_bus_id": "Bus Id", "fb_memory_usage": "FB Memory Usage", "total": "Total",
    "used": "Used", "free": "Free", "reserved": "Reserved", "compute_mode": "Compute Mode",
    "ecc_mode": "ECC Mode", "current_ecc": "Current", "pending_ecc": "Pending", "ecc_errors": "ECC Errors",
    "volatile": "Volatile", "aggregate": "Aggregate", "sram_correctable": "SRAM Correctable",
    "sram_uncorrectable": "SRAM Uncorrectable", "dram_correctable": "DRAM Correctable",
    "dram_uncorrectable": "DRAM Uncorrectable", "remapped_rows": "Remapped Rows",
    "remapped_row_corr": "Correctable Error", "remapped_row_unc": "Uncorrectable Error",
    "remapped_row_pending": "Pending", "remapped_row_failure": "Remapping Failure Occurred",
    "retired_pages": "Retired Pages", "temperature": "Temperature", "gpu_temp": "GPU Current Temp",
    "power_readings": "Power Readings", "power_draw": "Power Draw", "power_limit": "Power Limit",
    "default_power_limit": "Default Power Limit", "enforced_power_limit": "Enforced Power Limit",
    "clocks": "Clocks", "max_clocks": "Max Clocks", "sm_clock": "SM", "mem_clock": "Memory",
    "pci_gpu_link_info": "GPU Link Info", "pcie_gen": "PCIe Generation", "max_link_gen": "Max",
    "current_link_gen": "Current", "link_widths": "Link Width", "max_link_width": "Max",
    "current_link_width": "Current", "fabric": "Fabric", "state": "State", "status": "Status",
}


def _q_key(tag):
    return Q_KEYS.get(tag, tag.replace("_", " ").title())


def _q_lines(element, depth):
    lines = []
    for child in element:
        indent = "    " * depth
        text = " ".join((child.text or "").split())
        if len(child):
            lines.append(indent + _q_key(child.tag))
            lines.extend(_q_lines(child, depth + 1))
        else:
            lines.append("%s%s: %s" % (indent, _q_key(child.tag).ljust(55 - len(indent)), text or "N/A"))
    return lines


def render_q(state, data):
    profile = PROFILES[state["profile"]]
    fabric_state, fabric_status = fabric_words(state)
    header = [
        "",
        "==============NVSMI LOG==============",
        "",
        "%s: %s" % ("Timestamp".ljust(55), state["timestamp"]),
        "%s: %s" % ("Driver Version".ljust(55), state["userspace_version"]),
        "%s: %s" % ("CUDA Version".ljust(55), CUDA_BY_BRANCH.get(branch_of(state["userspace_version"]), "13.0")),
        "",
        "%s: %d" % ("Attached GPUs".ljust(55), len(profile["bus"])),
    ]
    body = []
    if data.get("q"):
        lines = data["q"].splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("GPU "))
        section = [line for line in lines[start + 1:] if line.strip()]
        for gpu in gpus(state, data):
            dbe = "1" if gpu["ecc_dbe"] else "0"
            values = {
                "Persistence Mode": "Enabled" if gpu["persistence"] else "Disabled",
                "GPU UUID": gpu["uuid"],
                "Serial Number": gpu["serial"],
                "Minor Number": str(gpu["index"]),
                "Platform Info/Module ID": str(gpu["index"] + 1),
                "GSP Firmware Version": state["userspace_version"],
                "PCI/Bus": "0x%s" % gpu["bus"].upper(),
                "PCI/Device": "0x00",
                "PCI/Bus Id": gpu["bus_id"],
                "ECC Errors/Volatile/DRAM Uncorrectable": dbe,
                "ECC Errors/Aggregate/DRAM Uncorrectable": dbe,
                "Remapped Rows/Uncorrectable Error": dbe,
                "Remapped Rows/Pending": "Yes" if gpu["ecc_dbe"] else "No",
                "Fabric/State": fabric_state,
                "Fabric/Status": fabric_status,
            }
            body.extend(["GPU %s" % gpu["bus_id"]] + q_set(section, values) + [""])
    else:
        root = ElementTree.fromstring(render_xml(state, data).encode("utf-8"))
        for element in root.findall("gpu"):
            body.extend(["GPU %s" % element.get("id")] + _q_lines(element, 1) + [""])
    return "\n".join(header + body) + "\n"


def render_list(state, data):
    return "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in gpus(state, data))


def _number(text):
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text or "")
    return match.group(1) if match else None


def render_table(state, data):
    """The default table, in the layout of the H200 capture (driver 580)."""
    lines = data["table"].splitlines()
    cuda = CUDA_BY_BRANCH.get(branch_of(state["userspace_version"]), "13.0")
    version = state["userspace_version"]
    header = "| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|" % (version, version, cuda)
    separator = lines[11]
    out = [state["timestamp"] + "       ", lines[1], header] + lines[3:8]
    for gpu in gpus(state, data):
        base = gpu["base"]
        left = "%4d  %s" % (gpu["index"], gpu["name"])
        pm = "On" if gpu["persistence"] else "Off"
        ecc = "1" if gpu["ecc_dbe"] else "0"
        temp = "%sC" % (_number(base.get("gpu/temperature/gpu_temp")) or "0")
        draw = _number(base.get("gpu/gpu_power_readings/instant_power_draw")
                       or base.get("gpu/gpu_power_readings/power_draw")
                       or base.get("gpu/power_readings/power_draw")) or "0"
        cap = _number(base.get("gpu/gpu_power_readings/current_power_limit")
                      or base.get("gpu/power_readings/enforced_power_limit")) or "0"
        power = "%dW / %sW" % (float(draw), ("%d" % float(cap)).rjust(4))
        perf = base.get("gpu/performance_state", "P0")
        used = "%sMiB" % (_number(base.get("gpu/fb_memory_usage/used")) or "0")
        total = "%sMiB" % (_number(base.get("gpu/fb_memory_usage/total")) or "0")
        util = "%s%%" % (_number(base.get("gpu/utilization/gpu_util")) or "0")
        compute = base.get("gpu/compute_mode", "Default")
        lead = " %-3s  %4s    %s" % ("N/A", temp, perf)
        out.append("|%s%s  |%s |%s |" % (left, pm.rjust(39 - len(left)), ("%s Off" % gpu["bus_id"]).rjust(23),
                                         ecc.rjust(21)))
        out.append("|%s%s |%s |%8s%13s |" % (lead, power.rjust(40 - len(lead)), ("%s / %s" % (used, total)).rjust(23),
                                             util, compute))
        out.append("|%s|%s|%s |" % (" " * 41, " " * 24, "Disabled".rjust(21)))
        out.append(separator)
    tail_start = next(i for i in range(len(lines)) if lines[i] == "" and i > 8)
    return "\n".join(out + lines[tail_start:]) + "\n"


def query_fields(state, gpu):
    """nvidia-smi --query-gpu fields: (header, value with unit, value without unit)."""
    base = gpu["base"]
    memory_total = _number(base.get("gpu/fb_memory_usage/total")) or "0"
    memory_used = _number(base.get("gpu/fb_memory_usage/used")) or "0"
    draw = float(_number(base.get("gpu/gpu_power_readings/instant_power_draw")
                         or base.get("gpu/gpu_power_readings/power_draw")
                         or base.get("gpu/power_readings/power_draw")) or 0)
    limit = float(_number(base.get("gpu/gpu_power_readings/current_power_limit")
                          or base.get("gpu/power_readings/enforced_power_limit")) or 0)
    util = _number(base.get("gpu/utilization/gpu_util")) or "0"
    sm = _number(base.get("gpu/clocks/sm_clock")) or "0"
    sm_max = _number(base.get("gpu/max_clocks/sm_clock")) or "0"
    width = _number(base.get("gpu/pci/pci_gpu_link_info/link_widths/current_link_width")) or "16"
    pm = "Enabled" if gpu["persistence"] else "Disabled"
    plain = {
        "index": str(gpu["index"]),
        "uuid": gpu["uuid"],
        "name": gpu["name"],
        "gpu_name": gpu["name"],
        "pci.bus_id": gpu["bus_id"],
        "gpu_bus_id": gpu["bus_id"],
        "serial": gpu["serial"],
        "driver_version": state["userspace_version"],
        "vbios_version": base.get("gpu/vbios_version", "N/A"),
        "inforom.img": base.get("gpu/inforom_version/img_version", "N/A"),
        "count": str(len(PROFILES[state["profile"]]["bus"])),
        "persistence_mode": pm,
        "compute_cap": PROFILES[state["profile"]]["compute_cap"],
        "temperature.gpu": _number(base.get("gpu/temperature/gpu_temp")) or "0",
        "ecc.errors.uncorrected.volatile.total": "1" if gpu["ecc_dbe"] else "0",
        "ecc.errors.uncorrected.aggregate.total": "1" if gpu["ecc_dbe"] else "0",
        "ecc.mode.current": base.get("gpu/ecc_mode/current_ecc", "N/A"),
        "mig.mode.current": "Disabled",
        "compute_mode": base.get("gpu/compute_mode", "Default"),
        "pstate": base.get("gpu/performance_state", "P0"),
        "pcie.link.gen.current": base.get("gpu/pci/pci_gpu_link_info/pcie_gen/current_link_gen", "N/A"),
        "pcie.link.width.current": width,
    }
    table = {key: (key, value, value) for key, value in plain.items()}
    table.update({
        "memory.total": ("memory.total [MiB]", "%s MiB" % memory_total, memory_total),
        "memory.used": ("memory.used [MiB]", "%s MiB" % memory_used, memory_used),
        "power.draw": ("power.draw [W]", "%.2f W" % draw, "%.2f" % draw),
        "power.limit": ("power.limit [W]", "%.2f W" % limit, "%.2f" % limit),
        "utilization.gpu": ("utilization.gpu [%]", "%s %%" % util, util),
        "clocks.current.sm": ("clocks.current.sm [MHz]", "%s MHz" % sm, sm),
        "clocks.sm": ("clocks.current.sm [MHz]", "%s MHz" % sm, sm),
        "clocks.max.sm": ("clocks.max.sm [MHz]", "%s MHz" % sm_max, sm_max),
    })
    return table


def render_query(state, data, fields, options, selected):
    rows = []
    header = []
    for gpu in selected:
        table = query_fields(state, gpu)
        row = []
        for field in fields:
            if field not in table:
                return None, 'Field "%s" is not a valid field to query.\n' % field
            name, with_unit, bare = table[field]
            if not rows:
                header.append(name)
            row.append(bare if "nounits" in options else with_unit)
        rows.append(", ".join(row))
    if "noheader" not in options:
        rows.insert(0, ", ".join(header))
    return "".join(row + "\n" for row in rows), None


# nvidia-smi --query-compute-apps fields: header, and the value (with unit, without) of a GPU's process.
COMPUTE_APP_FIELDS = {
    "gpu_uuid": ("gpu_uuid", lambda gpu, app: (gpu["uuid"], gpu["uuid"])),
    "gpu_bus_id": ("gpu_bus_id", lambda gpu, app: (gpu["bus_id"], gpu["bus_id"])),
    "pid": ("pid", lambda gpu, app: (str(app["pid"]), str(app["pid"]))),
    "process_name": ("process_name", lambda gpu, app: (app["name"], app["name"])),
    "used_memory": ("used_gpu_memory [MiB]", lambda gpu, app: ("1024 MiB", "1024")),
}


def render_compute_apps(fields, options, selected):
    """``--query-compute-apps``: one row per process the busy fault put on a selected GPU."""
    unknown = [field for field in fields if field not in COMPUTE_APP_FIELDS]
    if unknown:
        return None, 'Field "%s" is not a valid field to query.\n' % unknown[0]
    rows = []
    for gpu in selected:
        for app in gpu["apps"]:
            values = [COMPUTE_APP_FIELDS[field][1](gpu, app) for field in fields]
            rows.append(", ".join(value[1] if "nounits" in options else value[0] for value in values))
    if "noheader" not in options:
        rows.insert(0, ", ".join(COMPUTE_APP_FIELDS[field][0] for field in fields))
    return "".join(row + "\n" for row in rows), None


def _link_count(profile, first, second):
    return profile["nvlinks"] - max(len(first["links_down"]), len(second["links_down"]))


def render_topo(state, data):
    """``topo -m``: NV<links> between every GPU pair over NVSwitch, affinity from the public 8-GPU capture."""
    profile = PROFILES[state["profile"]]
    simulated = gpus(state, data)
    names = ["GPU%d" % g["index"] for g in simulated]
    lines = ["\t\x1b[4m%s\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m" % "\t".join(names)]
    for gpu in simulated:
        cells = [" X " if other is gpu else "NV%d" % _link_count(profile, gpu, other) for other in simulated]
        cpus, numa = profile["affinity"][gpu["index"]]
        lines.append("GPU%d\t%s\t%s\t%s\t\tN/A" % (gpu["index"], "\t".join(cells), cpus, numa))
    legend = data["topo_legend"].splitlines()
    start = next(i for i, line in enumerate(legend) if line.startswith("Legend:"))
    return "\n".join(lines + [""] + legend[start:]) + "\n"


def render_nvlink_status(state, data, selected):
    profile = PROFILES[state["profile"]]
    out = []
    for gpu in selected:
        out.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for link in range(profile["nvlinks"]):
            rate = "<inactive>" if link in gpu["links_down"] else profile["nvlink_rate"]
            out.append("\t Link %d: %s" % (link, rate))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the command line

def result(rc, stdout="", stderr="", overrides=None, faults=None):
    return {"rc": rc, "stdout": stdout, "stderr": stderr, "persistence_overrides": overrides, "faults": faults}


def _take(args, short, long_name):
    """Remove ``-i N`` / ``--id=N`` style options from ARGS; return the value or None."""
    for position, arg in enumerate(args):
        if arg == short and position + 1 < len(args):
            value = args[position + 1]
            del args[position:position + 2]
            return value
        if long_name and arg.startswith(long_name + "="):
            del args[position]
            return arg.split("=", 1)[1]
    return None


def answer(argv, state, data):
    """What nvidia-smi prints and returns for ARGV on a host in STATE."""
    version = state["userspace_version"]
    if state.get("module_version") is None:
        return result(EXIT_DRIVER_NOT_LOADED, DRIVER_NOT_LOADED)
    if state["module_version"] != version:
        return result(EXIT_VERSION_MISMATCH,
                      "Failed to initialize NVML: Driver/library version mismatch\n"
                      "NVML library version: %s\n" % nvml_version(version))
    if state.get("profile") not in PROFILES:
        return result(EXIT_NO_DEVICE, NO_DEVICES)
    args = list(argv)
    wanted = _take(args, "-i", "--id")
    simulated = gpus(state, data)
    selected = simulated
    if wanted is not None:
        indexes = [part.strip() for part in wanted.split(",")]
        selected = [g for g in simulated if str(g["index"]) in indexes or g["uuid"] in indexes
                    or g["bus_id"] in indexes]
        if not selected:
            return result(EXIT_NO_DEVICE, NO_DEVICES)
    pm = _take(args, "-pm", "--persistence-mode")
    if pm is not None:
        return set_persistence(state, selected, pm, args)
    if args in (["-r"], ["--gpu-reset"]):
        return reset_gpus(state, data, selected, wanted is not None)
    if not args:
        return result(EXIT_OK, render_table(state, data))
    if args in (["-L"], ["--list-gpus"]):
        return result(EXIT_OK, render_list(state, data))
    if sorted(args) in (["-q", "-x"], ["--query", "--xml-format"]):
        return result(EXIT_OK, _only(render_xml(state, data), selected, simulated, xml=True))
    if args in (["-q"], ["--query"]):
        return result(EXIT_OK, _only(render_q(state, data), selected, simulated, xml=False))
    if args in (["topo", "-m"], ["topo", "--matrix"]):
        return result(EXIT_OK, render_topo(state, data))
    if args in (["nvlink", "-s"], ["nvlink", "--status"]):
        return result(EXIT_OK, render_nvlink_status(state, data, selected))
    formats = [arg for arg in args if arg.startswith("--format=")]
    apps = [arg for arg in args if arg.startswith("--query-compute-apps=")]
    if len(apps) == 1 and len(formats) == 1 and len(args) == 2:
        options = formats[0].split("=", 1)[1].split(",")
        if "csv" not in options:
            return result(EXIT_INVALID_ARGUMENT, INVALID_ARGUMENTS)
        text, error = render_compute_apps([f.strip() for f in apps[0].split("=", 1)[1].split(",") if f.strip()],
                                          options, selected)
        if error:
            return result(EXIT_INVALID_ARGUMENT, error)
        return result(EXIT_OK, text)
    query = [arg for arg in args if arg.startswith("--query-gpu=")]
    if len(query) == 1 and len(formats) == 1 and len(args) == 2:
        options = formats[0].split("=", 1)[1].split(",")
        if "csv" not in options:
            return result(EXIT_INVALID_ARGUMENT, INVALID_ARGUMENTS)
        fields = [field.strip() for field in query[0].split("=", 1)[1].split(",") if field.strip()]
        text, error = render_query(state, data, fields, options, selected)
        if error:
            return result(EXIT_INVALID_ARGUMENT, error)
        return result(EXIT_OK, text)
    return result(EXIT_INVALID_ARGUMENT, INVALID_ARGUMENTS)


def _only(text, selected, simulated, xml):
    """Keep the selected GPUs' sections of a whole-host -q / -q -x text."""
    if len(selected) == len(simulated):
        return text
    keep = set(g["bus_id"] for g in selected)
    out = []
    current = None
    for line in text.splitlines():
        if xml and line.strip().startswith("<gpu id="):
            current = re.search(r'id="([^"]*)"', line).group(1)
        elif not xml and line.startswith("GPU "):
            current = line.split()[1]
        if current is None or current in keep:
            out.append(line)
        if xml and line.strip() == "</gpu>":
            current = None
    return "\n".join(out) + "\n"


def set_persistence(state, selected, value, rest):
    if rest or value not in ("0", "1", "ENABLED", "DISABLED"):
        return result(EXIT_INVALID_ARGUMENT, INVALID_ARGUMENTS)
    enable = value in ("1", "ENABLED")
    if not state.get("root"):
        return result(EXIT_NO_PERMISSION,
                      "Unable to set persistence mode for GPU %s: Insufficient Permissions\n"
                      "Terminating early due to previous errors.\n" % selected[0]["bus_id"])
    overrides = dict(state.get("persistence_overrides") or {})
    lines = []
    for gpu in selected:
        overrides[str(gpu["index"])] = enable
        lines.append("%s Legacy persistence mode for GPU %s." % ("Enabled" if enable else "Disabled", gpu["bus_id"]))
    return result(EXIT_OK, "\n".join(lines) + "\nAll done.\n", overrides=overrides)


def reset_gpus(state, data, selected, one):
    """``nvidia-smi -r -i N``: the GPU's ECC fault (volatile and aggregate count, the pending row
    remap) is gone afterwards. A real reset clears the volatile counters and applies the pending
    remap, but the aggregate count stays in the infoROM: nvsim keeps no such history. A GPU that
    a compute process holds is refused. Without ``-i`` the real tool resets every GPU only when
    none is in use; nvsim asks for ``-i`` as the collection always gives it."""
    if not one:
        return result(EXIT_INVALID_ARGUMENT, INVALID_ARGUMENTS)
    if not state.get("root"):
        return result(EXIT_NO_PERMISSION, "Unable to reset GPU %s: Insufficient Permissions\n"
                      "Terminating early due to previous errors.\n" % selected[0]["bus_id"])
    busy = [gpu for gpu in gpus(state, data) if gpu["index"] in [g["index"] for g in selected] and gpu["apps"]]
    if busy:
        return result(EXIT_IN_USE, "GPU %s is currently in use by another process.\n\n"
                      "1 device is currently being used by one or more other processes (e.g., Fabric Manager, "
                      "CUDA application, graphics application such as an X server, or a monitoring application "
                      "such as another instance of nvidia-smi). Please first kill all processes using this "
                      "device and all compute applications running in the system.\n" % busy[0]["bus_id"])
    faults = json.loads(json.dumps(state.get("faults") or {}))
    reset = set(g["index"] for g in selected)
    faults["ecc_dbe"] = sorted(set(int(i) for i in faults.get("ecc_dbe", [])) - reset)
    faults["resets"] = sorted(set(int(i) for i in faults.get("resets", [])) | reset)
    lines = ["GPU %s was successfully reset." % g["bus_id"] for g in selected]
    return result(EXIT_OK, "\n".join(lines) + "\nAll done.\n", faults=faults)


# ---------------------------------------------------------------- the host (thin layer)

DATA_DIR = "/usr/share/nvsim"
PROFILE_FILE = "/etc/nvsim/profile"
FAULTS_FILE = "/etc/nvsim/faults.json"
OVERRIDES_FILE = "/run/nvsim/persistence.json"
PERSISTENCED_PID = "/run/nvidia-persistenced/nvidia-persistenced.pid"
PERSISTENCED_MODE = "/run/nvsim/persistenced-mode"
FABRICMANAGER_PID = "/run/nvidia-fabricmanager/nv-fabricmanager.pid"
PROC_VERSION = "/proc/driver/nvidia/version"


def read_text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return None


def read_json(path):
    text = read_text(path)
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {}


def daemon_running(pid_file):
    pid = (read_text(pid_file) or "").strip()
    return pid.isdigit() and os.path.isdir("/proc/%s" % pid)


def read_state(userspace_version):
    state = empty_state(userspace_version)
    state["module_version"] = loaded_version(read_text(PROC_VERSION))
    profile = (read_text(PROFILE_FILE) or "").strip()
    state["profile"] = profile or None
    if daemon_running(PERSISTENCED_PID):
        state["persistenced"] = (read_text(PERSISTENCED_MODE) or "persistence").strip() == "persistence"
    state["persistence_overrides"] = read_json(OVERRIDES_FILE)
    state["fabricmanager"] = daemon_running(FABRICMANAGER_PID)
    state["faults"] = read_json(FAULTS_FILE)
    state["root"] = os.geteuid() == 0
    state["timestamp"] = time.strftime("%a %b %d %H:%M:%S %Y")
    return state


def read_data(profile, data_dir=DATA_DIR):
    spec = PROFILES.get(profile)
    if spec is None:
        return {}
    return {key: read_text(os.path.join(data_dir, spec[key])) if spec[key] else None
            for key in ("xml", "q", "table", "topo_legend")}


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, sort_keys=True)
        handle.write("\n")


def main(argv, userspace_version, data_dir=DATA_DIR):
    state = read_state(userspace_version)
    outcome = answer(argv, state, read_data(state["profile"], data_dir))
    if outcome["persistence_overrides"] is not None:
        write_json(OVERRIDES_FILE, outcome["persistence_overrides"])
    if outcome["faults"] is not None:
        write_json(FAULTS_FILE, outcome["faults"])
    sys.stdout.write(outcome["stdout"])
    sys.stderr.write(outcome["stderr"])
    return outcome["rc"]
