# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Acceptance of a Slurm GPU node (issue 31 item 5): what gpucloud.fleet.slurm_node_info saw, judged.

``checks(host, profile, slurm)`` returns the ``slurm.*`` checks in the shape of
plugin_utils/acceptance.py (``acceptance.evaluate`` appends them when the observation has a
``slurm`` key, which node_acceptance gives only hosts in ``slurm_gpu_nodes``):

- ``slurm.slurmd``: ``systemctl is-active slurmd`` is ``active``;
- ``slurm.gres``: the node is registered with the GPU GRES its profile gives (slurm.py's
  ``expected_gres``, from which slurm_gpu_node writes gres.conf: MIG and MPS change the count);
- ``slurm.state``: not down, failed, drained or not responding; a drained node fails and names
  its reason (and who set it, when), a node in such a state without a reason says so;
- ``slurm.smoke``: the ``srun --gres=gpu:N`` job saw exactly N GPUs in CUDA_VISIBLE_DEVICES and
  could open exactly N GPU device files (its device cgroup denied the others);
- ``slurm.nccl_pmix``: the multi-node nccl-tests run through ``srun --mpi=pmix``, judged only
  when asked; "not available" where the build lists no pmix.
"""

from ansible_collections.gpucloud.fleet.plugins.module_utils.nccl_tests import evaluate_nccl_result
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import slurm as slurm_conf

PASS, FAIL, NA, SKIPPED = "pass", "fail", "n/a", "skipped"
CHECKS = ("slurm.slurmd", "slurm.gres", "slurm.state", "slurm.smoke", "slurm.nccl_pmix")
# Base states and flags (scontrol's words, lower case) in which the node takes no jobs.
BAD_STATES = ("down", "fail", "future", "unknown")
BAD_FLAGS = ("drain", "fail", "not_responding", "invalid_reg", "maint", "reboot_issued", "power_down",
             "powered_down")
# The GRES acceptance compares: the GPUs and their MPS shares (a node may have other GRES).
JUDGED_GRES = ("gpu", "mps")


class SlurmAcceptanceError(ValueError):
    """The profile or the observation cannot be judged (an inventory or caller bug)."""


def _check(host, name, status, detail):
    return {"host": host, "check": name, "status": status, "ok": status != FAIL, "detail": detail}


def _format(counts):
    return ",".join("%s:%d" % (key, counts[key]) for key in sorted(counts)) or "no GPU GRES"


def expected_gres(profile):
    """The GPU GRES a node of PROFILE registers: ``slurm.expected_gres``, the counts the controller's
    node line and the node's checked gres.conf are written from (MIG and MPS change them)."""
    try:
        return slurm_conf.expected_gres(profile)
    except slurm_conf.SlurmConfigError as exc:
        name = profile.get("name", "?") if isinstance(profile, dict) else "?"
        raise SlurmAcceptanceError("profile %s: %s" % (name, exc)) from exc


def _slurmd_check(host, slurm):
    state = slurm.get("slurmd")
    if state == "active":
        return _check(host, "slurm.slurmd", PASS, "slurmd is active")
    return _check(host, "slurm.slurmd", FAIL, "slurmd is %s (systemctl is-active slurmd)" % (state or "not known"))


def _gres_check(host, profile, slurm, expected):
    node = slurm.get("node")
    if not slurm.get("registered") or not node:
        return _check(host, "slurm.gres", FAIL, "node %s is not registered with the controller: %s"
                      % (slurm.get("node_name", host), slurm.get("error") or "scontrol knows no such node"))
    have = dict((key, value) for key, value in (node.get("gres_counts") or {}).items()
                if key.split(":", 1)[0] in JUDGED_GRES)
    if have == expected:
        return _check(host, "slurm.gres", PASS, "registered with Gres=%s, as profile %s gives"
                      % (_format(have), profile.get("name", "?")))
    return _check(host, "slurm.gres", FAIL, "registered with Gres=%s, profile %s gives %s (gres.conf and the "
                  "slurm.conf node line disagree with the profile, or slurmd found fewer device files)"
                  % (_format(have), profile.get("name", "?"), _format(expected)))


