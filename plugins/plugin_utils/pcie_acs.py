# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""PCI Access Control Services (ACS) from ``lspci -vvv``: which ports redirect peer-to-peer traffic.

NCCL's troubleshooting guide (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs)
says ACS on the PCIe switch ports sends GPUDirect P2P traffic through the CPU root complex,
which slows it down or makes it hang; it shows ``ACSCtl: SrcValid+`` in ``lspci -vvv`` as the
sign and clears the control register to fix it. The bits that move P2P traffic are P2P
Request Redirect (ReqRedir), P2P Completion Redirect (CmpltRedir) and P2P Egress Control
(EgressCtrl); Linux sets SrcValid with them when an IOMMU is on.

Pure functions: :func:`parse_lspci` takes the text, :func:`judge` returns the verdict.
"""


import re

DEVICE = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+(.*)$")
BUS = re.compile(r"Bus:\s+primary=([0-9a-fA-F]+),\s+secondary=([0-9a-fA-F]+),\s+subordinate=([0-9a-fA-F]+)")
ACS_CTL = re.compile(r"ACSCtl:\s+(.*)$")
FLAG = re.compile(r"(\w+)([+-])")
PORT_KIND = re.compile(r"Express \(v\d\) (Root Port|Downstream Port|Upstream Port)")
# The ACS controls that send peer-to-peer requests or completions elsewhere than their target.
REDIRECTING = ("ReqRedir", "CmpltRedir", "EgressCtrl")


class LspciError(ValueError):
    """The text is not ``lspci -vvv`` output this parser can judge."""


def parse_lspci(text):
    """``lspci -vvv`` text -> a list of devices.

    Each device is {address ('0000:02:08.0'), description, kind ('Root Port', 'Downstream
    Port', 'Upstream Port' or None), secondary and subordinate (bus numbers behind a bridge,
    or None), acs_ctl ({flag: bool}, None without an ACS capability)}. Lines before the first
    device header are ignored (a capture that starts mid-device).
    """
    devices = []
    current = None
    denied = False
    for line in re.split(r"\r\n|\r|\n", text or ""):
        header = DEVICE.match(line)
        if header and not line[:1].isspace():
            domain, bus, slot, function, description = header.groups()
            current = {"address": "%s:%s:%s.%s" % ((domain or "0000").lower(), bus.lower(), slot.lower(), function),
                       "description": description.strip(), "kind": None, "secondary": None,
                       "subordinate": None, "acs_ctl": None}
            devices.append(current)
            continue
        if "<access denied>" in line:
            denied = True
        if current is None:
            continue
        match = BUS.search(line)
        if match:
            current["secondary"], current["subordinate"] = int(match.group(2), 16), int(match.group(3), 16)
        match = PORT_KIND.search(line)
        if match:
            current["kind"] = match.group(1)
        match = ACS_CTL.search(line)
        if match:
            current["acs_ctl"] = dict((name, sign == "+") for name, sign in FLAG.findall(match.group(1)))
    if not devices:
        raise LspciError("no PCI device in the text: not lspci -vvv output")
    if denied and not any(device["acs_ctl"] is not None for device in devices):
        raise LspciError("lspci could not read the extended capabilities (<access denied>): run it as root")
    return devices


def _endpoint(device):
    description = device["description"].lower()
    gpu = "nvidia" in description and ("3d controller" in description or "vga compatible" in description)
    hca = "infiniband controller" in description or ("ethernet controller" in description and "mellanox" in description)
    return gpu or hca


def judge(devices):
    """{redirecting: ['0000:02:08.0 (ReqRedir+ CmpltRedir+)', ...], ports: n} for the switch ports.

    Judged are PCIe switch ports (upstream and downstream) with an ACS capability, and of
    those only the ones with a GPU or HCA behind them when the listing names any GPU or HCA.
    Root ports are left out: P2P between GPUs and HCAs on an HGX board stays below the switch.
    """
    endpoints = [device for device in devices if _endpoint(device)]
    ports = [device for device in devices if device["kind"] in ("Downstream Port", "Upstream Port")
             and device["acs_ctl"] is not None]
    if endpoints:
        buses = [(device["address"][:4], int(device["address"][5:7], 16)) for device in endpoints]
        ports = [port for port in ports
                 if any(domain == port["address"][:4] and port["secondary"] is not None
                        and port["secondary"] <= bus <= port["subordinate"] for domain, bus in buses)]
    redirecting = []
    for port in ports:
        enabled = [flag for flag in REDIRECTING if port["acs_ctl"].get(flag)]
        if enabled:
            redirecting.append("%s (%s)" % (port["address"], " ".join(flag + "+" for flag in enabled)))
    return {"redirecting": redirecting, "ports": len(ports)}
