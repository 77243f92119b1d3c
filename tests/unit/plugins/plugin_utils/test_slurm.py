# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugin_utils/slurm.py: gres.conf, the slurm.conf node line and cgroup.conf of a GPU node (issue 31),
on the captured topologies and the lab's simulated HGX H200 (scripts/nvsim)."""

import os
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout, topology
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import slurm
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.gpu_sharing import gpu_sharing_plan
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

sys.path.insert(0, os.path.join(ROOT, "scripts", "nvsim"))

import build_repo  # noqa: E402  pylint: disable=wrong-import-position
import nvsim_smi  # noqa: E402  pylint: disable=wrong-import-position

SETTINGS = {"gpu_sharing_mig_tool": "nvidia-smi", "gpu_sharing_mig_parted_version": "0.15.0-1",
            "gpu_sharing_mps_host_daemon": True, "gpu_sharing_mps_active_thread_percentage": None,
            "gpu_sharing_mps_pinned_device_mem_limit": None}
# The setup module's answer on a 2 x 56-core HGX H200 host (ansible_processor_vcpus, _count, _cores,
# _threads_per_core, ansible_memtotal_mb), matching the affinity 0-55,112-167 / 56-111,168-223.
H200_NODE = {"cpus": 224, "sockets": 2, "cores": 56, "threads": 2, "memory_mb": 2063660}
# DGX A100 capture: CPUs 0-31,64-95 and 32-63,96-127, i.e. 2 x 32 cores x 2 threads.
A100_NODE = {"cpus": 128, "sockets": 2, "cores": 32, "threads": 2, "memory_mb": 1031912}
DGX_A100 = {"name": "dgx_a100", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8, "mig": False}


def example_profile(name):
    path = os.path.join(ROOT, "inventories", "example", "group_vars", name + ".yml")
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)["gpucloud_profile"]


def nvsim(argv, profile="h200-hgx8"):
    state = nvsim_smi.empty_state("580.159.04")
    state.update(module_version="580.159.04", profile=profile, persistenced=True)
    data = {key: fixture_text(build_repo.CAPTURES[path]) if path else None
            for key, path in ((key, nvsim_smi.PROFILES[profile][key]) for key in ("xml", "q", "table", "topo_legend"))}
    out = nvsim_smi.answer(argv, state, data)
    assert out["rc"] == 0
    return out["stdout"]


def h200_lab():
    """The lab's 8-GPU HGX H200 as nvidia-smi shows it: topology and each GPU's minor number."""
    topo = topology.parse_topo_matrix(nvsim(["topo", "-m"]))
    minors = [gpu["minor_number"] for gpu in mig_layout.parse_smi_xml(nvsim(["-q", "-x"]))]
    return topo, dict(H200_NODE, gpu_minors=minors)


def topo_fixture(name):
    return topology.parse_topo_matrix(fixture_text("public", "topo", name))


def test_hgx_h200_gres_conf_is_the_hand_checked_file():
    topo, node = h200_lab()
    profile = example_profile("h200_sxm")
    text = slurm.gres_conf(profile, topo, gpu_sharing_plan(profile, SETTINGS), node)
    assert text == fixture_text("slurm", "h200_sxm-hgx8.gres.conf")


