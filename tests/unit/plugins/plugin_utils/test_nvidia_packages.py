# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import base64
import os
import fnmatch

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.nvidia_packages import FilterModule
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nvidia_packages as np
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

FILTERS = FilterModule().filters()

# Fabric Manager / NSCQ names, from NVIDIA/gpu-driver-container commit
# 352ed15ed5a76e23a83a26bc73186b52dd9a35d6 (read 2026-12-01): ubuntu22.04/install.sh,
# ubuntu24.04/install.sh and rhel9/install.sh, functions fabricmanager_install and
# nscq_install (branch test `DRIVER_BRANCH -ge 580`).
FABRIC_MANAGER_TABLE = [
    ("535", "apt", ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("570.172.08", "apt", ["nvidia-fabricmanager-570", "libnvidia-nscq-570"]),
    ("575", "apt", ["nvidia-fabricmanager-575", "libnvidia-nscq-575"]),
    ("580", "apt", ["nvidia-fabricmanager", "libnvidia-nscq"]),
    ("580.95.05", "apt", ["nvidia-fabricmanager", "libnvidia-nscq"]),
    ("590", "apt", ["nvidia-fabricmanager", "libnvidia-nscq"]),
    ("535", "dnf", ["nvidia-fabric-manager", "libnvidia-nscq-535"]),
    ("570", "dnf", ["nvidia-fabric-manager", "libnvidia-nscq-570"]),
    ("580", "dnf", ["nvidia-fabricmanager", "libnvidia-nscq"]),
    ("590.44.01", "dnf", ["nvidia-fabricmanager", "libnvidia-nscq"]),
]


@pytest.mark.parametrize("branch,pkg_mgr,expected", FABRIC_MANAGER_TABLE)
def test_fabric_manager_names_by_branch(branch, pkg_mgr, expected):
    assert np.fabric_manager_packages(branch, pkg_mgr) == expected


# NVIDIA Driver Installation Guide, Kernel Modules, Table 5
# (docs.nvidia.com/datacenter/tesla/driver-installation-guide/620/kernel-modules.html, read
# 2026-12-01): `dnf module enable nvidia-driver:580-open`; NVIDIA/yum-packaging-dkms-nvidia
# README: proprietary `XXX-dkms` streams.
@pytest.mark.parametrize("branch,flavour,stream", [
    ("580", "open", "nvidia-driver:580-open"),
    ("570.172.08", "open", "nvidia-driver:570-open"),
    ("535", "proprietary", "nvidia-driver:535-dkms"),
])
def test_dnf_module_stream(branch, flavour, stream):
    assert np.dnf_module_stream(branch, flavour) == stream


@pytest.mark.parametrize("distribution,repo", [
    ("RedHat", "codeready-builder-for-rhel-9-x86_64-rpms"),
    ("Rocky", "crb"),
    ("AlmaLinux", "crb"),
    ("CentOS", "crb"),
    ("OracleLinux", "ol9_codeready_builder"),
])
def test_crb_repository_names(distribution, repo):
    assert np.rhel_crb_repository(distribution, "9") == repo


# ubuntu24.04/precompiled/nvidia-driver of the same gpu-driver-container commit.
def test_ubuntu_signed_modules_open_and_proprietary():
    assert np.ubuntu_signed_module_packages("580", "open", "6.8.0-45-generic") == [
        "linux-modules-nvidia-580-server-open-6.8.0-45-generic", "linux-signatures-nvidia-6.8.0-45-generic"]
    assert np.ubuntu_signed_module_packages("570", "proprietary", "5.15.0-119-generic") == [
        "linux-objects-nvidia-570-server-5.15.0-119-generic", "linux-modules-nvidia-570-server-5.15.0-119-generic",
        "linux-signatures-nvidia-5.15.0-119-generic"]


def test_ubuntu_signed_modules_refuse_a_non_ubuntu_kernel():
    with pytest.raises(np.NvidiaPackageError, match="Ubuntu kernel release"):
        np.ubuntu_signed_module_packages("580", "open", "6.1.0-26-amd64\n")


@pytest.mark.parametrize("install,source,needs", [
    (True, "dkms", True), (True, "ubuntu_signed", False), (False, "dkms", False)])
def test_needs_unsigned_modules(install, source, needs):
    assert np.needs_unsigned_modules(install, source) is needs


def test_needs_unsigned_modules_refuses_unknown_source():
    with pytest.raises(AnsibleFilterError, match="nvidia_needs_unsigned_modules: kernel module source"):
        FILTERS["nvidia_needs_unsigned_modules"](True, "precompiled")


# apt-cache madison of nvidia-utils-580 as NVIDIA's ubuntu2404 repository lists it next to
# the Ubuntu archive's build (apt-cache's "%10s | %s | %s" layout; versions as published,
# deliberately out of order: madison lists by source priority, not by version).
MADISON_580 = """\
nvidia-utils-580 | 580.95.05-0ubuntu1 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
nvidia-utils-580 | 580.105.08-0ubuntu1 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
nvidia-utils-580 | 580.65.06-0ubuntu1 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
nvidia-utils-580 | 580.9.1-0ubuntu1 | https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages
"""
# Debian bookworm: nvidia-smi from non-free and from bookworm-updates, one epoch-less version each.
MADISON_DEBIAN = """\
nvidia-smi | 535.261.03-1~deb12u1 | http://deb.debian.org/debian bookworm-updates/non-free amd64 Packages
nvidia-smi | 535.216.03-1~deb12u1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages
"""


def test_branch_lock_resolves_to_the_newest_of_the_branch():
    # 580.105.08 > 580.95.05 > 580.65.06 > 580.9.1 numerically, not as text.
    assert np.choose_driver_version(MADISON_580, branch="580") == "580.105.08"


def test_branch_lock_keeps_the_installed_version_of_the_branch():
    assert np.choose_driver_version(MADISON_580, branch="580", installed="580.95.05-0ubuntu1") == "580.95.05"


def test_branch_lock_moves_off_an_installed_other_branch():
    assert np.choose_driver_version(MADISON_580, branch="580", installed="570.172.08") == "580.105.08"


def test_exact_lock_must_be_offered():
    assert np.choose_driver_version(MADISON_DEBIAN, version="535.261.03") == "535.261.03"
    assert np.choose_driver_version(MADISON_DEBIAN, version="535.247.01") == ""


def test_branch_not_offered_resolves_to_nothing():
    assert np.choose_driver_version(MADISON_DEBIAN, branch="550") == ""
    assert np.choose_driver_version("", branch="580") == ""


def test_version_choice_refuses_garbage_and_two_locks():
    with pytest.raises(AnsibleFilterError, match="unexpected apt-cache madison line"):
        FILTERS["nvidia_driver_version_choice"]("N: Unable to locate package x", branch="580")
    with pytest.raises(AnsibleFilterError, match="exactly one"):
        FILTERS["nvidia_driver_version_choice"](MADISON_580, branch="580", version="580.95.05")


@pytest.mark.parametrize("left,right,order", [
    ("580.105.08-0ubuntu1", "580.95.05-0ubuntu1", 1),
    ("1:535.1-1", "580.1-1", 1),
    ("535.261.03-1~deb12u1", "535.261.03-1", -1),
    ("2.26.2-1+cuda12.8", "2.26.2-1+cuda12.8", 0),
])
def test_debian_version_order(left, right, order):
    assert np.compare_debian_versions(left, right) == order


def test_upstream_version():
    assert np.upstream_version("1:580.95.05-0ubuntu1") == "580.95.05"


# /etc/apt of a DGX OS 7 / cuda-keyring 1.1 host: cuda-keyring_1.1-1_all.deb installs
# /usr/share/keyrings/cuda-archive-keyring.gpg and this one-line source (file name and
# content as the package ships them for ubuntu2404).
CUDA_REPO = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
KEYRING_LIST = ("deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] "
                "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/ /\n")
UBUNTU_SOURCES = """\
Types: deb
URIs: http://archive.ubuntu.com/ubuntu/
Suites: noble noble-updates
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
"""
OWN = "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.sources"
OWN_SOURCES = """\
# Ansible managed
Types: deb
URIs: https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/
Suites: /
Architectures: amd64
Signed-By: /etc/apt/keyrings/cuda-ubuntu2404-x86_64.asc
"""


def test_cuda_keyring_source_is_found():
    files = {"/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list": KEYRING_LIST,
             "/etc/apt/sources.list.d/ubuntu.sources": UBUNTU_SOURCES,
             OWN: OWN_SOURCES}
    assert np.find_cuda_sources(files, CUDA_REPO, own_paths=(OWN,)) == [{
        "path": "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list", "uri": CUDA_REPO,
        "signed_by": "/usr/share/keyrings/cuda-archive-keyring.gpg"}]


def test_fresh_host_has_no_cuda_source():
    assert np.find_cuda_sources({"/etc/apt/sources.list.d/ubuntu.sources": UBUNTU_SOURCES}, CUDA_REPO) == []


def test_cuda_source_found_in_deb822_over_http_and_commented_lines_ignored():
    vendor = OWN_SOURCES.replace("https://", "http://").replace("/x86_64/", "/x86_64")
    files = {"/etc/apt/sources.list.d/vendor-cuda.sources": vendor,
             "/etc/apt/sources.list": "# deb [signed-by=/x.gpg] %s /\n" % CUDA_REPO}
    found = np.find_cuda_sources(files, CUDA_REPO)
    assert [f["path"] for f in found] == ["/etc/apt/sources.list.d/vendor-cuda.sources"]
    assert found[0]["signed_by"] == "/etc/apt/keyrings/cuda-ubuntu2404-x86_64.asc"


def test_other_distro_repository_is_not_a_match():
    files = {"/etc/apt/sources.list.d/cuda-ubuntu2204-x86_64.list": KEYRING_LIST.replace("2404", "2204")}
    assert np.find_cuda_sources(files, CUDA_REPO) == []


def test_cuda_sources_filter_reads_slurp_results():
    results = [{"source": "/etc/apt/sources.list.d/cuda-ubuntu2404-x86_64.list",
                "content": base64.b64encode(KEYRING_LIST.encode()).decode()}]
    assert len(FILTERS["nvidia_cuda_sources"](results, CUDA_REPO)) == 1
    with pytest.raises(AnsibleFilterError, match="nvidia_cuda_sources"):
        FILTERS["nvidia_cuda_sources"](["not a slurp result"], CUDA_REPO)


# cuDNN installation guide (docs.nvidia.com/deeplearning/cudnn/installation/linux.html, read
# 2026-12-01): cuDNN 9 per CUDA major; cuDNN 8.9 named libcudnn8 with +cudaX.Y in the version.
CUDNN_TABLE = [
    ("9", "12.8", "apt", "ubuntu2404", "", ["libcudnn9-cuda-12", "libcudnn9-dev-cuda-12"]),
    ("9", "13.0", "apt", "ubuntu2204", "9.19.0.56", ["libcudnn9-cuda-13=9.19.0.56-*", "libcudnn9-dev-cuda-13=9.19.0.56-*"]),
    ("9", "12.4", "dnf", "rhel9", "9.10.2.21", ["libcudnn9-cuda-12=9.10.2.21*", "libcudnn9-devel-cuda-12=9.10.2.21*"]),
    ("8", "12.2", "apt", "ubuntu2204", "8.9.7.29", ["libcudnn8=8.9.7.29-1+cuda12.*", "libcudnn8-dev=8.9.7.29-1+cuda12.*"]),
    ("8", "11.8", "apt", "debian12", "", ["libcudnn8=8.9.*+cuda11.*", "libcudnn8-dev=8.9.*+cuda11.*"]),
    ("8", "12.2", "dnf", "rhel9", "8.9.7.29", ["libcudnn8=8.9.7.29-1.cuda12.*", "libcudnn8-devel=8.9.7.29-1.cuda12.*"]),
    # A version lock's MAJOR.MINOR (inventories/example: cudnn "9.19"); NVIDIA's packages are
    # 9.19.0.56-1, which "=9.19-*" never matched.
    ("9", "13.0", "apt", "debian12", "9.19", ["libcudnn9-cuda-13=9.19.*", "libcudnn9-dev-cuda-13=9.19.*"]),
    ("9", "12.8", "dnf", "rhel9", "9.10", ["libcudnn9-cuda-12=9.10.*", "libcudnn9-devel-cuda-12=9.10.*"]),
    ("9", "12.8", "apt", "ubuntu2204", "9.10.2", ["libcudnn9-cuda-12=9.10.2.*", "libcudnn9-dev-cuda-12=9.10.2.*"]),
    ("8", "12.2", "apt", "ubuntu2204", "8.9", ["libcudnn8=8.9.*+cuda12.*", "libcudnn8-dev=8.9.*+cuda12.*"]),
    ("8", "12.2", "dnf", "rhel9", "8.9.7", ["libcudnn8=8.9.7.*.cuda12.*", "libcudnn8-devel=8.9.7.*.cuda12.*"]),
]


@pytest.mark.parametrize("major,cuda,pkg_mgr,distro,version,expected", CUDNN_TABLE)
def test_cudnn_packages(major, cuda, pkg_mgr, distro, version, expected):
    assert np.cudnn_packages(major, cuda, pkg_mgr, distro, version) == expected


# The versions apt lists for libcudnn9-cuda-13 in NVIDIA's debian12 repository look like
# 9.19.0.56-1; fnmatch stands in for apt's glob match of "=PATTERN".
@pytest.mark.parametrize("version,full_suffix,expected,matches,misses", [
    ("9.19", "-*", "9.19.*", ["9.19.0.56-1", "9.19.1.2-1"], ["9.190.0.1-1", "9.1.0.70-1", "9.19"]),
    ("9.19.0", "-*", "9.19.0.*", ["9.19.0.56-1"], ["9.19.1.2-1", "9.19.01.3-1"]),
    ("9.19.0.56", "-*", "9.19.0.56-*", ["9.19.0.56-1"], ["9.19.0.560-1", "9.19.0.5-1"]),
    ("8.9.7.29", "-1", "8.9.7.29-1", ["8.9.7.29-1"], ["8.9.7.29-2"]),
])
def test_version_pattern_matches_what_the_version_names(version, full_suffix, expected, matches, misses):
    pattern = np.version_pattern(version, np.CUDNN_VERSION_PARTS, full_suffix)
    assert pattern == expected
    assert [v for v in matches if fnmatch.fnmatchcase(v, pattern)] == matches
    assert [v for v in misses if fnmatch.fnmatchcase(v, pattern)] == []


@pytest.mark.parametrize("version", ["", "9.19.0.56.1", "9.x", "9.19-1", "9..19"])
def test_version_pattern_refuses_what_is_not_a_version(version):
    with pytest.raises(np.NvidiaPackageError, match="not a version"):
        np.version_pattern(version, 4, "-*")


# cudnn_version.h of cuDNN 9.19.0 defines MAJOR 9, MINOR 19, PATCHLEVEL 0 (no build number),
# read by cuda_toolkit's verify.yml as "9.19.0"; "?" where a macro is missing.
@pytest.mark.parametrize("wanted,found,expected", [
    ("9.19", "9.19.0", True),
    ("9.19.0.56", "9.19.0", True),
    ("9.19.0", "9.19.0", True),
    ("9", "9.19.0", True),
    ("9.1", "9.19.0", False),
    ("9.19", "9.1.0", False),
    ("9.19.1.2", "9.19.0", False),
    ("9.19", "9.?.?", False),
    ("9.19", "?.?.?", False),
])
def test_version_matches_compares_only_the_given_components(wanted, found, expected):
    assert FILTERS["nvidia_version_matches"](wanted, found) is expected


def test_version_matches_refuses_a_wanted_that_is_not_a_version():
    with pytest.raises(AnsibleFilterError, match="nvidia_version_matches"):
        FILTERS["nvidia_version_matches"]("9.19-1", "9.19.0")


def test_no_cudnn8_on_ubuntu2404():
    with pytest.raises(AnsibleFilterError, match="no cuDNN 8 for ubuntu2404"):
        FILTERS["nvidia_cudnn_packages"]("8", "12.4", "apt", "ubuntu2404")


def test_cudnn_refuses_mismatched_version_and_cuda():
    with pytest.raises(np.NvidiaPackageError, match="not a cuDNN 9 version"):
        np.cudnn_packages("9", "12.4", "apt", "ubuntu2204", "8.9.7.29")
    with pytest.raises(np.NvidiaPackageError, match="CUDA 12 and 13"):
        np.cudnn_packages("9", "11.8", "apt", "ubuntu2204")


# NCCL in NVIDIA's CUDA repositories: libnccl2_2.26.2-1+cuda12.8_amd64.deb,
# libnccl-2.26.2-1+cuda12.8.x86_64.rpm (NCCL installation guide, docs.nvidia.com/deeplearning/nccl/install-guide).
def test_nccl_packages():
    assert np.nccl_packages("2.26.2", "12.8", "apt") == ["libnccl2=2.26.2-1+cuda12.8", "libnccl-dev=2.26.2-1+cuda12.8"]
    assert np.nccl_packages("2.28.9", "13.0", "dnf") == ["libnccl=2.28.9-1+cuda13.0", "libnccl-devel=2.28.9-1+cuda13.0"]


@pytest.mark.parametrize("version", ["2.26", 2.26, "2.26.2\n", ""])
def test_nccl_refuses_bad_versions(version):
    with pytest.raises(AnsibleFilterError, match="nvidia_nccl_packages: NCCL version"):
        FILTERS["nvidia_nccl_packages"](version, "12.8", "apt")


# Ubuntu's nvidia-compute-utils-580 unit (lib/systemd/system/nvidia-persistenced.service):
# ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
UBUNTU_SHOW = ("{ path=/usr/bin/nvidia-persistenced ; argv[]=/usr/bin/nvidia-persistenced --user "
               "nvidia-persistenced --no-persistence-mode --verbose ; ignore_errors=no ; "
               "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")


def test_persistenced_override_drops_the_flag():
    text = np.persistenced_override(UBUNTU_SHOW)
    assert text.splitlines()[0] == "[Service]"
    exec_lines = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    assert exec_lines == ["ExecStart=",
                          "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose"]


def test_persistenced_without_the_flag_needs_no_override():
    assert np.persistenced_override("/usr/bin/nvidia-persistenced --verbose") == ""


def test_persistenced_override_refuses_an_empty_exec_start():
    with pytest.raises(AnsibleFilterError, match="no ExecStart"):
        FILTERS["nvidia_persistenced_override"]("")


@pytest.mark.parametrize("name,args", [
    ("nvidia_fabric_manager_packages", ("58", "apt")),
    ("nvidia_fabric_manager_packages", ("580", "zypper")),
    ("nvidia_dnf_module_stream", ("580", "closed")),
    ("nvidia_crb_repository", ("Debian",)),
    ("nvidia_cudnn_packages", ("7", "12.4", "apt", "ubuntu2204")),
])
def test_filters_turn_bad_input_into_filter_errors(name, args):
    with pytest.raises(AnsibleFilterError, match=name):
        FILTERS[name](*args)


# The unit file as Ubuntu's nvidia-compute-utils-580 installs it (FragmentPath, read by the role).
UBUNTU_UNIT = """\
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=true
Before=systemd-backlight@backlight:nvidia_0.service

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
"""


def test_persistenced_override_from_the_unit_file():
    assert "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --verbose\n" in \
        np.persistenced_override(UBUNTU_UNIT)
    # The lab's stand-in unit (scripts/nvsim/build_repo.py) has no flag: no override.
    assert np.persistenced_override(UBUNTU_UNIT.replace(" --no-persistence-mode", "")) == ""
    with pytest.raises(np.NvidiaPackageError, match="no ExecStart"):
        np.persistenced_override("[Service]\nType=forking\n")


# molecule/metal, 550.163.01 -> 580.95.05 from the lab's stand-in mirror: apt refused the
# upgrade with "pkgProblemResolver::Resolve generated breaks" while the held
# nvidia-fabricmanager-550 (Depends libnvidia-ml1 (= 550.163.01-...)) stayed installed.
@pytest.mark.parametrize("installed,wanted,kmods,expected", [
    (["nvidia-smi", "libnvidia-ml1", "nvidia-fabricmanager-550", "libnvidia-nscq-550", "nvidia-open-kernel-dkms"],
     ["nvidia-smi", "libnvidia-ml1", "nvidia-open-kernel-dkms", "nvidia-fabricmanager", "libnvidia-nscq"],
     ["nvidia-open-kernel-dkms", "nvidia-kernel-dkms"],
     ["libnvidia-nscq-550", "nvidia-fabricmanager-550"]),
    # the same branch again: nothing to replace
    (["nvidia-smi", "nvidia-fabricmanager", "libnvidia-nscq"],
     ["nvidia-smi", "nvidia-fabricmanager", "libnvidia-nscq"], [], []),
    # 570 -> 575 under the versioned naming
    (["nvidia-fabricmanager-570", "libnvidia-nscq-570"],
     ["nvidia-fabricmanager-575", "libnvidia-nscq-575"], [], ["libnvidia-nscq-570", "nvidia-fabricmanager-570"]),
    # dnf before 580: nvidia-fabric-manager
    (["nvidia-fabric-manager", "libnvidia-nscq-570"], ["nvidia-fabricmanager", "libnvidia-nscq"], [],
     ["libnvidia-nscq-570", "nvidia-fabric-manager"]),
    # flavour switch: the proprietary DKMS package goes, unrelated packages stay
    (["nvidia-kernel-dkms", "nvidia-fabricmanager-tools", "libnvidia-nscq-550-extra", "dkms"],
     ["nvidia-open-kernel-dkms"], ["nvidia-open-kernel-dkms", "nvidia-kernel-dkms"], ["nvidia-kernel-dkms"]),
])
def test_superseded_packages(installed, wanted, kmods, expected):
    assert np.superseded_packages(installed, wanted, kmods) == expected


def test_superseded_packages_refuses_non_strings():
    with pytest.raises(np.NvidiaPackageError):
        np.superseded_packages([550], ["nvidia-smi"])


# --- Ubuntu's archive (tests/fixtures/nvidia_driver/ubuntu2404.source) -------------------

def _fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                        "fixtures", "nvidia_driver")


