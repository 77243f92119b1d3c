# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import check_fabric, parse_ibstat

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "public", "ibstat")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt")) as handle:
        return handle.read()


H100 = "h100-node-8x-cx7-ndr-4x-cx6dx-eth-tabs-gpud"
A100_VM = "a100-vm-9x-mt4126-roce-200g-gpud"
AZURE = "azure-ndv4-a100-8x-cx6vf-hdr-ibpanic-gpud"

# Synthetic, written from the printf formats of rdma-core infiniband-diags/ibstat.c
# (ca_dump(), port_dump()): a dual-port ConnectX-6 with its second port down
# and polling, an FDR10 port, a 1x SDR port printed as "2.5", the "Effective
# speed" line of newer rdma-core, an ibwarn line between CAs, and a switch.
DUAL_PORT = (
    "CA 'mlx5_0'\n"
    "\tCA type: MT4123\n"
    "\tNumber of ports: 2\n"
    "\tFirmware version: 20.39.1002\n"
    "\tHardware version: 0\n"
    "\tNode GUID: 0x0c42a10300a1b2c0\n"
    "\tSystem image GUID: 0x0c42a10300a1b2c0\n"
    "\tPort 1:\n"
    "\t\tState: Active\n"
    "\t\tPhysical state: LinkUp\n"
    "\t\tRate: 200\n"
    "\t\tEffective speed: 200\n"
    "\t\tBase lid: 7\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 1\n"
    "\t\tCapability mask: 0xa651e848\n"
    "\t\tPort GUID: 0x0c42a10300a1b2c0\n"
    "\t\tLink layer: InfiniBand\n"
    "\tPort 2:\n"
    "\t\tState: Down\n"
    "\t\tPhysical state: Polling\n"
    "\t\tRate: 10\n"
    "\t\tBase lid: 65535\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 0\n"
    "\t\tCapability mask: 0xa651e848\n"
    "\t\tPort GUID: 0x0c42a10300a1b2c1\n"
    "\t\tLink layer: InfiniBand\n"
    "ibwarn: [2717] main: stat of IB device 'mlx4_0' failed\n"
    "CA 'mlx4_1'\n"
    "\tCA type: MT4099\n"
    "\tNumber of ports: 2\n"
    "\tFirmware version: 2.42.5000\n"
    "\tHardware version: 1\n"
    "\tNode GUID: 0xf452140300112230\n"
    "\tSystem image GUID: 0xf452140300112233\n"
    "\tPort 1:\n"
    "\t\tState: Active\n"
    "\t\tPhysical state: LinkUp\n"
    "\t\tRate: 40 (FDR10)\n"
    "\t\tBase lid: 12\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 1\n"
    "\t\tCapability mask: 0x02514868\n"
    "\t\tPort GUID: 0xf452140300112231\n"
    "\t\tLink layer: InfiniBand\n"
    "\tPort 2:\n"
    "\t\tState: Initializing\n"
    "\t\tPhysical state: LinkUp\n"
    "\t\tRate: 2.5\n"
    "\t\tBase lid: 0\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 0\n"
    "\t\tCapability mask: 0x02514868\n"
    "\t\tPort GUID: 0xf452140300112232\n"
    "\t\tLink layer: InfiniBand\n"
)

SWITCH = (
    "Switch 'switchib0'\n"
    "\tSwitch type: MT52000\n"
    "\tNumber of ports: 36\n"
    "\tFirmware version: 15.2008.2102\n"
    "\tHardware version: 0\n"
    "\tNode GUID: 0x248a070300f8a9b0\n"
    "\tSystem image GUID: 0x248a070300f8a9b0\n"
    "\tPort 0:\n"
    "\t\tState: Active\n"
    "\t\tPhysical state: LinkUp\n"
    "\t\tRate: 40\n"
    "\t\tBase lid: 3\n"
    "\t\tLMC: 0\n"
    "\t\tSM lid: 1\n"
    "\t\tCapability mask: 0x4250084a\n"
    "\t\tPort GUID: 0x248a070300f8a9b0\n"
    "\t\tLink layer: InfiniBand\n"
)

# "ibstat mlx5_0 1" prints the CA with a colon and the port without indentation.
SINGLE_PORT = (
    "CA: 'mlx5_0'\n"
    "Port 1:\n"
    "State: Active\n"
    "Physical state: LinkUp\n"
    "Rate: 400\n"
    "Base lid: 42\n"
    "LMC: 0\n"
    "SM lid: 1\n"
    "Capability mask: 0xa751e848\n"
    "Port GUID: 0xa088c20300e3142a\n"
    "Link layer: InfiniBand\n"
)


# --- fixtures -------------------------------------------------------------------

