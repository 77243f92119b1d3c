# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugins/filter/slurm.py over plugin_utils/slurm.py: the GRES a profile promises, gres.conf checked
against it, and the one slurm.conf both Slurm roles write (issue 31)."""

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter import slurm as slurm_filter
from ansible_collections.gpucloud.fleet.plugins.module_utils import topology
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

FILTERS = slurm_filter.FilterModule().filters()
H200_NODE = {"cpus": 224, "sockets": 2, "cores": 56, "threads": 2, "memory_mb": 2063660}
A100_NODE = {"cpus": 128, "sockets": 2, "cores": 32, "threads": 2, "memory_mb": 1031912}
MPS_PROFILE = {"name": "mps", "gpu_model": "H100", "gpu_count": 2, "mig": False,
               "sharing": {"mode": "mps", "replicas": 4}}
MIG_PROFILE = {"name": "a100_mig", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8,
               "mig": {"strategy": "mixed", "layout": "all-balanced"}}


def facts(node):
    """The setup module's keys for a node_shape dict."""
    return {"processor_vcpus": node["cpus"], "processor_count": node["sockets"], "processor_cores": node["cores"],
            "processor_threads_per_core": node["threads"], "memtotal_mb": node["memory_mb"]}


def example_profile(name):
    with open(os.path.join(ROOT, "inventories", "example", "group_vars", name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["gpucloud_profile"]


def settings(**changes):
    base = {
        "cluster_name": "gpucloud",
        "controllers": ["slurm-ctl-01"],
        "nodes": [
            {"name": "gpu-h200-002", "facts": H200_NODE, "gres": FILTERS["slurm_gres_plan"](example_profile("h200_sxm"))},
            {"name": "gpu-h200-001", "facts": H200_NODE, "gres": FILTERS["slurm_gres_plan"](example_profile("h200_sxm"))},
            {"name": "gpu-mps-01", "facts": A100_NODE, "gres": FILTERS["slurm_gres_plan"](MPS_PROFILE)},
        ],
        "partitions": [{"name": "h200", "nodes": ["gpu-h200-001", "gpu-h200-002"], "default": True,
                        "max_time": "7-00:00:00"},
                       {"name": "all"}],
        "slurm_user": "slurm",
        "state_save_location": "/var/lib/slurm/slurmctld",
        "slurmd_spool_dir": "/var/lib/slurm/slurmd",
        "log_dir": "/var/log/slurm",
        "prolog": "/etc/slurm/gpucloud-prolog",
        "epilog": "/etc/slurm/gpucloud-epilog",
        "health_check_program": "/etc/slurm/gpucloud-healthcheck",
        "health_check_interval": 300,
    }
    base.update(changes)
    return base


def test_the_gres_a_profile_promises():
    assert FILTERS["slurm_gres_plan"](example_profile("h200_sxm")) == {"gpu:h200": 8}
    assert FILTERS["slurm_gres_plan"](example_profile("a100_40g_sxm")) == {"gpu:a100-sxm4-40gb": 8}
    assert FILTERS["slurm_gres_plan"](MPS_PROFILE) == {"gpu:h100": 2, "mps": 8}
    # all-balanced on an A100 80GB: 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb per GPU.
    assert FILTERS["slurm_gres_plan"](MIG_PROFILE) == {"gpu:1g.10gb": 16, "gpu:2g.20gb": 8, "gpu:3g.40gb": 8}


@pytest.mark.parametrize("profile, message", [
    (None, "slurm_gres_plan: gpucloud_profile must be the node's hardware profile"),
    ({"name": "x", "gpu_model": "H200", "gpu_count": 0}, "gpucloud_profile.gpu_count must be at least 1"),
    ({"name": "x", "gpu_model": "H200", "gpu_count": 2, "sharing": {"mode": "mps"}},
     "gpucloud_profile.sharing.replicas must be a whole number"),
    ({"name": "x", "gpu_model": "Tesla V100-SXM2-32GB", "gpu_count": 2,
      "mig": {"strategy": "single", "layout": "all-1g.18gb"}},
     "gpucloud_profile.gpu_model 'Tesla V100-SXM2-32GB' is not a MIG GPU"),
])
def test_a_profile_without_usable_gres_is_refused(profile, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["slurm_gres_plan"](profile)


def test_gres_conf_of_the_captured_dgx_a100_through_the_filter():
    topo = topology.parse_topo_matrix(fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt"))
    profile = {"name": "dgx_a100", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8, "mig": False}
    assert FILTERS["slurm_gres_conf"](profile, topo, None, {"facts": facts(A100_NODE)}) == fixture_text("slurm", "dgx-a100-8gpu.gres.conf")


def test_gres_conf_without_cores_leaves_the_affinity_out():
    topo = topology.parse_topo_matrix(fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt"))
    profile = {"name": "dgx_a100", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8, "mig": False}
    # A lab container's 2 CPUs: with the capture's affinity (0-31,64-95) Cores would be refused.
    small = {"cpus": 2, "sockets": 1, "cores": 2, "threads": 1, "memory_mb": 24000}
    with pytest.raises(AnsibleFilterError, match="lies outside the node's CPUs 0-1"):
        FILTERS["slurm_gres_conf"](profile, topo, None, {"facts": facts(small)})
    text = FILTERS["slurm_gres_conf"](profile, topo, None, {"facts": facts(small)}, "off", False)
    assert "Cores=" not in text
    assert text.splitlines()[2] == "Name=gpu Type=a100-sxm4-80gb File=/dev/nvidia0"


def test_gres_conf_refuses_a_node_whose_gres_differ_from_the_promise():
    topo = topology.parse_topo_matrix(fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt"))
    profile = {"name": "dgx_a100", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8, "mig": False,
               "sharing": {"mode": "mps", "replicas": 2}}
    # The sharing plan says time-slicing (another source than the profile): the node would register
    # no mps GRES while the controller's node line says mps:16.
    with pytest.raises(AnsibleFilterError, match="give GRES gpu:a100-sxm4-80gb:8, profile dgx_a100 promises the "
                                                 "controller gpu:a100-sxm4-80gb:8,mps:16"):
        FILTERS["slurm_gres_conf"](profile, topo, {"mode": "time-slicing"}, {"facts": facts(A100_NODE)})


def test_slurm_conf_is_the_hand_checked_file():
    assert FILTERS["slurm_conf"](settings()) == fixture_text("slurm", "cluster-h200x2-mps.slurm.conf")


def test_slurm_conf_does_not_depend_on_the_inventory_order():
    reordered = settings()
    reordered["nodes"] = list(reversed(reordered["nodes"]))
    assert FILTERS["slurm_conf"](reordered) == FILTERS["slurm_conf"](settings())


def test_slurm_conf_reads_the_nodes_from_hostvars():
    hostvars = {
        "gpu-h200-001": {"gpucloud_profile": example_profile("h200_sxm"), "ansible_facts": facts(H200_NODE)},
        "gpu-h200-002": {"gpucloud_profile": example_profile("h200_sxm"), "ansible_facts": facts(H200_NODE)},
        "gpu-mps-01": {"gpucloud_profile": MPS_PROFILE, "ansible_facts": facts(A100_NODE)},
    }
    by_name = settings(nodes=["gpu-mps-01", "gpu-h200-001", "gpu-h200-002"])
    assert FILTERS["slurm_conf"](by_name, hostvars) == fixture_text("slurm", "cluster-h200x2-mps.slurm.conf")
    del hostvars["gpu-mps-01"]["ansible_facts"]["memtotal_mb"]
    with pytest.raises(AnsibleFilterError, match="the facts of gpu-mps-01 lack memtotal_mb: gather the hardware"):
        FILTERS["slurm_conf"](by_name, hostvars)
    del hostvars["gpu-mps-01"]["gpucloud_profile"]
    with pytest.raises(AnsibleFilterError, match="gpu-mps-01 has no gpucloud_profile"):
        FILTERS["slurm_conf"](by_name, hostvars)


def test_gres_conf_follows_the_minor_numbers_nvidia_smi_reports():
    topo = topology.parse_topo_matrix(fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt"))
    profile = {"name": "dgx_a100", "gpu_model": "A100-SXM4-80GB", "gpu_count": 8, "mig": False}
    xml = "<nvidia_smi_log>%s</nvidia_smi_log>" % "".join(
        "<gpu id=\"0000:%02x:00.0\"><product_name>NVIDIA A100-SXM4-80GB</product_name><minor_number>%d</minor_number>"
        "<uuid>GPU-%d</uuid></gpu>" % (index + 1, minor, index) for index, minor in enumerate([2, 3, 0, 1, 6, 7, 4, 5]))
    text = FILTERS["slurm_gres_conf"](profile, topo, None, {"facts": facts(A100_NODE), "smi_xml": xml})
    assert [line.split()[2] for line in text.splitlines()[2:]] == ["File=/dev/nvidia%d" % m for m in [2, 3, 0, 1, 6, 7, 4, 5]]


def test_no_health_check_program_with_interval_zero():
    text = FILTERS["slurm_conf"](settings(health_check_interval=0))
    assert "HealthCheck" not in text


@pytest.mark.parametrize("changes, message", [
    ({"cluster_name": "GPU Cloud"}, "slurm_cluster_name must be lower-case"),
    ({"controllers": []}, "the slurm_controllers group is empty"),
    ({"nodes": []}, "the slurm_gpu_nodes group is empty"),
    ({"partitions": []}, "slurm_partitions must list at least one partition"),
    ({"partitions": [{"name": "gpu", "nodes": ["gpu-h200-009"]}]},
     r"slurm_partitions\[0\].nodes names gpu-h200-009, not in the slurm_gpu_nodes group"),
    ({"partitions": [{"name": "a", "default": True}, {"name": "b", "default": True}]},
     "2 partitions say default: true"),
    ({"partitions": [{"name": "a", "max_time": "a week"}]}, r"slurm_partitions\[0\].max_time must be a Slurm time"),
    ({"partitions": [{"name": "a", "qos": "high"}]}, r"slurm_partitions\[0\] has unknown key\(s\) qos"),
    ({"partitions": [{"name": "a"}, {"name": "a"}]}, r"slurm_partitions\[1\].name a is given twice"),
    ({"nodes": [{"name": "gpu-h200-001", "facts": dict(H200_NODE, cpus=112), "gres": {"gpu:h200": 8}}]},
     "node gpu-h200-001: node cpus 112 is not sockets 2 x cores 56 x threads 2"),
    ({"prolog": "relative/prolog"}, "prolog must be an absolute path"),
])
def test_bad_cluster_settings_are_refused_naming_the_input(changes, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS["slurm_conf"](settings(**changes))


def test_cgroup_conf_through_the_filter():
    assert "CgroupPlugin=cgroup/v2\n" in FILTERS["slurm_cgroup_conf"](True)
    with pytest.raises(AnsibleFilterError, match="slurm_cgroup_conf: cgroup_v2 must be true or false"):
        FILTERS["slurm_cgroup_conf"]("yes")
