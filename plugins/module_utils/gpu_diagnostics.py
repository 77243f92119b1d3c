# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Deep diagnostics on a GPU node (issue 30, item 1): what runs at each level, the busy refusal, the run.

The gpu_diagnostics module hands its parameters, a ``run(argv) -> (rc, out, err)`` (module_utils/runner.py,
``missing="rc"``) and an ``observe(params)`` (module_utils/node_observation.py) to :func:`diagnose`.

- The busy refusal: the compute processes on the GPUs (``nvidia-smi --query-compute-apps``, tied to
  GPU indexes through ``--query-gpu=index,uuid``); a targeted GPU that holds one is refused, naming
  the GPU and the PIDs, unless the caller forces the run. A diagnostic loads the GPU: it would slow
  or break the job and its verdict on a shared GPU means little.
- With DCGM (``dcgmi`` installed and ``nv-hostengine`` answering ``dcgmi discovery -l``):
  ``dcgmi diag -r N -j``, parsed and judged per test and per GPU by module_utils/dcgm_diag.py.
- Without it, the collection's own checks: the node read as node acceptance reads it
  (node_observation, limited to the GPUs, the fabric and the topology) and judged on the
  controller by the acceptance checks named in :data:`OWN_CHECKS` (plugin_utils/acceptance.py);
  from medium on, the burn-in (roles/node_acceptance/files/burn_in.py: bf16 GEMM and device memory
  copy bandwidth) for :data:`BURN_IN_SECONDS`, run by the playbook where PyTorch is installed.

Nothing here changes a GPU setting. In check mode nothing loads a GPU: the result says what would run.
"""

from ansible_collections.gpucloud.fleet.plugins.module_utils import dcgm_diag
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import MISSING_RC

SOURCES = ("auto", "dcgm", "own")

SMI_GPUS = ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"]
SMI_APPS = ["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv,noheader"]
DCGM_PROBE = ["dcgmi", "discovery", "-l"]
# nvidia-smi may print this line instead of nothing when no process runs.
NO_PROCESSES = "No running processes found"

# The acceptance checks (plugin_utils/acceptance.py) the own checks consist of: NVML answers (the
# driver is loaded and every GPU of the profile is seen), uncorrectable ECC errors, pending or failed
# row remapping, the PCIe link against its maximum, the NVSwitch fabric state and the NVLink count
# between every GPU pair (the profile's topology.min_nvlinks).
QUICK_CHECKS = ("gpu.count", "gpu.ecc_errors", "gpu.row_remap", "gpu.pcie_link", "gpu.fabric", "topology")
BURN_IN_CHECKS = ("burn_in.bf16_gemm", "burn_in.memory_copy")
OWN_CHECKS = {
    "quick": QUICK_CHECKS,
    "medium": QUICK_CHECKS + BURN_IN_CHECKS,
    "long": QUICK_CHECKS + BURN_IN_CHECKS,
    "extended": QUICK_CHECKS + BURN_IN_CHECKS,
}
# Seconds of burn-in per GPU: quick reads only; medium a short load that finds a slow or failing
# GPU; long and extended hold the load long enough to heat the GPU to its steady clocks.
BURN_IN_SECONDS = {"quick": 0, "medium": 10, "long": 60, "extended": 300}

# What the own checks read of the node: the GPUs, Fabric Manager (NVSwitch) and the topology only.
_OWN_PROFILE_KEYS = ("name", "gpu_count", "gpu_model", "nvswitch", "pcie_link", "topology")


class DiagnosticsError(Exception):
    """The diagnostic cannot run, or refuses to."""

    def __init__(self, msg, **result):
        super(DiagnosticsError, self).__init__(msg)
        self.result = result


def _level(name):
    if name not in dcgm_diag.LEVELS:
        raise DiagnosticsError("level %r is not one of %s" % (name, ", ".join(dcgm_diag.LEVELS)))
    return name


def parse_gpu_uuids(text):
    """``nvidia-smi --query-gpu=index,uuid --format=csv,noheader`` -> {uuid: index}."""
    found = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit() or not parts[1]:
            raise ValueError("nvidia-smi --query-gpu=index,uuid: a line is not 'index, uuid': %r" % line)
        found[parts[1]] = int(parts[0])
    return found


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name --format=csv,noheader`` -> [{gpu_uuid, pid, name}].

    A process name may hold commas: only the first two separate fields.
    """
    apps = []
    for line in (text or "").splitlines():
        if not line.strip() or line.strip() == NO_PROCESSES:
            continue
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) != 3 or not parts[1].isdigit():
            raise ValueError("nvidia-smi --query-compute-apps: a line is not 'gpu_uuid, pid, process_name': %r" % line)
        apps.append({"gpu_uuid": parts[0], "pid": int(parts[1]), "name": parts[2]})
    return apps


