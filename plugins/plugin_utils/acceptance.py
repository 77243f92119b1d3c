# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Node acceptance: observed facts + the host's hardware profile -> a list of checks.

Pure functions, no Ansible objects: the node_acceptance role reads the node with one
module, gpucloud.fleet.node_observation (GPU facts, topology and InfiniBand mismatches,
package versions, the pending-reboot record, Tang binding, firewall state), runs the CUDA
context and burn-in scripts, and hands the lot here through the gpucloud.fleet.acceptance_*
filters (:func:`observed`, then :func:`evaluate`).

Every check is ``{host, check, status, ok, detail}`` with status

- ``pass``: measured and as the profile says;
- ``fail``: measured and not as the profile says, or required and not measurable;
- ``n/a``: the profile says the thing does not exist here (a GPU-less lab node has
  no ECC to check);
- ``skipped``: not measured in this run (the operator left it out);
- ``pending``: not measured because the host waits for a reboot (a new driver is
  installed but the old one is loaded, so nvidia-smi and NVML would only answer
  "Driver/library version mismatch"): neither accepted nor failed.

``ok`` is false only for ``fail``.
"""


import json
import os
import re

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout
from ansible_collections.gpucloud.fleet.plugins.module_utils import xid as xid_table
from ansible_collections.gpucloud.fleet.plugins.module_utils.node_observation import version_matches
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import pcie_acs
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import slurm_acceptance

PASS, FAIL, NA, SKIPPED, PENDING = "pass", "fail", "n/a", "skipped", "pending"
STATUSES = (PASS, FAIL, NA, SKIPPED, PENDING)

REBOOT_SKIP = "reboot required: GPU checks skipped"

# Every check this module can produce, in report order; a Slurm node's observation (key slurm)
# adds slurm_acceptance.CHECKS after them.
CHECKS = (
    "reboot",
    "gpu.count",
    "gpu.model",
    "gpu.memory",
    "driver.version",
    "stack.cuda",
    "stack.cudnn",
    "stack.nccl",
    "gpu.persistence",
    "gpu.ecc_mode",
    "gpu.ecc_errors",
    "gpu.row_remap",
    "gpu.mig",
    "gpu.fabric",
    "gpu.pcie_link",
    "gpu.xid",
    "fabric.manager",
    "cuda.context",
    "pcie.acs",
    "topology",
    "ib.ports",
    "storage.tang",
    "firewall",
    "burn_in.bf16_gemm",
    "burn_in.memory_copy",
)


class AcceptanceError(Exception):
    """The profile or the observations are malformed (a bug in the inventory)."""


def _check(host, name, status, detail):
    if status not in STATUSES:
        raise AcceptanceError("unknown status %r for check %s" % (status, name))
    return {"host": host, "check": name, "status": status, "ok": status != FAIL, "detail": detail}


def model_matches(wanted, name):
    """True when the GPU NAME is the profile's WANTED model, whole words only.

    'H100' matches 'NVIDIA H100 80GB HBM3' and 'A100' matches 'NVIDIA A100-SXM4-40GB', but
    'H20' does not match 'NVIDIA H200' and 'H100 80GB HBM3' does not match 'NVIDIA H100 PCIe'.
    Case and runs of spaces do not count.
    """
    if not wanted or not name:
        return False
    pattern = r"(?<![A-Za-z0-9])%s(?![A-Za-z0-9])" % re.escape(" ".join(str(wanted).split()))
    return re.search(pattern, " ".join(str(name).split()), re.IGNORECASE) is not None


def parse_cuda_context(text):
    """The JSON printed by roles/node_acceptance/files/cuda_context.py -> {error, devices}.

    ``error`` says why CUDA could not start at all (libcuda.so.1 missing, cuInit failed);
    ``devices`` is a list of {index, ok, error} with ``error`` like
    'CUDA_ERROR_SYSTEM_NOT_READY (802)'. Raises AcceptanceError on output that is not the
    script's JSON (a traceback, an empty run).
    """
    try:
        data = json.loads(text or "")
    except ValueError:
        raise AcceptanceError("cuda_context.py printed no JSON: %r" % (text or "")[-200:])
    if not isinstance(data, dict) or not isinstance(data.get("devices", []), list):
        raise AcceptanceError("cuda_context.py printed JSON of the wrong shape: %r" % (data,))
    devices = []
    for device in data.get("devices") or []:
        if not isinstance(device, dict) or "index" not in device:
            raise AcceptanceError("cuda_context.py: a device entry without index: %r" % (device,))
        devices.append({"index": int(device["index"]), "ok": device.get("error") is None,
                        "error": device.get("error")})
    return {"error": data.get("error"), "devices": devices}


def burn_in_result(rc, stdout, stderr):
    """What burn_in.py's run says: its JSON numbers, or {error} with its last words."""
    if rc == 0:
        try:
            data = json.loads(stdout or "")
        except ValueError:
            return {"error": "burn_in.py printed no JSON: %r" % (stdout or "")[-200:]}
        if not isinstance(data, dict):
            return {"error": "burn_in.py printed JSON of the wrong shape: %r" % (data,)}
        return data
    lines = (stderr or "").strip().split("\n")
    return {"error": lines[-1].strip() or "rc %s" % rc}


