# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The per-OS vars candidates, for the facts of every target OS, and the file each role loads.

The facts are ansible-core's `setup` output (tests/fixtures/facts/*.source): Debian 12 and 13
from the lab images, Ubuntu 22.04/24.04, Rocky Linux 9 and RHEL 9 from those OSes' release
files (the lab cannot boot them). Which file a role loads is resolved against the real files
in roles/<role>/vars, the way ansible.builtin.first_found does it: the first candidate that
exists.
"""

import json
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.os_vars_files import os_vars_files

HERE = os.path.dirname(__file__)
FACTS = os.path.join(HERE, "..", "..", "..", "fixtures", "facts")
ROLES = os.path.join(HERE, "..", "..", "..", "..", "roles")
OSES = ["debian12", "debian13", "ubuntu2204", "ubuntu2404", "rocky9", "rhel9"]


def facts(name):
    with open(os.path.join(FACTS, name + ".json")) as handle:
        return json.load(handle)


def loaded(role, os_name):
    """The file first_found picks for ROLE on OS_NAME, from the files on disk."""
    for candidate in os_vars_files(facts(os_name)):
        if os.path.isfile(os.path.join(ROLES, role, "vars", candidate)):
            return candidate
    raise AssertionError("%s has no vars file for %s, not even default.yml" % (role, os_name))


@pytest.mark.parametrize("os_name, expected", [
    # Debian's family names are Debian's own: the repeats are dropped.
    ("debian12", ["Debian_12.yml", "Debian.yml", "default.yml"]),
    ("debian13", ["Debian_13.yml", "Debian.yml", "default.yml"]),
    ("ubuntu2204", ["Ubuntu_22.yml", "Ubuntu.yml", "Debian_22.yml", "Debian.yml", "default.yml"]),
    ("ubuntu2404", ["Ubuntu_24.yml", "Ubuntu.yml", "Debian_24.yml", "Debian.yml", "default.yml"]),
    ("rocky9", ["Rocky_9.yml", "Rocky.yml", "RedHat_9.yml", "RedHat.yml", "default.yml"]),
    ("rhel9", ["RedHat_9.yml", "RedHat.yml", "default.yml"]),
])
def test_candidates_most_specific_first(os_name, expected):
    assert os_vars_files(facts(os_name)) == expected


# Every role with per-OS variables, on every target OS. A new vars file, a renamed one or a
# changed order shows here as a changed row.
LOADS = {
    "container_runtime": ["Debian.yml", "Debian.yml", "Ubuntu.yml", "Ubuntu.yml", "RedHat.yml", "RedHat.yml"],
    "cuda_toolkit": ["Debian.yml", "Debian.yml", "Ubuntu.yml", "Ubuntu.yml", "RedHat.yml", "RedHat.yml"],
    "disk_encryption": ["default.yml", "Debian_13.yml", "default.yml", "Ubuntu_24.yml", "RedHat.yml", "RedHat.yml"],
    "firewall": ["Debian.yml", "Debian.yml", "Debian.yml", "Debian.yml", "RedHat.yml", "RedHat.yml"],
    "gpu_monitoring": ["Debian.yml", "Debian.yml", "Debian.yml", "Debian.yml", "default.yml", "default.yml"],
    "gpu_sharing": ["Debian.yml", "Debian.yml", "Ubuntu.yml", "Ubuntu.yml", "default.yml", "default.yml"],
    "host_hardening": ["Debian.yml", "Debian.yml", "Ubuntu_22.yml", "Debian.yml", "default.yml", "default.yml"],
    "host_prep": ["Debian.yml", "Debian.yml", "Debian.yml", "Debian.yml", "RedHat.yml", "RedHat.yml"],
    "monitoring_server": ["Debian.yml", "Debian_13.yml", "Debian.yml", "Debian.yml", "default.yml", "default.yml"],
    "nccl_fabric": ["Debian.yml", "Debian.yml", "Ubuntu.yml", "Ubuntu.yml", "RedHat.yml", "RedHat.yml"],
    "nvidia_driver": ["Debian.yml", "Debian.yml", "Ubuntu.yml", "Ubuntu.yml", "RedHat.yml", "RedHat.yml"],
    "tang_server": ["default.yml", "default.yml", "default.yml", "default.yml", "RedHat.yml", "RedHat.yml"],
    "training_benchmark": ["Debian.yml", "Debian.yml", "Debian.yml", "Debian.yml", "default.yml", "default.yml"],
}


@pytest.mark.parametrize("role", sorted(LOADS))
def test_each_role_loads_the_expected_file_on_each_os(role):
    assert [loaded(role, os_name) for os_name in OSES] == LOADS[role]


def test_the_table_covers_every_role_with_a_loader():
    with_loader = sorted(r for r in os.listdir(ROLES) if os.path.isfile(os.path.join(ROLES, r, "tasks", "set_vars.yml")))
    assert with_loader == sorted(LOADS)


def test_numbers_and_names_are_strings_in_the_names():
    # A fact read back from JSON or YAML as a number still names the file.
    assert os_vars_files({"distribution": "Debian", "distribution_major_version": 12, "os_family": "Debian"})[0] == "Debian_12.yml"


@pytest.mark.parametrize("bad, message", [
    ({"distribution_major_version": "12", "os_family": "Debian"}, "no distribution"),
    ({"distribution": "Debian", "os_family": "Debian"}, "no distribution_major_version"),
    ({"distribution": "Debian", "distribution_major_version": "12"}, "no os_family"),
    ({"distribution": "", "distribution_major_version": "12", "os_family": "Debian"}, "no distribution"),
    ({"distribution": "../x", "distribution_major_version": "12", "os_family": "Debian"}, "cannot name a vars file"),
    ("Debian", "expected ansible_facts"),
])
def test_refuses_facts_that_cannot_choose_a_file(bad, message):
    with pytest.raises(AnsibleFilterError, match=message):
        os_vars_files(bad)
