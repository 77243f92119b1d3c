# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.pcie_acs import LspciError, judge, parse_lspci
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

PLX = fixture_text("public", "lspci", "plx-pex8725-acs-on-heymeco.txt")
# The excerpt starts inside a port; its header line (added here, not captured) makes it a device.
PLX_PORT = ("0000:02:01.0 PCI bridge: PLX Technology, Inc. PEX 8725 24-Lane, 10-Port PCI Express Gen 3 (8.0 GT/s) "
            "Multi-Root Switch with DMA (rev ca) (prog-if 00 [Normal decode])\n"
            "        Bus: primary=02, secondary=03, subordinate=03, sec-latency=0\n"
            "        Capabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\n")
GPU = ("0000:03:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
       "        Subsystem: NVIDIA Corporation Device 17a6\n")


def test_captured_plx_port_with_acs_on():
    devices = parse_lspci(PLX_PORT + PLX)
    assert [d["address"] for d in devices] == ["0000:02:01.0", "0000:02:08.0"]
    assert devices[0]["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                                     "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert (devices[1]["secondary"], devices[1]["subordinate"], devices[1]["acs_ctl"]) == (0x82, 0x82, None)
    assert judge(devices) == {"redirecting": ["0000:02:01.0 (ReqRedir+ CmpltRedir+)"], "ports": 1}


def test_a_gpu_behind_the_port_is_judged_and_one_elsewhere_is_not():
    assert judge(parse_lspci(PLX_PORT + PLX + GPU))["redirecting"] == ["0000:02:01.0 (ReqRedir+ CmpltRedir+)"]
    elsewhere = GPU.replace("0000:03:00.0", "0000:41:00.0")
    assert judge(parse_lspci(PLX_PORT + PLX + elsewhere)) == {"redirecting": [], "ports": 0}


def test_acs_cleared_with_setpci_passes():
    cleared = (PLX_PORT + PLX).replace(
        "ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+",
        "ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd-")
    assert judge(parse_lspci(cleared + GPU)) == {"redirecting": [], "ports": 1}


@pytest.mark.parametrize("text, message", [
    ("", "not lspci -vvv output"),
    ("                ACSCtl: SrcValid+ ReqRedir+\n", "not lspci -vvv output"),
    (PLX_PORT.replace("Capabilities: [68] Express", "Capabilities: <access denied>\n        Express"),
     "run it as root"),
])
def test_refuses_what_it_cannot_judge(text, message):
    with pytest.raises(LspciError, match=message):
        parse_lspci(text)


def test_acceptance_fails_on_redirecting_ports():
    profile = {"name": "hgx", "gpu_count": 0, "pcie_acs": True, "firewall": False}
    acs = judge(parse_lspci(PLX_PORT + PLX + GPU))
    check = dict((c["check"], c) for c in acceptance.evaluate("n1", profile, {}, {"pcie_acs": acs}))["pcie.acs"]
    assert check["status"] == "fail"
    assert check["detail"].startswith("ACS redirects peer-to-peer traffic to the root complex on "
                                      "0000:02:01.0 (ReqRedir+ CmpltRedir+)")
