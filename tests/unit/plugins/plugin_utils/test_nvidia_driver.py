# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role's plan functions (plugins/plugin_utils/nvidia_driver.py) and their filters."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.nvidia_driver import FilterModule
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import nvidia_driver as nd
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

FILTERS = FilterModule().filters()

# --- settings_problems -------------------------------------------------------------------

DEBIAN12_DISTRO = {
    "version": "", "branch": "580", "reboot_timeout": 1800, "source": "distro", "kernel_module_source": "dkms",
    "signed_kmod_supported": False, "distribution": "Debian", "distribution_major_version": "12",
    "distribution_version": "12.12", "os_family": "Debian", "sources_supported": ["cuda_repo", "distro", "mirror"],
    "cuda_repo_distro": "debian12", "mirror_url": "", "mirror_key": "", "fabric_manager": False,
    "fabric_manager_packages": [], "version_regex": r"^[0-9]{3}\.[0-9]{1,3}(\.[0-9]{1,3})?$",
    "branch_regex": r"^[0-9]{3}$",
}
KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nmQINBF...\n-----END PGP PUBLIC KEY BLOCK-----\n"


@pytest.mark.parametrize("change", [
    {},
    {"branch": 580},
    {"branch": "", "version": "580.159.04"},
    {"branch": "", "version": "570.26"},
    {"reboot_timeout": "900"},
    {"source": "mirror", "mirror_url": "file:///srv/mirror", "mirror_key": KEY},
    {"source": "cuda_repo", "fabric_manager": True, "fabric_manager_packages": ["nvidia-fabricmanager"]},
    {"distribution": "Ubuntu", "distribution_major_version": "24", "kernel_module_source": "ubuntu_signed",
     "signed_kmod_supported": True},
    {"distribution": "Rocky", "distribution_major_version": "9", "os_family": "RedHat",
     "sources_supported": ["cuda_repo", "mirror"], "source": "cuda_repo", "cuda_repo_distro": "rhel9"},
])
def test_settings_accepted(change):
    assert nd.settings_problems(dict(DEBIAN12_DISTRO, **change)) == []


@pytest.mark.parametrize("change,words", [
    ({"branch": "", "version": 570.1}, ["nvidia_driver_version:", "quote it"]),
    ({"branch": 580.0}, ["nvidia_driver_branch:", "12.10 becomes 12.1"]),
    ({"reboot_timeout": 0}, ["nvidia_driver_reboot_timeout: 0", "greater than 0"]),
    ({"reboot_timeout": -5}, ["nvidia_driver_reboot_timeout: -5"]),
    ({"reboot_timeout": True}, ["nvidia_driver_reboot_timeout: true"]),
    ({"reboot_timeout": "10m"}, ["nvidia_driver_reboot_timeout: \"10m\""]),
    ({"reboot_timeout": 1.5}, ["nvidia_driver_reboot_timeout: 1.5"]),
    ({"branch": ""}, ["Set exactly one of nvidia_driver_version", 'nvidia_driver_branch=""']),
    ({"version": "580.159.04"}, ["Set exactly one of nvidia_driver_version", 'nvidia_driver_version="580.159.04"']),
    ({"branch": "58"}, ["nvidia_driver_branch=\"58\""]),
    ({"branch": "580\n"}, ["nvidia_driver_branch=\"580\\n\""]),
    ({"branch": "", "version": "580.159.04.1"}, ["nvidia_driver_version=\"580.159.04.1\""]),
    ({"branch": None}, ['nvidia_driver_branch="None"']),
    ({"distribution_major_version": "11", "distribution_version": "11.9"},
     ["nvidia_driver_source=distro is not supported on Debian 11.9"]),
    ({"sources_supported": ["cuda_repo", "mirror"]}, ["nvidia_driver_source=distro", "sources here: cuda_repo, mirror"]),
    ({"source": "cuda_repo", "cuda_repo_distro": "debian13"}, ["nvidia_driver_source=cuda_repo is not supported"]),
    ({"kernel_module_source": "ubuntu_signed"}, ["nvidia_driver_kernel_module_source=ubuntu_signed needs Ubuntu",
                                                 "got Debian with nvidia_driver_source=distro"]),
    ({"distribution": "Ubuntu", "distribution_major_version": "24", "kernel_module_source": "ubuntu_signed",
      "signed_kmod_supported": True, "source": "cuda_repo", "cuda_repo_distro": "ubuntu2404"},
     ["nvidia_driver_kernel_module_source=ubuntu_signed", "nvidia_driver_source=cuda_repo"]),
    ({"source": "mirror", "mirror_url": "ftp://x", "mirror_key": KEY}, ["nvidia_driver_mirror_url", '"ftp://x"']),
    ({"source": "mirror", "mirror_url": "https://m/", "mirror_key": "a key"}, ["nvidia_driver_mirror_key"]),
    ({"fabric_manager": True}, ["nvidia_driver_fabric_manager=true", "nvidia_driver_source=distro", "Debian"]),
    ({"branch": "", "version": 570.1, "fabric_manager": True, "fabric_manager_packages": None},
     ["nvidia_driver_version:"]),
])
def test_settings_refused_naming_the_variable(change, words):
    problems = nd.settings_problems(dict(DEBIAN12_DISTRO, **change))
    assert len(problems) == 1, problems
    for word in words:
        assert word in problems[0]


