# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/slurm_gpu_node/files/gpucloud-slurm-gpu-health: the checks Slurm's Prolog, Epilog and
HealthCheckProgram run (issue 31), on nvidia-smi answers of the lab's nvsim and kernel log records."""

import importlib.machinery
import importlib.util
import json
import os

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT

PROGRAM = os.path.join(ROOT, "roles", "slurm_gpu_node", "files", "gpucloud-slurm-gpu-health")


def load():
    loader = importlib.machinery.SourceFileLoader("slurm_gpu_health", PROGRAM)
    spec = importlib.util.spec_from_loader("slurm_gpu_health", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


health = load()
HEALTHY = "0, 0\n1, 0\n"
XID = ("4,1201,98765432,-;NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, "
       "GPU has fallen off the bus.\n SUBSYSTEM=pci\n")


def test_a_healthy_answer_has_no_problem():
    assert health.smi_problems(0, HEALTHY, "", 2) == []


@pytest.mark.parametrize("rc, out, err, problem", [
    (9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
     "nvidia-smi exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
    (0, "0, 0\n", "", "nvidia-smi shows 1 GPUs, expected 2"),
    (0, "0, 0\n1, 1\n", "", "GPU1 has 1 uncorrectable ECC errors"),
])
def test_each_failure_names_what_failed(rc, out, err, problem):
    assert health.smi_problems(rc, out, err, 2) == [problem]


def test_n_a_ecc_counters_are_not_errors():
    assert health.smi_problems(0, "0, [N/A]\n1, [N/A]\n", "", 2) == []


def test_xids_since_boot_then_only_new_ones():
    records = health.kmsg_records(["6,1200,98765000,-;usb 1-1: new device\n", XID])
    assert health.new_xids(records, None) == (["Xid 79 on PCI:0000:18:00"], 1201)
    assert health.new_xids(records, 1201) == ([], 1201)
    later = records + health.kmsg_records(["4,1300,99999999,-;NVRM: Xid (PCI:0000:2a:00): 48, pid=1, DBE\n"])
    assert health.new_xids(later, 1201) == (["Xid 48 on PCI:0000:2a:00"], 1300)


V1_JOB = "5:devices:/slurm/uid_1000/job_%s/step_0/task_0\n1:cpu:/\n"
V2_JOB = "0::/system.slice/slurmstepd.scope/job_%s/step_batch/user/task_0\n"


def test_leftover_gpu_processes_of_the_job_are_named_and_others_are_not():
    holders = {
        4242: ("python3", ["/dev/nvidia0", "/dev/nvidiactl", "/dev/null"], 1000, V1_JOB % 77),
        4243: ("torchrun", ["/dev/nvidia1"], 1000, V2_JOB % 77),
        # escaped the job's cgroup, still the job's user
        4300: ("python3", ["/dev/nvidia2"], 1000, "0::/user.slice/user-1000.slice/session-4.scope\n"),
        # another job of the same user, still running
        5000: ("python3", ["/dev/nvidia3"], 1000, V2_JOB % 78),
        # the drivers' daemons: system users, no job
        800: ("nvidia-persiste", ["/dev/nvidia0", "/dev/nvidiactl"], 118, "0::/system.slice/nvidia-persistenced.service\n"),
        801: ("nvidia-cuda-mps", ["/dev/nvidia0"], 0, "0::/system.slice/nvidia-mps.service\n"),
        17: ("bash", ["/dev/pts/0"], 1000, V2_JOB % 77),
        99: ("slurm-gpu-health", ["/dev/nvidia1"], 0, V2_JOB % 77),
    }
    assert health.leftover_processes(holders, "77", 1000, (99,)) == [
        "pid 4242 (python3) still holds /dev/nvidia0",
        "pid 4243 (torchrun) still holds /dev/nvidia1",
        "pid 4300 (python3) still holds /dev/nvidia2",
    ]
    # A root job: only its own cgroup tells.
    assert health.leftover_processes(holders, "78", 0) == ["pid 5000 (python3) still holds /dev/nvidia3"]


def test_the_drain_reason_is_one_quoted_safe_line():
    reason = health.drain_reason("prolog", ["nvidia-smi exit 9: it's \"down\"\nnow", "x" * 300])
    assert reason.startswith("gpucloud prolog: nvidia-smi exit 9: it s  down  now; x")
    assert len(reason) == health.REASON_MAX and reason.endswith("...")


def run_main(monkeypatch, tmp_path, mode, smi, holders=None, kmsg=None):
    config = tmp_path / "health.json"
    config.write_text(json.dumps({"expected_gpus": 2, "state_dir": str(tmp_path / "state")}))
    monkeypatch.setattr(health, "CONFIG", str(config))
    calls = []

    class Done:
        def __init__(self, returncode, stdout="", stderr=""):
            self.returncode, self.stdout, self.stderr = returncode, stdout, stderr

    def fake_run(argv, **_kwargs):
        calls.append(argv)
        return Done(*smi) if argv[0] == "nvidia-smi" else Done(0)

    monkeypatch.setattr(health.subprocess, "run", fake_run)
    monkeypatch.setattr(health, "read_kmsg", lambda: kmsg)
    monkeypatch.setattr(health, "device_holders", lambda: holders or {})
    monkeypatch.setenv("SLURMD_NODENAME", "slurm-gpu1")
    return health.main([mode]), calls


def test_prolog_drains_with_the_reason_and_fails(monkeypatch, tmp_path):
    code, calls = run_main(monkeypatch, tmp_path, "prolog", (0, "0, 1\n1, 0\n"))
    assert code == 1
    assert calls[-1] == ["scontrol", "update", "NodeName=slurm-gpu1", "State=DRAIN",
                         "Reason=gpucloud prolog: GPU0 has 1 uncorrectable ECC errors"]


def test_a_healthy_prolog_changes_nothing(monkeypatch, tmp_path):
    code, calls = run_main(monkeypatch, tmp_path, "prolog", (0, HEALTHY), kmsg=[])
    assert code == 0 and [call[0] for call in calls] == ["nvidia-smi"]


def test_the_epilog_reads_no_nvidia_smi_and_finds_leftovers_and_xids(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_JOB_UID", "1000")
    code, calls = run_main(monkeypatch, tmp_path, "epilog", (9, "", "no driver"),
                           holders={4242: ("python3", ["/dev/nvidia1"], 1000, V2_JOB % 77)}, kmsg=[XID])
    assert code == 1
    assert calls == [["scontrol", "update", "NodeName=slurm-gpu1", "State=DRAIN",
                      "Reason=gpucloud epilog: new Xid 79 on PCI:0000:18:00; pid 4242 (python3) still holds /dev/nvidia1"]]
    # The Xid is reported once: the next run starts after it.
    code, calls = run_main(monkeypatch, tmp_path, "epilog", (0, ""), kmsg=[XID])
    assert code == 0 and calls == []


def test_an_unknown_mode_is_refused(monkeypatch, tmp_path):
    assert health.main(["postlog"]) == 2
