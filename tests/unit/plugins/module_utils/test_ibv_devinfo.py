# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import check_fabric
from ansible_collections.gpucloud.fleet.plugins.module_utils.ibv_devinfo import parse_ibv_devinfo, to_ibstat_view

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "public", "ibv_devinfo")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt")) as handle:
        return handle.read()


AZURE = "azure-hb120v3-cx6-vf-ib-plus-cx4lx-vf-eth-aks-perfstudy"
ORNL = "cx6-hdr-1port-ib-ornl-bernie-linuxhpc"

# Synthetic "ibv_devinfo -v", written from the printf formats of rdma-core
# libibverbs/examples/devinfo.c (print_hca_cap(), print_all_port_gids()):
# device capability blocks with flag lines and nested keys, an NDR InfiniBand
# port and a RoCE port whose GIDs carry their type. Shortened: a real -v
# output has some 60 more device lines of the same shapes.
VERBOSE = (
    "hca_id:\tmlx5_0\n"
    "\ttransport:\t\t\tInfiniBand (0)\n"
    "\tfw_ver:\t\t\t\t28.39.1002\n"
    "\tnode_guid:\t\t\ta088:c203:00e3:142a\n"
    "\tsys_image_guid:\t\t\ta088:c203:00e3:142a\n"
    "\tvendor_id:\t\t\t0x02c9\n"
    "\tvendor_part_id:\t\t\t4129\n"
    "\thw_ver:\t\t\t\t0x0\n"
    "\tboard_id:\t\t\tMT_0000000838\n"
    "\tphys_port_cnt:\t\t\t1\n"
    "\tmax_mr_size:\t\t\t0xffffffffffffffff\n"
    "\tmax_qp:\t\t\t\t131072\n"
    "\tdevice_cap_flags:\t\t0x25f21c36\n"
    "\t\t\t\t\tBAD_PKEY_CNTR\n"
    "\t\t\t\t\tBAD_QKEY_CNTR\n"
    "\t\t\t\t\tAUTO_PATH_MIG\n"
    "\tmax_sge:\t\t\t30\n"
    "\tatomic_cap:\t\t\tATOMIC_HCA (1)\n"
    "\tgeneral_odp_caps:\n"
    "\t\t\t\t\tODP_SUPPORT\n"
    "\ttso_caps:\n"
    "\t\tmax_tso:\t\t\t0\n"
    "\ttag matching not supported\n"
    "\n"
    "\tcq moderation caps:\n"
    "\t\tmax_cq_count:\t65535\n"
    "\t\tmax_cq_period:\t4095 us\n"
    "\n"
    "\tmaximum available device memory:\t131072Bytes\n"
    "\n"
    "\tnum_comp_vectors:\t\t63\n"
    "\t\tport:\t1\n"
    "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n"
    "\t\t\tmax_mtu:\t\t4096 (5)\n"
    "\t\t\tactive_mtu:\t\t4096 (5)\n"
    "\t\t\tsm_lid:\t\t\t1\n"
    "\t\t\tport_lid:\t\t42\n"
    "\t\t\tport_lmc:\t\t0x00\n"
    "\t\t\tlink_layer:\t\tInfiniBand\n"
    "\t\t\tmax_msg_sz:\t\t0x40000000\n"
    "\t\t\tport_cap_flags:\t\t0xa259e848\n"
    "\t\t\tport_cap_flags2:\t0x0032\n"
    "\t\t\tmax_vl_num:\t\t4 (3)\n"
    "\t\t\tbad_pkey_cntr:\t\t0x0\n"
    "\t\t\tqkey_viol_cntr:\t\t0x0\n"
    "\t\t\tsm_sl:\t\t\t0\n"
    "\t\t\tpkey_tbl_len:\t\t128\n"
    "\t\t\tgid_tbl_len:\t\t8\n"
    "\t\t\tsubnet_timeout:\t\t18\n"
    "\t\t\tinit_type_reply:\t0\n"
    "\t\t\tactive_width:\t\t4X (2)\n"
    "\t\t\tactive_speed:\t\t100.0 Gbps (128)\n"
    "\t\t\tphys_state:\t\tLINK_UP (5)\n"
    "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:a088:c203:00e3:142a\n"
    "\n"
    "hca_id:\tmlx5_1\n"
    "\ttransport:\t\t\tInfiniBand (0)\n"
    "\tfw_ver:\t\t\t\t22.39.1002\n"
    "\tnode_guid:\t\t\te8eb:d303:0033:07da\n"
    "\tsys_image_guid:\t\t\te8eb:d303:0033:07da\n"
    "\tvendor_id:\t\t\t0x02c9\n"
    "\tvendor_part_id:\t\t\t4125\n"
    "\thw_ver:\t\t\t\t0x0\n"
    "\tboard_id:\t\t\tMT_0000000359\n"
    "\tphys_port_cnt:\t\t\t1\n"
    "\t\tport:\t1\n"
    "\t\t\tstate:\t\t\tPORT_DOWN (1)\n"
    "\t\t\tmax_mtu:\t\t4096 (5)\n"
    "\t\t\tactive_mtu:\t\t1024 (3)\n"
    "\t\t\tsm_lid:\t\t\t0\n"
    "\t\t\tport_lid:\t\t0\n"
    "\t\t\tport_lmc:\t\t0x00\n"
    "\t\t\tlink_layer:\t\tEthernet\n"
    "\t\t\tactive_width:\t\t4X (2)\n"
    "\t\t\tactive_speed:\t\t25.0 Gbps (32)\n"
    "\t\t\tphys_state:\t\tDISABLED (3)\n"
    "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:eaeb:d3ff:fe33:07da, RoCE v1\n"
    "\t\t\tGID[  1]:\t\tfe80::eaeb:d3ff:fe33:7da, RoCE v2\n"
    "\t\t\tGID[  3]:\t\t::ffff:10.1.2.3, RoCE v2\n"
    "\n"
)