def _field(record, name):
    return [value.strip() for line in record.splitlines() if line.startswith(name + ":")
            for value in line.split(":", 1)[1].split(",")]


@pytest.mark.parametrize("branch", ["470", "535", "570", "575", "580", "580.178.04", "590", "595", "615"])
def test_ubuntu_archive_names_fabric_manager_and_nscq_by_branch_at_every_branch(branch):
    number = branch.split(".")[0]
    assert np.fabric_manager_packages(branch, "apt", "ubuntu") == [
        "nvidia-fabricmanager-%s" % number, "libnvidia-nscq-%s" % number]


def test_ubuntu_archive_fabric_manager_name_is_the_real_package_not_the_virtual_one():
    record = _fixture("ubuntu2404-show-nvidia-fabricmanager-580.txt")
    fabric_manager = np.fabric_manager_packages("580", "apt", "ubuntu")[0]
    assert _field(record, "Package") == [fabric_manager]
    # The unversioned name is what every branch's package Provides AND Conflicts: virtual.
    virtual = set(_field(record, "Provides")) & set(_field(record, "Conflicts"))
    assert "nvidia-fabricmanager" in virtual and fabric_manager not in virtual
    # ... and apt refuses it with a version, as the capture shows.
    refused = _fixture("ubuntu2404-install-s-nvidia-fabricmanager.txt")
    assert "is a virtual package provided by" in refused and refused.rstrip().endswith("rc=100")