def test_settings_lists_every_problem_and_refuses_floats_and_timeouts_alone():
    many = nd.settings_problems(dict(DEBIAN12_DISTRO, branch="", source="mirror", fabric_manager=True))
    assert [problem.split(" ")[0] for problem in many] == ["Set", "nvidia_driver_source=mirror",
                                                           "nvidia_driver_fabric_manager=true,"]
    first = nd.settings_problems(dict(DEBIAN12_DISTRO, branch=580.0, version="570.10", reboot_timeout=0))
    assert len(first) == 2 and first[0].startswith("nvidia_driver_branch:")
    assert first[1].startswith("nvidia_driver_reboot_timeout:")


def test_settings_filter_refuses_a_non_mapping_by_name():
    with pytest.raises(AnsibleFilterError, match="nvidia_driver_settings_problems: settings must be a mapping"):
        FILTERS["nvidia_driver_settings_problems"](["580"])
    assert FILTERS["nvidia_driver_settings_problems"](DEBIAN12_DISTRO) == []


# --- driver_state ---------------------------------------------------------------------------

H200_PROC = fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt")
# Hand-written PCI lines in the facts probe's format (address, device id from sysfs): H200 0x2335, V100 0x1db4.
H200_PCI = "0000:18:00.0 0x2335\n0000:2a:00.0 0x2335\n"
STATE = {"installed_package_version": "", "smi_architectures": None, "kernel_module": "auto",
         "open_architectures": ["Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"],
         "first_turing_device_id": 7680, "version": "", "branch": "580"}


def _reads(pci, proc=""):
    return pci + nd.PROC_VERSION_MARKER + "\n" + proc


def test_state_of_a_loaded_h200_with_its_driver_installed():
    state = nd.driver_state(_reads(H200_PCI, H200_PROC), dict(STATE, installed_package_version="580.159.04-0ubuntu1"))
    assert state["gpus"] == ["0000:18:00.0", "0000:2a:00.0"]
    assert state["loaded"] == "580.159.04" and state["installed"] == "580.159.04"
    assert state["ask_smi"] is True and state["flavour"] == "open" and state["drift"] is False
    with_smi = nd.driver_state(_reads(H200_PCI, H200_PROC),
                               dict(STATE, installed_package_version="1:580.159.04-1",
                                    smi_architectures=["Hopper", None, "Hopper"]))
    assert with_smi["architectures"] == ["Hopper"] and with_smi["flavour"] == "open" and with_smi["installed"] == "580.159.04"


def test_state_without_a_loaded_module_reads_the_pci_ids():
    state = nd.driver_state(_reads("0000:3b:00.0 0x1db4\n" + H200_PCI), STATE)
    assert state["loaded"] == "" and state["installed"] == "" and state["ask_smi"] is False
    assert state["pre_turing"] is True and state["flavour"] == "proprietary" and state["architectures"] == []
    assert nd.driver_state(_reads(""), STATE)["flavour"] == "open"
    assert nd.driver_state("", STATE)["gpus"] == []


