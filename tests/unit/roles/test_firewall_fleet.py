# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.firewall lets the fleet's own traffic through from firewall_fleet_cidrs (issue 15, item 14).

The role's defaults, put together as tasks/validate.yml does, rendered by the role's filter:
mpirun starts remote ranks over SSH, so port 22 must be open to the fleet as well as the
ephemeral ports of Open MPI and NCCL.
"""


import os

import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.firewall import firewall_ruleset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _defaults():
    with open(os.path.join(ROOT, "roles", "firewall", "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


def test_fleet_cidrs_reach_ssh_and_the_ephemeral_ports():
    defaults = _defaults()
    config = {
        "controller": [], "trusted_interfaces": [], "public_tcp_ports": [], "public_udp_ports": [],
        "allow_ping": True, "allow_any_source": False,
        "services": [{"name": "fleet", "proto": "tcp", "ports": defaults["firewall_fleet_tcp_ports"],
                      "sources": ["10.30.0.0/16"]}],
    }
    rules = firewall_ruleset(config, "ipv4", "GPUCLOUD-INPUT")
    fleet = [rule for rule in rules if "--comment fleet" in rule]
    assert fleet == ["-A GPUCLOUD-INPUT -s 10.30.0.0/16 -p tcp -m multiport --dports 22,1024:65535 "
                     "-m comment --comment fleet -j ACCEPT"]


def test_example_fleet_allows_its_compute_network():
    with open(os.path.join(ROOT, "inventories", "example", "group_vars", "gpu_nodes.yml")) as handle:
        assert yaml.safe_load(handle)["firewall_fleet_cidrs"]