def test_azure_two_devices_fixture():
    parsed = parse_ibv_devinfo(fixture(AZURE))
    assert sorted(parsed) == ["mlx5_0", "mlx5_1"]
    ib = parsed["mlx5_0"]
    assert (ib["transport"], ib["transport_code"], ib["fw_ver"], ib["vendor_part_id"], ib["board_id"]) == (
        "InfiniBand", 0, "20.31.1014", 4124, "MT_0000000223")
    assert (ib["node_guid"], ib["sys_image_guid"], ib["vendor_id"], ib["hw_ver"], ib["phys_port_cnt"]) == (
        "0015:5dff:fe33:ff18", "1070:fd03:006b:341c", "0x02c9", "0x0", 1)
    assert ib["ports"] == {"1": {
        "state": "PORT_ACTIVE", "state_code": 4, "max_mtu": 4096, "active_mtu": 4096,
        "sm_lid": 228, "port_lid": 383, "port_lmc": 0, "link_layer": "InfiniBand", "gids": [],
    }}
    eth = parsed["mlx5_1"]
    assert (eth["fw_ver"], eth["vendor_part_id"], eth["hw_ver"], eth["board_id"]) == (
        "14.30.1284", 4118, "0x80", "MSF0010110035")
    port = eth["ports"]["1"]
    assert (port["link_layer"], port["active_mtu"], port["max_mtu"], port["port_lid"]) == ("Ethernet", 1024, 4096, 0)


def test_ornl_single_device_fixture():
    parsed = parse_ibv_devinfo(fixture(ORNL))
    assert list(parsed) == ["mlx5_0"]
    device = parsed["mlx5_0"]
    assert (device["fw_ver"], device["vendor_part_id"], device["node_guid"], device["board_id"]) == (
        "20.41.1000", 4123, "a088:c203:0096:05fc", "MT_0000000222")
    port = device["ports"]["1"]
    assert (port["state"], port["state_code"], port["sm_lid"], port["port_lid"], port["link_layer"]) == (
        "PORT_ACTIVE", 4, 35, 35, "InfiniBand")


def test_fixture_with_crlf_and_space_indentation():
    text = fixture(AZURE).replace("\t", "    ").replace("\n", "\r\n")
    assert parse_ibv_devinfo(text) == parse_ibv_devinfo(fixture(AZURE))


