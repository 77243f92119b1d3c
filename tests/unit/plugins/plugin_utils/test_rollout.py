# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.rollout import (
    RolloutError,
    asks_for_canary,
    plan,
    serial_list,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

PROFILES = ["a100_80g_pcie", "a100_40g_sxm", "h100_sxm", "h200_sxm"]


def _example_fleet():
    """Hosts in inventory order and the profile groups of inventories/example/hosts.yml."""
    with open(os.path.join(ROOT, "inventories", "example", "hosts.yml")) as handle:
        inventory = yaml.safe_load(handle)
    profiles = inventory["all"]["children"]["gpu_nodes"]["children"]
    groups = dict((name, list(group["hosts"])) for name, group in profiles.items())
    hosts = [host for name in profiles for host in groups[name]]
    return hosts, groups


def test_example_fleet_canary_holds_one_node_of_every_profile():
    hosts, groups = _example_fleet()
    result = plan(hosts, PROFILES, groups, [1, "10%", "25%"])
    assert result["canaries"] == ["gpu-a100p-001", "gpu-a100s-001", "gpu-h100-001", "gpu-h200-001"]
    assert result["serial"] == [4, "10%", "25%"]
    assert result["canary"] is True
    first_batch = result["order"][:result["serial"][0]]
    assert sorted(groups[p][0] for p in PROFILES) == sorted(first_batch)
    assert sorted(result["order"]) == sorted(hosts)
    # Before: the first batch was the inventory's first host, one A100 PCIe node only.
    assert hosts[:1] == ["gpu-a100p-001"]


def test_rest_follows_in_inventory_order():
    groups = {"a": ["a1", "a2"], "h": ["h1", "h2", "h3"]}
    result = plan(["a1", "a2", "h1", "h2", "h3"], ["a", "h"], groups, [1, "25%"])
    assert result["order"] == ["a1", "h1", "a2", "h2", "h3"]
    assert result["serial"] == [2, "25%"]


def test_limit_to_one_profile_keeps_a_one_node_canary():
    groups = {"lab_gpu": ["n1", "n2"], "metal_gpu": []}
    result = plan(["n1", "n2"], ["lab_gpu", "metal_gpu"], groups, [1, "100%"])
    assert result == {"order": ["n1", "n2"], "canaries": ["n1"], "profiles": ["lab_gpu"],
                      "serial": [1, "100%"], "canary": True}


def test_limit_keeps_hosts_outside_it_out():
    groups = {"a": ["a1", "a2"], "h": ["h1", "h2"]}
    result = plan(["a2", "h2"], ["a", "h"], groups, [1, "50%"])
    assert result["canaries"] == ["a2", "h2"]
    assert result["order"] == ["a2", "h2"]


def test_profile_order_follows_profile_groups_not_inventory():
    groups = {"a": ["a1"], "h": ["h1"]}
    assert plan(["a1", "h1"], ["h", "a"], groups, [1, 5])["order"] == ["h1", "a1"]


@pytest.mark.parametrize("serial, expected", [
    (1, [1]),
    ("25%", ["25%"]),
    ([2, "50%"], [2, "50%"]),
    (["1"], [1]),
])
def test_serial_without_canary_is_unchanged(serial, expected):
    groups = {"a": ["a1", "a2"], "h": ["h1"]}
    result = plan(["a1", "a2", "h1"], ["a", "h"], groups, serial)
    assert result["serial"] == expected
    assert result["canary"] is False
    assert result["order"] == ["a1", "h1", "a2"]


@pytest.mark.parametrize("serial", [[1, "10%"], ["1", 5], ["1", "100%"]])
def test_canary_forms(serial):
    assert asks_for_canary(serial)


@pytest.mark.parametrize("bad", [0, -1, True, "x", 1.5, "0%", "-5%", [], [1, None], "1\n2", "²",
                                 "150%", "12.5%", " 1 ", "25%\n", [1, "101%"]])
def test_bad_serial_is_refused(bad):
    with pytest.raises(RolloutError):
        serial_list(bad)


@pytest.mark.parametrize("groups, message", [
    ({"a": ["a1"], "h": []}, "h1 is in the profile groups []"),
    ({"a": ["a1", "h1"], "h": ["h1"]}, "h1 is in the profile groups ['a', 'h']"),
])
def test_host_not_in_exactly_one_profile_is_refused(groups, message):
    with pytest.raises(RolloutError, match=message.replace("[", r"\[").replace("]", r"\]")):
        plan(["a1", "h1"], ["a", "h"], groups, [1, "25%"])


def test_duplicate_hosts_are_refused():
    with pytest.raises(RolloutError, match="more than once"):
        plan(["a1", "a1"], ["a"], {"a": ["a1"]}, [1, 2])


STAGES = ["host_prep", "nvidia_driver", "cuda_toolkit", "hardening", "verify"]


def test_stage_skips_names_every_left_out_stage_with_its_reason():
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.rollout import stage_skips
    assert stage_skips(STAGES, ["host_prep", "nvidia_driver", "verify"], {"cuda_toolkit": "too big"}, ["all"], []) == [
        "stage cuda_toolkit SKIPPED: not in rollout_stages (too big)",
        "stage hardening SKIPPED: not in rollout_stages (no reason given; set rollout_skip_reasons.hardening)"]
    assert stage_skips(STAGES, STAGES) == []


