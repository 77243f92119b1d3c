# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/slurm_scontrol.py on real Slurm 22.05.8 and 23.11.4 output (tests/fixtures/slurm/scontrol)."""

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import slurm_scontrol as sc
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

BUILDS = ("ubuntu2404", "debian12")
HOSTS = {"ubuntu2404": "sa-u2404", "debian12": "sa-d12"}
VERSIONS = {"ubuntu2404": "23.11.4", "debian12": "22.05.8"}


def capture(build, name):
    return fixture_text("slurm", "scontrol", build, name)


@pytest.mark.parametrize("build", BUILDS)
def test_idle_node(build):
    node = sc.parse_node(capture(build, "node-idle.txt"))
    assert node["name"] == HOSTS[build]
    assert node["state"] == {"text": "IDLE", "base": "idle", "flags": [], "not_responding": False}
    assert node["reason"] is None
    assert node["gres_counts"] == {"gpu:h200": 2}
    assert node["gres"] == [{"name": "gpu", "type": "h200", "count": 2, "sockets": None}]
    assert node["partitions"] == ["gpu"]
    assert node["version"] == VERSIONS[build]
    assert node["cpus"] == 2
    assert node["cfg_tres"] == {"cpu": "2", "mem": "1M", "billing": "2"}
    assert node["alloc_tres"] == {}
    # OS= holds spaces: the words without '=' belong to it, not to a key of their own.
    assert node["fields"]["OS"] == "Linux 6.18.44-fc-v1147 #1 SMP PREEMPT_DYNAMIC @0"
    assert node["fields"]["RealMemory"] == "1"


@pytest.mark.parametrize("build", BUILDS)
def test_drained_node_keeps_its_whole_reason(build):
    node = sc.parse_node(capture(build, "node-drain.txt"))
    assert node["state"]["base"] == "idle" and node["state"]["flags"] == ["drain"]
    assert node["reason"] == "gpucloud prolog: GPU1 Xid 79 fallen off the bus"
    assert node["reason_by"] == "root"
    assert node["reason_at"] == "2026-12-03T20:24:49"


@pytest.mark.parametrize("build", BUILDS)
def test_down_node(build):
    node = sc.parse_node(capture(build, "node-down.txt"))
    assert node["state"]["base"] == "down" and node["state"]["flags"] == ["drain"]
    assert node["reason"] == "maintenance"


@pytest.mark.parametrize("build", BUILDS)
def test_node_with_a_job_has_its_allocation(build):
    node = sc.parse_node(capture(build, "node-mixed.txt"))
    assert node["state"]["base"] == "mixed"
    assert node["alloc_tres"] == {"cpu": "1", "mem": "1M"}


def test_resumed_node_may_keep_an_old_reason():
    # Slurm 23.11 leaves the reason of the last drain on the resumed node; 22.05 clears it.
    assert sc.parse_node(capture("ubuntu2404", "node-resumed.txt"))["reason"] == "maintenance"
    assert sc.parse_node(capture("debian12", "node-resumed.txt"))["reason"] is None


@pytest.mark.parametrize("build", BUILDS)
def test_unknown_node_is_refused(build):
    text = capture(build, "node-unknown.txt").split("rc=")[0]
    with pytest.raises(ValueError, match="NodeName="):
        sc.parse_node(text)


def test_a_reason_holding_equals_signs_stays_one_value():
    line = capture("ubuntu2404", "node-drain.txt").replace(
        "gpucloud prolog: GPU1 Xid 79 fallen off the bus", "health check rc=3 Xid=79 GPU=1")
    node = sc.parse_node(line)
    assert node["reason"] == "health check rc=3 Xid=79 GPU=1"
    assert "Xid" not in node["fields"] and "GPU" not in node["fields"]


def test_reason_without_user_and_time():
    line = capture("debian12", "node-down.txt").replace(" [root@2026-12-03T20:24:50]", "")
    node = sc.parse_node(line)
    assert node["reason"] == "maintenance" and node["reason_by"] is None


def test_several_lines_are_refused():
    with pytest.raises(ValueError, match="one line"):
        sc.parse_node(capture("debian12", "node-idle.txt") * 2)
    with pytest.raises(ValueError, match="one line"):
        sc.parse_node("")


@pytest.mark.parametrize("text, expected", [
    ("IDLE", ("idle", [], False)),
    ("IDLE+DRAIN", ("idle", ["drain"], False)),
    ("DOWN*+DRAIN", ("down", ["drain"], True)),
    ("MIXED+DRAIN", ("mixed", ["drain"], False)),
    ("ALLOCATED", ("allocated", [], False)),
    ("IDLE+NOT_RESPONDING", ("idle", ["not_responding"], True)),
    ("FUTURE", ("future", [], False)),
    ("DOWN+FAIL", ("down", ["fail"], False)),
])
def test_states(text, expected):
    state = sc.parse_state(text)
    assert (state["base"], state["flags"], state["not_responding"]) == expected


