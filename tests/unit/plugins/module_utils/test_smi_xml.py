# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.smi_xml import (
    available,
    gpu_record,
    parse_compute_cap_csv,
    parse_smi_output,
    parse_smi_q,
    parse_smi_xml,
    to_number,
    to_state,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

H200_XML = ("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")
H200_Q = ("h200-ubuntu2404-driver580", "nvidia-smi_-q.txt")
A100_MIG_V11 = ("public", "smi_xml", "a100-sxm4-40gb-mig-510-v11-netdata-reindented.txt")
GT1030_V11 = ("public", "smi_xml", "gt1030-470-v11-telegraf.txt")
P2000_V12 = ("public", "smi_xml", "quadro-p2000-linux-525-v12-telegraf.txt")
A10_Q = ("public", "smi_q", "a10-1gpu-535-gpud.txt")
H100_Q = ("public", "smi_q", "h100-sxm-8gpu-565-thamada.txt")
L4_Q = ("public", "smi_q", "l4-1gpu-550-thamada.txt")
RTX4070_Q = ("public", "smi_q", "rtx4070-laptop-wsl2-566-jesse3692.txt")
XML_FIXTURES = [H200_XML, A100_MIG_V11, GT1030_V11, P2000_V12]
Q_FIXTURES = [H200_Q, A10_Q, H100_Q, L4_Q, RTX4070_Q]

# Values that move from one second to the next (the XML and the text were
# captured one second apart on the H200 host).
LIVE = ("power", "clocks_mhz")


