# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The pure readers under the node_observation module, on captures."""


import os

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.module_utils import node_observation as obs
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

UBUNTU_580 = fixture_text("dpkg", "dpkg-query-ubuntu2404-nvidia-utils-580-server.txt")


def role_default(name):
    with open(os.path.join(ROOT, "roles", "node_acceptance", "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)[name]


def test_role_default_patterns_find_ubuntus_server_driver():
    stack = obs.stack_from_packages(UBUNTU_580, role_default("node_acceptance_stack_packages"))
    assert stack == {"driver": "580.178.04-0ubuntu0.24.04.1", "cuda": None, "cudnn": None, "nccl": None}


def test_packages_not_installed_do_not_count():
    listing = "nvidia-driver-580 580.95.05-1 config-files\nnvidia-driver-570 570.10-1 installed\n"
    assert obs.stack_from_packages(listing, {"driver": ["nvidia-driver-[0-9]*"]}) == {"driver": "570.10-1"}


def test_stack_versions_capture():
    assert obs.parse_stack_versions(fixture_text("h200-ubuntu2404-driver580", "stack-versions.txt")) == {
        "cuda": "13.0", "cudnn": "9.19.0", "nccl": "2.28.9"}


@pytest.mark.parametrize("installed,pending", [
    ("580.159.04-0ubuntu1", False),
    ("580.178.04-0ubuntu0.24.04.1", True),
    (None, None),
])
def test_loaded_module_against_the_installed_driver(installed, pending):
    proc = fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")
    assert obs.driver_reboot_pending(proc, installed)["pending"] is pending
    assert obs.driver_reboot_pending("", "580.159.04")["pending"] is None


def test_reboot_record_as_ubuntu_writes_it():
    files = {obs.REBOOT_REQUIRED: fixture_text("reboot", "ubuntu2404-reboot-required.txt"),
             obs.REBOOT_REQUIRED_PKGS: fixture_text("reboot", "ubuntu2404-reboot-required.pkgs")}
    assert obs.reboot_record(files.get) == {"pending": True, "reasons": ["linux-image-6.8.0-90-generic", "libc6"]}


def test_reasons_without_the_record_are_not_a_pending_reboot():
    files = {obs.REBOOT_REASONS: "nvidia_driver: driver 580 installed\n"}
    assert obs.reboot_record(files.get) == {"pending": False, "reasons": ["nvidia_driver: driver 580 installed"]}
    assert obs.reboot_record({}.get) == {"pending": False, "reasons": []}


def test_only_xid_lines_leave_the_node():
    log = fixture_text("h200-ubuntu2404-driver580", "dmesg_nvrm.txt")
    xid = "[  812.4] NVRM: Xid (PCI:0000:00:06): 79, pid=3120, name=python3, GPU has fallen off the bus.\r\n"
    assert obs.xid_lines(log) == ""
    assert obs.xid_lines(log + xid) == xid.rstrip("\r\n") + "\n"


def test_clevis_servers_from_a_two_server_binding():
    text = fixture_text("disk_encryption", "clevis-luks-list-sss-two-tang-t1.txt")
    assert obs.clevis_servers(text) == ["http://127.0.0.1:18761", "http://127.0.0.1:18762"]
    assert obs.clevis_servers(fixture_text("disk_encryption", "clevis-luks-list-unbound.txt")) == []


def test_what_a_profile_asks_to_read():
    assert obs.wanted({"gpu_count": 0}) == {
        "gpus": False, "mig": False, "topology": False, "ib": False, "xid": False, "tang": False,
        "firewall": True, "fabric_manager": False, "pcie_acs": False}
    nvswitch = obs.wanted({"gpu_count": "8", "nvswitch": True, "mig": {"layout": "x"}, "xid": False})
    assert (nvswitch["gpus"], nvswitch["mig"], nvswitch["xid"], nvswitch["fabric_manager"], nvswitch["pcie_acs"]) == (
        True, True, False, True, True)
    assert obs.wanted({"gpu_count": 8, "nvswitch": True, "pcie_acs": False})["pcie_acs"] is False
    with pytest.raises(obs.ObservationError, match="gpu_count must be a number"):
        obs.wanted({"gpu_count": None})
