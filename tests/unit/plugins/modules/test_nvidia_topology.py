# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import nvidia_topology
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import (
    DRIVER_NOT_LOADED,
    FakeCommands,
    fixture_path,
    fixture_text,
    run_module,
)

SMI = "/usr/bin/nvidia-smi"
TOPO = (SMI, "topo", "-m")
H200_TOPO = ("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt")
DGX_A100 = ("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
H800 = ("public", "topo", "h800-4of8-gpu-nv8-17nic-container-empty-affinity-verl.txt")


def test_runs_nvidia_smi_with_c_locale():
    commands = FakeCommands({TOPO: (0, fixture_text(*H200_TOPO), "")})
    result = run_module(nvidia_topology, {}, commands=commands, binaries=("nvidia-smi",))
    assert commands.calls == [([SMI, "topo", "-m"], {"LC_ALL": "C"})]
    assert result["changed"] is False
    assert result["source"] == "nvidia-smi"
    assert result["topology"]["gpus"] == ["GPU0"]
    assert result["affinity"] == {"GPU0": {"cpus": "0-15", "numa": "0", "gpu_numa_id": "N/A"}}
    assert (result["gpu_count"], result["nic_count"], result["nvlink_pairs"], result["mismatches"]) == (1, 0, [], [])


def test_check_mode_reads_all_the_same():
    commands = FakeCommands({TOPO: (0, fixture_text(*H200_TOPO), "")})
    normal = run_module(nvidia_topology, {}, commands=commands, binaries=("nvidia-smi",))
    checked = run_module(nvidia_topology, {}, check_mode=True, commands=commands, binaries=("nvidia-smi",))
    assert checked == normal


def test_src_file_of_a_dgx_a100_matching_its_profile():
    result = run_module(nvidia_topology, {
        "src": fixture_path(*DGX_A100),
        "expect": {"gpu_count": 8, "nic_count": 8, "min_nvlinks": 12, "max_nic_distance": "PXB",
                   "require_affinity": True},
    })
    assert "failed" not in result
    assert result["source"] == "src"
    assert len(result["nvlink_pairs"]) == 28
    assert result["nvlink_pairs"][0] == {"gpus": ["GPU0", "GPU1"], "links": 12}
    assert [nic["name"] for nic in result["nearest_nics"]["GPU4"][:2]] == ["mlx5_4", "mlx5_5"]
    assert result["affinity"]["GPU4"] == {"cpus": "32-63,96-127", "numa": "1", "gpu_numa_id": None}


def test_topology_text_against_an_hgx_h200_profile_lists_every_mismatch():
    result = run_module(nvidia_topology, {
        "topology_text": fixture_text(*H800),
        "expect": {"gpu_count": 8, "min_nvlinks": 18, "max_nic_distance": "PXB", "require_affinity": True},
    })
    assert result["failed"] is True
    assert result["source"] == "topology_text"
    assert result["mismatches"][0] == "expected 8 GPUs, found 4"
    assert result["mismatches"][1] == "GPU0-GPU1: NV8, expected at least NV18"
    assert result["mismatches"][-1] == "GPU3: no CPU or NUMA affinity reported"
    assert len(result["mismatches"]) == 1 + 6 + 4
    assert result["msg"].startswith("topology does not match the expected profile (11 mismatches): expected 8 GPUs")
    assert result["topology"]["nics"][16] == "NIC16"


def test_h200_single_gpu_without_nic():
    result = run_module(nvidia_topology, {
        "src": fixture_path(*H200_TOPO),
        "expect": {"gpu_count": 1, "max_nic_distance": "SYS"},
    })
    assert result["mismatches"] == ["GPU0: no NIC in the topology, expected one at most SYS away"]


def test_driver_not_loaded():
    commands = FakeCommands({TOPO: (9, DRIVER_NOT_LOADED, "")})
    result = run_module(nvidia_topology, {}, commands=commands, binaries=("nvidia-smi",))
    assert result["failed"] is True
    assert result["rc"] == 9
    assert result["msg"].startswith("nvidia-smi topo -m failed (rc=9): NVIDIA-SMI has failed")


def test_no_nvidia_smi():
    result = run_module(nvidia_topology, {})
    assert result["msg"] == "Failed to find required executable nvidia-smi"


def test_not_a_topology():
    result = run_module(nvidia_topology, {"src": fixture_path("h200-ubuntu2404-driver580", "nvidia-smi_topo_-p2p_r.txt")})
    assert result["msg"].startswith("cannot parse nvidia-smi topo -m output from src: this is a `nvidia-smi topo -p2p`")


def test_truncated_capture_fails_instead_of_reporting_fewer_nics():
    text = fixture_text(*DGX_A100)
    result = run_module(nvidia_topology, {"topology_text": text[:text.index("  NIC4: mlx5_4")]})
    assert result["failed"] is True
    assert result["msg"] == ("cannot parse nvidia-smi topo -m output from topology_text: "
                             "the NIC Legend lacks NIC4, NIC5, NIC6, NIC7 (truncated output?)")
    assert "topology" not in result


def test_unreadable_src(tmp_path):
    result = run_module(nvidia_topology, {"src": str(tmp_path / "absent.txt")})
    assert result["msg"].startswith("cannot read src %s" % (tmp_path / "absent.txt"))


@pytest.mark.parametrize("args, message", [
    ({"src": "/a", "topology_text": "b"}, "parameters are mutually exclusive: src|topology_text"),
    ({"expect": {"max_nic_distance": "NEAR"}}, "value of max_nic_distance must be one of: PIX, PXB, PHB, NODE, SYS"),
    ({"expect": {"gpu_count": "eight"}}, "gpu_count"),
    ({"expect": {"nvlinks": 18}}, "Unsupported parameters"),
])
def test_bad_arguments(args, message):
    result = run_module(nvidia_topology, args)
    assert result["failed"] is True
    assert message in result["msg"]


def test_non_utf8_src_fails_cleanly(tmp_path):
    path = tmp_path / "topo.txt"
    path.write_bytes(b"\tGPU0\tNIC0\nGPU0\t X \tPIX\n\xff\xfe\x00binary")
    result = run_module(nvidia_topology, {"src": str(path)})
    assert result["failed"] is True
    assert result["msg"].startswith("src %s is not UTF-8 text" % path)
