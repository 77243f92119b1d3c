# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""node_observation: one read-only call returns the whole observation; expectations never fail it."""


import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import node_observation
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import FakeCommands, fixture_text, run_module

SMI = "/usr/bin/nvidia-smi"
DPKG = "/usr/bin/dpkg-query"
LISTING = (DPKG, "-W", "-f=${Package} ${Version} ${db:Status-Status}\n")
H200_XML = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml")
PROC_VERSION = fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")
STACK = fixture_text("h200-ubuntu2404-driver580", "stack-versions.txt")
# dpkg-query of an Ubuntu 24.04 node with Ubuntu's 580.178.04 server driver userspace.
UBUNTU_580 = fixture_text("dpkg", "dpkg-query-ubuntu2404-nvidia-utils-580-server.txt")
KERNEL_LOG = fixture_text("h200-ubuntu2404-driver580", "dmesg_nvrm.txt")
XID_79 = "[  812.400000] NVRM: Xid (PCI:0000:00:06): 79, pid=3120, name=python3, GPU has fallen off the bus.\n"
REBOOT_REQUIRED = fixture_text("reboot", "ubuntu2404-reboot-required.txt")
REBOOT_PKGS = fixture_text("reboot", "ubuntu2404-reboot-required.pkgs")
PATTERNS = {"driver": ["nvidia-open", "nvidia-driver-[0-9]*", "nvidia-utils-[0-9]*"], "nccl": ["libnccl2"]}
SMI_H200 = {
    (SMI, "-q", "-x"): (0, H200_XML, ""),
    (SMI, "--query-gpu=index,compute_cap", "--format=csv,noheader"): (0, "0, 9.0\n", ""),
}
H200 = {"name": "h200", "gpu_count": 1, "gpu_model": "H200", "firewall": False, "xid": False}


@pytest.fixture
def files(monkeypatch):
    """The node's files, by path; every path the module reads is recorded."""
    table = {}
    read = []

    def read_file(path):
        read.append(path)
        return table.get(path)

    monkeypatch.setattr(node_observation, "read_text", read_file)
    monkeypatch.setattr(node_observation, "pynvml", None)
    return table, read


def observe(args, commands, check_mode=False):
    return run_module(node_observation, args, check_mode=check_mode, commands=commands)


def test_healthy_gpu_node_is_read_once_in_check_mode(files):
    table, _read = files
    table["/proc/driver/nvidia/version"] = PROC_VERSION
    commands = FakeCommands(SMI_H200)
    result = observe({"profile": H200, "stack_text": STACK}, commands, check_mode=True)
    assert not result.get("failed"), result
    assert result["changed"] is False
    assert result["pending_reboot"] is False
    observed = result["observation"]
    assert observed["stack"] == {"cuda": "13.0", "cudnn": "9.19.0", "nccl": "2.28.9"}
    assert observed["reboot_required"] is False
    assert "driver_mismatch" not in observed
    assert observed["nvidia"]["gpu_count"] == 1
    assert observed["nvidia"]["driver_version"] == "580.159.04"
    assert observed["nvidia"]["gpus"][0]["compute_capability"] == "9.0"
    # Only what the profile asks for: no firewall, no Xid, no topology, no InfiniBand.
    assert sorted(observed) == ["nvidia", "reboot_required", "stack"]


def test_installed_stack_comes_from_the_package_database(files):
    commands = FakeCommands({**SMI_H200, LISTING: (0, UBUNTU_580, "")})
    result = observe({"profile": dict(H200, gpu_count=0), "stack_packages": PATTERNS}, commands)
    assert result["observation"]["stack"] == {"driver": "580.178.04-0ubuntu0.24.04.1", "nccl": None}
    assert commands.calls[0] == (list(LISTING), {"LC_ALL": "C", "LANG": "C"})


def test_loaded_module_that_is_not_the_installed_driver_waits_for_a_reboot(files):
    table, _read = files
    table["/proc/driver/nvidia/version"] = PROC_VERSION  # 580.159.04 loaded, 580.178.04 installed
    commands = FakeCommands({LISTING: (0, UBUNTU_580, "")})
    result = observe({"profile": H200, "stack_packages": PATTERNS}, commands)
    assert result["pending_reboot"] is True
    observed = result["observation"]
    assert observed["driver_mismatch"] == {"pending": True, "loaded": "580.159.04",
                                           "installed": "580.178.04-0ubuntu0.24.04.1"}
    assert observed["reboot_required"] is False
    # The GPUs are not asked: nvidia-smi would only answer "Driver/library version mismatch".
    assert "nvidia" not in observed
    assert [argv[0] for argv, _env in commands.calls] == [DPKG]


