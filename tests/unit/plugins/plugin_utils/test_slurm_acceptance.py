# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugin_utils/slurm_acceptance.py: every verdict, on what slurm_scontrol.observe reads from the real
Slurm 22.05.8 / 23.11.4 captures (tests/fixtures/slurm/scontrol), failing ones included."""

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import slurm_scontrol
from ansible_collections.gpucloud.fleet.plugins.module_utils.nccl_tests import parse_nccl_tests
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance, slurm, slurm_acceptance
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text
from ansible_collections.gpucloud.fleet.tests.unit.plugins.plugin_utils.test_slurm import (
    MIG_PROFILE, example_profile, h200_lab, mig_node)

BUILDS = ("ubuntu2404", "debian12")
HOSTS = {"ubuntu2404": "sa-u2404", "debian12": "sa-d12"}
# The lab clusters' profile: two H200 device files, gres.conf Type=h200 (tests/fixtures/slurm/scontrol/README.source).
LAB = {"name": "lab_h200x2", "gpu_model": "H200", "gpu_count": 2, "mig": False}


def capture(build, name):
    return fixture_text("slurm", "scontrol", build, name)


def fake_run(build, node="node-idle.txt", smoke="smoke-gpu1.txt", slurmd="active", mpi=None, nccl_answer=None):
    """Answers the commands observe() runs from one build's captures."""
    def run(argv):
        if argv[0] == "systemctl":
            return (0 if slurmd == "active" else 3), slurmd + "\n", ""
        if argv[:3] == ["scontrol", "show", "node"]:
            if node == "node-unknown.txt":
                return 1, "", capture(build, node).split("rc=")[0]
            return 0, capture(build, node), ""
        if argv[0] == "sinfo":
            return 0, capture(build, "sinfo-drain.txt" if "drain" in node else "sinfo-idle.txt"), ""
        if argv == ["srun", "--mpi=list"]:
            return 0, mpi if mpi is not None else capture(build, "mpi-list.txt"), ""
        if argv[:2] == ["srun", "--mpi=pmix"]:
            return nccl_answer
        if argv[0] == "srun":
            return (0, capture(build, smoke), "") if not smoke.startswith("srun:") else (1, "", smoke)
        raise AssertionError("unexpected command %r" % (argv,))
    return run


def judged(build="ubuntu2404", profile=None, smoke_gpus=1, nccl=None, check_mode=False, **answers):
    seen = slurm_scontrol.observe(fake_run(build, **answers), HOSTS[build], smoke_gpus=smoke_gpus, nccl=nccl,
                                  check_mode=check_mode, nccl_parse=parse_nccl_tests)
    checks = slurm_acceptance.checks(HOSTS[build], profile or LAB, seen)
    assert [c["check"] for c in checks] == list(slurm_acceptance.CHECKS)
    return dict((c["check"], c) for c in checks)


@pytest.mark.parametrize("build", BUILDS)
def test_a_healthy_lab_node_passes(build):
    checks = judged(build)
    assert [checks[name]["status"] for name in slurm_acceptance.CHECKS] == ["pass", "pass", "pass", "pass", "n/a"]
    assert checks["slurm.gres"]["detail"] == "registered with Gres=gpu:h200:2, as profile lab_h200x2 gives"
    assert "CUDA_VISIBLE_DEVICES=0" in checks["slurm.smoke"]["detail"]
    assert "its cgroup denies /dev/nvidia1" in checks["slurm.smoke"]["detail"]


@pytest.mark.parametrize("build", BUILDS)
def test_two_gpu_smoke_job_passes(build):
    assert judged(build, smoke_gpus=2, smoke="smoke-gpu2.txt")["slurm.smoke"]["status"] == "pass"


@pytest.mark.parametrize("build", BUILDS)
def test_drained_node_fails_and_names_its_reason(build):
    check = judged(build, node="node-drain.txt")["slurm.state"]
    assert check["status"] == "fail"
    assert check["detail"] == ("state IDLE+DRAIN (drain), reason: gpucloud prolog: GPU1 Xid 79 fallen off the bus "
                               "(set by root at 2026-12-03T20:24:49)")


@pytest.mark.parametrize("build", BUILDS)
def test_down_node_fails_with_its_reason(build):
    check = judged(build, node="node-down.txt")["slurm.state"]
    assert check["status"] == "fail" and "(down, drain), reason: maintenance" in check["detail"]