def observed(observation, cuda_text=None, burn_in=None):
    """The node_observation module's OBSERVATION, with what the controller adds, ready for :func:`evaluate`.

    ``lspci`` ({text} of ``lspci -vvv``) becomes ``pcie_acs`` (pcie_acs.judge); CUDA_TEXT, the output
    of cuda_context.py (None: not run), becomes ``cuda``; BURN_IN, burn_in.py's run as a task result
    ({rc, stdout, stderr}; None: not run), becomes ``burn_in``.
    """
    if not isinstance(observation, dict):
        raise AcceptanceError("the observation must be the node_observation module's dict, got %r" % (observation,))
    result = dict(observation)
    lspci = result.pop("lspci", None)
    if lspci is not None:
        try:
            result["pcie_acs"] = pcie_acs.judge(pcie_acs.parse_lspci(str(lspci.get("text") or "")))
        except pcie_acs.LspciError as exc:
            result["pcie_acs"] = {"redirecting": [], "ports": 0, "error": str(exc)}
    if cuda_text is not None:
        try:
            result["cuda"] = parse_cuda_context(str(cuda_text))
        except AcceptanceError as exc:
            result["cuda"] = {"error": str(exc), "devices": []}
    if burn_in is not None:
        result["burn_in"] = burn_in_result(burn_in.get("rc"), burn_in.get("stdout"), burn_in.get("stderr"))
    return result


