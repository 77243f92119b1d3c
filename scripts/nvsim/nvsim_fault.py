# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvsim-fault: switch simulated GPU faults on and off (gpucloud lab stand-in, not NVIDIA software).

    nvsim-fault ecc-dbe [--gpu N]
    nvsim-fault nvlink-down [--gpu N] [--link L]
    nvsim-fault xid [--gpu N] CODE
    nvsim-fault busy [--gpu N] [--pid P] [--name NAME]
    nvsim-fault clear
    nvsim-fault show

State lives in /etc/nvsim/faults.json, which the simulated nvidia-smi reads. An Xid line
is printed by the stand-in kernel module (/proc/driver/nvidia/gpucloud-xid), so it is a kernel message.
A busy GPU is a compute process that nvidia-smi --query-compute-apps lists on it; no process runs
(the simulated GPU runs nothing): the PID and name are what nvidia-smi reports.
"""

import argparse
import json
import os
import sys

import nvsim_smi

# Written by the stand-in nvidia module into the kernel log (scripts/nvsim/kmod/nvidia.c).
XID_SWITCH = "/proc/driver/nvidia/gpucloud-xid"

# Xid texts as the driver logs them (NVIDIA's Xid catalog); others get a generic text.
XID_TEXT = {
    13: "Graphics Exception: ESR 0x50df30=0x10000e 0x50df34=0x0 0x50df28=0x0 0x50df2c=0x0",
    31: "Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x0_00000000. "
        "Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
    48: "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, "
        "subpartition 0.",
    63: "Row Remapper: New row marked for remapping, reset gpu to activate.",
    74: "NVLink: fatal error detected on link 0(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
    79: "GPU has fallen off the bus.",
    94: "Contained: SM (0x1). RST: No, D-RST: No",
    95: "Uncontained: FBHUB. RST: Yes, D-RST: No",
}


def xid_line(bus, code):
    """One kernel log line in the driver's format, for the GPU on PCI bus BUS."""
    text = XID_TEXT.get(code, "Simulated Xid %d (gpucloud lab stand-in)." % code)
    return "NVRM: Xid (PCI:0000:%s:00): %d, pid='<unknown>', name=<unknown>, %s" % (bus, code, text)


def apply(faults, command, gpu=0, link=0, pid=4242, name="python3"):
    """The fault state after COMMAND (pure)."""
    faults = json.loads(json.dumps(faults or {}))
    if command == "clear":
        return {}
    if command == "ecc-dbe":
        faults["ecc_dbe"] = sorted(set(faults.get("ecc_dbe", [])) | {gpu})
    elif command == "nvlink-down":
        down = faults.setdefault("nvlink_down", {})
        down[str(gpu)] = sorted(set(down.get(str(gpu), [])) | {link})
    elif command == "busy":
        apps = [app for app in faults.setdefault("busy", {}).get(str(gpu), []) if app["pid"] != pid]
        faults["busy"][str(gpu)] = apps + [{"pid": pid, "name": name}]
    return faults


def bus_of(profile, gpu):
    spec = nvsim_smi.PROFILES.get(profile)
    if spec is None or not 0 <= gpu < len(spec["bus"]):
        return None
    return spec["bus"][gpu]


def build_parser():
    parser = argparse.ArgumentParser(prog="nvsim-fault", description="Simulated GPU faults for the nvsim lab driver.")
    parser.add_argument("command", choices=["ecc-dbe", "nvlink-down", "xid", "busy", "clear", "show"])
    parser.add_argument("code", nargs="?", type=int, help="Xid code (xid only)")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--link", type=int, default=0)
    parser.add_argument("--pid", type=int, default=4242, help="busy: the compute process's PID")
    parser.add_argument("--name", default="python3", help="busy: the compute process's name")
    return parser


def parse_args(argv, parser=None):
    """The command line; options may stand anywhere (`xid --gpu 3 79` as well as `xid 79 --gpu 3`)."""
    # parse_args would read `xid --gpu 3 79` as command xid without a code and refuse the 79.
    return (parser or build_parser()).parse_intermixed_args(argv)


def main(argv):
    parser = build_parser()
    args = parse_args(argv, parser)
    faults = nvsim_smi.read_json(nvsim_smi.FAULTS_FILE)
    if args.command == "show":
        sys.stdout.write(json.dumps(faults, indent=2, sort_keys=True) + "\n")
        return 0
    profile = (nvsim_smi.read_text(nvsim_smi.PROFILE_FILE) or "").strip()
    bus = bus_of(profile, args.gpu)
    if args.command != "clear" and bus is None:
        parser.error("no GPU %d in profile %r (/etc/nvsim/profile)" % (args.gpu, profile or None))
    if args.command == "xid":
        if args.code is None:
            parser.error("xid needs a CODE")
        if not os.path.exists(XID_SWITCH):
            parser.error("%s is missing: the stand-in nvidia module is not loaded (an Xid comes "
                         "from the kernel module, as on metal)" % XID_SWITCH)
        with open(XID_SWITCH, "w", encoding="utf-8") as switch:
            switch.write(xid_line(bus, args.code) + "\n")
        faults.setdefault("xid", []).append({"gpu": args.gpu, "code": args.code})
    else:
        faults = apply(faults, args.command, args.gpu, args.link, args.pid, args.name)
    nvsim_smi.write_json(nvsim_smi.FAULTS_FILE, faults)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