@pytest.mark.parametrize("text", ["", "idle", "IDLE DRAIN", "IDLE+", None])
def test_bad_states(text):
    with pytest.raises(ValueError):
        sc.parse_state(text)


@pytest.mark.parametrize("text, counts", [
    ("gpu:h200:8(S:0-1)", {"gpu:h200": 8}),
    ("gpu:h200:4(S:0),gpu:h200:4(S:1)", {"gpu:h200": 8}),
    ("gpu:h200:8(S:0-1),mps:32(S:0-1)", {"gpu:h200": 8, "mps": 32}),
    ("gpu:1g.18gb:14,gpu:3g.71gb:4", {"gpu:1g.18gb": 14, "gpu:3g.71gb": 4}),
    ("gpu:2", {"gpu": 2}),
    ("mps:4K", {"mps": 4096}),
    ("gpu:a100:4(S:0,2)", {"gpu:a100": 4}),
    ("(null)", {}),
    ("", {}),
])
def test_gres(text, counts):
    assert sc.gres_counts(sc.parse_gres(text)) == counts


def test_gres_sockets():
    assert sc.parse_gres("gpu:a100:4(S:0,2)")[0]["sockets"] == "0,2"


@pytest.mark.parametrize("text", ["gpu", "gpu:h200:x", "gpu:h200:8(S:0-1", "GPU:2"])
def test_bad_gres(text):
    with pytest.raises(ValueError, match="GRES"):
        sc.parse_gres(text)


@pytest.mark.parametrize("build", BUILDS)
def test_sinfo(build):
    idle = sc.parse_sinfo(capture(build, "sinfo-idle.txt"))
    assert idle == [{"node": HOSTS[build], "partition": "gpu", "default": True, "state": "idle",
                     "gres": [{"name": "gpu", "type": "h200", "count": 2, "sockets": None}], "reason": None}]
    drained = sc.parse_sinfo(capture(build, "sinfo-drain.txt"))[0]
    assert drained["state"] == "drained"
    assert drained["reason"] == "gpucloud prolog: GPU1 Xid 79 fallen off the bus"


def test_bad_sinfo():
    with pytest.raises(ValueError, match="sinfo"):
        sc.parse_sinfo("sa-d12 gpu* idle gpu:h200:2 none\n")


@pytest.mark.parametrize("build", BUILDS)
def test_smoke_job_with_one_gpu_is_confined_to_it(build):
    smoke = sc.parse_smoke(capture(build, "smoke-gpu1.txt"))
    assert smoke["cuda_visible_devices"] == ["0"]
    assert smoke["allowed"] == ["/dev/nvidia0"]
    assert smoke["denied"] == ["/dev/nvidia1"]


@pytest.mark.parametrize("build", BUILDS)
def test_smoke_job_with_two_gpus(build):
    smoke = sc.parse_smoke(capture(build, "smoke-gpu2.txt"))
    assert smoke["cuda_visible_devices"] == ["0", "1"]
    assert smoke["allowed"] == ["/dev/nvidia0", "/dev/nvidia1"] and smoke["denied"] == []


def test_smoke_job_env_capture_agrees():
    env = dict(line.split("=", 1) for line in capture("ubuntu2404", "srun-gpu1-env.txt").splitlines())
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["SLURM_GPUS_ON_NODE"] == "1"


def test_smoke_job_devices_sort_by_number():
    text = "CUDA_VISIBLE_DEVICES=\n" + "".join(
        "device /dev/nvidia%d Operation not permitted\n" % n for n in (10, 2, 1))
    assert sc.parse_smoke(text)["denied"] == ["/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia10"]
    assert sc.parse_smoke(text)["cuda_visible_devices"] == []


@pytest.mark.parametrize("text", ["", "srun: error: Unable to allocate resources: Invalid generic resource (gres) "
                                      "specification\n"])
def test_smoke_output_that_is_not_the_script(text):
    with pytest.raises(ValueError):
        sc.parse_smoke(text)


@pytest.mark.parametrize("build, version", [("ubuntu2404", "pmix_v5"), ("debian12", "pmix_v4")])
def test_mpi_list(build, version):
    mpi = sc.parse_mpi_list(capture(build, "mpi-list.txt"))
    assert mpi["pmix"] is True
    assert set(mpi["types"]) == {"none", "pmix", "cray_shasta", "pmi2"}
    assert mpi["pmix_versions"] == [version]


def test_mpi_list_without_pmix():
    text = "".join(line + "\n" for line in capture("debian12", "mpi-list.txt").splitlines()
                   if "pmix" not in line)
    assert sc.parse_mpi_list(text)["pmix"] is False
    with pytest.raises(ValueError):
        sc.parse_mpi_list("srun: error: invalid MPI type 'list'\n")