def crypt_mappings(lsblk_text):
    """Names of the dm-crypt mappings in ``lsblk -n -l -o TYPE,NAME <device>`` output."""
    names = []
    for line in (lsblk_text or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "crypt":
            names.append(parts[1])
    return names


def _gpus(nvidia):
    return (nvidia or {}).get("gpus") or []


def _per_gpu(gpus, bad):
    """'GPU0 (x), GPU3 (y)' for every GPU where bad(gpu) returns a reason."""
    reasons = []
    for gpu in gpus:
        reason = bad(gpu)
        if reason:
            reasons.append("GPU%s %s" % (gpu.get("index"), reason))
    return reasons


def _gpu_checks(host, profile, nvidia, not_gathered="GPU facts were not gathered", mig_instances=None):
    """Checks on the GPUs themselves; n/a everywhere on a profile without GPUs."""
    name = profile.get("name", "?")
    want_count = int(profile.get("gpu_count", 0))
    gpus = _gpus(nvidia)
    names = ("gpu.model", "gpu.memory", "gpu.persistence", "gpu.ecc_mode", "gpu.ecc_errors",
             "gpu.row_remap", "gpu.mig", "gpu.fabric", "gpu.pcie_link")
    if nvidia is None:
        return [_check(host, "gpu.count", SKIPPED, not_gathered)] + [
            _check(host, n, SKIPPED, not_gathered) for n in names]

    found = len(gpus)
    driver = "driver loaded" if nvidia.get("driver_loaded") else "no NVIDIA driver loaded"
    if want_count == 0:
        if found == 0:
            count = _check(host, "gpu.count", PASS,
                           "no GPU present, as profile %s expects (gpu_count 0; %s)" % (name, driver))
            return [count] + [_check(host, n, NA, "no GPU present (profile %s has no GPUs)" % name)
                              for n in names]
        count = _check(host, "gpu.count", FAIL,
                       "%d GPU(s) present, profile %s expects none" % (found, name))
    elif found == 0 and not nvidia.get("driver_loaded"):
        # nvidia-smi exits 9 ("couldn't communicate with the NVIDIA driver") and NVML fails to
        # initialise without a loaded kernel module: the GPUs were not counted, not found absent.
        return [_check(host, "gpu.count", FAIL,
                       "driver not loaded: the GPUs cannot be counted (nvidia-smi and NVML need the NVIDIA "
                       "kernel module); expected %d x %s" % (want_count, profile.get("gpu_model", "GPU")))] + [
            _check(host, n, SKIPPED, "driver not loaded") for n in names]
    elif found != want_count:
        detail = "expected %d x %s, found %d" % (want_count, profile.get("gpu_model", "GPU"), found)
        if found == 0:
            detail = "no GPU present (%s); %s" % (driver, detail)
        count = _check(host, "gpu.count", FAIL, detail)
    else:
        count = _check(host, "gpu.count", PASS, "%d GPU(s)" % found)
    if found == 0:
        return [count] + [_check(host, n, FAIL, "no GPU present to check") for n in names]

    checks = [count]
    model = profile.get("gpu_model")
    if model:
        wrong = _per_gpu(gpus, lambda g: None if model_matches(model, g.get("name"))
                         else "is %s" % g.get("name"))
        checks.append(_check(host, "gpu.model", FAIL if wrong else PASS,
                             "; ".join(wrong) + ", expected %s" % model if wrong else "every GPU is %s" % model))
    else:
        checks.append(_check(host, "gpu.model", SKIPPED, "profile %s names no gpu_model" % name))

    mem_min = profile.get("gpu_memory_mib_min")
    if mem_min:
        small = _per_gpu(gpus, lambda g: None if (g.get("memory_total_mib") or 0) >= int(mem_min)
                         else "has %s MiB" % g.get("memory_total_mib"))
        checks.append(_check(host, "gpu.memory", FAIL if small else PASS,
                             "; ".join(small) + ", expected at least %s MiB" % mem_min if small
                             else "every GPU has at least %s MiB" % mem_min))
    else:
        checks.append(_check(host, "gpu.memory", SKIPPED, "profile %s sets no gpu_memory_mib_min" % name))

    if profile.get("persistence", True):
        off = _per_gpu(gpus, lambda g: None if g.get("persistence_mode") else "persistence mode is %s"
                       % ("off" if g.get("persistence_mode") is False else "unknown"))
        checks.append(_check(host, "gpu.persistence", FAIL if off else PASS,
                             "; ".join(off) if off else "persistence mode on for every GPU"))
    else:
        checks.append(_check(host, "gpu.persistence", NA, "profile %s does not require persistence" % name))

    want_ecc = profile.get("ecc", True)

    def ecc_mode(gpu):
        ecc = gpu.get("ecc") or {}
        if ecc.get("current") is want_ecc and ecc.get("pending") in (want_ecc, None):
            return None
        return "ECC current=%s pending=%s" % (ecc.get("current"), ecc.get("pending"))

    wrong_ecc = _per_gpu(gpus, ecc_mode)
    checks.append(_check(host, "gpu.ecc_mode", FAIL if wrong_ecc else PASS,
                         "; ".join(wrong_ecc) + ", expected %s" % ("on" if want_ecc else "off") if wrong_ecc
                         else "ECC is %s on every GPU" % ("on" if want_ecc else "off")))

    def ecc_errors(gpu):
        ecc = gpu.get("ecc") or {}
        retired = gpu.get("retired_pages") or {}
        volatile, aggregate = ecc.get("uncorrected_volatile"), ecc.get("uncorrected_aggregate")
        if volatile or aggregate:
            return "has uncorrectable ECC errors (volatile %s, aggregate %s)" % (volatile, aggregate)
        if retired.get("double_bit_ecc"):
            return "has %s pages retired for double-bit ECC errors" % retired["double_bit_ecc"]
        return None

    bad_ecc = _per_gpu(gpus, ecc_errors)
    checks.append(_check(host, "gpu.ecc_errors", FAIL if bad_ecc else PASS,
                         "; ".join(bad_ecc) if bad_ecc else "no uncorrectable ECC errors"))

    def remap(gpu):
        rows = gpu.get("remapped_rows")
        pages = gpu.get("retired_pages")
        if rows:
            reasons = [what for what in ("pending", "failure") if rows.get(what)]
            if reasons:
                return "row remapping %s (uncorrectable rows %s)" % (" and ".join(reasons), rows.get("uncorrectable"))
            return None
        if pages and pages.get("pending"):
            return "page retirement pending"
        return None

    bad_remap = _per_gpu(gpus, remap)
    checks.append(_check(host, "gpu.row_remap", FAIL if bad_remap else PASS,
                         "; ".join(bad_remap) + " (reset the GPU; replace it if remapping failed)" if bad_remap
                         else "no pending or failed row remapping"))

    want_mig = bool(profile.get("mig", False))

    def mig(gpu):
        state = gpu.get("mig") or {}
        if state.get("current") is None and not want_mig:
            return None
        if state.get("current") is not want_mig or state.get("pending") not in (want_mig, None):
            return "MIG current=%s pending=%s" % (state.get("current"), state.get("pending"))
        return None

    bad_mig = _per_gpu(gpus, mig)
    if bad_mig or not want_mig:
        checks.append(_check(host, "gpu.mig", FAIL if bad_mig else PASS,
                             "; ".join(bad_mig) + ", expected MIG %s" % ("enabled" if want_mig else "disabled")
                             if bad_mig else "MIG %s as profile %s says" % ("enabled" if want_mig else "disabled", name)))
    else:
        checks.append(_mig_layout_check(host, profile, gpus, mig_instances))
    checks.append(_fabric_check(host, profile, gpus))
    checks.append(_pcie_link_check(host, profile, gpus))
    return checks


def _mig_layout_check(host, profile, gpus, mig_instances):
    """MIG is on everywhere: are the GPU instances the profile's layout (``nvidia-smi mig -lgi``)?"""
    name = profile.get("name", "?")
    if not mig_instances:
        return _check(host, "gpu.mig", FAIL, "MIG enabled, but the GPU instances were not read (nvidia-smi mig -lgi): "
                      "the layout of profile %s is unverified" % name)
    if mig_instances.get("error"):
        return _check(host, "gpu.mig", FAIL, "MIG enabled; nvidia-smi mig -lgi failed: %s" % mig_instances["error"])
    state = [{"index": gpu.get("index"), "name": gpu.get("name"), "family": mig_layout.family_of(gpu.get("name")),
              "mig_current": True, "mig_pending": True, "mig_devices": None} for gpu in gpus]
    try:
        judged = mig_layout.compare(profile, state, mig_layout.parse_lgi(mig_instances.get("text")))
    except mig_layout.MigLayoutError as exc:
        return _check(host, "gpu.mig", FAIL, "MIG layout of profile %s cannot be judged: %s" % (name, exc))
    bad = ["GPU%s %s" % (gpu["index"], "; ".join(gpu["reasons"])) for gpu in judged["gpus"] if not gpu["ok"]]
    if bad:
        return _check(host, "gpu.mig", FAIL, "; ".join(bad) + " (layout %s of profile %s)" % (judged["layout"], name))
    return _check(host, "gpu.mig", PASS, "MIG enabled, layout %s on every GPU as profile %s says"
                  % (judged["layout"], name))


def _nvswitch(profile):
    return bool(profile.get("nvswitch", False))


def _fabric_check(host, profile, gpus):
    """Every GPU registered with Fabric Manager: state Completed, status Success."""
    if not _nvswitch(profile):
        return _check(host, "gpu.fabric", NA, "profile %s has no NVSwitch fabric" % profile.get("name", "?"))

    def fabric(gpu):
        state = (gpu.get("fabric") or {}).get("state")
        status = (gpu.get("fabric") or {}).get("status")
        if state is None:
            return "reports no fabric state (N/A): the driver sees no NVSwitch fabric"
        if state.lower() != "completed" or (status or "").lower() != "success":
            return "fabric state %s, status %s" % (state, status)
        return None

    bad = _per_gpu(gpus, fabric)
    return _check(host, "gpu.fabric", FAIL if bad else PASS,
                  "; ".join(bad) + " (expected Completed/Success: is nvidia-fabricmanager running at the "
                  "driver's exact version?)" if bad else "every GPU's fabric state is Completed, status Success")


def _pcie_link_check(host, profile, gpus):
    """The GPU's PCIe link at its maximum width and generation.

    NVIDIA documents that the current generation and width "may be reduced when the GPU is not
    in use" (nvidia-smi --help-query-gpu), so the check judges:

    - the width always: HGX H100/H200 boards hold x16 at idle (the captures under
      tests/fixtures), and a narrower link there is a seating, riser or retimer fault. PCIe
      cards may narrow at idle (an idle L4 reports x8 of x16), so the check is on only where
      the profile asks for it (``pcie_link``, default: the NVSwitch profiles);
    - the maximum generation the system allows against what the GPU supports, always: a
      lower one means the slot, switch or BIOS caps the link, which no idle state explains;
    - the current generation only when the GPU is not idle; an idle GPU below its maximum
      generation is reported, not failed.
    """
    if not profile.get("pcie_link", _nvswitch(profile)):
        return _check(host, "gpu.pcie_link", NA, "profile %s does not check the PCIe link" % profile.get("name", "?"))
    idle_low = []

    def link(gpu):
        pcie = gpu.get("pcie") or {}
        gen, gen_max, gen_device_max = pcie.get("gen"), pcie.get("gen_max"), pcie.get("gen_device_max")
        width, width_max = pcie.get("width"), pcie.get("width_max")
        if None in (gen, gen_max, width, width_max):
            return "PCIe link not reported (gen %s/%s, width x%s/x%s)" % (gen, gen_max, width, width_max)
        reasons = []
        if width < width_max:
            reasons.append("runs at x%d of x%d" % (width, width_max))
        if gen_device_max is not None and gen_max < gen_device_max:
            reasons.append("the system caps the link at Gen%d, the GPU supports Gen%d" % (gen_max, gen_device_max))
        if gen < gen_max:
            if gpu.get("idle") is False:
                reasons.append("runs at Gen%d of Gen%d while busy" % (gen, gen_max))
            else:
                idle_low.append("GPU%s Gen%d of Gen%d" % (gpu.get("index"), gen, gen_max))
        return ", ".join(reasons) or None

    bad = _per_gpu(gpus, link)
    note = (" (not judged, the GPU is idle or does not say: %s)" % ", ".join(idle_low)) if idle_low else ""
    if bad:
        return _check(host, "gpu.pcie_link", FAIL, "; ".join(bad) + note)
    return _check(host, "gpu.pcie_link", PASS, "every GPU's PCIe link at its maximum width and generation" + note)


def _reboot_check(host, reboot_required, mismatch=None, reasons=None):
    if reboot_required and reasons:
        return _check(host, "reboot", PENDING, REBOOT_SKIP + " (the host records a pending reboot: %s). Reboot, "
                      "then verify again" % "; ".join(str(r) for r in reasons))
    if mismatch:
        return _check(host, "reboot", PENDING, REBOOT_SKIP + " (the loaded NVIDIA kernel module is %s, the installed "
                      "driver is %s: nvidia-smi and NVML would answer 'Driver/library version mismatch'). Reboot "
                      "into the installed driver, then verify again" % (mismatch.get("loaded"), mismatch.get("installed")))
    if reboot_required is None:
        return _check(host, "reboot", SKIPPED, "whether a reboot is pending was not reported")
    if reboot_required:
        return _check(host, "reboot", PENDING, REBOOT_SKIP + " (the installed driver waits for a reboot; "
                      "nvidia-smi and NVML would answer 'Driver/library version mismatch'). Reboot, then verify again")
    return _check(host, "reboot", PASS, "no reboot pending")


def _fabric_manager_check(host, profile, fabric_manager, pending):
    if not _nvswitch(profile):
        return _check(host, "fabric.manager", NA, "profile %s has no NVSwitch fabric" % profile.get("name", "?"))
    if pending:
        return _check(host, "fabric.manager", SKIPPED, REBOOT_SKIP)
    if fabric_manager is None:
        return _check(host, "fabric.manager", SKIPPED, "nvidia-fabricmanager was not inspected")
    state = fabric_manager.get("state") or "unknown"
    if state == "active":
        return _check(host, "fabric.manager", PASS, "nvidia-fabricmanager is active")
    return _check(host, "fabric.manager", FAIL, "nvidia-fabricmanager is %s, expected active (without it CUDA "
                  "fails with error 802 on an NVSwitch system)" % state)


def _cuda_context_check(host, profile, cuda, pending):
    if int(profile.get("gpu_count", 0)) == 0 or not profile.get("cuda_context", _nvswitch(profile)):
        return _check(host, "cuda.context", NA, "profile %s does not check CUDA contexts" % profile.get("name", "?"))
    if pending:
        return _check(host, "cuda.context", SKIPPED, REBOOT_SKIP)
    if cuda is None:
        return _check(host, "cuda.context", SKIPPED, "no CUDA context was tried")
    if cuda.get("error"):
        return _check(host, "cuda.context", FAIL, "CUDA did not start: %s" % cuda["error"])
    devices = cuda.get("devices") or []
    bad = ["GPU%s: %s" % (d["index"], d.get("error")) for d in devices if not d.get("ok")]
    want = int(profile.get("gpu_count", 0))
    if len(devices) != want:
        bad.append("CUDA sees %d device(s), profile expects %d" % (len(devices), want))
    if bad:
        return _check(host, "cuda.context", FAIL, "; ".join(bad))
    return _check(host, "cuda.context", PASS, "a CUDA context was created on each of %d GPU(s)" % len(devices))


def _acs_check(host, profile, acs):
    if not profile.get("pcie_acs", _nvswitch(profile)):
        return _check(host, "pcie.acs", NA, "profile %s does not check PCI ACS" % profile.get("name", "?"))
    if acs is None:
        return _check(host, "pcie.acs", SKIPPED, "PCI ACS was not inspected")
    if acs.get("error"):
        return _check(host, "pcie.acs", FAIL, "PCI ACS could not be read: %s" % acs["error"])
    redirecting = acs.get("redirecting") or []
    if redirecting:
        return _check(host, "pcie.acs", FAIL, "ACS redirects peer-to-peer traffic to the root complex on %s "
                      "(GPUDirect P2P/RDMA slows down or hangs; disable ACS in the BIOS or with setpci)"
                      % ", ".join(redirecting))
    return _check(host, "pcie.acs", PASS, "no PCIe switch port between GPUs and HCAs redirects peer-to-peer "
                  "traffic (%d port(s) read)" % int(acs.get("ports", 0)))


def _driver_check(host, profile, lock, nvidia, stack):
    locked = (lock or {}).get("driver")
    if not locked:
        return _check(host, "driver.version", SKIPPED, "no driver version in the version lock")
    loaded = (nvidia or {}).get("driver_version")
    package = (stack or {}).get("driver")
    if loaded:
        ok = version_matches(locked, loaded)
        return _check(host, "driver.version", PASS if ok else FAIL,
                      "loaded driver %s%s locked %s" % (loaded, " matches" if ok else " differs from", locked))
    if package:
        ok = version_matches(locked, package)
        return _check(host, "driver.version", PASS if ok else FAIL,
                      "driver not loaded; installed package %s%s locked %s"
                      % (package, " matches" if ok else " differs from", locked))
    if int(profile.get("gpu_count", 0)) == 0:
        return _check(host, "driver.version", NA, "no GPU present and no driver package installed")
    return _check(host, "driver.version", FAIL, "no NVIDIA driver loaded or installed, locked %s" % locked)


def _stack_checks(host, profile, lock, stack):
    checks = []
    for part in ("cuda", "cudnn", "nccl"):
        name = "stack.%s" % part
        locked = (lock or {}).get(part)
        if not locked:
            checks.append(_check(host, name, SKIPPED, "no %s version in the version lock" % part))
            continue
        if stack is None:
            checks.append(_check(host, name, SKIPPED, "installed versions were not read"))
            continue
        found = stack.get(part)
        if found is None:
            checks.append(_check(host, name, FAIL, "%s is not installed, locked %s" % (part, locked)))
        elif version_matches(locked, found):
            checks.append(_check(host, name, PASS, "%s %s matches locked %s" % (part, found, locked)))
        else:
            checks.append(_check(host, name, FAIL, "%s %s differs from locked %s" % (part, found, locked)))
    return checks


def _mismatch_check(host, name, wanted, observed, what):
    """A check from a {mismatches, error} observation of a module with `expect`."""
    if not wanted:
        return _check(host, name, NA, "the profile sets no %s expectation" % what)
    if observed is None:
        return _check(host, name, SKIPPED, "the %s was not read" % what)
    if observed.get("error"):
        return _check(host, name, FAIL, "the %s could not be read: %s" % (what, observed["error"]))
    mismatches = observed.get("mismatches") or []
    if mismatches:
        return _check(host, name, FAIL, "; ".join(mismatches))
    return _check(host, name, PASS, "the %s matches the profile" % what)


def _storage_check(host, profile, tang):
    """The data volume is LUKS, bound to Tang, open (a dm-crypt mapping) and mounted.

    TANG: {device, luks, bound, servers} and, unless ``check_open`` is false, ``name`` (the
    mapping the disk_encryption role opens), ``lsblk`` (``lsblk -n -l -o TYPE,NAME <device>``
    output, None when it failed, with ``lsblk_error``), ``mount_point`` ('' when the role
    mounts nothing) and ``mounted_from`` (``findmnt -n -o SOURCE --mountpoint`` output, ''
    when nothing is mounted there).
    """
    if not profile.get("tang_bound", False):
        return _check(host, "storage.tang", NA, "the profile has no Tang-bound data volume")
    if tang is None:
        return _check(host, "storage.tang", SKIPPED, "the data volume was not inspected")
    device = tang.get("device") or "the data volume"
    if not tang.get("luks"):
        return _check(host, "storage.tang", FAIL, "%s is not a LUKS volume" % device)
    if not tang.get("bound"):
        return _check(host, "storage.tang", FAIL, "%s has no clevis tang binding" % device)
    bound = "%s is LUKS and bound to Tang (%s)" % (device, ", ".join(tang.get("servers") or []) or "server not named")
    if tang.get("check_open") is False:
        return _check(host, "storage.tang", PASS, bound + "; whether it is open was not checked "
                      "(verify_data_volume_open is false)")
    if "lsblk" not in tang and not tang.get("lsblk_error"):
        return _check(host, "storage.tang", PASS, bound + "; whether it is open was not inspected")
    if tang.get("lsblk") is None:
        return _check(host, "storage.tang", FAIL, bound + ", but whether it is open could not be read: %s"
                      % (tang.get("lsblk_error") or "lsblk printed nothing"))
    name = tang.get("name") or "<name>"
    opened = crypt_mappings(tang.get("lsblk"))
    if not opened:
        return _check(host, "storage.tang", FAIL, "%s but LOCKED: not opened since boot (is a Tang server reachable? "
                      "`systemctl status systemd-cryptsetup@%s`)" % (bound, name))
    mapper = "/dev/mapper/%s" % opened[0]
    detail = "%s, open as %s" % (bound, mapper)
    mount_point = tang.get("mount_point") or ""
    if not mount_point:
        return _check(host, "storage.tang", PASS, detail)
    source = (tang.get("mounted_from") or "").strip()
    if not source:
        return _check(host, "storage.tang", FAIL, "%s, but not mounted at %s (`systemctl status %s.mount`)"
                      % (detail, mount_point, mount_point.strip("/").replace("/", "-") or "-"))
    if source not in ["/dev/mapper/%s" % n for n in opened] and not source.startswith("/dev/dm-"):
        return _check(host, "storage.tang", FAIL, "%s, but %s is mounted at %s instead" % (detail, source, mount_point))
    return _check(host, "storage.tang", PASS, "%s, mounted at %s" % (detail, mount_point))


def _pci_key(address):
    """'00000000:18:00.0' (nvidia-smi) and '0000:18:00' (an Xid line) -> (0, 0x18, 0), else None."""
    parts = (address or "").split(":")
    if len(parts) != 3:
        return None
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2].split(".")[0], 16)
    except ValueError:
        return None