def busy_gpus(apps, uuids, targets=None):
    """[{gpu, pid, name}] of the processes on the TARGETS (GPU indexes; None: every GPU).

    A process on a GPU whose UUID nvidia-smi did not list is named by its UUID and counts as on a
    targeted GPU: whether it is cannot be told, and the refusal is the safe answer.
    """
    busy = []
    for app in apps:
        gpu = uuids.get(app["gpu_uuid"], app["gpu_uuid"])
        if targets is None or not isinstance(gpu, int) or gpu in targets:
            busy.append({"gpu": gpu, "pid": app["pid"], "name": app["name"]})
    return sorted(busy, key=lambda entry: (str(entry["gpu"]), entry["pid"]))


def refusal_message(busy):
    """The refusal, naming every busy GPU and its PIDs."""
    by_gpu = {}
    for entry in busy:
        by_gpu.setdefault(entry["gpu"], []).append("%d (%s)" % (entry["pid"], entry["name"]))
    named = "; ".join("GPU %s: PID %s" % (gpu, ", ".join(pids)) for gpu, pids in sorted(by_gpu.items(), key=str))
    return ("refused: the GPUs hold compute processes (%s); a diagnostic would load them under a running job. "
            "Drain the node first, or set force: true" % named)


def dcgm_command(level, gpus=None):
    """The ``dcgmi diag`` argv of LEVEL (a level name) on GPUS (indexes; None: every GPU)."""
    argv = ["dcgmi", "diag", "-r", str(dcgm_diag.level_number(_level(level))), "-j"]
    if gpus:
        argv += ["-i", ",".join(str(gpu) for gpu in gpus)]
    return argv


def own_profile(profile):
    """The PROFILE limited to what the own checks read (no Xid, firewall, storage, InfiniBand, ACS, MIG)."""
    limited = dict((key, profile[key]) for key in _OWN_PROFILE_KEYS if key in profile)
    limited.update(xid=False, firewall=False, tang_bound=False, pcie_acs=False)
    return limited


def _first_line(*texts):
    for text in texts:
        if (text or "").strip():
            return text.strip().splitlines()[0]
    return ""


def dcgm_state(run):
    """(ready, reason): is ``dcgmi`` installed and does the host engine answer?"""
    rc, out, err = run(DCGM_PROBE)
    if rc == MISSING_RC:
        return False, "dcgmi is not installed"
    if rc != 0:
        return False, "dcgmi discovery -l failed (rc %s): %s (is nv-hostengine running?)" % (rc, _first_line(err, out))
    return True, "dcgmi answers (dcgmi discovery -l)"