@pytest.mark.parametrize("branch,pkg_mgr,expected", FABRIC_MANAGER_TABLE)
def test_nvidia_repository_names_stay_the_default(branch, pkg_mgr, expected):
    assert np.fabric_manager_packages(branch, pkg_mgr, "nvidia") == expected


def test_ubuntu_archive_refuses_dnf_and_unknown_archives():
    with pytest.raises(np.NvidiaPackageError, match="apt archive"):
        np.fabric_manager_packages("580", "dnf", "ubuntu")
    with pytest.raises(np.NvidiaPackageError, match="archive must be one of"):
        np.fabric_manager_packages("580", "apt", "debian")
    with pytest.raises(AnsibleFilterError, match="nvidia_fabric_manager_packages"):
        FILTERS["nvidia_fabric_manager_packages"]("580", "apt", "launchpad")


UBUNTU_580 = ["nvidia-utils-580-server", "libnvidia-compute-580-server", "nvidia-compute-utils-580-server",
              "nvidia-headless-no-dkms-580-server-open", "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
UBUNTU_595 = [name.replace("580", "595") for name in UBUNTU_580]
UBUNTU_FLAVOURS = ["nvidia-headless-no-dkms-%s-server-open", "nvidia-headless-no-dkms-%s-server",
                   "nvidia-dkms-%s-server-open", "nvidia-dkms-%s-server"]


@pytest.mark.parametrize("installed,wanted,flavour_packages,expected", [
    # Ubuntu's archive, 580 -> 595: every branch-named package of the role goes, the
    # dependencies apt pulled in (nvidia-kernel-common-580-server) are apt's to handle.
    (UBUNTU_580 + ["nvidia-kernel-common-580-server", "nvidia-firmware-580-server-580.178.04", "libc6"],
     UBUNTU_595, [n % "595" for n in UBUNTU_FLAVOURS], sorted(UBUNTU_580)),
    # the same branch, open -> proprietary: only the flavour's package goes
    (UBUNTU_580, [n.replace("-server-open", "-server") for n in UBUNTU_580], [n % "580" for n in UBUNTU_FLAVOURS],
     ["nvidia-headless-no-dkms-580-server-open"]),
    # the signed precompiled modules of another branch, same kernel
    (["linux-modules-nvidia-580-server-open-6.8.0-45-generic", "linux-signatures-nvidia-6.8.0-45-generic"],
     ["linux-modules-nvidia-595-server-open-6.8.0-45-generic", "linux-signatures-nvidia-6.8.0-45-generic"], [],
     ["linux-modules-nvidia-580-server-open-6.8.0-45-generic"]),
    # a re-run at the same branch replaces nothing
    (UBUNTU_580, UBUNTU_580, [n % "580" for n in UBUNTU_FLAVOURS], []),
])
def test_superseded_packages_on_ubuntu(installed, wanted, flavour_packages, expected):
    assert np.superseded_packages(installed, wanted, flavour_packages) == expected


@pytest.mark.parametrize("fixture,target", [
    ("ubuntu2404-show-nvidia-utils-590-server.txt", "nvidia-utils-595-server"),
    ("ubuntu2404-show-nvidia-utils-570-server.txt", "nvidia-utils-580-server"),
    ("ubuntu2404-show-nvidia-utils-580-server.txt", ""),
    ("ubuntu2404-show-nvidia-fabricmanager-580.txt", ""),
])
def test_transitional_target_from_the_archive_records(fixture, target):
    assert np.transitional_target(_fixture(fixture)) == target


def test_transitional_target_ignores_names_without_a_branch_and_refuses_garbage():
    assert np.transitional_target("Package: nvidia-smi\nVersion: 535.261.03-1\nDepends: nvidia-smi-535\n") == ""
    with pytest.raises(np.NvidiaPackageError, match="no Package field"):
        np.transitional_target("")
    with pytest.raises(np.NvidiaPackageError, match="no Package field"):
        np.transitional_target("E: No packages found")


# --- driver_package_plan: the role's whole package plan from one madison read ----------------

NOBLE_MADISON = fixture_text("nvidia_driver", "ubuntu2404-madison-nvidia-utils-580-server.txt")
NOBLE_DISTRO = {
    "pkg_mgr": "apt", "branch": "580", "version": "", "installed": "", "lock_branch": "580",
    "lock_pattern": "580.*", "packages": [], "extra_packages": [],
    "userspace_packages": ["nvidia-utils-580-server", "libnvidia-compute-580-server"],
    "flavour_packages": {"open": ["nvidia-headless-no-dkms-580-server-open"], "proprietary": []},
    "kmod_packages": {"open": ["nvidia-dkms-580-server-open"], "proprietary": ["nvidia-dkms-580-server"]},
    "flavour": "open", "install_kernel_module": True, "module_source": "dkms", "kernel": "6.8.0-45-generic",
    "fabric_manager": True, "fabric_manager_packages": ["nvidia-fabricmanager-580", "libnvidia-nscq-580"],
    "unversioned_packages": [], "build_packages": ["linux-headers-6.8.0-45-generic", "dkms"],
}


def test_driver_plan_from_the_captured_noble_madison():
    plan = np.driver_package_plan(NOBLE_MADISON, NOBLE_DISTRO)
    assert plan["version"] == "580.178.04"
    assert plan["versioned"] == ["nvidia-utils-580-server", "libnvidia-compute-580-server",
                                 "nvidia-headless-no-dkms-580-server-open", "nvidia-dkms-580-server-open",
                                 "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    assert plan["build_deps"] == ["linux-headers-6.8.0-45-generic", "dkms"] and plan["fm_dnf"] == []
    assert plan["offered_full"][0] == "580.178.04-0ubuntu0.24.04.1"
    assert plan["install_pattern"] == "580.178.04-*"
    assert plan["install"][0] == "nvidia-utils-580-server=580.178.04-*"


def test_driver_plan_keeps_an_installed_version_still_offered_and_falls_back_to_the_lock_when_none_is():
    # The capture offers one version; an older one is added by hand to it.
    madison = NOBLE_MADISON + ("nvidia-utils-580-server | 580.95.05-0ubuntu0.24.04.2 | "
                               "http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n")
    plan = np.driver_package_plan(madison, dict(NOBLE_DISTRO, installed="580.95.05-0ubuntu0.24.04.2"))
    assert plan["version"] == "580.95.05" and plan["offered_full"] == ["580.95.05-0ubuntu0.24.04.2"]
    assert np.driver_package_plan(madison, NOBLE_DISTRO)["version"] == "580.178.04"
    empty = np.driver_package_plan("", NOBLE_DISTRO)
    assert empty["version"] == "" and empty["offered"] == [] and empty["install_pattern"] == "580.*"


def test_driver_plan_signed_modules_override_list_and_dnf():
    signed = np.driver_package_plan(NOBLE_MADISON, dict(NOBLE_DISTRO, module_source="ubuntu_signed", fabric_manager=False))
    assert signed["build_deps"] == [] and "nvidia-dkms-580-server-open" not in signed["versioned"]
    assert signed["unversioned"] == np.ubuntu_signed_module_packages("580", "open", "6.8.0-45-generic")
    own_settings = dict(NOBLE_DISTRO, packages=["x-580"], extra_packages=["x-580", "y"], install_kernel_module=False)
    own = np.driver_package_plan(NOBLE_MADISON, own_settings)
    assert own["versioned"] == ["x-580", "y", "nvidia-fabricmanager-580", "libnvidia-nscq-580"] and own["build_deps"] == []
    rhel_settings = dict(NOBLE_DISTRO, pkg_mgr="dnf", version="580.95.05", branch="",
                         userspace_packages=["nvidia-driver-cuda"], flavour_packages={}, kmod_packages={},
                         fabric_manager_packages=["nvidia-fabricmanager"])
    rhel = np.driver_package_plan("ignored", rhel_settings)
    assert rhel["install"] == ["nvidia-driver-cuda=580.95.05*"] and rhel["fm_dnf"] == ["nvidia-fabricmanager"]
    assert rhel["offered"] == [] and rhel["version"] == ""


@pytest.mark.parametrize("change,message", [
    ({"pkg_mgr": "zypper"}, "package manager must be one of apt, dnf"),
    ({"flavour": "nouveau"}, "flavour must be one of open, proprietary"),
    ({"module_source": "prebuilt"}, "module_source must be one of dkms, ubuntu_signed"),
    ({"extra_packages": "nvidia-smi"}, "extra_packages must be a list of package names"),
    ({"branch": "580", "version": "580.95.05"}, "give exactly one of branch and version"),
])
def test_driver_plan_refuses_bad_settings_naming_them(change, message):
    with pytest.raises(np.NvidiaPackageError, match=message):
        np.driver_package_plan(NOBLE_MADISON, dict(NOBLE_DISTRO, **change))
