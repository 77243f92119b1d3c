# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""site.yml's opt-in stage slurm (issue 31): the rollout role knows it, site.yml runs the controller
before the nodes after every batch, and the example inventory's Slurm partition renders."""

import os

import yaml

from ansible_collections.gpucloud.fleet.plugins.filter import slurm as slurm_filter
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT

FILTERS = slurm_filter.FilterModule().filters()


def load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_slurm_is_a_stage_that_is_off_unless_asked():
    stages_all = load("roles", "rollout", "vars", "main.yml")["__rollout_stages_all"]
    assert stages_all[-1] == "slurm"
    assert "slurm" not in load("roles", "rollout", "defaults", "main.yml")["rollout_stages"]
    rollout_vars = load("roles", "rollout", "vars", "main.yml")
    assert rollout_vars["__rollout_stage_roles"]["slurm"] == ["slurm_controller", "slurm_gpu_node"]
    assert "'slurm': 'opt-in: add slurm to rollout_stages" in rollout_vars["__rollout_skip_reasons"]
    assert "'slurm'" in rollout_vars["__rollout_batch_stages"]


def test_site_runs_the_controller_then_the_nodes_after_the_batches():
    plays = load("playbooks", "site.yml")
    names = [play.get("hosts") for play in plays]
    controller, nodes = names.index("slurm_controllers"), names.index("slurm_gpu_nodes:&gpu_nodes")
    assert names.index("site_rollout") < controller < nodes
    for index, role in ((controller, "gpucloud.fleet.slurm_controller"), (nodes, "gpucloud.fleet.slurm_gpu_node")):
        stage = [task for task in plays[index]["tasks"] if "ansible.builtin.include_role" in task][-1]
        assert stage["ansible.builtin.include_role"]["name"] == role
        assert stage["when"] == "'slurm' in rollout_stages"
        assert plays[index]["tags"] == ["slurm"]


def test_the_example_inventorys_slurm_partition_renders():
    hosts = load("inventories", "example", "hosts.yml")["all"]["children"]
    h200 = sorted(hosts["gpu_nodes"]["children"]["h200_sxm"]["hosts"])
    assert list(hosts["slurm_gpu_nodes"]["children"]) == ["h200_sxm"]
    settings = load("inventories", "example", "group_vars", "all", "slurm.yml")
    profile = load("inventories", "example", "group_vars", "h200_sxm.yml")["gpucloud_profile"]
    partitions = [dict(part, nodes=h200) for part in settings["slurm_partitions"]]
    facts = {"processor_vcpus": 224, "processor_count": 2, "processor_cores": 56, "processor_threads_per_core": 2,
             "memtotal_mb": 2063660}
    text = FILTERS["slurm_conf"]({
        "cluster_name": settings["slurm_cluster_name"], "controllers": list(hosts["slurm_controllers"]["hosts"]),
        "nodes": h200, "partitions": partitions, "slurm_user": "slurm",
        "state_save_location": "/var/lib/slurm/slurmctld", "slurmd_spool_dir": "/var/lib/slurm/slurmd",
        "log_dir": "/var/log/slurm", "prolog": "/etc/slurm/gpucloud-prolog", "epilog": "/etc/slurm/gpucloud-epilog",
        "health_check_program": "/etc/slurm/gpucloud-healthcheck", "health_check_interval": 300,
    }, dict((host, {"gpucloud_profile": profile, "ansible_facts": facts}) for host in h200))
    assert "SlurmctldHost=slurm-ctl-01\n" in text
    assert "PartitionName=gpu Nodes=%s Default=YES MaxTime=7-00:00:00 State=UP\n" % ",".join(h200) in text
    assert text.count("Gres=gpu:h200:8\n") == 8
