# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

import json
import os
import re

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.container_host import ContainerHostError, is_container
from ansible_collections.gpucloud.fleet.plugins.test.container_host import TestModule as ContainerHostTests, container_host

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
VIRTUAL = os.path.join(ROOT, "tests", "fixtures", "facts", "virtual")


def _facts(name):
    with open(os.path.join(VIRTUAL, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.mark.parametrize("name, expected", [
    ("podman-debian12", True),   # a lab container (captured)
    ("docker-on-kvm", True),     # a container inside a VM (captured)
    ("kvm-vm", False),           # a VM has its own kernel (hand-written)
])
def test_virtual_facts(name, expected):
    assert is_container(_facts(name)) is expected


# What Ansible's Linux virtual facts call a container (ansible/module_utils/facts/virtual/linux.py)
# and what systemd-detect-virt --container prints (systemd's src/basic/virt.c), which container
# managers also write to /run/systemd/container, read by those facts.
ANSIBLE_NAMES = ["container", "containerd", "docker", "lxc", "openvz", "podman"]
SYSTEMD_NAMES = ["openvz", "lxc", "lxc-libvirt", "systemd-nspawn", "docker", "podman", "rkt", "wsl", "proot", "pouch"]


@pytest.mark.parametrize("kind", sorted(set(ANSIBLE_NAMES + SYSTEMD_NAMES + ["oci"])))
def test_every_container_type_is_a_container_guest(kind):
    assert is_container({"virtualization_role": "guest", "virtualization_type": kind})
    # /run/systemd/container found inside a VM: the type says kvm, the techniques say the container.
    assert is_container({"virtualization_role": "guest", "virtualization_type": "kvm",
                         "virtualization_tech_guest": ["kvm", kind]})
    # A host running containers is not one.
    assert not is_container({"virtualization_role": "host", "virtualization_type": kind,
                             "virtualization_tech_guest": [], "virtualization_tech_host": [kind]})


@pytest.mark.parametrize("facts", [
    {},
    {"virtualization_role": "NA", "virtualization_type": "NA"},
    {"virtualization_role": "guest", "virtualization_type": "VMware"},
    {"virtualization_role": "guest", "virtualization_type": "kvm", "virtualization_tech_guest": ["kvm"]},
])
def test_not_containers(facts):
    assert not is_container(facts)


@pytest.mark.parametrize("facts, message", [
    ("podman", "ansible_facts"),
    (None, "ansible_facts"),
    ({"virtualization_tech_guest": "docker"}, "virtualization_tech_guest"),
])
def test_bad_facts_are_refused(facts, message):
    with pytest.raises(ContainerHostError, match=message):
        is_container(facts)
    with pytest.raises(AnsibleFilterError, match="container_host: .*" + message):
        container_host(facts)


def test_the_jinja_test():
    assert ContainerHostTests().tests()["container_host"](_facts("podman-debian12")) is True


def _yaml_files(*tops):
    for top in tops:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.join(dirpath, f)


def test_one_answer_to_is_this_a_container():
    """Nothing but the container_host test reads the virtualisation type to decide."""
    offenders = []
    for path in _yaml_files("roles", "playbooks"):
        rel = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r"virtualization_(type|role|tech_guest)\b", line) and "is not defined" not in line:
                    offenders.append("%s:%d" % (rel, number))
    assert offenders == [], "decide with `ansible_facts is gpucloud.fleet.container_host`: %s" % offenders