def test_recorded_reboot_is_pending_with_its_reasons_and_leaves_the_gpus_alone(files):
    table, _read = files
    table["/run/reboot-required"] = REBOOT_REQUIRED
    table["/run/reboot-required.pkgs"] = REBOOT_PKGS
    table["/run/gpucloud/reboot-reasons"] = "nvidia_driver: driver 580.178.04 installed\n\nlinux-image-6.8.0-90-generic\n"
    commands = FakeCommands({"/usr/sbin/iptables": (0, "-P INPUT ACCEPT\n-A INPUT -j GPUCLOUD-INPUT\n", "")})
    result = observe({"profile": dict(H200, firewall=True), "stack_text": STACK}, commands)
    assert result["pending_reboot"] is True
    observed = result["observation"]
    assert observed["reboot_required"] is True
    assert observed["reboot_reasons"] == ["nvidia_driver: driver 580.178.04 installed",
                                          "linux-image-6.8.0-90-generic", "libc6"]
    assert "nvidia" not in observed
    # What does not need the GPUs is still read.
    assert observed["firewall"] == {"active": True, "detail": "`iptables -w -S INPUT` shows -j GPUCLOUD-INPUT"}


def test_reboot_required_by_the_caller_is_pending_without_a_record(files):
    result = observe({"profile": H200, "stack_text": STACK, "reboot_required": True}, FakeCommands())
    assert result["pending_reboot"] is True
    assert result["observation"]["reboot_required"] is True
    assert "reboot_reasons" not in result["observation"]


def test_reboot_pending_false_decides_without_reading_the_record(files):
    table, read = files
    table["/run/reboot-required"] = REBOOT_REQUIRED
    table["/proc/driver/nvidia/version"] = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.163.01  x\n"
    result = observe({"profile": H200, "stack_text": "", "reboot_pending": False}, FakeCommands(SMI_H200))
    assert result["pending_reboot"] is False
    assert result["observation"]["nvidia"]["gpu_count"] == 1
    assert not [path for path in read if path.startswith("/run/")]


def test_captured_gpus_are_read_even_while_a_reboot_is_pending(files):
    result = observe({"profile": H200, "stack_text": STACK, "reboot_pending": True, "gpu_text": H200_XML},
                     FakeCommands())
    assert result["pending_reboot"] is True
    assert result["observation"]["nvidia"]["gpu_count"] == 1


def test_unmet_topology_and_fabric_expectations_are_observations_not_failures(files):
    profile = dict(H200, topology={"gpu_count": 8, "min_nvlinks": 18}, ib={"hca_count": 8, "rate": 400})
    topo = fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
    # ibstat is not installed: no HCA, which the expectation then reports.
    result = observe({"profile": profile, "stack_text": STACK, "reboot_pending": False, "gpu_text": H200_XML,
                      "topology_text": topo}, FakeCommands())
    assert not result.get("failed"), result
    observed = result["observation"]
    assert observed["topology"]["error"] == ""
    assert "GPU0-GPU1: NV12, expected at least NV18" in observed["topology"]["mismatches"]
    assert observed["ib"] == {"mismatches": ["expected 8 HCA(s), found 0 (none)"], "error": ""}


def test_topology_without_a_gpu_and_a_topology_key_nobody_knows(files):
    commands = FakeCommands({SMI: (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                                      "driver.\n", "")})
    result = observe({"profile": dict(H200, topology={"gpu_count": 8}), "stack_text": STACK}, commands)
    assert result["observation"]["nvidia"]["driver_loaded"] is False
    assert result["observation"]["topology"] == {"error": "no GPU present, nothing to read"}
    topo = fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
    result = observe({"profile": dict(H200, topology={"min_nvlink": 12}), "stack_text": STACK,
                      "reboot_pending": False, "gpu_text": H200_XML, "topology_text": topo}, FakeCommands())
    assert result["observation"]["topology"]["mismatches"] == []
    assert "unknown keys min_nvlink" in result["observation"]["topology"]["error"]