def test_dgx_a100_capture_gres_conf_is_the_hand_checked_file():
    text = slurm.gres_conf(DGX_A100, topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt"), None, A100_NODE)
    assert text == fixture_text("slurm", "dgx-a100-8gpu.gres.conf")


def test_hgx_h200_node_line_is_the_hand_checked_line():
    topo, node = h200_lab()
    counts = slurm.gres_plan(example_profile("h200_sxm"), topo, None, node)["counts"]
    assert counts == {"gpu:h200": 8}
    assert slurm.node_line("gpu-h200-01", node, counts) + "\n" == fixture_text("slurm", "h200_sxm-hgx8.slurm.conf")


def test_device_files_follow_the_minor_numbers_not_the_index():
    # Della's 4-GPU A100 (CPUs 0-23 / 24-47, one thread per core) with the minor numbers 2, 3, 0, 1 of
    # the derived nvidia-smi -q -x whose GPUs are out of PCI order.
    minors = [gpu["minor_number"] for gpu in mig_layout.parse_smi_xml(
        fixture_text("derived", "h200-4gpu-minor-permuted-q-x.xml"))]
    assert minors == [2, 3, 0, 1]
    node = {"cpus": 48, "sockets": 2, "cores": 24, "threads": 1, "memory_mb": 515000, "gpu_minors": minors}
    profile = {"name": "della", "gpu_model": "A100-SXM4-80GB", "gpu_count": 4, "mig": False,
               "slurm": {"gres_type": "a100"}}
    plan = slurm.gres_plan(profile, topo_fixture("a100-sxm4-4gpu-nv4-1mlx5-princeton-della-cryoem.txt"), None, node)
    assert plan["lines"] == ["Name=gpu Type=a100 File=/dev/nvidia2 Cores=0-23",
                             "Name=gpu Type=a100 File=/dev/nvidia3 Cores=0-23",
                             "Name=gpu Type=a100 File=/dev/nvidia0 Cores=24-47",
                             "Name=gpu Type=a100 File=/dev/nvidia1 Cores=24-47"]
    assert plan["counts"] == {"gpu:a100": 4}


def test_a_container_without_affinity_gets_no_cores():
    profile = {"name": "h800", "gpu_model": "NVIDIA H800", "gpu_count": 4, "mig": False}
    lines = slurm.gres_plan(profile, topo_fixture("h800-4of8-gpu-nv8-17nic-container-empty-affinity-verl.txt"))["lines"]
    assert lines == ["Name=gpu Type=nvidia_h800 File=/dev/nvidia%d" % n for n in range(4)]


def test_mps_adds_one_mps_line_per_gpu_with_the_profiles_replicas():
    profile = {"name": "mps", "gpu_model": "GeForce RTX 3090", "gpu_count": 2, "mig": False,
               "sharing": {"mode": "mps", "replicas": 4}}
    node = {"cpus": 24, "sockets": 1, "cores": 12, "threads": 2, "memory_mb": 64000}
    plan = slurm.gres_plan(profile, topo_fixture("rtx3090-2gpu-nv4-bridge-ryzen5900x.txt"),
                           gpu_sharing_plan(profile, SETTINGS), node)
    assert plan["lines"] == ["Name=gpu Type=geforce_rtx_3090 File=/dev/nvidia0 Cores=0-11",
                             "Name=gpu Type=geforce_rtx_3090 File=/dev/nvidia1 Cores=0-11",
                             "Name=mps Count=4 File=/dev/nvidia0", "Name=mps Count=4 File=/dev/nvidia1"]
    assert plan["counts"] == {"gpu:geforce_rtx_3090": 2, "mps": 8}
    assert slurm.node_line("n1", node, plan["counts"]).endswith(" Gres=gpu:geforce_rtx_3090:2,mps:8")


# No capture of /proc/driver/nvidia-caps/mig-minors exists here: these lines stand for the entries the
# lookup needs (capability path, minor), in the file's "<path> <minor>" format.
MIG_MINORS = "".join("gpu0/gi%d/access %d\ngpu0/gi%d/ci0/access %d\n" % (gi, 100 + 2 * gi, gi, 101 + 2 * gi)
                     for gi in range(7, 14))
MIG_PROFILE = {"name": "a100_mig", "gpu_model": "A100-PCIE-40GB", "gpu_count": 1,
               "mig": {"strategy": "single", "layout": "all-1g.5gb"}}


def mig_node(**changes):
    node = {"cpus": 16, "sockets": 1, "cores": 16, "threads": 1, "memory_mb": 190000,
            "mig_instances": mig_layout.parse_lgi(fixture_text("public", "mig", "a100-pcie-40gb-lgi-all-1g.5gb-cloud-native-docs.txt")),
            "mig_minors": slurm.parse_mig_minors(MIG_MINORS)}
    node.update(changes)
    return node


def test_mig_gives_one_gres_per_mig_device_with_its_capability_files():
    one_gpu = topology.parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))
    plan = slurm.gres_plan(MIG_PROFILE, one_gpu, gpu_sharing_plan(MIG_PROFILE, SETTINGS), mig_node())
    assert plan["lines"] == ["Name=gpu Type=1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap%d,"
                             "/dev/nvidia-caps/nvidia-cap%d Cores=0-15" % (100 + 2 * gi, 101 + 2 * gi)
                             for gi in range(7, 14)]
    assert plan["counts"] == {"gpu:1g.5gb": 7}