@pytest.mark.parametrize("build", BUILDS)
def test_drain_without_a_reason_says_so(build):
    text = capture(build, "node-drain.txt")
    stripped = text[:text.index(" Reason=")] + "\n"

    def run(argv):
        if argv[:3] == ["scontrol", "show", "node"]:
            return 0, stripped, ""
        return fake_run(build)(argv)
    seen = slurm_scontrol.observe(run, HOSTS[build])
    check = dict((c["check"], c) for c in slurm_acceptance.checks(HOSTS[build], LAB, seen))["slurm.state"]
    assert check["status"] == "fail" and "without a reason" in check["detail"]


def test_a_resumed_node_with_an_old_reason_passes():
    # Slurm 23.11 keeps the last reason on a resumed node: an IDLE node is judged by its state.
    check = judged("ubuntu2404", node="node-resumed.txt")["slurm.state"]
    assert check["status"] == "pass"


@pytest.mark.parametrize("build", BUILDS)
def test_busy_node_passes(build):
    assert judged(build, node="node-mixed.txt")["slurm.state"]["detail"] == "state MIXED"


def test_not_responding_fails():
    text = capture("debian12", "node-idle.txt").replace("State=IDLE ", "State=IDLE* ")

    def run(argv):
        if argv[:3] == ["scontrol", "show", "node"]:
            return 0, text, ""
        return fake_run("debian12")(argv)
    seen = slurm_scontrol.observe(run, "sa-d12")
    check = slurm_acceptance.checks("sa-d12", LAB, seen)[2]
    assert check["status"] == "fail" and "not_responding" in check["detail"]


@pytest.mark.parametrize("build", BUILDS)
def test_unregistered_node_fails(build):
    checks = judged(build, node="node-unknown.txt")
    assert checks["slurm.gres"]["status"] == "fail"
    assert "Node nosuchnode not found" in checks["slurm.gres"]["detail"]
    assert checks["slurm.state"]["status"] == "fail"


@pytest.mark.parametrize("build", BUILDS)
def test_stopped_slurmd_fails(build):
    checks = judged(build, slurmd=capture(build, "slurmd-stopped.txt").strip())
    assert checks["slurm.slurmd"]["status"] == "fail"
    assert checks["slurm.slurmd"]["detail"] == "slurmd is inactive (systemctl is-active slurmd)"


@pytest.mark.parametrize("build", BUILDS)
def test_profile_with_more_gpus_than_registered_fails(build):
    check = judged(build, profile=dict(LAB, gpu_count=8))["slurm.gres"]
    assert check["status"] == "fail"
    assert "registered with Gres=gpu:h200:2, profile lab_h200x2 gives gpu:h200:8" in check["detail"]


def test_profile_with_another_gres_type_fails():
    check = judged(profile=dict(LAB, slurm={"gres_type": "h200_141gb"}))["slurm.gres"]
    assert check["status"] == "fail" and "gives gpu:h200_141gb:2" in check["detail"]


def test_mps_profile_expects_the_mps_shares():
    check = judged(profile=dict(LAB, sharing={"mode": "mps", "replicas": 4}))["slurm.gres"]
    assert check["status"] == "fail" and "gives gpu:h200:2,mps:8" in check["detail"]


@pytest.mark.parametrize("build", BUILDS)
def test_smoke_job_that_sees_every_gpu_fails(build):
    # Without ConstrainDevices a one-GPU job can open both device files: the 2-GPU capture stands for it.
    check = judged(build, smoke_gpus=1, smoke="smoke-gpu2.txt")["slurm.smoke"]
    assert check["status"] == "fail"
    assert "asked for 1, got 2 GPUs visible and 2 GPU device files open to it" in check["detail"]


def test_smoke_job_that_could_not_start_fails():
    check = judged(smoke_gpus=2, smoke="srun: error: Unable to allocate resources: Requested node configuration "
                                       "is not available")["slurm.smoke"]
    assert check["status"] == "fail" and "Requested node configuration is not available" in check["detail"]


def test_smoke_job_not_asked_or_in_check_mode_is_skipped():
    assert judged(smoke_gpus=0)["slurm.smoke"]["status"] == "skipped"
    check = judged(check_mode=True)["slurm.smoke"]
    assert check["status"] == "skipped" and "check mode" in check["detail"]


NCCL = {"nodes": 2, "gpus_per_node": 4, "command": ["all_reduce_perf", "-b", "8", "-e", "128M", "-f", "2"]}
# A real srun -N2 --mpi=pmix --ntasks-per-node=4 all_reduce_perf run (CSCS Alps, 2 x 4 GH200; its .source).
CSCS = fixture_text("public", "nccl_tests", "gh200-2node-8gpu-slingshot-cxi-2.17.1-cscs.txt")


