# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.host_prep import host_prep_node_state, host_prep_plan
from ansible_collections.gpucloud.fleet.plugins.plugin_utils.host_prep import HostPrepError, node_state, plan


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


# What roles/host_prep/tasks/read_node.yml prints; the files section from a lab container.
def read(secure_boot="SecureBoot disabled", rc=0, modprobe="options nouveau modeset=0\nalias fs-ext4 ext4",
         files="grub_cfg 1764780000.25\ngrub_fragment 1764779990.5\ngovernor_unit -\nondemand -",
         cpufreq="/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor",
         available="performance powersave", governors="powersave\nperformance"):
    return "\n".join(["@@secure-boot", secure_boot, "@@secure-boot-rc %s" % rc, "@@modprobe", modprobe,
                      "@@files", files, "@@cpufreq", cpufreq, "@@governors-available", available,
                      "@@governors", governors]).replace("\n\n", "\n") + "\n"


@pytest.mark.parametrize("secure_boot, rc, state", [
    ("SecureBoot enabled", 0, "enabled"),
    ("SecureBoot disabled\nPlatform is in Setup Mode", 0, "disabled"),
    ("SecureBoot enabled", 1, "unknown"),
    ("EFI variables are not supported on this system", 255, "not_supported"),
    ("EFI variables are not supported on this system", 0, "not_supported"),
    ("mokutil: not found", 127, "unknown"),
    ("", 0, "unknown"),
    ("Failed to read SecureBoot", 1, "unknown"),
])
def test_secure_boot_state_is_read_never_guessed(secure_boot, rc, state):
    assert node_state(read(secure_boot=secure_boot, rc=rc))["secure_boot_state"] == state


def test_secure_boot_detail_is_one_line():
    assert node_state(read("SecureBoot disabled\nPlatform is in Setup Mode"))["secure_boot_detail"] == \
        "SecureBoot disabled Platform is in Setup Mode"


def test_squashfs_blocks_are_the_rules_that_keep_it_out():
    modprobe = "\n".join(["install squashfs /bin/true", "blacklist squashfs", "blacklist squashfs_extra",
                          "install squashfsx /bin/false", "options squashfs x=1", "# blacklist squashfs",
                          "blacklist cramfs"])
    assert node_state(read(modprobe=modprobe))["squashfs_blocks"] == ["install squashfs /bin/true", "blacklist squashfs"]


def test_files_and_governors():
    state = node_state(read())
    assert state["files"] == {"grub_cfg": 1764780000.25, "grub_fragment": 1764779990.5, "governor_unit": None,
                              "ondemand": None}
    assert state["cpufreq"] is True
    assert state["governors_available"] == ["performance", "powersave"]
    assert state["governors_offered"] == "performance powersave"
    assert state["governors"] == ["powersave", "performance"]


def test_no_cpufreq():
    state = node_state(read(cpufreq="", available="", governors=""))
    assert (state["cpufreq"], state["governors_available"], state["governors"]) == (False, [], [])


@pytest.mark.parametrize("text, words", [
    ("stray\n" + read(), "outside a section"),
    (read().replace("@@governors\n", ""), "sections governors missing"),
    (read().replace("@@secure-boot-rc 0\n", ""), "secure-boot-rc"),
    (read(rc="x"), "exit status"),
    (read(files="grub_cfg yesterday"), "grub_cfg has no mtime"),
    (read() + "@@other\n", "unknown section"),
])
def test_a_broken_read_is_an_error(text, words):
    with pytest.raises(HostPrepError, match=words):
        node_state(text)
    with pytest.raises(AnsibleFilterError, match="^host_prep_node_state: "):
        host_prep_node_state(text)