@pytest.mark.parametrize("changes,message", [
    ({"mig_instances": None}, "node mig_instances"),
    ({"mig_minors": {}}, "node mig_minors has no gpu0/gi7/access"),
])
def test_mig_without_the_hosts_instances_or_capabilities_is_refused(changes, message):
    one_gpu = topology.parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))
    with pytest.raises(slurm.SlurmConfigError, match=message):
        slurm.gres_plan(MIG_PROFILE, one_gpu, None, mig_node(**changes))


def test_mig_instances_that_differ_from_the_layout_are_refused():
    one_gpu = topology.parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))
    node = mig_node()
    node["mig_instances"] = node["mig_instances"][:6]
    with pytest.raises(slurm.SlurmConfigError, match=r"GPU0 has MIG devices .*1g\.5gb', 6.* wants .*7"):
        slurm.gres_plan(MIG_PROFILE, one_gpu, None, node)


def test_an_unknown_mig_profile_is_refused():
    one_gpu = topology.parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))
    profile = dict(MIG_PROFILE, mig={"strategy": "single", "layout": "all-1g.10gb.xl"})
    with pytest.raises(slurm.SlurmConfigError, match=r"gpucloud_profile.mig: .*has no MIG profile 1g.10gb.xl"):
        slurm.gres_plan(profile, one_gpu, None, mig_node())


def test_a_topology_with_another_gpu_count_is_refused():
    one_gpu = topology.parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))
    with pytest.raises(slurm.SlurmConfigError, match=r"topology has 1 GPUs \(GPU0\), gpucloud_profile.gpu_count is 8"):
        slurm.gres_conf(example_profile("h200_sxm"), one_gpu, None, dict(H200_NODE))