def _state_check(host, slurm):
    node = slurm.get("node")
    if not node:
        return _check(host, "slurm.state", FAIL, "no node record to judge (see slurm.gres)")
    state = node.get("state") or {}
    bad = [state.get("base")] if state.get("base") in BAD_STATES else []
    bad += [flag for flag in state.get("flags") or [] if flag in BAD_FLAGS and flag not in bad]
    if state.get("not_responding") and "not_responding" not in bad:
        bad.append("not_responding")
    text = state.get("text") or "?"
    if not bad:
        return _check(host, "slurm.state", PASS, "state %s" % text)
    reason = node.get("reason")
    if not reason:
        return _check(host, "slurm.state", FAIL, "state %s (%s) without a reason: nobody said why the node takes "
                      "no jobs" % (text, ", ".join(bad)))
    by = ""
    if node.get("reason_by") or node.get("reason_at"):
        by = " (set by %s at %s)" % (node.get("reason_by") or "?", node.get("reason_at") or "?")
    return _check(host, "slurm.state", FAIL, "state %s (%s), reason: %s%s" % (text, ", ".join(bad), reason, by))


def _smoke_check(host, slurm):
    smoke = slurm.get("smoke") or {}
    asked = smoke.get("asked") or 0
    if not asked:
        return _check(host, "slurm.smoke", SKIPPED, "no smoke job asked (node_acceptance_slurm_smoke_gpus is 0)")
    if not smoke.get("ran"):
        return _check(host, "slurm.smoke", SKIPPED, smoke.get("skipped") or "the smoke job did not run")
    if smoke.get("error"):
        return _check(host, "slurm.smoke", FAIL, "srun --gres=gpu:%d: %s" % (asked, smoke["error"]))
    visible = smoke.get("cuda_visible_devices") or []
    allowed = smoke.get("allowed") or []
    denied = smoke.get("denied") or []
    detail = "srun --gres=gpu:%d: CUDA_VISIBLE_DEVICES=%s, the job may open %s, its cgroup denies %s" % (
        asked, ",".join(visible) or "(empty)", ", ".join(allowed) or "no GPU device file", ", ".join(denied) or "none")
    problems = []
    if len(visible) != asked:
        problems.append("%d GPUs visible" % len(visible))
    if len(allowed) != asked:
        problems.append("%d GPU device files open to it (ConstrainDevices=yes confines a job to its GPUs)"
                        % len(allowed))
    if problems:
        return _check(host, "slurm.smoke", FAIL, "%s; asked for %d, got %s" % (detail, asked, " and ".join(problems)))
    return _check(host, "slurm.smoke", PASS, detail)


def _nccl_check(host, slurm):
    nccl = slurm.get("nccl") or {}
    if not nccl.get("asked"):
        return _check(host, "slurm.nccl_pmix", NA, "no multi-node NCCL run asked")
    if not nccl.get("ran"):
        skipped = nccl.get("skipped") or "the NCCL job did not run"
        return _check(host, "slurm.nccl_pmix", NA if skipped.startswith("not available") else SKIPPED, skipped)
    if nccl.get("error"):
        return _check(host, "slurm.nccl_pmix", FAIL, nccl["error"])
    result = nccl.get("result")
    if not isinstance(result, dict):
        return _check(host, "slurm.nccl_pmix", FAIL, "srun --mpi=pmix ran but printed no nccl-tests result")
    failures = evaluate_nccl_result(result)
    ranks = (nccl.get("nodes") or 0) * (nccl.get("gpus_per_node") or 0)
    if ranks and result.get("ranks") != ranks:
        failures.append("%s ranks ran, %d nodes x %d GPUs asked" % (result.get("ranks"), nccl["nodes"],
                                                                    nccl["gpus_per_node"]))
    detail = "%s ranks, average bus bandwidth %s GB/s" % (result.get("ranks"), result.get("avg_busbw"))
    if failures:
        return _check(host, "slurm.nccl_pmix", FAIL, "%s: %s" % (detail, "; ".join(failures)))
    return _check(host, "slurm.nccl_pmix", PASS, detail)


def checks(host, profile, slurm):
    """The slurm.* acceptance checks of HOST from SLURM, what gpucloud.fleet.slurm_node_info returned."""
    if not isinstance(slurm, dict):
        raise SlurmAcceptanceError("host %s: the Slurm observation must be what slurm_node_info returns, got %r"
                                   % (host, slurm))
    expected = expected_gres(profile)
    return [_slurmd_check(host, slurm), _gres_check(host, profile, slurm, expected), _state_check(host, slurm),
            _smoke_check(host, slurm), _nccl_check(host, slurm)]