def _xid_check(host, profile, nvidia, kernel_log):
    """No Xid of an actionable class in the kernel log of the current boot.

    KERNEL_LOG: {text (the NVRM Xid lines), source} or {error}. Which codes are actionable
    is xid.judge's call; the profile's ``xid_ignore`` lists codes an operator has accepted.
    """
    name = profile.get("name", "?")
    if int(profile.get("gpu_count", 0)) == 0:
        return _check(host, "gpu.xid", NA, "no GPU present (profile %s has no GPUs)" % name)
    if not profile.get("xid", True):
        return _check(host, "gpu.xid", NA, "profile %s does not check Xid events (xid: false)" % name)
    if kernel_log is None:
        return _check(host, "gpu.xid", SKIPPED, "the kernel log was not read")
    if kernel_log.get("error"):
        return _check(host, "gpu.xid", FAIL, "the kernel log could not be read: %s" % kernel_log["error"])
    judged = xid_table.judge(kernel_log.get("text"), profile.get("xid_ignore") or ())
    index = {}
    for gpu in _gpus(nvidia):
        key = _pci_key(gpu.get("pci_bus_id"))
        if key is not None:
            index[key] = gpu.get("index")

    def where(entry):
        return ", ".join("GPU%s (%s)" % (index[_pci_key(pci)], pci) if _pci_key(pci) in index else pci
                         for pci in entry["pci"])

    source = kernel_log.get("source") or "the kernel log"
    reported = ["Xid %d x%d on %s: %s" % (e["code"], e["count"], where(e), e["meaning"])
                for e in judged["informational"]]
    note = "; reported, not failed (application or accepted codes): %s" % "; ".join(reported) if reported else ""
    actionable = judged["actionable"]
    if actionable:
        return _check(host, "gpu.xid", FAIL, "kernel log since boot (%s): %s%s" % (
            source, "; ".join("Xid %d x%d on %s: %s (%s)" % (e["code"], e["count"], where(e), e["meaning"], e["action"])
                              for e in actionable), note))
    if reported:
        return _check(host, "gpu.xid", PASS, "no actionable Xid since boot (%s)%s" % (source, note))
    return _check(host, "gpu.xid", PASS, "no Xid since boot (%s)" % source)


