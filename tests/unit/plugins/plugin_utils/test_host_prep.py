# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.host_prep import host_prep_plan
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.host_prep import HostPrepError, plan


def settings(**changes):
    base = {
        "host_prep_reboot_timeout": 1800, "host_prep_bmc_timeout": 30, "host_prep_kernel_cmdline": [],
        "host_prep_sysctl": {"kernel.yama.ptrace_scope": 0, "vm.swappiness": 10}, "host_prep_sysctl_extra": {},
        "host_prep_fabric_multi_nic": False, "host_prep_bios_attributes": {}, "host_prep_bmc_address": "",
        "host_prep_bmc_username": "", "host_prep_bmc_password": "",
        "os_family": "Debian", "distribution": "Debian", "distribution_version": "12.8",
        "distribution_major_version": "12", "supported": True, "inventory_hostname": "gpu-1",
    }
    base.update(changes)
    return base


def test_defaults_plan_the_profile_unchanged():
    assert plan(settings()) == {"sysctl": {"kernel.yama.ptrace_scope": 0, "vm.swappiness": 10}}


def test_multi_nic_loosens_rp_filter_and_extra_wins():
    result = plan(settings(host_prep_fabric_multi_nic="yes",
                           host_prep_sysctl_extra={"net.ipv4.conf.default.rp_filter": 0, "vm.swappiness": "1"}))
    assert result["sysctl"] == {"kernel.yama.ptrace_scope": 0, "vm.swappiness": "1",
                                "net.ipv4.conf.all.rp_filter": 2, "net.ipv4.conf.default.rp_filter": 0}


@pytest.mark.parametrize("name", ["host_prep_reboot_timeout", "host_prep_bmc_timeout"])
@pytest.mark.parametrize("value", [0, -1, "0", "900\n", " 900", "15m", 1.5, True, None, "", [900]])
def test_timeouts_must_be_positive_whole_seconds(name, value):
    with pytest.raises(HostPrepError, match="^%s: .* must be a whole number of seconds" % name):
        plan(settings(**{name: value}))


@pytest.mark.parametrize("value", [1, "900", 900])
def test_positive_timeouts_pass(value):
    plan(settings(host_prep_reboot_timeout=value, host_prep_bmc_timeout=value))


@pytest.mark.parametrize("changes", [
    {"supported": False}, {"supported": "false"},
    {"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "8", "distribution_version": "8.9"},
])
def test_unsupported_os_is_refused_naming_the_host(changes):
    with pytest.raises(HostPrepError, match="host_prep supports .*; gpu-1 runs"):
        plan(settings(**changes))


def test_rhel_9_is_supported():
    plan(settings(os_family="RedHat", distribution="RedHat", distribution_major_version="9", distribution_version="9.4"))


@pytest.mark.parametrize("entry", [
    "iommu=pt\n", "a b", "a='b'", 'a="b"', "a=$(reboot)", "a=b;c", "a=b|c", "a=b&c", "a=<b", "a=(b)", "a=`b`",
    "a=b\\c", "=b", "", "a=", 5, None,
])
def test_malformed_cmdline_entries_are_refused(entry):
    with pytest.raises(HostPrepError, match=r"^host_prep_kernel_cmdline: malformed entries"):
        plan(settings(host_prep_kernel_cmdline=["iommu=pt", entry]))


def test_wellformed_cmdline_entries_pass():
    plan(settings(host_prep_kernel_cmdline=["iommu=pt", "quiet", "pci=realloc=off", "intel_iommu=on,sm_on",
                                            "hugepagesz=1G", "a.b-c_d=1:2/3"]))


@pytest.mark.parametrize("extra", [
    {"vm.swappiness\n": 10}, {"swappiness": 10}, {"Vm.swappiness": 1}, {"vm.swappiness": "1\n"},
    {"vm.swappiness": "a=b"}, {"vm.swappiness": [1]}, {"vm.swappiness": None}, {"vm.swappiness": {"a": 1}},
])
def test_malformed_sysctl_is_refused(extra):
    with pytest.raises(HostPrepError, match=r"^host_prep_sysctl / host_prep_sysctl_extra: malformed keys"):
        plan(settings(host_prep_sysctl_extra=extra))


@pytest.mark.parametrize("changes", [
    {"host_prep_sysctl_extra": {"kernel.yama.ptrace_scope": 2}},
    {"host_prep_sysctl_extra": {"kernel.yama.ptrace_scope": "3"}},
    {"host_prep_sysctl_extra": {"net.ipv4.ip_forward": 0}},
    {"host_prep_sysctl_extra": {"net.ipv4.ip_forward": "0"}},
    {"host_prep_fabric_multi_nic": True, "host_prep_sysctl_extra": {"net.ipv4.conf.all.rp_filter": 1}},
])
def test_sysctl_that_breaks_gpu_nodes_is_refused(changes):
    with pytest.raises(HostPrepError, match=r"^host_prep_sysctl / host_prep_sysctl_extra break GPU nodes"):
        plan(settings(**changes))


def test_strict_rp_filter_is_allowed_with_one_nic():
    plan(settings(host_prep_sysctl_extra={"net.ipv4.conf.all.rp_filter": 1}))


@pytest.mark.parametrize("changes", [
    {"host_prep_bios_attributes": {"SriovGlobalEnable": "Enabled"}},
    {"host_prep_bmc_address": "https://bmc", "host_prep_bmc_username": "u", "host_prep_bmc_password": "p"},
    {"host_prep_bmc_address": "bmc.example.net\n", "host_prep_bmc_username": "u", "host_prep_bmc_password": "p"},
    {"host_prep_bmc_address": "bmc.example.net", "host_prep_bmc_username": "u"},
    {"host_prep_bmc_address": "bmc.example.net", "host_prep_bmc_password": "p"},
])
def test_incomplete_bmc_settings_are_refused(changes):
    with pytest.raises(HostPrepError, match=r"^host_prep_bios_attributes needs host_prep_bmc_address"):
        plan(settings(**changes))


def test_complete_bmc_settings_pass():
    plan(settings(host_prep_bios_attributes={"A": 1}, host_prep_bmc_address="[fe80::1]:443",
                  host_prep_bmc_username="u", host_prep_bmc_password="p"))


def test_the_filter_names_itself_and_chains():
    with pytest.raises(AnsibleFilterError, match="^host_prep_plan: host_prep_reboot_timeout") as info:
        host_prep_plan(settings(host_prep_reboot_timeout=0))
    assert isinstance(info.value.__cause__, HostPrepError)