@pytest.mark.parametrize("run_tags,skip_tags,expected", [
    (["nvidia_driver", "verify"], [], []),
    (["cuda_toolkit"], [], ["cuda_toolkit"]),
    (["tagged"], [], ["cuda_toolkit", "hardening"]),
    (["all"], ["hardening"], ["cuda_toolkit"]),
    (["all"], ["tagged"], []),
    ([], [], ["cuda_toolkit", "hardening"]),
])
def test_stage_skips_follow_the_run_tags_as_each_stage_task_did(run_tags, skip_tags, expected):
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.rollout import stage_skips
    said = stage_skips(STAGES, ["host_prep", "nvidia_driver", "verify"], {}, run_tags, skip_tags)
    assert [line.split()[1] for line in said] == expected


@pytest.mark.parametrize("stages,enabled,reasons", [
    ("host_prep", [], {}), (STAGES, "verify", {}), (STAGES, [], ["cuda_toolkit"]), (STAGES, None, {})])
def test_stage_skips_refuses_what_is_not_a_stage_list(stages, enabled, reasons):
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.rollout import stage_skips
    with pytest.raises(RolloutError, match="rollout_stages|rollout_skip_reasons"):
        stage_skips(stages, enabled, reasons)


def test_stage_skips_filter_names_itself_on_bad_input():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpucloud.fleet.plugins.filter.rollout import FilterModule as RolloutFilters
    skips = RolloutFilters().filters()["rollout_stage_skips"]
    assert skips(STAGES, ["verify"], None, ["hardening"], None) == [
        "stage hardening SKIPPED: not in rollout_stages (no reason given; set rollout_skip_reasons.hardening)"]
    with pytest.raises(AnsibleFilterError, match="rollout_stage_skips: .*rollout_stages"):
        skips(STAGES, "verify")


PROFILE = {"name": "h200", "gpu_count": 8, "gpu_model": "H200"}
LOCK = {"driver": "580.95.05"}


@pytest.mark.parametrize("groups,profile_groups,profile,lock,stages,required,expected", [
    (["gpu_nodes", "h200"], ["h200", "a100"], PROFILE, LOCK, ["nvidia_driver"], {"bmc": "x"}, []),
    (["gpu_nodes"], ["h200"], PROFILE, LOCK, [], {}, ["n1 is in the profile groups []; a GPU node belongs to exactly "
                                                      "one of ['h200']"]),
    (["h200", "a100"], ["h200", "a100"], PROFILE, LOCK, [], {}, ["n1 is in the profile groups ['h200', 'a100']"]),
    (["h200"], None, PROFILE, LOCK, [], {}, ["(gpucloud_profile_groups is not set)"]),
    (["h200"], ["h200"], dict(PROFILE, name="a100"), LOCK, [], {}, ["n1: group_vars/h200.yml must set gpucloud_profile"]),
    (["h200"], ["h200"], dict(PROFILE, gpu_count="8"), LOCK, [], {}, ["group_vars/h200.yml must set"]),
    (["h200"], ["h200"], dict(PROFILE, gpu_count=True), LOCK, [], {}, ["group_vars/h200.yml must set"]),
    (["h200"], ["h200"], dict(PROFILE, gpu_model=""), LOCK, [], {}, ["group_vars/h200.yml must set"]),
    (["h200"], ["h200"], dict(PROFILE, gpu_count=0, gpu_model=""), {}, [], {}, []),
    (["h200"], ["h200"], PROFILE, {}, ["nvidia_driver"], {}, ["gpucloud_version_lock (driver at least)"]),
    (["h200"], ["h200"], PROFILE, None, [], {}, ["gpucloud_version_lock (driver at least)"]),
    (["h200"], ["h200"], None, LOCK, [], {}, ["group_vars/h200.yml must set gpucloud_profile"]),
    (["h200"], ["h200"], PROFILE, LOCK, [], {"bmc": "", "ib": None, "ok": "x"},
     ["n1: profile h200 requires bmc, which is empty or unset", "n1: profile h200 requires ib, which is empty or unset"]),
])
def test_node_problems_name_what_to_set(groups, profile_groups, profile, lock, stages, required, expected):
    from ansible_collections.gpucloud.fleet.plugins.plugin_utils.rollout import node_problems
    problems = node_problems("n1", groups, profile_groups, profile, lock, stages, required)
    assert len(problems) == len(expected), problems
    for problem, words in zip(problems, expected):
        assert words in problem, problems


def test_node_problems_filter():
    from ansible_collections.gpucloud.fleet.plugins.filter.rollout import FilterModule as RolloutFilters
    problems = RolloutFilters().filters()["rollout_node_problems"]
    assert problems("n1", ["h200"], ["h200"], PROFILE, LOCK, ["nvidia_driver"]) == []
    assert problems("n1", ["h200"], None, PROFILE, LOCK, []) == [
        "n1 is in the profile groups []; a GPU node belongs to exactly one of (gpucloud_profile_groups is not set)"]