def test_state_flavour_forced_and_architectures_from_smi_win_over_pci():
    forced = nd.driver_state(_reads("0000:3b:00.0 0x1db4\n", H200_PROC),
                             dict(STATE, kernel_module="open", installed_package_version="580.159.04-1"))
    assert forced["flavour"] == "open" and forced["ask_smi"] is False
    volta = nd.driver_state(_reads(H200_PCI, H200_PROC),
                            dict(STATE, installed_package_version="580.159.04-1", smi_architectures=["Volta", "Hopper"]))
    assert volta["flavour"] == "proprietary"


@pytest.mark.parametrize("installed,lock,drift", [
    ("580.159.04-1", {"branch": "580"}, False),
    ("570.211.01-0ubuntu1", {"branch": "580"}, True),
    ("580.159.04-1", {"branch": "", "version": "580.159.04"}, False),
    ("580.126.09-1", {"branch": "", "version": "580.159.04"}, True),
    ("", {"branch": "580"}, False),
])
def test_state_drift_from_the_lock(installed, lock, drift):
    assert nd.driver_state(_reads(""), dict(STATE, installed_package_version=installed, **lock))["drift"] is drift


def test_state_loaded_but_stale_does_not_ask_smi():
    state = nd.driver_state(_reads(H200_PCI, H200_PROC), dict(STATE, installed_package_version="580.178.04-1"))
    assert state["loaded"] == "580.159.04" and state["installed"] == "580.178.04" and state["ask_smi"] is False


@pytest.mark.parametrize("reads,settings,message", [
    (_reads("0000:18:00.0\n"), STATE, "unexpected PCI device line"),
    (_reads("0000:18:00.0 0xzz\n"), STATE, "unexpected PCI device id"),
    (_reads(""), dict(STATE, kernel_module="nouveau"), "nvidia_driver_kernel_module must be one of auto, open"),
])
def test_state_refuses_garbage(reads, settings, message):
    with pytest.raises(nd.NvidiaDriverError, match=message):
        nd.driver_state(reads, settings)
    with pytest.raises(AnsibleFilterError, match="nvidia_driver_state: "):
        FILTERS["nvidia_driver_state"](reads, settings)


# --- package_plan -----------------------------------------------------------------------------

NOBLE_MADISON = fixture_text("nvidia_driver", "ubuntu2404-madison-nvidia-utils-580-server.txt")
SHOW_580 = fixture_text("nvidia_driver", "ubuntu2404-show-nvidia-utils-580-server.txt")
SHOW_590 = fixture_text("nvidia_driver", "ubuntu2404-show-nvidia-utils-590-server.txt")
SHOW_570 = fixture_text("nvidia_driver", "ubuntu2404-show-nvidia-utils-570-server.txt")
PLAN = {
    "pkg_mgr": "apt", "branch": "580", "version": "", "installed": "", "lock_branch": "580",
    "lock_pattern": "580.*", "packages": [], "extra_packages": [],
    "userspace_packages": ["nvidia-utils-580-server", "libnvidia-compute-580-server"],
    "flavour_packages": {"open": ["nvidia-headless-no-dkms-580-server-open"], "proprietary": []},
    "kmod_packages": {"open": ["nvidia-dkms-580-server-open"], "proprietary": ["nvidia-dkms-580-server"]},
    "flavour": "open", "install_kernel_module": False, "module_source": "dkms", "kernel": "6.8.0-45-generic",
    "fabric_manager": True, "fabric_manager_packages": ["nvidia-fabricmanager-580", "libnvidia-nscq-580"],
    "unversioned_packages": [], "build_packages": ["linux-headers-6.8.0-45-generic", "dkms"],
    "primary": "nvidia-utils-580-server", "installed_names": [], "check_mode": False, "hold": True,
    "source": "distro",
    "all_flavour_packages": ["nvidia-dkms-580-server-open", "nvidia-dkms-580-server",
                             "nvidia-headless-no-dkms-580-server-open"],
}


def _apt_reads(madison, show):
    return madison + nd.SHOW_MARKER + "\n" + show