def test_nccl_not_asked_is_not_judged():
    assert judged()["slurm.nccl_pmix"]["status"] == "n/a"


def test_nccl_not_available_without_pmix():
    mpi = "".join(line + "\n" for line in capture("debian12", "mpi-list.txt").splitlines() if "pmix" not in line)
    check = judged("debian12", nccl=NCCL, mpi=mpi)["slurm.nccl_pmix"]
    assert check["status"] == "n/a" and check["detail"].startswith("not available")


@pytest.mark.parametrize("build", BUILDS)
def test_nccl_through_pmix_that_fails_to_start_fails(build):
    # The lab's builds list pmix but lack libpmix (README.source): srun --mpi=pmix fails there.
    check = judged(build, nccl=NCCL, nccl_answer=(1, "", "srun: error: mpi/pmix_v5: can not load PMIx library\n"))
    assert check["slurm.nccl_pmix"]["status"] == "fail"
    assert "can not load PMIx library" in check["slurm.nccl_pmix"]["detail"]


def test_nccl_through_pmix_passes_on_a_real_two_node_run():
    check = judged(nccl=NCCL, nccl_answer=(0, CSCS, ""))["slurm.nccl_pmix"]
    assert check["status"] == "pass" and check["detail"].startswith("8 ranks, average bus bandwidth 19.7866")


def test_nccl_with_fewer_ranks_than_asked_fails():
    check = judged(nccl=dict(NCCL, nodes=4), nccl_answer=(0, CSCS, ""))["slurm.nccl_pmix"]
    assert check["status"] == "fail" and "8 ranks ran, 4 nodes x 4 GPUs asked" in check["detail"]


def test_nccl_with_wrong_elements_fails():
    bad = CSCS.replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED")
    check = judged(nccl=NCCL, nccl_answer=(0, bad, ""))["slurm.nccl_pmix"]
    assert check["status"] == "fail" and "out of bounds" in check["detail"]


def test_nccl_in_check_mode_is_skipped():
    assert judged(nccl=NCCL, check_mode=True)["slurm.nccl_pmix"]["status"] == "skipped"


def test_unknown_mig_model_is_refused():
    with pytest.raises(slurm_acceptance.SlurmAcceptanceError, match="not a MIG GPU"):
        slurm_acceptance.expected_gres({"name": "x", "gpu_model": "T4", "gpu_count": 1,
                                        "mig": {"strategy": "single", "layout": "all-1g.5gb"}})


@pytest.mark.parametrize("profile", [None, {"name": "x", "gpu_model": "H200", "gpu_count": 0},
                                     {"name": "x", "gpu_model": "H200", "gpu_count": "eight"}])
def test_bad_profiles_are_refused(profile):
    with pytest.raises(slurm_acceptance.SlurmAcceptanceError):
        slurm_acceptance.expected_gres(profile)


def test_expected_gres_is_the_gres_plan_of_the_example_h200_node():
    topo, node = h200_lab()
    profile = example_profile("h200_sxm")
    assert slurm_acceptance.expected_gres(profile) == slurm.gres_plan(profile, topo, None, node)["counts"] \
        == {"gpu:h200": 8}


def test_expected_gres_of_a_mig_profile_is_the_gres_plan_once_applied():
    one_gpu = {"gpus": ["GPU0"], "affinity": {}}
    planned = slurm.gres_plan(MIG_PROFILE, one_gpu, None, mig_node())["counts"]
    assert slurm_acceptance.expected_gres(MIG_PROFILE) == planned == {"gpu:1g.5gb": 7}


def test_acceptance_evaluate_adds_the_slurm_checks_only_when_observed():
    profile = dict(LAB)
    plain = [c["check"] for c in acceptance.evaluate("n1", profile, {}, {})]
    assert plain == list(acceptance.CHECKS)
    seen = slurm_scontrol.observe(fake_run("debian12", node="node-drain.txt"), "sa-d12")
    checks = acceptance.evaluate("sa-d12", profile, {}, {"slurm": seen})
    assert [c["check"] for c in checks] == list(acceptance.CHECKS) + list(slurm_acceptance.CHECKS)
    assert [c["status"] for c in checks if c["check"] == "slurm.state"] == ["fail"]


def test_acceptance_evaluate_names_a_bad_slurm_observation():
    with pytest.raises(acceptance.AcceptanceError, match="Slurm observation"):
        acceptance.evaluate("n1", dict(LAB), {}, {"slurm": "registered"})