def _firewall_check(host, profile, firewall):
    if not profile.get("firewall", True):
        return _check(host, "firewall", NA, "the profile manages no firewall")
    if firewall is None:
        return _check(host, "firewall", SKIPPED, "the firewall was not inspected")
    if firewall.get("active"):
        return _check(host, "firewall", PASS, firewall.get("detail") or "firewall policy active")
    return _check(host, "firewall", FAIL, firewall.get("detail") or "no firewall policy active")


def _burn_in_checks(host, profile, burn_in):
    limits = profile.get("burn_in") or {}
    pairs = (("burn_in.bf16_gemm", "bf16_gemm_tflops", "bf16_tflops_min", "TFLOP/s"),
             ("burn_in.memory_copy", "d2d_copy_GBps_rw", "copy_gbps_min", "GB/s"))
    mig = profile.get("mig")
    checks = []
    for name, key, limit_key, unit in pairs:
        limit = limits.get(limit_key)
        if limit and mig:
            # The floors are whole-GPU numbers; on a MIG node a CUDA process sees one MIG device
            # (a slice with a fraction of the SMs and memory bandwidth), so they would fail every
            # healthy node (issue 28 item 10).
            checks.append(_check(host, name, NA, "profile %s serves MIG slices (layout %s): the burn-in "
                                 "floors are whole-GPU numbers, not judged on a slice"
                                 % (profile.get("name", "?"), mig.get("layout") if isinstance(mig, dict) else mig)))
        elif not limit:
            checks.append(_check(host, name, NA, "the profile sets no %s" % limit_key))
        elif burn_in is None:
            checks.append(_check(host, name, SKIPPED, "burn-in not run (node_acceptance_burn_in is false)"))
        elif burn_in.get("error"):
            checks.append(_check(host, name, FAIL, "burn-in failed: %s" % burn_in["error"]))
        else:
            value = burn_in.get(key)
            if value is None:
                checks.append(_check(host, name, FAIL, "burn-in printed no %s" % key))
            else:
                ok = float(value) >= float(limit)
                checks.append(_check(host, name, PASS if ok else FAIL, "%.1f %s, minimum %s %s"
                                     % (float(value), unit, limit, unit)))
    return checks