def test_h100_tab_indented_fixture():
    parsed = parse_ibstat(fixture(H100))
    assert sorted(parsed) == sorted("mlx5_%d" % i for i in range(12))
    cx7 = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    cx6dx = ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    for name in cx7:
        assert parsed[name]["ca_type"] == "MT4129"
        assert parsed[name]["firmware"] == "28.39.1002"
        assert parsed[name]["ports"]["1"]["rate"] == 400
    for name in cx6dx:
        assert parsed[name]["ca_type"] == "MT4125"
        assert parsed[name]["firmware"] == "22.39.1002"
        assert parsed[name]["ports"]["1"]["rate"] == 100
        assert parsed[name]["ports"]["1"]["port_guid"] == "0x0000000000000000"
    # As captured, every port of this node runs RoCE: all twelve report Ethernet.
    assert set(p["link_layer"] for ca in parsed.values() for p in ca["ports"].values()) == {"Ethernet"}
    assert parsed["mlx5_0"] == {
        "node_type": "CA",
        "ca_type": "MT4129",
        "number_of_ports": 1,
        "firmware": "28.39.1002",
        "hardware_version": "0",
        "node_guid": "0xa088c20300e3142a",
        "system_image_guid": "0xa088c20300e3142a",
        "ports": {"1": {
            "state": "Active",
            "physical_state": "LinkUp",
            "rate": 400,
            "base_lid": 0,
            "lmc": 0,
            "sm_lid": 0,
            "capability_mask": "0x00010000",
            "port_guid": "0xa288c2fffee3142a",
            "link_layer": "Ethernet",
        }},
    }


def test_a100_vm_mixed_link_layers_fixture():
    parsed = parse_ibstat(fixture(A100_VM))
    assert len(parsed) == 9
    assert all(ca["ca_type"] == "MT4126" for ca in parsed.values())
    assert parsed["mlx5_0"]["firmware"] == "22.35.2302"
    assert parsed["mlx5_0"]["ports"]["1"]["link_layer"] == "Ethernet"
    lids = [parsed["mlx5_%d" % i]["ports"]["1"]["base_lid"] for i in range(1, 9)]
    assert lids == [1369, 1372, 1374, 1379, 1383, 1387, 1392, 1396]
    for i in range(1, 9):
        port = parsed["mlx5_%d" % i]["ports"]["1"]
        assert (port["link_layer"], port["sm_lid"], port["rate"], port["state"]) == ("InfiniBand", 83, 200, "Active")
        assert parsed["mlx5_%d" % i]["firmware"] == "28.37.1014"
    # the file ends without a newline after the last line
    assert parsed["mlx5_8"]["ports"]["1"]["link_layer"] == "InfiniBand"
    assert parsed["mlx5_8"]["ports"]["1"]["port_guid"] == "0x4c1037318e9cd20a"


def test_azure_space_indented_fixture_with_ibpanic():
    parsed = parse_ibstat(fixture(AZURE))
    assert sorted(parsed) == ["mlx5_%d" % i for i in range(8)]
    assert [parsed["mlx5_%d" % i]["ports"]["1"]["base_lid"] for i in range(8)] == [
        13247, 13246, 13259, 13276, 13301, 13300, 13302, 13305]
    for ca in parsed.values():
        assert (ca["ca_type"], ca["firmware"], ca["number_of_ports"]) == ("MT4124", "20.41.1000", 1)
        port = ca["ports"]["1"]
        assert (port["state"], port["physical_state"], port["rate"], port["link_layer"], port["sm_lid"]) == (
            "Active", "LinkUp", 200, "InfiniBand", 1)
    assert parsed["mlx5_7"]["node_guid"] == "0x00155dfffe3411f2"
    assert parsed["mlx5_7"]["system_image_guid"] == "0xb83fd203006e277c"


def test_fixture_with_crlf_and_without_indentation():
    text = "\r\n".join(line.strip() for line in fixture(AZURE).splitlines())
    assert parse_ibstat(text) == parse_ibstat(fixture(AZURE))


# --- synthetic ------------------------------------------------------------------------

def test_dual_port_fdr10_and_sdr():
    parsed = parse_ibstat(DUAL_PORT)
    assert sorted(parsed) == ["mlx4_1", "mlx5_0"]
    port1, port2 = parsed["mlx5_0"]["ports"]["1"], parsed["mlx5_0"]["ports"]["2"]
    assert (port1["state"], port1["effective_speed"]) == ("Active", 200.0)
    assert (port2["state"], port2["physical_state"], port2["base_lid"]) == ("Down", "Polling", 65535)
    fdr10 = parsed["mlx4_1"]["ports"]["1"]
    assert (fdr10["rate"], fdr10["rate_note"]) == (40, "FDR10")
    assert parsed["mlx4_1"]["ports"]["2"]["rate"] == 2.5


def test_switch_and_single_port_forms():
    switch = parse_ibstat(SWITCH)["switchib0"]
    assert (switch["node_type"], switch["ca_type"], switch["number_of_ports"]) == ("Switch", "MT52000", 36)
    assert switch["ports"]["0"]["base_lid"] == 3
    single = parse_ibstat(SINGLE_PORT)["mlx5_0"]
    assert single["ca_type"] is None
    assert single["ports"]["1"]["rate"] == 400


