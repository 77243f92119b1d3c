# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.gpu_monitoring import (
    FilterModule, gpu_monitoring_source, monitoring_server_targets)
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.gpu_monitoring import (
    GpuMonitoringError, gpu_source, scrape_target, scrape_targets)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def _facts(name):
    with open(os.path.join(ROOT, "tests", "fixtures", "facts", "virtual", name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


METAL = {"virtualization_role": "host", "virtualization_type": "kvm", "virtualization_tech_guest": [],
         "default_ipv4": {"address": "10.0.0.11"}}
LAB = _facts("podman-debian12")


@pytest.mark.parametrize("requested, version, facts, expected", [
    ("auto", "4.2.3-1", METAL, "dcgm"),
    ("auto", "4.2.3-1", LAB, "collector"),        # nv-hostengine cannot run in a container
    ("auto", "4.2.3-1", _facts("kvm-vm"), "dcgm"),
    ("auto", "", METAL, "collector"),            # no DCGM version locked
    ("auto", None, METAL, "collector"),
    ("auto", "  ", METAL, "collector"),
    ("dcgm", "", LAB, "dcgm"),                   # asked for: as asked
    ("collector", "4.2.3-1", METAL, "collector"),
])
def test_gpu_source(requested, version, facts, expected):
    assert gpu_source(requested, version, facts) == expected
    assert gpu_monitoring_source(requested, version, facts) == expected


@pytest.mark.parametrize("requested", ["nvml", "DCGM", "", None, True])
def test_a_bad_source_names_the_variable(requested):
    with pytest.raises(GpuMonitoringError, match="gpu_monitoring_gpu_source must be one of auto, dcgm, collector"):
        gpu_source(requested, "4.2.3-1", METAL)
    with pytest.raises(AnsibleFilterError, match="gpu_monitoring_source: gpu_monitoring_gpu_source"):
        gpu_monitoring_source(requested, "4.2.3-1", METAL)


HOSTVARS = {
    "gpu2": {"ansible_host": "10.0.0.12", "gpucloud_profile": {"name": "h200"},
             "gpucloud_version_lock": {"dcgm": "4.2.3-1"}, "ansible_facts": METAL},
    "gpu1": {"monitoring_server_target_address": "fd00::11", "ansible_host": "10.0.0.11",
             "gpucloud_profile": {"name": "h200"}, "gpucloud_version_lock": {"dcgm": "4.2.3-1"}, "ansible_facts": LAB},
    "gpu3": {"ansible_facts": METAL, "gpu_monitoring_dcgm_version": "4.2.3-1"},
    "gpu4": {"gpucloud_version_lock": {"dcgm": "4.2.3-1"}, "gpu_monitoring_gpu_source": "collector",
             "monitoring_server_scrape_dcgm": "yes"},
    "gpu5": {"gpucloud_version_lock": {"dcgm": "4.2.3-1"}, "gpu_monitoring_dcgm_version": ""},
    "other": {},
}


def test_scrape_targets():
    assert scrape_targets(["gpu3", "gpu1", "gpu2", "gpu4", "gpu5"], HOSTVARS) == [
        # a container: the collector, whatever the lock says; an IPv6 address in brackets
        {"node": "gpu1", "profile": "h200", "address": "[fd00::11]", "dcgm": False},
        {"node": "gpu2", "profile": "h200", "address": "10.0.0.12", "dcgm": True},
        # no ansible_host: the gathered default IPv4 address; the host's own DCGM version; no profile
        {"node": "gpu3", "profile": "", "address": "10.0.0.11", "dcgm": True},
        # the override wins; no address known: the name
        {"node": "gpu4", "profile": "", "address": "gpu4", "dcgm": True},
        # gpu_monitoring_dcgm_version set empty on the host wins over the lock
        {"node": "gpu5", "profile": "", "address": "gpu5", "dcgm": False},
    ]


def test_the_two_roles_agree():
    """monitoring_server scrapes dcgm-exporter exactly where gpu_monitoring installs it."""
    for node, hv in HOSTVARS.items():
        if "monitoring_server_scrape_dcgm" in hv:
            continue
        version = hv.get("gpu_monitoring_dcgm_version", hv.get("gpucloud_version_lock", {}).get("dcgm", ""))
        installed = gpu_source(hv.get("gpu_monitoring_gpu_source", "auto"), version, hv.get("ansible_facts", {}))
        assert scrape_target(node, hv)["dcgm"] is (installed == "dcgm"), node


def test_no_nodes():
    assert scrape_targets([], HOSTVARS) == []


@pytest.mark.parametrize("nodes, hostvars, message", [
    ("gpu1", HOSTVARS, "expected a list of GPU nodes"),
    (["gpu9"], HOSTVARS, "gpu9 is in the GPU node group but not in the inventory"),
    (["gpu1"], ["gpu1"], "hostvars must be a mapping"),
    (["g"], {"g": {"gpu_monitoring_gpu_source": "nvml"}}, "g: gpu_monitoring_gpu_source must be one of"),
    (["g"], {"g": {"monitoring_server_scrape_dcgm": "maybe"}}, "g: monitoring_server_scrape_dcgm must be a boolean"),
    (["g"], {"g": {"ansible_facts": "podman"}}, "g: ansible_facts must be a mapping"),
])
def test_bad_input(nodes, hostvars, message):
    with pytest.raises(GpuMonitoringError, match=message):
        scrape_targets(nodes, hostvars)
    with pytest.raises(AnsibleFilterError, match="monitoring_server_targets: " + message):
        monitoring_server_targets(nodes, hostvars)


def test_the_filters_are_the_functions():
    filters = FilterModule().filters()
    assert filters["gpu_monitoring_source"]("auto", "4.2.3-1", METAL) == "dcgm"
    assert filters["monitoring_server_targets"](["gpu2"], HOSTVARS)[0]["dcgm"] is True