def test_plan_picks_the_record_of_the_resolved_version_among_several():
    plan = nd.package_plan(_apt_reads(NOBLE_MADISON, SHOW_590 + "\n" + SHOW_580), PLAN)
    assert plan["version"] == "580.178.04" and plan["transitional"] == "" and plan["superseded"] == []
    names = ["nvidia-utils-580-server", "libnvidia-compute-580-server", "nvidia-headless-no-dkms-580-server-open",
             "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    assert plan["record"] == {"version": "580.178.04", "install": names, "remove": [], "hold": names}
    assert nd.package_plan(_apt_reads(NOBLE_MADISON, SHOW_580), dict(PLAN, hold=False))["record"]["hold"] == []


def test_plan_names_what_a_branch_change_replaces():
    installed = ["nvidia-utils-570-server", "nvidia-fabricmanager-570", "nvidia-dkms-580-server", "bash"]
    plan = nd.package_plan(_apt_reads(NOBLE_MADISON, SHOW_580), dict(PLAN, installed_names=installed))
    assert plan["superseded"] == ["nvidia-dkms-580-server", "nvidia-fabricmanager-570", "nvidia-utils-570-server"]
    assert plan["record"]["remove"] == plan["superseded"]


def test_plan_refuses_a_transitional_lock_naming_the_variable():
    # The 590 record of the capture, offered under the version madison lists for it.
    madison = "nvidia-utils-590-server | 590.48.01-0ubuntu0.24.04.5 | http://archive.ubuntu.com/ubuntu noble-updates/restricted amd64 Packages\n"
    settings = dict(PLAN, branch="590", lock_branch="590", primary="nvidia-utils-590-server",
                    userspace_packages=["nvidia-utils-590-server"], fabric_manager=False)
    with pytest.raises(nd.NvidiaDriverError, match="nvidia_driver_branch=590: nvidia-utils-590-server 590.48.01 is a "
                                                   "transitional package that only installs nvidia-utils-595-server"):
        nd.package_plan(_apt_reads(madison, SHOW_590), settings)
    with pytest.raises(AnsibleFilterError, match="nvidia_driver_version=590.48.01: "):
        FILTERS["nvidia_driver_package_plan"](_apt_reads(madison, SHOW_590),
                                              dict(settings, branch="", version="590.48.01"))


def test_plan_refuses_a_lock_nothing_offers_except_in_check_mode():
    with pytest.raises(nd.NvidiaDriverError, match="No configured repository offers nvidia-utils-580-server at the "
                                                   "locked branch 580 \\(nvidia_driver_source=distro\\); offered: nothing"):
        nd.package_plan(_apt_reads("", ""), PLAN)
    with pytest.raises(nd.NvidiaDriverError, match="locked version 580.95.05 .*offered: 580.178.04-0ubuntu0.24.04.1"):
        nd.package_plan(_apt_reads(NOBLE_MADISON, SHOW_580), dict(PLAN, branch="", version="580.95.05"))
    checked = nd.package_plan(_apt_reads("", ""), dict(PLAN, check_mode=True))
    assert checked["version"] == "" and checked["install_pattern"] == "580.*" and checked["record"]["version"] == ""


def test_plan_refuses_a_show_without_the_resolved_record():
    with pytest.raises(nd.NvidiaDriverError, match="apt-cache show nvidia-utils-580-server gave no record of version "
                                                   "580.178.04-0ubuntu0.24.04.1"):
        nd.package_plan(_apt_reads(NOBLE_MADISON, SHOW_570), PLAN)
    with pytest.raises(nd.NvidiaDriverError, match="gave no record"):
        nd.package_plan(NOBLE_MADISON, PLAN)


def test_plan_with_dnf_reads_nothing():
    settings = dict(PLAN, pkg_mgr="dnf", version="580.95.05", branch="", userspace_packages=["nvidia-driver-cuda"],
                    flavour_packages={}, kmod_packages={}, fabric_manager_packages=["nvidia-fabricmanager"],
                    primary="nvidia-driver-cuda")
    plan = nd.package_plan("", settings)
    assert plan["install"] == ["nvidia-driver-cuda=580.95.05*"] and plan["fm_dnf"] == ["nvidia-fabricmanager"]
    assert plan["transitional"] == "" and plan["record"]["install"] == ["nvidia-driver-cuda"]
