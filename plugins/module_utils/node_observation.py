# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What node acceptance reads on a node, as one dict (the node_observation module).

Every reading only reads. Nothing here judges: an expectation that is not met is an
observation (topology and InfiniBand mismatches), never an error; the controller judges
(plugin_utils/acceptance.py). ``observe`` takes its senses as arguments: ``run(argv)`` ->
``(rc, out, err)`` with rc 127 for a command that is not installed, ``read_file(path)`` ->
text or None when absent, and ``gpu_facts()`` -> nvidia_gpu_facts' facts.

The keys of the result are those plugin_utils/acceptance.py's ``evaluate`` reads, plus
``lspci`` ({text}), which the controller turns into ``pcie_acs``.
"""

import fnmatch
import re

from ansible_collections.gpucloud.fleet.plugins.module_utils import ibstat, topology
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import facts_from_capture

# The pending-reboot record Ubuntu's update-notifier, unattended-upgrades and kured read, and
# the reasons gpucloud.fleet.node_reboot writes beside it.
REBOOT_REQUIRED = "/run/reboot-required"
REBOOT_REQUIRED_PKGS = "/run/reboot-required.pkgs"
REBOOT_REASONS = "/run/gpucloud/reboot-reasons"
PROC_DRIVER_VERSION = "/proc/driver/nvidia/version"

PACKAGE_LISTINGS = {
    "dpkg": ["dpkg-query", "-W", "-f=${Package} ${Version} ${db:Status-Status}\n"],
    "rpm": ["rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE} installed\n"],
}
TOPOLOGY_EXPECT_KEYS = ("gpu_count", "nic_count", "min_nvlinks", "max_nic_distance", "require_affinity")
XID_MARKER = "NVRM: Xid"
CLEVIS_URL = re.compile(r'"url"\s*:\s*"([^"]+)"')


class ObservationError(Exception):
    """Something the observation cannot do without (the package database); the module fails."""


def version_matches(locked, found):
    """True when FOUND is the locked version: '13.0' matches '13.0.2-1', '2.28' matches '2.28.9'.

    Debian epochs (``1:``) and a Debian revision do not count; the locked version's
    components must all equal the found version's first components.
    """
    if locked is None or found is None:
        return False
    found = str(found).split(":", 1)[-1]
    want = re.findall(r"\d+", str(locked))
    have = re.findall(r"\d+", found.split("-", 1)[0]) or re.findall(r"\d+", found)
    return bool(want) and [int(x) for x in have[:len(want)]] == [int(x) for x in want]


def cudnn_version_text(number):
    """cuDNN's integer version (``cudnnGetVersion()``: 91900, 8902) as text ('9.19.0', '8.9.2')."""
    number = int(number)
    if number >= 90000:
        return "%d.%d.%d" % (number // 10000, (number % 10000) // 100, number % 100)
    return "%d.%d.%d" % (number // 1000, (number % 1000) // 100, number % 100)


def parse_stack_versions(text):
    """A ``stack-versions.txt`` capture (torch's view of NCCL, CUDA, cuDNN) -> {cuda, cudnn, nccl}.

    Lines look like ``nccl (2, 28, 9)``, ``cuda 13.0``, ``cudnn 91900``; other lines are ignored.
    """
    result = {"cuda": None, "cudnn": None, "nccl": None}
    for line in (text or "").splitlines():
        key, _sep, value = line.strip().partition(" ")
        key, value = key.lower(), value.strip()
        if key not in result or not value:
            continue
        numbers = re.findall(r"\d+", value)
        if key == "cudnn" and len(numbers) == 1:
            result[key] = cudnn_version_text(numbers[0])
        elif numbers:
            result[key] = ".".join(numbers)
    return result


def stack_from_packages(text, patterns):
    """Installed versions per component from a package listing.

    TEXT has one ``name version [status]`` line per package, blank-separated
    (``dpkg-query -W -f`` or ``rpm -qa --qf``); PATTERNS maps a component (driver, cuda, cudnn, nccl) to shell
    patterns of package names, best first. The first pattern with an installed package
    gives the version (the highest when several match); no match gives None.
    """
    installed = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and (len(parts) < 3 or parts[2].strip() in ("installed", "")):
            if parts[1].strip():
                installed[parts[0].strip()] = parts[1].strip()
    result = {}
    for component, wanted in (patterns or {}).items():
        result[component] = None
        for pattern in wanted or []:
            versions = [installed[name] for name in sorted(installed) if fnmatch.fnmatchcase(name, pattern)]
            if versions:
                result[component] = max(versions, key=lambda v: [int(x) for x in re.findall(r"\d+", v)])
                break
    return result


# /proc/driver/nvidia/version: "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release
# Build ..." (open flavour) or "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.163.01  <date>".
PROC_VERSION_RE = re.compile(r"Kernel Module(?: for [^ ]+)?\s+([0-9]+\.[0-9.]+)")


def loaded_driver_version(text):
    """The version of the loaded NVIDIA kernel module from /proc/driver/nvidia/version, or None."""
    match = PROC_VERSION_RE.search(text or "")
    return match.group(1).rstrip(".") if match else None


def driver_reboot_pending(proc_version_text, installed):
    """Does the host wait for a reboot into its installed driver?

    PROC_VERSION_TEXT is /proc/driver/nvidia/version (empty when no module is loaded);
    INSTALLED the installed driver package's version (:func:`stack_from_packages`). A loaded
    module that is not the installed version is what an upgrade without a reboot leaves:
    nvidia-smi and NVML answer "Driver/library version mismatch". Returns {pending, loaded,
    installed} with ``pending`` None when one side is unknown (no module loaded, no package
    found): nothing can be said then, and the GPU queries run as usual.
    """
    loaded = loaded_driver_version(proc_version_text)
    installed = str(installed).strip() if installed else None
    if not loaded or not installed:
        return {"pending": None, "loaded": loaded, "installed": installed}
    return {"pending": not version_matches(loaded, installed), "loaded": loaded, "installed": installed}


def reboot_record(read_file):
    """The pending-reboot record: {pending: /run/reboot-required exists, reasons: [...]}.

    The reasons are the lines of /run/gpucloud/reboot-reasons (``<role>: <why>``, what
    node_reboot's callers appended) and of /run/reboot-required.pkgs (the packages that asked,
    as Ubuntu's notify-reboot-required writes them), blank lines and repeats left out, in
    file order.
    """
    reasons = []
    for path in (REBOOT_REASONS, REBOOT_REQUIRED_PKGS):
        for line in (read_file(path) or "").splitlines():
            line = line.strip()
            if line and line not in reasons:
                reasons.append(line)
    return {"pending": read_file(REBOOT_REQUIRED) is not None, "reasons": reasons}


def xid_lines(text):
    """The NVRM Xid lines of a kernel log, one per line (only these leave the node)."""
    return "".join(line + "\n" for line in (text or "").splitlines() if XID_MARKER in line)


def clevis_servers(text):
    """Tang server URLs in ``clevis luks list`` output."""
    return CLEVIS_URL.findall(text or "")


def wanted(profile):
    """What to read for a hardware PROFILE; the defaults are acceptance.evaluate's."""
    profile = profile or {}
    nvswitch = bool(profile.get("nvswitch", False))
    try:
        gpus = int(profile.get("gpu_count", 0)) > 0
    except (TypeError, ValueError):
        raise ObservationError("profile gpu_count must be a number, got %r" % (profile.get("gpu_count"),))
    return {
        "gpus": gpus,
        "mig": isinstance(profile.get("mig"), dict),
        "topology": bool(profile.get("topology")),
        "ib": bool(profile.get("ib")),
        "xid": gpus and bool(profile.get("xid", True)),
        "tang": bool(profile.get("tang_bound", False)),
        "firewall": bool(profile.get("firewall", True)),
        "fabric_manager": nvswitch,
        "pcie_acs": bool(profile.get("pcie_acs", nvswitch)),
    }


def _first_line(*texts):
    for text in texts:
        text = (text or "").strip()
        if text:
            return text
    return ""


class Observer(object):
    """One observation of one node; ``observe()`` returns (observation, pending_reboot)."""

    def __init__(self, params, run, read_file, gpu_facts):
        self.params = params
        self.run = run
        self.read_file = read_file
        self.gpu_facts = gpu_facts
        self.profile = params.get("profile") or {}
        self.want = wanted(self.profile)

    def observe(self):
        observed = {"stack": self.stack()}
        pending = self.reboot(observed)
        nvidia = self.nvidia(pending)
        if nvidia is not None:
            observed["nvidia"] = nvidia
        for key, reading in (("mig_instances", self.mig_instances(pending)),
                             ("topology", self.topology(pending, nvidia)),
                             ("ib", self.ib()),
                             ("kernel_log", self.kernel_log()),
                             ("tang", self.tang()),
                             ("firewall", self.firewall()),
                             ("fabric_manager", self.fabric_manager(pending)),
                             ("lspci", self.lspci())):
            if reading is not None:
                observed[key] = reading
        return observed, pending

    def stack(self):
        if self.params.get("stack_text") is not None:
            return parse_stack_versions(self.params["stack_text"])
        manager = self.params.get("package_manager") or "auto"
        if manager == "auto":
            manager = "dpkg"
            rc, out, err = self.run(PACKAGE_LISTINGS[manager])
            if rc == 127:
                manager = "rpm"
                rc, out, err = self.run(PACKAGE_LISTINGS[manager])
        else:
            rc, out, err = self.run(PACKAGE_LISTINGS[manager])
        if rc != 0:
            command = " ".join(PACKAGE_LISTINGS[manager][:2])
            raise ObservationError("%s failed (rc %s): %s" % (command, rc, _first_line(err, out)))
        return stack_from_packages(out, self.params.get("stack_packages") or {})

    def reboot(self, observed):
        """Set reboot_required (and reboot_reasons, driver_mismatch); return whether GPU queries wait."""
        decided = self.params.get("reboot_pending")
        if decided is not None:
            observed["reboot_required"] = bool(decided)
            return bool(decided)
        record = reboot_record(self.read_file)
        observed["reboot_required"] = bool(self.params.get("reboot_required")) or record["pending"]
        if record["reasons"]:
            observed["reboot_reasons"] = record["reasons"]
        pending = observed["reboot_required"]
        if self.want["gpus"]:
            driver = driver_reboot_pending(self.read_file(PROC_DRIVER_VERSION) or "", observed["stack"].get("driver"))
            if driver["pending"] is True:
                observed["driver_mismatch"] = driver
                pending = True
        return pending

    def nvidia(self, pending):
        if self.params.get("gpu_text") is not None:
            return facts_from_capture(self.params["gpu_text"])
        if pending:
            return None
        return self.gpu_facts()

    def mig_instances(self, pending):
        if not self.want["mig"]:
            return None
        if self.params.get("mig_lgi_text") is not None:
            return {"text": self.params["mig_lgi_text"]}
        if self.params.get("gpu_text") is not None or pending:
            return None
        rc, out, err = self.run(["nvidia-smi", "mig", "-lgi"])
        if rc == 0:
            return {"text": out}
        return {"error": "rc %s: %s" % (rc, _first_line(err, out))}

    def topology(self, pending, nvidia):
        expect = self.profile.get("topology")
        if not self.want["topology"] or pending:
            return None
        text = self.params.get("topology_text")
        if text is None:
            if not (nvidia or {}).get("gpu_count"):
                return {"error": "no GPU present, nothing to read"}
            rc, out, err = self.run(["nvidia-smi", "topo", "-m"])
            if rc != 0:
                return {"mismatches": [], "error": "nvidia-smi topo -m failed (rc=%s): %s" % (rc, _first_line(err, out))}
            text = out
        unknown = sorted(set(expect) - set(TOPOLOGY_EXPECT_KEYS)) if isinstance(expect, dict) else None
        if unknown is None or unknown:
            return {"mismatches": [], "error": "the profile's topology expectation %s: the keys are %s"
                    % ("is not a mapping" if unknown is None else "has unknown keys " + ", ".join(unknown),
                       ", ".join(TOPOLOGY_EXPECT_KEYS))}
        try:
            return {"mismatches": topology.analyze(text, expect)["mismatches"], "error": ""}
        except ValueError as exc:
            return {"mismatches": [], "error": "cannot parse nvidia-smi topo -m output: %s" % exc}

    def ib(self):
        if not self.want["ib"]:
            return None
        expect = self.profile.get("ib")
        src = self.params.get("ib_src")
        if src:
            text = self.read_file(src)
            if text is None or not text.strip():
                return {"mismatches": [], "error": "src %s is missing or empty: a capture of ibstat output was expected" % src}
        else:
            rc, out, err = self.run(["ibstat"])
            if rc == 127:
                text = ""
            elif rc != 0 and ("can't list IB device names" in err + out or "No IB devices found" in err + out):
                text = ""
            elif rc != 0 and not out.strip():
                return {"mismatches": [], "error": "ibstat failed with rc %s: %s" % (rc, _first_line(err, out))}
            else:
                text = out
        try:
            hcas = ibstat.parse_ibstat(text) if text.strip() else {}
            if not isinstance(expect, dict):
                raise ValueError("the profile's ib expectation is not a mapping")
            return {"mismatches": ibstat.check_fabric(hcas, dict((k, v) for k, v in expect.items() if v is not None)),
                    "error": ""}
        except ValueError as exc:
            return {"mismatches": [], "error": str(exc)}

    def kernel_log(self):
        if self.params.get("xid_text") is not None:
            return {"text": self.params["xid_text"], "source": self.params.get("xid_source") or "a captured kernel log"}
        if not self.want["xid"]:
            return None
        rc, out, _err = self.run(["journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q"])
        if rc == 0 and out.strip():
            return {"text": xid_lines(out), "source": "journalctl -k -b"}
        rc, out, err = self.run(["dmesg"])
        if rc == 0:
            return {"text": xid_lines(out), "source": "dmesg"}
        return {"error": "neither journalctl -k -b nor dmesg could be read: %s" % (_first_line(err, out) or "rc %s" % rc)}

    def tang(self):
        if not self.want["tang"]:
            return None
        volume = self.params.get("data_volume") or {}
        device = volume.get("device") or ""
        check_open = bool(volume.get("check_open", True))
        mount_point = volume.get("mount_point") or ""
        luks = bool(device) and self.run(["cryptsetup", "isLuks", device])[0] == 0
        clevis = self.run(["clevis", "luks", "list", "-d", device])[1] if luks else ""
        result = {"device": device, "luks": luks, "bound": "tang" in clevis, "servers": clevis_servers(clevis),
                  "check_open": check_open, "name": volume.get("name") or "", "mount_point": mount_point}
        if luks and check_open:
            rc, out, err = self.run(["lsblk", "-n", "-l", "-o", "TYPE,NAME", device])
            if rc == 0:
                result["lsblk"] = out
                result["mounted_from"] = ""
                if mount_point:
                    result["mounted_from"] = self.run(["findmnt", "-n", "-o", "SOURCE", "--mountpoint", mount_point])[1]
            else:
                result["lsblk"] = None
                result["lsblk_error"] = err.strip() or "lsblk rc %s" % rc
        return result

    def firewall(self):
        if not self.want["firewall"]:
            return None
        probe = list(self.params.get("firewall_probe") or [])
        expect = self.params.get("firewall_expect") or ""
        rc, out, _err = self.run(probe)
        active = rc == 0 and re.search(expect, out) is not None
        shown = ("shows %s" % expect) if active else "does not show %s (rc %s)" % (expect, rc)
        return {"active": active, "detail": "`%s` %s" % (" ".join(probe), shown)}

    def fabric_manager(self, pending):
        if not self.want["fabric_manager"] or pending:
            return None
        rc, out, _err = self.run(list(self.params.get("fabric_manager_probe") or []))
        return {"state": out.strip() or "rc %s" % rc}

    def lspci(self):
        if not self.want["pcie_acs"]:
            return None
        if self.params.get("lspci_text") is not None:
            return {"text": self.params["lspci_text"]}
        return {"text": self.run(["lspci", "-vvv"])[1]}


def observe(params, run, read_file, gpu_facts):
    """(observation, pending_reboot) of one node; see :class:`Observer`."""
    return Observer(params, run, read_file, gpu_facts).observe()