def _busy(run, targets, force):
    """(busy entries, GPU indexes listed), or DiagnosticsError when it cannot be told and FORCE is off."""
    rc, out, err = run(SMI_GPUS)
    if rc != 0:
        if force:
            return [], None
        raise DiagnosticsError("cannot tell whether the GPUs hold compute processes: %s failed (rc %s): %s; "
                               "force: true runs anyway" % (" ".join(SMI_GPUS), rc, _first_line(err, out)))
    uuids = parse_gpu_uuids(out)
    unknown = sorted(set(targets or ()) - set(uuids.values()))
    if unknown:
        raise DiagnosticsError("gpus: %s not on this node (its GPUs: %s)"
                               % (", ".join(str(g) for g in unknown), ", ".join(str(g) for g in sorted(uuids.values()))
                                  or "none"))
    rc, out, err = run(SMI_APPS)
    if rc != 0:
        if force:
            return [], sorted(uuids.values())
        raise DiagnosticsError("cannot tell whether the GPUs hold compute processes: %s failed (rc %s): %s; "
                               "force: true runs anyway" % (" ".join(SMI_APPS), rc, _first_line(err, out)))
    return busy_gpus(parse_compute_apps(out), uuids, targets), sorted(uuids.values())


def _source(run, wanted):
    if wanted == "own":
        return "own", "source: own asked for"
    ready, reason = dcgm_state(run)
    if ready:
        return "dcgm", reason
    if wanted == "dcgm":
        raise DiagnosticsError("source: dcgm asked for, but %s" % reason)
    return "own", reason + ": the collection's own checks run instead"


def _run_dcgm(run, result):
    argv = result["command"]
    rc, out, err = run(argv)
    try:
        parsed = dcgm_diag.parse(out, result["level"])
        verdict = dcgm_diag.judge(parsed, result["gpus"])
    except ValueError as exc:
        raise DiagnosticsError("%s (rc %s): %s%s" % (" ".join(argv), rc, exc,
                                                     "; stderr: %s" % err.strip() if (err or "").strip() else ""),
                               **result)
    result.update(rc=rc, dcgm=parsed, passed=verdict["passed"], failures=verdict["failures"],
                  warnings=verdict["warnings"], skipped=verdict["skipped"])
    return result


def diagnose(params, run, observe, check_mode=False):
    """The module's result; DiagnosticsError (with the result so far) on a refusal or a failure to run.

    PARAMS: level, force, gpus, source, profile. OBSERVE(params) -> (observation, pending_reboot) reads the
    node as node_observation does.
    """
    level = _level(params.get("level"))
    force = bool(params.get("force"))
    targets = params.get("gpus") or None
    if targets is not None and not all(isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in targets):
        raise DiagnosticsError("gpus must be GPU indexes (numbers >= 0), not %r" % (targets,))
    wanted = params.get("source") or "auto"
    if wanted not in SOURCES:
        raise DiagnosticsError("source %r is not one of %s" % (wanted, ", ".join(SOURCES)))
    profile = params.get("profile") or {}

    busy, listed = _busy(run, targets, force)
    source, reason = _source(run, wanted)
    result = {"level": level, "dcgm_level": dcgm_diag.level_number(level), "source": source, "source_reason": reason,
              "gpus": sorted(targets) if targets else (listed or []), "busy": busy, "forced": bool(busy) and force,
              "refused": bool(busy) and not force, "ran": False, "check_mode": check_mode}
    if source == "dcgm":
        result.update(command=dcgm_command(level, targets), checks=[], burn_in_seconds=0)
    else:
        if "gpu_count" not in profile:
            raise DiagnosticsError("profile: the own checks judge the node against its hardware profile "
                                   "(gpucloud_profile), which needs at least gpu_count", **result)
        result.update(command=None, checks=list(OWN_CHECKS[level]), burn_in_seconds=BURN_IN_SECONDS[level])
    if result["refused"]:
        raise DiagnosticsError(refusal_message(busy), **result)
    if check_mode:
        return result
    result["ran"] = True
    if source == "dcgm":
        return _run_dcgm(run, result)
    observation, pending = observe({"profile": own_profile(profile)})
    result.update(observation=observation, pending_reboot=pending)
    return result