def test_captured_ibstat_on_the_node_matches_the_profile(files):
    table, _read = files
    table["/tmp/ibstat.txt"] = fixture_text("public", "ibstat", "h100-node-8x-cx7-ndr-4x-cx6dx-eth-tabs-gpud.txt")
    # The capture's eight 400 Gb/s RoCE ports (its 100 Gb/s ones are the front-end NICs).
    roce = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
    profile = dict(H200, gpu_count=0, ib={"hca_count": 8, "ca_names": roce, "rate": 400, "link_layer": "Ethernet"})
    result = observe({"profile": profile, "stack_text": STACK, "ib_src": "/tmp/ibstat.txt"}, FakeCommands())
    assert result["observation"]["ib"] == {"mismatches": [], "error": ""}
    result = observe({"profile": dict(profile, ib=dict(profile["ib"], link_layer="InfiniBand")), "stack_text": STACK,
                      "ib_src": "/tmp/ibstat.txt"}, FakeCommands())
    assert len(result["observation"]["ib"]["mismatches"]) == 8
    assert result["observation"]["ib"]["mismatches"][0] == "mlx5_0 port 1: link layer is Ethernet, expected InfiniBand"
    result = observe({"profile": profile, "stack_text": STACK, "ib_src": "/tmp/missing.txt"}, FakeCommands())
    assert result["observation"]["ib"]["error"].startswith("src /tmp/missing.txt is missing or empty")


def test_kernel_log_keeps_only_the_xid_lines_and_falls_back_to_dmesg(files):
    profile = dict(H200, gpu_count=1, xid=True)
    args = {"profile": profile, "stack_text": STACK, "reboot_pending": True}
    journal = ("/usr/bin/journalctl", "-k", "-b", "-o", "cat", "--no-pager", "-q")
    result = observe(args, FakeCommands({journal: (0, KERNEL_LOG + XID_79, "")}))
    assert result["observation"]["kernel_log"] == {"text": XID_79, "source": "journalctl -k -b"}
    # A container's journal holds no kernel messages: dmesg answers.
    result = observe(args, FakeCommands({journal: (0, "", ""), "/usr/bin/dmesg": (0, KERNEL_LOG, "")}))
    assert result["observation"]["kernel_log"] == {"text": "", "source": "dmesg"}
    denied = "dmesg: read kernel buffer failed: Operation not permitted\n"
    result = observe(args, FakeCommands({journal: (1, "", ""), "/usr/bin/dmesg": (1, "", denied)}))
    assert result["observation"]["kernel_log"] == {
        "error": "neither journalctl -k -b nor dmesg could be read: dmesg: read kernel buffer failed: Operation not permitted"}
    # A capture is judged as it is, named by its file.
    result = observe(dict(args, xid_text=XID_79, xid_source="/tmp/kernel.log"), FakeCommands())
    assert result["observation"]["kernel_log"] == {"text": XID_79, "source": "/tmp/kernel.log"}


def test_tang_bound_volume_open_and_mounted(files):
    device = "/dev/nvme1n1"
    commands = FakeCommands({
        ("/usr/sbin/cryptsetup", "isLuks", device): (0, "", ""),
        ("/usr/bin/clevis", "luks", "list", "-d", device): (
            0, fixture_text("disk_encryption", "clevis-luks-list-sss-two-tang-t1.txt"), ""),
        # lsblk -n -l -o TYPE,NAME and findmnt -n -o SOURCE print one line per device or mount (hand-written).
        ("/usr/bin/lsblk", "-n", "-l", "-o", "TYPE,NAME", device): (0, "disk nvme1n1\ncrypt data\n", ""),
        ("/usr/bin/findmnt", "-n", "-o", "SOURCE", "--mountpoint", "/data"): (0, "/dev/mapper/data\n", ""),
    })
    volume = {"device": device, "name": "data", "mount_point": "/data"}
    result = observe({"profile": dict(H200, gpu_count=0, tang_bound=True), "stack_text": STACK,
                      "data_volume": volume}, commands)
    assert result["observation"]["tang"] == {
        "device": device, "luks": True, "bound": True, "servers": ["http://127.0.0.1:18761", "http://127.0.0.1:18762"],
        "check_open": True, "name": "data", "mount_point": "/data", "lsblk": "disk nvme1n1\ncrypt data\n",
        "mounted_from": "/dev/mapper/data\n"}


def test_tang_volume_that_is_not_luks_and_one_not_checked_open(files):
    commands = FakeCommands({"/usr/sbin/cryptsetup": (1, "", "")})
    profile = dict(H200, gpu_count=0, tang_bound=True)
    result = observe({"profile": profile, "stack_text": STACK, "data_volume": {"device": "/dev/loop3"}}, commands)
    assert result["observation"]["tang"]["luks"] is False
    assert result["observation"]["tang"]["bound"] is False
    assert "lsblk" not in result["observation"]["tang"]
    # No data volume at all: nothing to ask cryptsetup about.
    result = observe({"profile": profile, "stack_text": STACK}, FakeCommands())
    assert result["observation"]["tang"]["luks"] is False