def evaluate(host, profile, lock=None, observed=None):
    """Every acceptance check of HOST against PROFILE and the version LOCK.

    ``observed`` keys (each optional; a missing key means "not measured"):
    ``reboot_required`` (true: a driver waits for a reboot, or /run/reboot-required exists, so the
    GPU checks are skipped and the ``reboot`` check is ``pending``), ``reboot_reasons`` (the lines of
    the pending-reboot record, named in the ``reboot`` check), ``driver_mismatch`` ({loaded, installed} when the
    loaded kernel module is not the installed driver: pending as well, see
    module_utils/node_observation.py's ``driver_reboot_pending``), ``nvidia`` (nvidia_gpu_info facts), ``kernel_log``
    ({text, source} with the NVRM Xid lines of this boot, or {error}),
    ``fabric_manager`` ({state}: systemctl is-active nvidia-fabricmanager), ``cuda``
    (:func:`parse_cuda_context`), ``pcie_acs`` ({redirecting, ports, error} from
    pcie_acs.judge), ``stack`` ({driver, cuda, cudnn, nccl} installed
    versions), ``topology`` and ``ib`` ({mismatches, error}), ``tang`` ({device, luks,
    bound, servers, check_open, name, lsblk, lsblk_error, mount_point, mounted_from}: see
    :func:`_storage_check`), ``firewall`` ({active, detail}), ``burn_in`` ({bf16_gemm_tflops,
    d2d_copy_GBps_rw} or {error}), ``mig_instances`` ({text} of ``nvidia-smi mig -lgi``, or
    {error}; read where the profile has MIG: the layout is judged by mig_layout.compare), ``slurm``
    (what gpucloud.fleet.slurm_node_info returned, on Slurm nodes only: slurm_acceptance.checks).
    """
    if not isinstance(profile, dict) or "gpu_count" not in profile:
        raise AcceptanceError("host %s: the hardware profile must be a dict with at least gpu_count, got %r"
                              % (host, profile))
    observed = observed or {}
    reboot_required = observed.get("reboot_required")
    if isinstance(reboot_required, str):
        reboot_required = reboot_required.strip().lower() in ("true", "yes", "on", "1")
    mismatch = observed.get("driver_mismatch")
    pending = bool(reboot_required) or bool(mismatch)
    nvidia = None if pending else observed.get("nvidia")
    stack = observed.get("stack")
    checks = _gpu_checks(host, profile, nvidia, REBOOT_SKIP if pending else "GPU facts were not gathered",
                         observed.get("mig_instances"))
    checks.insert(3, _driver_check(host, profile, lock, nvidia, stack))
    checks[4:4] = _stack_checks(host, profile, lock, stack)
    checks.insert(0, _reboot_check(host, reboot_required, mismatch, observed.get("reboot_reasons")))
    checks.append(_xid_check(host, profile, nvidia, observed.get("kernel_log")))
    checks.append(_fabric_manager_check(host, profile, observed.get("fabric_manager"), pending))
    checks.append(_cuda_context_check(host, profile, observed.get("cuda"), pending))
    checks.append(_acs_check(host, profile, observed.get("pcie_acs")))
    checks.append(_mismatch_check(host, "topology", profile.get("topology"), observed.get("topology"),
                                  "GPU/NIC topology"))
    checks.append(_mismatch_check(host, "ib.ports", profile.get("ib"), observed.get("ib"), "InfiniBand port"))
    checks.append(_storage_check(host, profile, observed.get("tang")))
    checks.append(_firewall_check(host, profile, observed.get("firewall")))
    checks.extend(_burn_in_checks(host, profile, observed.get("burn_in")))
    if observed.get("slurm") is not None:
        try:
            checks.extend(slurm_acceptance.checks(host, profile, observed["slurm"]))
        except slurm_acceptance.SlurmAcceptanceError as exc:
            raise AcceptanceError(str(exc)) from exc
    return checks