def test_cores_outside_the_nodes_cpus_are_refused():
    node = dict(A100_NODE, cpus=64, sockets=1)
    with pytest.raises(slurm.SlurmConfigError, match=r"GPU0: CPU affinity 64-95 lies outside the node's CPUs 0-63"):
        slurm.gres_conf(DGX_A100, topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt"), None, node)


def test_part_of_a_socket_is_refused_unless_numa_nodes_are_sockets():
    node = dict(A100_NODE, sockets=1, cores=64)
    topo = topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt")
    with pytest.raises(slurm.SlurmConfigError, match=r"GPU0: cores 0-31 are part of socket 0 \(cores 0-63\)"):
        slurm.gres_plan(DGX_A100, topo, None, node)
    lines = slurm.gres_plan(DGX_A100, topo, None, dict(node, numa_node_as_socket=True))["lines"]
    assert [line.split("Cores=")[1] for line in lines] == ["0-31"] * 4 + ["32-63"] * 4


def test_affinity_without_node_facts_is_refused():
    with pytest.raises(slurm.SlurmConfigError, match=r"GPU0 has CPU affinity 0-31,64-95: the node facts"):
        slurm.gres_plan(DGX_A100, topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt"))


@pytest.mark.parametrize("node,message", [
    (dict(A100_NODE, gpu_minors=[0, 1]), "node gpu_minors must list the minor number of each of the 8 GPUs"),
    (dict(A100_NODE, gpu_minors=[0] * 8), "node gpu_minors repeats a minor number"),
    (dict(A100_NODE, cpus=120), r"node cpus 120 is not sockets 2 x cores 32 x threads 2"),
    (dict(A100_NODE, threads="two"), r"node threads must be a whole number, got 'two'"),
    ("a100", "the node facts must be a mapping"),
])
def test_bad_node_facts_are_refused(node, message):
    with pytest.raises(slurm.SlurmConfigError, match=message):
        slurm.gres_plan(DGX_A100, topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt"), None, node)


@pytest.mark.parametrize("profile,message", [
    (dict(DGX_A100, slurm={"gres_type": "a100:80g"}), r"gpucloud_profile.slurm.gres_type gives no usable GRES type"),
    (dict(DGX_A100, slurm={"gres_type": "a100\n"}), r"gpucloud_profile.slurm.gres_type gives no usable GRES type"),
    (dict(DGX_A100, gpu_model="A100, 80GB"), r"gpucloud_profile.gpu_model gives no usable GRES type"),
    (dict(DGX_A100, slurm="a100"), r"gpucloud_profile.slurm must be a mapping"),
    (dict(DGX_A100, gpu_count="eight"), r"gpucloud_profile.gpu_count must be a whole number"),
])
def test_bad_profiles_are_refused(profile, message):
    with pytest.raises(slurm.SlurmConfigError, match=message):
        slurm.gres_plan(profile, topo_fixture("dgx-a100-8gpu-8nic-roce-deepep13.txt"), None, A100_NODE)


def test_real_memory_keeps_two_percent_and_at_least_a_gib():
    assert slurm.real_memory(2063660) == 2063660 - 41273
    assert slurm.real_memory(32000) == 32000 - 1024
    with pytest.raises(slurm.SlurmConfigError, match="node memory_mb 1000 leaves nothing"):
        slurm.real_memory(1000)


@pytest.mark.parametrize("name,gres,message", [
    ("gpu 01", None, "node name 'gpu 01' is not a host name"),
    ("gpu01", {"gpu:h200:8": 1}, "GRES name 'gpu:h200:8' is not name or name:type"),
    ("gpu01", {"gpu:h200": 0}, "gres gpu:h200 must be at least 1"),
])
def test_bad_node_line_inputs_are_refused(name, gres, message):
    with pytest.raises(slurm.SlurmConfigError, match=message):
        slurm.node_line(name, H200_NODE, gres)


def test_cgroup_conf_confines_devices_with_the_hosts_cgroup_version():
    assert slurm.cgroup_conf(True).splitlines()[1:] == ["CgroupPlugin=cgroup/v2", "ConstrainDevices=yes"]
    assert slurm.cgroup_conf(False).splitlines()[1:] == ["CgroupPlugin=cgroup/v1", "ConstrainDevices=yes"]
    with pytest.raises(slurm.SlurmConfigError, match="cgroup_v2 must be true or false"):
        slurm.cgroup_conf("yes")


def test_cpu_lists_and_ranges():
    assert slurm.parse_cpu_list("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert slurm.format_ranges([8, 7, 5, 2, 1, 0]) == "0-2,5,7-8"
    for bad in ("0-55\n", "3-1", "N/A", "0,,1"):
        with pytest.raises(slurm.SlurmConfigError):
            slurm.parse_cpu_list(bad)
    with pytest.raises(slurm.SlurmConfigError, match="mig-minors line 'gpu0/gi7/access' is not"):
        slurm.parse_mig_minors("gpu0/gi7/access\n")


def test_autodetect_nvml_keeps_the_explicit_lines_as_its_check():
    topo, node = h200_lab()
    profile = example_profile("h200_sxm")
    text = slurm.gres_conf(profile, topo, None, node, autodetect="nvml")
    assert text.splitlines()[1] == "AutoDetect=nvml"
    assert text.splitlines()[2:] == fixture_text("slurm", "h200_sxm-hgx8.gres.conf").splitlines()[2:]
    with pytest.raises(slurm.SlurmConfigError, match="autodetect must be one of off, nvml, got 'rsmi'"):
        slurm.gres_conf(profile, topo, None, node, autodetect="rsmi")