def test_firewall_probe_that_is_missing_or_shows_no_chain(files):
    profile = dict(H200, gpu_count=0, firewall=True)
    result = observe({"profile": profile, "stack_text": STACK}, FakeCommands())
    assert result["observation"]["firewall"] == {
        "active": False, "detail": "`iptables -w -S INPUT` does not show -j GPUCLOUD-INPUT (rc 127)"}
    result = observe({"profile": profile, "stack_text": STACK, "firewall_probe": ["nft", "list", "ruleset"],
                      "firewall_expect": "chain gpucloud"}, FakeCommands({"/usr/sbin/nft": (0, "", "")}))
    assert result["observation"]["firewall"]["detail"] == "`nft list ruleset` does not show chain gpucloud (rc 0)"


def test_nvswitch_profile_reads_fabric_manager_and_lspci(files):
    lspci = fixture_text("public", "lspci", "plx-pex8725-acs-on-heymeco.txt")
    commands = FakeCommands({"/usr/bin/systemctl": (3, "inactive\n", ""), "/usr/bin/lspci": (0, lspci, "")})
    result = observe({"profile": dict(H200, nvswitch=True), "stack_text": STACK, "reboot_pending": False,
                      "gpu_text": H200_XML}, commands)
    assert result["observation"]["fabric_manager"] == {"state": "inactive"}
    assert result["observation"]["lspci"] == {"text": lspci}
    # A pending reboot: Fabric Manager waits for the new driver too; ACS is the board's.
    commands = FakeCommands({"/usr/bin/lspci": (0, lspci, "")})
    result = observe({"profile": dict(H200, nvswitch=True), "stack_text": STACK, "reboot_pending": True}, commands)
    assert "fabric_manager" not in result["observation"]
    assert result["observation"]["lspci"] == {"text": lspci}


def test_mig_instances_are_read_where_the_profile_has_a_layout(files):
    lgi = fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_mig_-lgip.txt")
    profile = dict(H200, mig={"layout": "all-1g.18gb"})
    commands = FakeCommands({**SMI_H200, (SMI, "mig", "-lgi"): (6, "No GPU instances found: Not Found\n", "")})
    result = observe({"profile": profile, "stack_text": STACK}, commands)
    assert result["observation"]["mig_instances"] == {"error": "rc 6: No GPU instances found: Not Found"}
    result = observe({"profile": profile, "stack_text": STACK, "mig_lgi_text": lgi}, FakeCommands(SMI_H200))
    assert result["observation"]["mig_instances"] == {"text": lgi}


def test_package_database_that_cannot_be_read_fails_naming_it(files):
    result = observe({"profile": H200}, FakeCommands())
    assert result["failed"] is True
    assert result["msg"] == "rpm -qa failed (rc 127): rpm: command not found"
    result = observe({"profile": H200}, FakeCommands({LISTING: (2, "", "dpkg-query: error: parsing file "
                                                                       "'/var/lib/dpkg/status' near line 7\n")}))
    assert result["msg"].startswith("dpkg-query -W failed (rc 2): dpkg-query: error: parsing file")


def test_rpm_lists_the_stack_where_there_is_no_dpkg(files):
    # rpm -qa --qf '%{NAME} %{VERSION}-%{RELEASE} installed\n' (hand-written, NVIDIA's RHEL 9 package names).
    listing = "nvidia-driver 580.95.05-1.el9 installed\nlibnccl 2.28.9-1+cuda13.0 installed\n"
    rpm = ("/usr/bin/rpm", "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE} installed\n")
    patterns = {"driver": ["nvidia-driver"], "nccl": ["libnccl"]}
    result = observe({"profile": dict(H200, gpu_count=0), "stack_packages": patterns}, FakeCommands({rpm: (0, listing, "")}))
    assert result["observation"]["stack"] == {"driver": "580.95.05-1.el9", "nccl": "2.28.9-1+cuda13.0"}


def test_a_profile_without_a_numeric_gpu_count_is_refused(files):
    result = observe({"profile": {"name": "x", "gpu_count": "eight"}, "stack_text": STACK}, FakeCommands())
    assert result["failed"] is True
    assert result["msg"] == "profile gpu_count must be a number, got 'eight'"