def test_missing_port_fields_are_none():
    parsed = parse_ibstat("CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Down\n")
    port = parsed["mlx5_0"]["ports"]["1"]
    assert port["state"] == "Down"
    assert port["rate"] is None and port["link_layer"] is None and port["physical_state"] is None


@pytest.mark.parametrize("text", [
    "",
    "\n \n",
    "<html><body><h1>404 Not Found</h1></body></html>\n",
    "ibpanic: [12] main: can't list IB device names: (No such file or directory)\n",
    "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n",
    "State: Active\nRate: 400\n",
])
def test_not_ibstat_output_raises(text):
    with pytest.raises(ValueError):
        parse_ibstat(text)


def test_malformed_number_raises():
    with pytest.raises(ValueError, match="line 4: base lid 'x' is not a number"):
        parse_ibstat("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tBase lid: x\n")


# --- check_fabric ---------------------------------------------------------------------

def test_check_fabric_all_good():
    parsed = parse_ibstat(fixture(AZURE))
    assert check_fabric(parsed, {"hca_count": 8, "rate": 200, "link_layer": "InfiniBand"}) == []
    assert check_fabric(parsed) == []


def test_check_fabric_lists_every_mismatch():
    parsed = parse_ibstat(fixture(AZURE))
    assert check_fabric(parsed, {"hca_count": 9, "rate": 400, "link_layer": "infiniband"}) == [
        "expected 9 HCA(s), found 8 (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7)",
    ] + ["mlx5_%d port 1: rate is 200, expected 400" % i for i in range(8)]


def test_check_fabric_select_names_by_pattern():
    parsed = parse_ibstat(fixture(A100_VM))
    expect = {"hca_count": 8, "ca_pattern": r"mlx5_[1-8]", "link_layer": "InfiniBand", "rate": 200}
    assert check_fabric(parsed, expect) == []
    everything = check_fabric(parsed, {"hca_count": 8, "link_layer": "InfiniBand"})
    assert everything == [
        "expected 8 HCA(s), found 9 (mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7, mlx5_8)",
        "mlx5_0 port 1: link layer is Ethernet, expected InfiniBand",
    ]


def test_check_fabric_select_names_by_list():
    parsed = parse_ibstat(fixture(H100))
    names = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    assert check_fabric(parsed, {"ca_names": names, "hca_count": 8, "rate": 400}) == []
    assert check_fabric(parsed, {"ca_names": ["mlx5_0", "mlx5_12"], "rate": 400}) == ["mlx5_12: CA not found"]


def test_check_fabric_down_port_and_port_selection():
    parsed = parse_ibstat(DUAL_PORT)
    assert check_fabric(parsed, {"ca_names": ["mlx5_0"]}) == [
        "mlx5_0 port 2: state is Down, expected Active",
        "mlx5_0 port 2: physical state is Polling, expected LinkUp",
    ]
    assert check_fabric(parsed, {"ca_names": ["mlx5_0"], "ports": [1]}) == []
    assert check_fabric(parsed, {"ca_names": ["mlx5_0"], "ports": [3]}) == ["mlx5_0 port 3: not found"]


def test_check_fabric_missing_values_are_mismatches():
    parsed = parse_ibstat("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n")
    assert check_fabric(parsed, {"rate": 400}) == [
        "mlx5_0 port 1: physical state is None, expected LinkUp",
        "mlx5_0 port 1: rate is None, expected 400",
    ]
    assert check_fabric(parse_ibstat("CA 'mlx5_0'\n\tCA type: MT4129\n")) == ["mlx5_0: no ports reported"]


def test_check_fabric_rejects_bad_expectations():
    parsed = parse_ibstat(fixture(AZURE))
    with pytest.raises(ValueError, match="unknown fabric expectation"):
        check_fabric(parsed, {"speed": 400})
    with pytest.raises(ValueError, match="mutually exclusive"):
        check_fabric(parsed, {"ca_names": ["mlx5_0"], "ca_pattern": "mlx5_.*"})
    with pytest.raises(ValueError, match="not a valid regular expression"):
        check_fabric(parsed, {"ca_pattern": "mlx5_["})


# Nothing considered is no pass (issue 15, item 17).
@pytest.mark.parametrize("expect,words", [
    ({"rate": 200}, "no HCA found at all"),
    ({"ca_pattern": "mlx5_1[0-9]"}, "no HCA found matching ca_pattern 'mlx5_1[0-9]'"),
    ({}, "no HCA found at all"),
])
def test_no_hca_considered_is_a_mismatch(expect, words):
    parsed = parse_ibstat(SINGLE_PORT) if "ca_pattern" in expect else {}
    mismatches = check_fabric(parsed, expect)
    assert len(mismatches) == 1 and mismatches[0].startswith(words)


def test_no_hca_expected_and_none_found_passes():
    assert check_fabric({}, {"hca_count": 0}) == []
