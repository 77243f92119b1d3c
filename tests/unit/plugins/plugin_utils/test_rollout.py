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