def test_h200_v13_every_field():
    facts = parse_smi_xml(fixture_text(*H200_XML))
    assert facts == {
        "driver_version": "580.159.04",
        "cuda_driver_version": "13.0",
        "nvml_version": None,
        "gpu_count": 1,
        "gpus": [{
            "index": 0,
            "name": "NVIDIA H200",
            "uuid": "GPU-4fc604de-9030-742c-d69f-594418e871d5",
            "serial": "1654024076551",
            "pci_bus_id": "00000000:00:06.0",
            "architecture": "Hopper",
            "compute_capability": None,
            "memory_total_mib": 143771,
            "memory_used_mib": 0,
            "persistence_mode": True,
            "compute_mode": "Default",
            "mig": {"current": False, "pending": False},
            "ecc": {"current": True, "pending": True, "uncorrected_volatile": 0, "uncorrected_aggregate": 0},
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
            "retired_pages": None,
            "power": {"draw_w": 77.64, "limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0},
            "temperature_c": 32,
            "clocks_mhz": {"sm": 375, "sm_max": 1980, "memory": 3201, "memory_max": 3201},
            "pcie": {"gen": 5, "gen_max": 5, "gen_device_max": 5, "width": 16, "width_max": 16},
            "vbios_version": "96.00.A5.00.1A",
            "numa_node": None,
            "gpu_numa_id": None,
            "cpu_affinity": None,
            # Idle at Gen5 x16; one GPU in a VM, so no NVSwitch fabric (N/A).
            "idle": True,
            "fabric": {"state": None, "status": None},
        }],
    }


def test_a100_v11_mig_enabled_reindented():
    facts = parse_smi_xml(fixture_text(*A100_MIG_V11))
    assert (facts["driver_version"], facts["cuda_driver_version"], facts["gpu_count"]) == ("510.47.03", "11.6", 1)
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA A100-SXM4-40GB"
    assert gpu["uuid"] == "GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"
    assert gpu["serial"] == "1324321002473"
    assert gpu["pci_bus_id"] == "00000000:00:04.0"
    assert gpu["architecture"] == "Ampere"
    assert gpu["mig"] == {"current": True, "pending": True}
    assert gpu["persistence_mode"] is False
    # Volatile counters are N/A with MIG on; the aggregate ones are SRAM/DRAM (Ampere layout).
    assert gpu["ecc"] == {"current": True, "pending": True, "uncorrected_volatile": None, "uncorrected_aggregate": 0}
    assert gpu["remapped_rows"] is None
    assert gpu["retired_pages"] is None
    assert gpu["power"] == {"draw_w": 66.92, "limit_w": 400.0, "default_limit_w": 400.0, "enforced_limit_w": 400.0}
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"], gpu["temperature_c"]) == (40960, 38, 36)
    assert gpu["clocks_mhz"] == {"sm": 1410, "sm_max": 1410, "memory": 1215, "memory_max": 1215}
    assert gpu["pcie"] == {"gen": 4, "gen_max": 4, "gen_device_max": None, "width": 16, "width_max": 16}
    assert gpu["vbios_version"] == "92.00.45.00.03"


def test_gt1030_v11_consumer_card_without_ecc_serial_or_power_draw():
    facts = parse_smi_xml(fixture_text(*GT1030_V11))
    assert (facts["driver_version"], facts["cuda_driver_version"]) == ("470.74", "11.4")
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA GeForce GT 1030"
    assert gpu["serial"] is None
    assert gpu["architecture"] is None
    assert gpu["pci_bus_id"] == "00000000:2D:00.0"
    assert gpu["mig"] == {"current": None, "pending": None}
    assert gpu["ecc"] == {"current": None, "pending": None, "uncorrected_volatile": None, "uncorrected_aggregate": None}
    assert gpu["remapped_rows"] is None
    assert gpu["power"] == {"draw_w": None, "limit_w": 30.0, "default_limit_w": 30.0, "enforced_limit_w": 30.0}
    assert (gpu["memory_total_mib"], gpu["memory_used_mib"]) == (1998, 875)
    assert gpu["clocks_mhz"] == {"sm": 1265, "sm_max": 1949, "memory": 3003, "memory_max": 3004}
    assert gpu["pcie"] == {"gen": 3, "gen_max": 3, "gen_device_max": None, "width": 4, "width_max": 4}


def test_quadro_p2000_v12_downtrained_link():
    gpu = parse_smi_xml(fixture_text(*P2000_V12))["gpus"][0]
    assert gpu["name"] == "Quadro P2000"
    assert gpu["architecture"] == "Pascal"
    assert gpu["serial"] == "0322218049033"
    assert gpu["persistence_mode"] is True
    assert gpu["pcie"] == {"gen": 1, "gen_max": 3, "gen_device_max": 3, "width": 8, "width_max": 16}
    assert gpu["power"] == {"draw_w": 4.61, "limit_w": 75.0, "default_limit_w": 75.0, "enforced_limit_w": 75.0}
    assert gpu["temperature_c"] == 34


@pytest.mark.parametrize("fixture", XML_FIXTURES + Q_FIXTURES, ids=lambda fixture: fixture[-1])
def test_every_gpu_has_the_nvml_shape(fixture):
    facts = parse_smi_output(fixture_text(*fixture))
    assert sorted(facts) == ["cuda_driver_version", "driver_version", "gpu_count", "gpus", "nvml_version"]
    assert facts["gpu_count"] == len(facts["gpus"]) >= 1
    for index, gpu in enumerate(facts["gpus"]):
        assert sorted(gpu) == sorted(gpu_record(0))
        assert gpu["index"] == index
        assert gpu["uuid"].startswith("GPU-")


def test_h200_text_and_xml_agree():
    xml = parse_smi_xml(fixture_text(*H200_XML))
    text = parse_smi_q(fixture_text(*H200_Q))
    assert dict((k, v) for k, v in xml["gpus"][0].items() if k not in LIVE) == \
        dict((k, v) for k, v in text["gpus"][0].items() if k not in LIVE)
    assert text["gpus"][0]["power"] == {
        "draw_w": 77.32, "limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0}
    assert text["gpus"][0]["clocks_mhz"] == {"sm": 345, "sm_max": 1980, "memory": 3201, "memory_max": 3201}
    assert dict((k, v) for k, v in xml.items() if k != "gpus") == dict((k, v) for k, v in text.items() if k != "gpus")


def test_h100_8gpu_text():
    facts = parse_smi_q(fixture_text(*H100_Q))
    assert (facts["driver_version"], facts["cuda_driver_version"], facts["gpu_count"]) == ("565.57.01", "12.7", 8)
    assert [gpu["pci_bus_id"] for gpu in facts["gpus"]] == [
        "00000000:%s:00.0" % bus for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")]
    assert [gpu["uuid"] for gpu in facts["gpus"][:3]] == [
        "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1",
        "GPU-7c3cadbd-17e5-0913-f69b-c618122ea0cd",
        "GPU-2d50cdf6-dd67-9f2e-855e-0d4d6d395a2f",
    ]
    first = facts["gpus"][0]
    assert first["serial"] == "1654423001593"
    assert first["name"] == "NVIDIA H100 80GB HBM3"
    assert first["power"] == {"draw_w": 100.89, "limit_w": 700.0, "default_limit_w": 700.0, "enforced_limit_w": 700.0}
    assert first["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert first["ecc"] == {"current": True, "pending": True, "uncorrected_volatile": 0, "uncorrected_aggregate": 0}
    assert (first["memory_total_mib"], first["temperature_c"]) == (81559, 30)
    assert all(gpu["architecture"] == "Hopper" and gpu["persistence_mode"] for gpu in facts["gpus"])


def test_a10_text_pending_row_remap():
    gpu = parse_smi_q(fixture_text(*A10_Q))["gpus"][0]
    assert gpu["name"] == "NVIDIA A10"
    assert gpu["pci_bus_id"] == "00000000:07:00.0"
    # A real GPU that needs a reset: 4 uncorrectable remaps pending.
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}
    assert gpu["ecc"]["uncorrected_volatile"] == 0
    assert gpu["power"] == {"draw_w": 43.89, "limit_w": 150.0, "default_limit_w": 150.0, "enforced_limit_w": 150.0}
    assert gpu["retired_pages"] is None


def test_l4_text():
    facts = parse_smi_q(fixture_text(*L4_Q))
    gpu = facts["gpus"][0]
    assert (facts["driver_version"], facts["cuda_driver_version"]) == ("550.90.07", "12.4")
    assert (gpu["name"], gpu["architecture"], gpu["serial"]) == ("NVIDIA L4", "Ada Lovelace", "1653723016068")
    assert gpu["pcie"] == {"gen": 1, "gen_max": 4, "gen_device_max": 4, "width": 8, "width_max": 16}
    assert gpu["power"]["limit_w"] == 72.0


def test_rtx4070_wsl_text_partial_answers():
    gpu = parse_smi_q(fixture_text(*RTX4070_Q))["gpus"][0]
    assert gpu["name"] == "NVIDIA GeForce RTX 4070 Laptop GPU"
    assert gpu["serial"] is None
    assert gpu["ecc"] == {"current": None, "pending": None, "uncorrected_volatile": None, "uncorrected_aggregate": None}
    # WSL reports the enforced limit but not the requested one.
    assert gpu["power"] == {"draw_w": 1.97, "limit_w": None, "default_limit_w": 55.0, "enforced_limit_w": 61.24}


def test_old_double_bit_ecc_layout_and_retired_pages():
    text = """<?xml version="1.0" ?>
<nvidia_smi_log><driver_version>418.87.01</driver_version><cuda_version>10.1</cuda_version>
<gpu id="00000000:3B:00.0"><product_name>Tesla V100-SXM2-32GB</product_name><uuid>GPU-1</uuid>
<ecc_errors><volatile><double_bit><total>2</total></double_bit></volatile>
<aggregate><double_bit><total>5</total></double_bit></aggregate></ecc_errors>
<retired_pages><multiple_single_bit_retirement><retired_count>1</retired_count></multiple_single_bit_retirement>
<double_bit_retirement><retired_count>3</retired_count></double_bit_retirement>
<pending_blacklist>Yes</pending_blacklist></retired_pages>
<remapped_rows>N/A</remapped_rows></gpu></nvidia_smi_log>"""
    gpu = parse_smi_xml(text)["gpus"][0]
    assert (gpu["ecc"]["uncorrected_volatile"], gpu["ecc"]["uncorrected_aggregate"]) == (2, 5)
    assert gpu["retired_pages"] == {"single_bit_ecc": 1, "double_bit_ecc": 3, "pending": True}
    assert gpu["remapped_rows"] is None


def test_no_gpu_xml():
    text = "<nvidia_smi_log><driver_version>580.159.04</driver_version><attached_gpus>0</attached_gpus></nvidia_smi_log>"
    assert parse_smi_xml(text)["gpu_count"] == 0


def test_windows_line_endings_and_bytes():
    text = fixture_text(*H200_Q).replace("\n", "\r\n")
    assert parse_smi_q(text) == parse_smi_q(fixture_text(*H200_Q))
    assert parse_smi_xml(fixture_text(*H200_XML).encode("utf-8")) == parse_smi_xml(fixture_text(*H200_XML))


def test_warnings_around_the_document_are_ignored():
    text = ("WARNING: infoROM is corrupted at gpu 0000:00:06.0\n" + fixture_text(*H200_XML)
            + "\nWARNING: trailing\n")
    assert parse_smi_xml(text) == parse_smi_xml(fixture_text(*H200_XML))
    assert parse_smi_output(text)["gpu_count"] == 1


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("No devices were found", "not XML"),
    ("<nvidia_smi_log><gpu>", "not XML"),
    ("<html><body>502</body></html>", "expected <nvidia_smi_log>"),
])
def test_xml_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_smi_xml(text)


def test_text_fixture_is_not_xml():
    with pytest.raises(ValueError, match="not XML"):
        parse_smi_xml(fixture_text(*H200_Q))


def test_text_parser_rejects_other_output():
    with pytest.raises(ValueError, match="not nvidia-smi -q output"):
        parse_smi_q(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt"))


def test_dispatch_by_content():
    assert parse_smi_output(fixture_text(*H200_XML))["gpus"][0]["power"]["draw_w"] == 77.64
    assert parse_smi_output(fixture_text(*H200_Q))["gpus"][0]["power"]["draw_w"] == 77.32


def test_value_helpers():
    assert [available(value) for value in ("N/A", "[Not Supported]", " 5 ", None, "Unknown Error")] == [
        None, None, "5", None, None]
    assert to_number("143771 MiB") == 143771
    assert to_number("16x") == 16
    assert to_number("-8 C") == -8
    assert to_number("700.00 W", float) == 700.0
    assert to_number("N/A") is None
    assert to_number("Default") is None
    assert [to_state(value) for value in ("Enabled", "Disabled", "Yes", "No", "N/A", "Pass-Through")] == [
        True, False, True, False, None, None]


def test_compute_cap_csv():
    assert parse_compute_cap_csv("0, 9.0\n1, 9.0\n") == {0: "9.0", 1: "9.0"}
    assert parse_compute_cap_csv("0, [N/A]\n") == {}
    assert parse_compute_cap_csv('Field "compute_cap" is not a valid field to query.\n') == {}


def test_plain_nvidia_smi_table_is_refused():
    # It names the driver, so it used to read as "driver loaded, 0 GPUs" on a host with one.
    with pytest.raises(ValueError, match="plain nvidia-smi table"):
        parse_smi_q(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi.txt"))
    with pytest.raises(ValueError, match="plain nvidia-smi table"):
        parse_smi_output(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi.txt"))


def test_truncated_text_is_refused():
    text = fixture_text(*H100_Q)
    cut = text[:text.index("GPU 00000000", text.index("GPU 00000000") + 1)]
    with pytest.raises(ValueError, match="says 8 attached GPU.s. but holds 1 GPU section"):
        parse_smi_q(cut)
    with pytest.raises(ValueError, match="no \"Attached GPUs\" line"):
        parse_smi_q(text.replace("Attached GPUs", "Attached"))


def test_h100_nvswitch_text_fabric_and_link():
    facts = parse_smi_q(fixture_text(*H100_Q))
    assert [gpu["fabric"] for gpu in facts["gpus"]] == [{"state": "Completed", "status": "Success"}] * 8
    # Idle, and still Gen5 x16 on this HGX board.
    assert [(gpu["idle"], gpu["pcie"]) for gpu in facts["gpus"]] == [
        (True, {"gen": 5, "gen_max": 5, "gen_device_max": 5, "width": 16, "width_max": 16})] * 8


def test_fabric_state_in_progress_xml():
    text = fixture_text(*H200_XML).replace(
        "<fabric>\n\t\t\t<state>N/A</state>\n\t\t\t<status>N/A</status>",
        "<fabric>\n\t\t\t<state>In Progress</state>\n\t\t\t<status>N/A</status>")
    assert parse_smi_xml(text)["gpus"][0]["fabric"] == {"state": "In Progress", "status": None}


def test_idle_pcie_cards_narrow_their_link():
    # Why gpu.pcie_link judges the current width only on profiles that ask for it: an idle L4
    # reports Gen1 x8 of Gen4 x16.
    gpu = parse_smi_q(fixture_text(*L4_Q))["gpus"][0]
    assert gpu["idle"] is True
    assert gpu["pcie"] == {"gen": 1, "gen_max": 4, "gen_device_max": 4, "width": 8, "width_max": 16}


def test_indexes_are_nvidia_smis_order_not_minor_numbers():
    """A host whose minor numbers are 2, 3, 0, 1 (derived from the H200 capture, see its .source)."""
    parsed = parse_smi_xml(fixture_text("derived", "h200-4gpu-minor-permuted-q-x.xml"))
    assert [(gpu["index"], gpu["pci_bus_id"]) for gpu in parsed["gpus"]] == [
        (0, "00000000:18:00.0"), (1, "00000000:2A:00.0"), (2, "00000000:3A:00.0"), (3, "00000000:5D:00.0")]