def fleet_report(results, expected=None):
    """{host: [checks]} -> the fleet's totals and every failed check by host.

    A host of EXPECTED without checks never reached its verdict (unreachable, or failed
    before verify): it gets one failed ``verify.reached`` check.
    """
    results = dict(results)
    for host in expected or []:
        if not results.get(host):
            results[host] = [_check(host, "verify.reached", FAIL,
                                    "no verdict: the host was unreachable or failed before verify")]
    hosts = sorted(results)
    failures = []
    counts = dict((status, 0) for status in STATUSES)
    for host in hosts:
        for check in results[host] or []:
            counts[check["status"]] += 1
            if check["status"] == FAIL:
                failures.append({"host": host, "check": check["check"], "detail": check["detail"]})
    failed_hosts = sorted(set(f["host"] for f in failures))
    pending_hosts = [host for host in hosts if host not in failed_hosts
                     and any(c["status"] == PENDING for c in results[host] or [])]
    gpu_less = [host for host in hosts
                if any(c["check"] == "gpu.count" and c["status"] == PASS and c["detail"].startswith("no GPU present")
                       for c in results[host] or [])]
    return {
        "hosts": hosts,
        "passed_hosts": [h for h in hosts if h not in failed_hosts and h not in pending_hosts],
        "failed_hosts": failed_hosts,
        "pending_hosts": pending_hosts,
        "gpu_less_hosts": gpu_less,
        "counts": counts,
        "failures": failures,
    }


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def host_markdown(host, checks):
    """One host's verify report as Markdown."""
    failed = [c for c in checks if c["status"] == FAIL]
    pending = [c for c in checks if c["status"] == PENDING]
    verdict = "FAILED" if failed else "PENDING REBOOT" if pending else "ACCEPTED"
    lines = ["# Node acceptance: %s" % host, "",
             "**%s** - %d checks, %d failed%s." % (
                 verdict, len(checks), len(failed), ", %d pending" % len(pending) if pending else ""), "",
             "| Check | Status | Detail |", "| --- | --- | --- |"]
    for check in checks:
        lines.append("| %s | %s | %s |" % (check["check"], check["status"].upper() if check["status"] in (FAIL, PENDING)
                                           else check["status"], _cell(check["detail"])))
    return "\n".join(lines) + "\n"


