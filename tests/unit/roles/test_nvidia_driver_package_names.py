# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The package names roles/nvidia_driver/vars/Ubuntu.yml asks apt for, by source, branch and flavour.

Ubuntu's archive (nvidia_driver_source=distro) names Fabric Manager and NSCQ by branch at every
branch: its unversioned nvidia-fabricmanager is a virtual package that each branch's package
Provides and Conflicts (tests/fixtures/nvidia_driver/ubuntu2404.source), so apt refuses it.
NVIDIA's CUDA repository, and a mirror of it, keep NVIDIA's names (unversioned from 580).
The vars file is templated by ansible-playbook on localhost; nothing changes on the machine.
"""

import json
import os
import sys

import pytest
import yaml

from playbook_cases import ROOT, run_playbook

CASES = {
    "distro-580-open": ({"nvidia_driver_source": "distro", "lock": "580", "flavour": "open"}, {
        "userspace": ["nvidia-utils-580-server", "libnvidia-compute-580-server", "nvidia-compute-utils-580-server"],
        "flavour": ["nvidia-headless-no-dkms-580-server-open"],
        "fabric_manager": ["nvidia-fabricmanager-580", "libnvidia-nscq-580"],
        "kmod": ["nvidia-dkms-580-server-open"]}),
    "distro-595-proprietary": ({"nvidia_driver_source": "distro", "lock": "595", "flavour": "proprietary"}, {
        "userspace": ["nvidia-utils-595-server", "libnvidia-compute-595-server", "nvidia-compute-utils-595-server"],
        "flavour": ["nvidia-headless-no-dkms-595-server"],
        "fabric_manager": ["nvidia-fabricmanager-595", "libnvidia-nscq-595"],
        "kmod": ["nvidia-dkms-595-server"]}),
    "distro-570-open": ({"nvidia_driver_source": "distro", "lock": "570", "flavour": "open"}, {
        "userspace": ["nvidia-utils-570-server", "libnvidia-compute-570-server", "nvidia-compute-utils-570-server"],
        "flavour": ["nvidia-headless-no-dkms-570-server-open"],
        "fabric_manager": ["nvidia-fabricmanager-570", "libnvidia-nscq-570"],
        "kmod": ["nvidia-dkms-570-server-open"]}),
    "cuda_repo-580-open": ({"nvidia_driver_source": "cuda_repo", "lock": "580", "flavour": "open"}, {
        "userspace": ["nvidia-utils-580", "libnvidia-compute-580", "nvidia-compute-utils-580"],
        "flavour": [],
        "fabric_manager": ["nvidia-fabricmanager", "libnvidia-nscq"],
        "kmod": ["nvidia-dkms-580-open"]}),
    "mirror-580-proprietary": ({"nvidia_driver_source": "mirror", "lock": "580", "flavour": "proprietary"}, {
        "userspace": ["nvidia-utils-580", "libnvidia-compute-580", "nvidia-compute-utils-580"],
        "flavour": [],
        "fabric_manager": ["nvidia-fabricmanager", "libnvidia-nscq"],
        "kmod": ["nvidia-dkms-580"]}),
    "mirror-570-open": ({"nvidia_driver_source": "mirror", "lock": "570", "flavour": "open"}, {
        "userspace": ["nvidia-utils-570", "libnvidia-compute-570", "nvidia-compute-utils-570"],
        "flavour": [],
        "fabric_manager": ["nvidia-fabricmanager-570", "libnvidia-nscq-570"],
        "kmod": ["nvidia-dkms-570-open"]}),
}


@pytest.fixture(scope="module")
def names(tmp_path_factory):
    work = tmp_path_factory.mktemp("nvidia_driver_names")
    plays = []
    for case, (settings, _expected) in CASES.items():
        plays.append({
            "name": case, "hosts": "localhost", "connection": "local", "gather_facts": False,
            "vars_files": [os.path.join(ROOT, "roles", "nvidia_driver", "vars", "Ubuntu.yml")],
            "vars": {"nvidia_driver_source": settings["nvidia_driver_source"],
                     "__nvidia_driver_lock_branch": settings["lock"],
                     "ansible_python_interpreter": sys.executable,
                     "ansible_facts": {"distribution_version": "24.04", "kernel": "6.8.0-45-generic"}},
            "tasks": [{"name": "Write the names", "ansible.builtin.copy": {
                "dest": str(work / ("%s.json" % case)), "mode": "0600",
                "content": "{{ {'userspace': __nvidia_driver_userspace_packages,"
                           " 'flavour': __nvidia_driver_flavour_packages['%s'],"
                           " 'fabric_manager': __nvidia_driver_fabric_manager_packages,"
                           " 'kmod': __nvidia_driver_kmod_packages['%s']} | to_json }}"
                           % (settings["flavour"], settings["flavour"])}}],
        })
    playbook = work / "names.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    run = run_playbook(work, playbook)
    assert run.returncode == 0, run.stdout[-4000:]
    return {case: json.loads((work / ("%s.json" % case)).read_text()) for case in CASES}


@pytest.mark.parametrize("case", sorted(CASES))
def test_ubuntu_package_names(names, case):
    assert names[case] == CASES[case][1]