def test_verbose_output():
    parsed = parse_ibv_devinfo(VERBOSE)
    ndr = parsed["mlx5_0"]
    assert ndr["vendor_part_id"] == 4129
    assert ndr["max_qp"] == "131072"
    assert ndr["max_sge"] == "30"
    assert ndr["num_comp_vectors"] == "63"
    assert "general_odp_caps" not in ndr
    port = ndr["ports"]["1"]
    assert (port["active_width"], port["active_width_code"]) == ("4X", 2)
    assert (port["active_speed"], port["active_speed_code"]) == ("100.0 Gbps", 128)
    assert (port["phys_state"], port["phys_state_code"]) == ("LINK_UP", 5)
    assert (port["max_vl_num"], port["gid_tbl_len"], port["port_lid"]) == ("4", 8, 42)
    assert port["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:a088:c203:00e3:142a", "type": None}]
    roce = parsed["mlx5_1"]["ports"]["1"]
    assert (roce["state"], roce["state_code"], roce["phys_state"]) == ("PORT_DOWN", 1, "DISABLED")
    assert roce["gids"] == [
        {"index": 0, "gid": "fe80:0000:0000:0000:eaeb:d3ff:fe33:07da", "type": "RoCE v1"},
        {"index": 1, "gid": "fe80::eaeb:d3ff:fe33:7da", "type": "RoCE v2"},
        {"index": 3, "gid": "::ffff:10.1.2.3", "type": "RoCE v2"},
    ]


def test_ibstat_view_and_fabric_check():
    view = to_ibstat_view(parse_ibv_devinfo(VERBOSE))
    assert view["mlx5_0"]["ports"]["1"] == {
        "state": "Active", "physical_state": "LinkUp", "rate": 400,
        "link_layer": "InfiniBand", "base_lid": 42, "sm_lid": 1,
    }
    assert view["mlx5_1"]["ports"]["1"]["rate"] == 100
    assert check_fabric(view, {"hca_count": 2, "rate": 400}) == [
        "mlx5_1 port 1: state is Down, expected Active",
        "mlx5_1 port 1: physical state is Disabled, expected LinkUp",
        "mlx5_1 port 1: rate is 100, expected 400",
    ]


def test_ibstat_view_of_default_output_skips_unknown_fields():
    view = to_ibstat_view(parse_ibv_devinfo(fixture(ORNL)))
    assert view["mlx5_0"]["ports"]["1"] == {"state": "Active", "link_layer": "InfiniBand", "base_lid": 35, "sm_lid": 35}
    assert check_fabric(view, {"hca_count": 1, "link_layer": "InfiniBand"}) == []
    assert check_fabric(view, {"rate": 200}) == ["mlx5_0 port 1: rate not reported"]


def test_old_ib_link_layer_word():
    text = fixture(ORNL).replace("link_layer:\t\tInfiniBand", "link_layer:\t\tIB")
    view = to_ibstat_view(parse_ibv_devinfo(text))
    assert check_fabric(view, {"link_layer": "InfiniBand"}) == []


def test_invalid_mtu_is_none():
    text = "hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tactive_mtu:\t\tinvalid MTU (0)\n\t\t\tstate:\t\t\tinvalid state (9)\n"
    port = parse_ibv_devinfo(text)["mlx5_0"]["ports"]["1"]
    assert port["active_mtu"] is None
    assert (port["state"], port["state_code"]) == ("invalid state", 9)
    assert port["link_layer"] is None


@pytest.mark.parametrize("text", [
    "",
    "No IB devices found\n",
    "<html><body>Service Unavailable</body></html>",
    "CA 'mlx5_0'\n\tCA type: MT4129\n",
    "2 HCAs found:\n\tmlx5_0\n\tmlx5_1\n\n",
])
def test_not_ibv_devinfo_output_raises(text):
    with pytest.raises(ValueError):
        parse_ibv_devinfo(text)


def test_malformed_integer_raises():
    with pytest.raises(ValueError, match="line 2: phys_port_cnt 'two' is not an integer"):
        parse_ibv_devinfo("hca_id:\tmlx5_0\n\tphys_port_cnt:\t\t\ttwo\n")