def fleet_markdown(report):
    """The fleet table: totals, then every failed check by host."""
    pending = report.get("pending_hosts") or []
    lines = ["# Fleet acceptance", "",
             "%d host(s): %d accepted, %s%d failed. Checks: %s." % (
                 len(report["hosts"]), len(report["passed_hosts"]),
                 "%d pending a reboot, " % len(pending) if pending else "", len(report["failed_hosts"]),
                 ", ".join("%d %s" % (report["counts"].get(s, 0), s) for s in STATUSES))]
    if pending:
        lines += ["", "Reboot pending on %s: a new driver waits for a reboot, so their GPU checks were skipped; "
                  "they are neither accepted nor failed. Reboot them, then verify again." % ", ".join(pending)]
    if report["gpu_less_hosts"]:
        lines += ["", "No GPU present on %s: their profile expects none (a GPU-less lab), so the GPU, driver "
                  "and topology checks there prove nothing about GPUs." % ", ".join(report["gpu_less_hosts"])]
    lines += [""]
    if report["failures"]:
        lines += ["| Host | Failed check | Detail |", "| --- | --- | --- |"]
        for failure in report["failures"]:
            lines.append("| %s | %s | %s |" % (failure["host"], failure["check"], _cell(failure["detail"])))
    else:
        lines.append("No failed checks.")
    return "\n".join(lines) + "\n"


def site_summary_markdown(nodes, stages_all, stages_enabled, skip_reasons=None, fleet=None, check_mode=False,
                          expected=None):
    """site.yml's closing summary: one row per GPU node, then what the run skipped.

    NODES maps host -> {profile, os, stages, reboot_required, reboot_allowed, verdict},
    or None for a host that never got that far (unreachable, failed, or stopped with
    its batch); a host of EXPECTED missing from NODES counts as None.
    """
    nodes = dict(nodes)
    for host in expected or []:
        nodes.setdefault(host, None)
    skip_reasons = skip_reasons or {}
    lines = ["# Rollout summary%s" % (" (CHECK MODE: nothing was changed)" if check_mode else ""), "",
             "| Host | Profile | OS | Stages run | Reboot | Verdict |", "| --- | --- | --- | --- | --- | --- |"]
    stopped = []
    for host in sorted(nodes):
        node = nodes[host]
        if not node:
            stopped.append(host)
            lines.append("| %s | - | - | - | - | NOT RUN: in a later batch, unreachable, failed earlier, or the rollout stopped |" % host)
            continue
        if node.get("reboot_required"):
            reboot = "REQUIRED, %s" % ("allowed (done by the roles' handlers)" if node.get("reboot_allowed")
                                       else "not allowed: reboot in a maintenance window or rerun with "
                                            "rollout_allow_reboot=true")
        else:
            reboot = "not needed"
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            host, _cell(node.get("profile")), _cell(node.get("os")),
            _cell(", ".join(node.get("stages") or []) or "none"), reboot, _cell(node.get("verdict"))))
    skipped = [s for s in stages_all if s not in stages_enabled]
    lines.append("")
    if skipped:
        lines.append("Stages skipped by rollout_stages: %s." % "; ".join(
            "%s (%s)" % (s, skip_reasons.get(s, "no reason given")) for s in skipped))
    else:
        lines.append("Every stage was enabled.")
    if fleet and fleet.get("gpu_less_hosts"):
        lines.append("No GPU present on %s: their hardware profile expects none, so nothing in this run proves "
                     "a GPU works there." % ", ".join(fleet["gpu_less_hosts"]))
    if stopped:
        lines.append("Not rolled out: %s." % ", ".join(stopped))
    return "\n".join(lines) + "\n"


def settings_problems(host, profile, overrides, renamed_set, renamed, captures, firewall_probe, fabric_manager_probe,
                      burn_in_seconds):
    """Why node_acceptance cannot run with these settings: a list of messages, each naming its variable.

    HOST is the inventory host; PROFILE gpucloud_profile (None when unset) and OVERRIDES
    gpucloud_profile_overrides; RENAMED_SET the verify_* names the inventory sets, RENAMED the
    old name -> new name of the settings that were renamed; CAPTURES setting -> controller path
    ('' reads the node); the two probes argv lists; BURN_IN_SECONDS a positive number. Nothing is
    read on the node; a capture must be a file on the controller (os.path.isfile, as Ansible's
    ``file`` test). Empty: the settings are usable.
    """
    problems = []
    if not isinstance(profile, dict) or "gpu_count" not in profile or not isinstance(overrides, dict):
        problems.append(
            "gpucloud_profile: %s has no gpucloud_profile with gpu_count: put it in exactly one hardware-profile group "
            "(group_vars/<profile>.yml) - see docs/operator-guide.md. gpucloud_profile_overrides, when set, must be a "
            "mapping." % (host,))
    old = sorted(name for name in renamed_set if name in renamed)
    if old:
        problems.append("%s: rename it in the inventory (roles/node_acceptance/README.md)."
                        % "; ".join("%s is now %s" % (name, renamed[name]) for name in old))
    missing = [(name, path) for name, path in captures.items() if path and not os.path.isfile(str(path))]
    if missing:
        problems.append("%s: %s is not a file on the controller; give the path of a capture, or '' to read the node."
                        % (", ".join(name for name, _path in missing), ", ".join(str(path) for _name, path in missing)))
    try:
        seconds_ok = int(burn_in_seconds) > 0
    except (TypeError, ValueError):
        seconds_ok = False
    if not firewall_probe or not fabric_manager_probe or not seconds_ok:
        problems.append(
            "node_acceptance_firewall_probe (%s) and node_acceptance_fabric_manager_probe (%s) must each name a command "
            "(an argv list); node_acceptance_burn_in_seconds (%s) must be a positive number."
            % (json.dumps(firewall_probe), json.dumps(fabric_manager_probe), json.dumps(burn_in_seconds)))
    return problems
