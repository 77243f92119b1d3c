# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugin_utils/nccl_fabric.py: the nccl_fabric role's plan (every check validate.yml made, the
IPoIB addresses) and ipoib_address, which was a filter of its own until issue 29."""


from unittest import mock

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.nccl_fabric import nccl_fabric_plan as plan_filter
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nccl_fabric as plugin
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.nccl_fabric import NcclFabricPlanError, ipoib_address, nccl_fabric_plan


@pytest.mark.parametrize("subnet,index,offset,expected", [
    ("10.10.0.0/16", 0, 0, "10.10.0.1/16"),
    ("10.10.0.0/16", 0, 10, "10.10.0.11/16"),
    ("10.10.0.0/16", 254, 0, "10.10.0.255/16"),
    ("10.10.0.0/16", 255, 0, "10.10.1.0/16"),
    ("10.10.0.0/16", 65533, 0, "10.10.255.254/16"),
    ("10.10.0.0/24", "7", "3", "10.10.0.11/24"),
    ("10.10.3.7/16", 0, 0, "10.10.0.1/16"),
    ("192.168.0.0/30", 1, 0, "192.168.0.2/30"),
    ("192.168.0.0/31", 0, 0, "192.168.0.0/31"),
    ("192.168.0.0/31", 1, 0, "192.168.0.1/31"),
    ("192.168.0.9/32", 0, 0, "192.168.0.9/32"),
    ("fd00:10::/64", 0, 0, "fd00:10::1/64"),
    ("fd00:10::/64", 4, 10, "fd00:10::f/64"),
    ("fd00:10::/126", 2, 0, "fd00:10::3/126"),
    ("fd00:10::/127", 0, 0, "fd00:10::/127"),
    ("fd00:10::/128", 0, 0, "fd00:10::/128"),
])
def test_address(subnet, index, offset, expected):
    assert ipoib_address(subnet, index, offset) == expected


def test_offset_defaults_to_zero():
    assert ipoib_address("10.10.0.0/16", 3) == "10.10.0.4/16"


@pytest.mark.parametrize("subnet,index,offset", [
    ("10.10.0.0/24", 254, 0),
    ("10.10.0.0/24", 250, 4),
    ("10.10.0.0/30", 2, 0),
    ("192.168.0.0/31", 2, 0),
    ("192.168.0.9/32", 1, 0),
    ("fd00:10::/126", 3, 0),
])
def test_past_the_end(subnet, index, offset):
    with pytest.raises(NcclFabricPlanError, match="past the end"):
        ipoib_address(subnet, index, offset)


def test_last_ipv4_host_is_never_broadcast():
    assert ipoib_address("10.10.0.0/24", 253) == "10.10.0.254/24"


@pytest.mark.parametrize("subnet,index,offset,message", [
    ("10.10.0.0/16", -1, 0, "index must not be negative"),
    ("10.10.0.0/16", 0, -5, "offset must not be negative"),
    ("10.10.0.0/16", 1.5, 0, "index must be an integer"),
    ("10.10.0.0/16", True, 0, "index must be an integer"),
    ("10.10.0.0/16", "one", 0, "index must be an integer"),
    ("10.10.0.0", 0, 0, "has no prefix length"),
    ("10.10.0.0/33", 0, 0, "is not a valid CIDR"),
    ("10.300.0.0/16", 0, 0, "is not a valid CIDR"),
    ("fd00::zz/64", 0, 0, "is not a valid CIDR"),
    ("ten/8", 0, 0, "is not a valid CIDR"),
    (None, 0, 0, "must be a CIDR string"),
])
def test_invalid_input(subnet, index, offset, message):
    with pytest.raises(NcclFabricPlanError, match=message):
        ipoib_address(subnet, index, offset)


def test_missing_netaddr():
    with mock.patch.object(plugin, "HAS_NETADDR", False):
        with pytest.raises(NcclFabricPlanError, match="netaddr is required"):
            ipoib_address("10.10.0.0/16", 0)


# '²'.isdigit() is true, yet int('²') raises ValueError (issue 15, item 18).
@pytest.mark.parametrize("bad", ["²", "1²", "+-5", "٣"])
def test_non_ascii_digits_are_a_filter_error(bad):
    with pytest.raises(NcclFabricPlanError, match="index must be an integer"):
        ipoib_address("10.10.0.0/16", bad)
    with pytest.raises(NcclFabricPlanError, match="offset must be an integer"):
        ipoib_address("10.10.0.0/16", 1, bad)


# The plan: the defaults of roles/nccl_fabric/defaults/main.yml that it reads, and Debian's OS vars.
SETTINGS = {"nccl_fabric_reboot_timeout": 1800, "nccl_fabric_nccl_tests_timeout": 600,
            "nccl_fabric_ipoib_renderer": "auto", "nccl_fabric_rdma_stack": "inbox",
            "nccl_fabric_doca_repo_url": "", "nccl_fabric_doca_repo_key_url": "",
            "nccl_fabric_link_layer": "infiniband", "nccl_fabric_nccl_ib_gid_index": None,
            "nccl_fabric_nccl_extra_env": {}, "nccl_fabric_group": "gpu", "nccl_fabric_ipoib_interfaces": [],
            "nccl_fabric_ipoib_mtu": 4092, "nccl_fabric_ipoib_mode": "datagram", "nccl_fabric_ipoib_host_index": None}
HOST = {"supported": True, "distribution": "Debian", "distribution_version": "12.8", "renderer_default": "networkd",
        "renderer_packages": {"networkd": ["dbus"], "ifupdown": ["ifupdown"], "netplan": ["netplan.io", "dbus"],
                              "networkmanager": ["network-manager"]},
        "groups": {"all": ["gpu-1", "gpu-2", "gpu-3"], "gpu": ["gpu-1", "gpu-2", "gpu-3"]}, "inventory_hostname": "gpu-2"}
IB0 = {"device": "ib0", "subnet": "10.10.0.0/16", "offset": 10}


def plan(host=None, **changes):
    return nccl_fabric_plan(dict(SETTINGS, **changes), dict(HOST, **(host or {})))


def test_the_defaults_plan_no_interfaces():
    assert plan() == {"renderer": "networkd", "ipoib": []}
    assert plan(nccl_fabric_ipoib_renderer="ifupdown")["renderer"] == "ifupdown"


def test_addresses_come_from_the_group_position_or_the_host_index():
    ib1 = {"device": "ib1", "subnet": "fd00:10::/64", "mtu": 65520, "mode": "connected"}
    assert plan(nccl_fabric_ipoib_interfaces=[IB0, ib1])["ipoib"] == [
        {"device": "ib0", "address": "10.10.0.12/16", "mtu": 4092, "mode": "datagram"},
        {"device": "ib1", "address": "fd00:10::2/64", "mtu": 65520, "mode": "connected"}]
    assert plan({"inventory_hostname": "login-1"}, nccl_fabric_ipoib_interfaces=[IB0],
                nccl_fabric_ipoib_host_index=7)["ipoib"][0]["address"] == "10.10.0.18/16"


@pytest.mark.parametrize("host,changes,words", [
    ({}, {"nccl_fabric_reboot_timeout": 0}, ["nccl_fabric_reboot_timeout: 0 must be a whole number of seconds"]),
    ({}, {"nccl_fabric_nccl_tests_timeout": -1}, ["nccl_fabric_nccl_tests_timeout: -1"]),
    ({}, {"nccl_fabric_nccl_tests_timeout": "60\n"}, ["nccl_fabric_nccl_tests_timeout"]),
    ({}, {"nccl_fabric_reboot_timeout": True}, ["nccl_fabric_reboot_timeout: true"]),
    ({"supported": False, "distribution": "Fedora", "distribution_version": "41"}, {},
     ["nccl_fabric supports Debian, Ubuntu and the RedHat family 9; this host runs Fedora 41."]),
    ({"renderer_packages": {"networkd": ["dbus"]}}, {"nccl_fabric_ipoib_renderer": "netplan"},
     ["nccl_fabric_ipoib_renderer: 'netplan' is not available on Debian (allowed: auto, networkd)"]),
    ({}, {"nccl_fabric_rdma_stack": "doca", "nccl_fabric_doca_repo_url": "https://mirror/doca"},
     ["nccl_fabric_doca_repo_url: nccl_fabric_rdma_stack=doca needs"]),
    ({}, {"nccl_fabric_link_layer": "roce"}, ["nccl_fabric_nccl_ib_gid_index: RoCE needs a GID index"]),
    ({}, {"nccl_fabric_nccl_extra_env": {"NCCL_DEBUG_SUBSYS": "INIT\nLD_PRELOAD=/tmp/x.so"}},
     ["nccl_fabric_nccl_extra_env: the values of ['NCCL_DEBUG_SUBSYS'] must be one-line"]),
    ({}, {"nccl_fabric_nccl_extra_env": {"NCCL_A": "x\ry", "NCCL_B": "x\x00y", "NCCL_C": ["a"]}},
     ["NCCL_A", "NCCL_B", "NCCL_C"]),
    ({}, {"nccl_fabric_nccl_extra_env": {"NCCL_X\nLD_PRELOAD": "/tmp/x.so", "NCCL_X=1": 2}},
     ["nccl_fabric_nccl_extra_env: names must match NCCL_[A-Z0-9_]+ in full", '"NCCL_X\\nLD_PRELOAD"', '"NCCL_X=1"']),
    ({}, {"nccl_fabric_group": "gpus"}, ["nccl_fabric_group: 'gpus' is not an inventory group"]),
    ({}, {"nccl_fabric_ipoib_interfaces": [IB0, dict(IB0, subnet="10.11.0.0/16")]},
     ["nccl_fabric_ipoib_interfaces: each device may appear once"]),
    ({}, {"nccl_fabric_link_layer": "roce", "nccl_fabric_group": "gpus"},
     ["nccl_fabric_nccl_ib_gid_index: RoCE", "; nccl_fabric_group: 'gpus'"]),
    ({}, {"nccl_fabric_ipoib_interfaces": [dict(IB0, mtu=9000)]},
     ["nccl_fabric_ipoib_interfaces ib0: MTU 9000 is too large for datagram mode"]),
    ({}, {"nccl_fabric_ipoib_interfaces": [dict(IB0, mtu=65521, mode="connected")]},
     ["MTU 65521 is too large for connected mode"]),
    ({"inventory_hostname": "login-1"}, {"nccl_fabric_ipoib_interfaces": [IB0]},
     ["login-1 is not in nccl_fabric_group 'gpu': add it to the group or set nccl_fabric_ipoib_host_index"]),
    ({}, {"nccl_fabric_ipoib_interfaces": [dict(IB0, subnet="10.50.0.0/33")]},
     ["nccl_fabric_ipoib_interfaces: ipoib_address: subnet '10.50.0.0/33' is not a valid CIDR"]),
    ({}, {"nccl_fabric_ipoib_interfaces": [dict(IB0, subnet="10.50.0.0/30")]},
     ["nccl_fabric_ipoib_interfaces: ipoib_address: index 1 + offset 10 is past the end of 10.50.0.0/30"]),
])
def test_bad_input_is_refused_naming_the_variable(host, changes, words):
    with pytest.raises(NcclFabricPlanError) as info:
        plan(host, **changes)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("env", [{"NCCL_IB_TIMEOUT": 22, "NCCL_SOCKET_IFNAME": "=ib0"}, {"NCCL_X": 1.5}, {"NCCL_X": True}])
def test_one_line_strings_and_numbers_pass(env):
    assert plan(nccl_fabric_nccl_extra_env=env)["renderer"] == "networkd"


def test_the_filter_names_itself_and_chains():
    with pytest.raises(AnsibleFilterError, match="nccl_fabric_plan: nccl_fabric_group") as info:
        plan_filter(dict(SETTINGS, nccl_fabric_group="x"), HOST)
    assert isinstance(info.value.__cause__, NcclFabricPlanError)
