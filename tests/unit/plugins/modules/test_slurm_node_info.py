# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.slurm_node_info over the Slurm 22.05 / 23.11 captures (tests/fixtures/slurm/scontrol)."""

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.slurm_scontrol import SINFO_FORMAT, SMOKE_SCRIPT
from ansible_collections.gpucloud.fleet.plugins.modules import slurm_node_info
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import FakeCommands, fixture_text, run_module

SCONTROL, SINFO, SRUN, SYSTEMCTL = "/usr/bin/scontrol", "/usr/bin/sinfo", "/usr/bin/srun", "/usr/bin/systemctl"


def capture(name, build="ubuntu2404"):
    return fixture_text("slurm", "scontrol", build, name)


def commands(node="node-idle.txt", smoke="smoke-gpu1.txt", slurmd="active\n", build="ubuntu2404", extra=None):
    table = {
        (SYSTEMCTL, "is-active", "slurmd"): (0 if slurmd == "active\n" else 3, slurmd, ""),
        SCONTROL: (0, capture(node, build), ""),
        SINFO: (0, capture("sinfo-idle.txt", build), ""),
        SRUN: (0, capture(smoke, build), ""),
        (SRUN, "--mpi=list"): (0, capture("mpi-list.txt", build), ""),
    }
    table.update(extra or {})
    return FakeCommands(table)


def test_reads_the_node_and_runs_no_job_unless_asked():
    fake = commands()
    result = run_module(slurm_node_info, {"node": "sa-u2404"}, commands=fake)
    assert result["changed"] is False and "failed" not in result
    assert result["registered"] is True and result["slurmd"] == "active"
    assert result["node"]["gres_counts"] == {"gpu:h200": 2}
    assert result["partitions"][0]["partition"] == "gpu" and result["partitions"][0]["default"] is True
    assert result["smoke"] == {"asked": 0, "ran": False}
    assert [argv[1:] for argv, _env in fake.calls] == [
        ["is-active", "slurmd"], ["show", "node", "-o", "sa-u2404"], ["-N", "-h", "-n", "sa-u2404", "-o", SINFO_FORMAT]]
    assert all(env.get("LC_ALL") == "C" for _argv, env in fake.calls)


def test_smoke_job_asks_for_n_gpus_on_this_node():
    fake = commands()
    result = run_module(slurm_node_info, {"node": "sa-u2404", "smoke_gpus": 1}, commands=fake)
    srun = fake.calls[-1][0]
    assert srun[:2] == [SRUN, "-w"] and srun[2] == "sa-u2404" and "--gres=gpu:1" in srun
    assert srun[-3:] == ["sh", "-c", SMOKE_SCRIPT]
    assert result["smoke"]["ran"] is True
    assert result["smoke"]["cuda_visible_devices"] == ["0"] and result["smoke"]["denied"] == ["/dev/nvidia1"]


def test_check_mode_starts_no_job():
    fake = commands()
    result = run_module(slurm_node_info, {"node": "sa-u2404", "smoke_gpus": 1,
                                          "nccl": {"nodes": 2, "gpus_per_node": 1, "command": ["all_reduce_perf"]}},
                        commands=fake, check_mode=True)
    assert not any(argv[0] == SRUN for argv, _env in fake.calls)
    assert result["smoke"]["ran"] is False and "check mode" in result["smoke"]["skipped"]
    assert "check mode" in result["nccl"]["skipped"]


def test_unregistered_node_is_reported_not_failed():
    fake = commands(extra={SCONTROL: (1, "", capture("node-unknown.txt").split("rc=")[0]),
                           SINFO: (0, "", "")})
    result = run_module(slurm_node_info, {"node": "nosuchnode"}, commands=fake)
    assert "failed" not in result
    assert result["registered"] is False and result["node"] is None
    assert "Node nosuchnode not found" in result["error"]


def test_stopped_slurmd_is_reported():
    result = run_module(slurm_node_info, {"node": "sa-d12"}, commands=commands(build="debian12",
                                                                               slurmd=capture("slurmd-stopped.txt",
                                                                                              "debian12")))
    assert result["slurmd"] == "inactive"


def test_failed_smoke_job_is_reported():
    message = "srun: error: Unable to allocate resources: Requested node configuration is not available\n"
    fake = commands(extra={SRUN: (1, "", message)})
    result = run_module(slurm_node_info, {"node": "sa-u2404", "smoke_gpus": 4}, commands=fake)
    assert result["smoke"]["ran"] is True and result["smoke"]["rc"] == 1
    assert "Requested node configuration is not available" in result["smoke"]["error"]


def test_nccl_without_pmix_is_not_available():
    no_pmix = "MPI plugin types are...\n\tnone\n\tpmi2\n"
    fake = commands(extra={(SRUN, "--mpi=list"): (0, no_pmix, "")})
    result = run_module(slurm_node_info, {"node": "sa-u2404",
                                          "nccl": {"nodes": 2, "gpus_per_node": 8, "command": ["all_reduce_perf"]}},
                        commands=fake)
    assert result["mpi"]["pmix"] is False
    assert result["nccl"]["ran"] is False and result["nccl"]["skipped"].startswith("not available")
    assert not any("--mpi=pmix" in argv for argv, _env in fake.calls)


def test_nccl_runs_through_pmix_where_listed():
    fake = commands(extra={SRUN: (1, "", "srun: error: mpi/pmix_v5: can not load PMIx library\n")})
    result = run_module(slurm_node_info, {"node": "sa-u2404",
                                          "nccl": {"nodes": 2, "gpus_per_node": 8,
                                                   "command": ["all_reduce_perf", "-b", "8", "-e", "1G"]}},
                        commands=fake)
    srun = fake.calls[-1][0]
    assert srun[:4] == [SRUN, "--mpi=pmix", "-N", "2"] and "--ntasks-per-node=8" in srun and "--gres=gpu:8" in srun
    assert srun[-5:] == ["all_reduce_perf", "-b", "8", "-e", "1G"]
    assert result["nccl"]["ran"] is True and "can not load PMIx library" in result["nccl"]["error"]


@pytest.mark.parametrize("args, message", [
    ({"smoke_gpus": -1}, "smoke_gpus"),
    ({"nccl": {"nodes": 0, "gpus_per_node": 8, "command": ["x"]}}, "nccl.nodes"),
])
def test_bad_arguments_fail_before_any_command(args, message):
    fake = FakeCommands()
    result = run_module(slurm_node_info, dict(args, node="n1"), commands=fake)
    assert result["failed"] and message in result["msg"]
    assert fake.calls == []
