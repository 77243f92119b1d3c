# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a host is a container, from its Ansible facts: the one list every role uses.

A container shares the host's kernel and clock: it cannot load a kernel module, run DCGM's
nv-hostengine, audit the kernel or discipline the clock. Ansible's Linux virtual facts call a
container a guest whose ``virtualization_type`` is the container manager's name; that name is
one of its own probes (docker, podman, containerd, lxc, openvz, the ``container`` environment
variable) or the text of ``/run/systemd/container``, which every manager systemd knows writes
(systemd-detect-virt's container list). ``virtualization_tech_guest`` holds every technique
found, so a container inside a VM is still a container. Pure: no Ansible objects.
"""

from collections.abc import Mapping

# Ansible's own probes, then systemd-detect-virt --container's names (and "oci", which
# runc-based managers write to /run/systemd/container).
CONTAINER_TYPES = frozenset([
    "container", "containerd", "docker", "lxc", "openvz", "podman",
    "lxc-libvirt", "oci", "pouch", "proot", "rkt", "systemd-nspawn", "wsl",
])


class ContainerHostError(ValueError):
    """The facts cannot tell whether the host is a container."""


def is_container(facts):
    """True when FACTS (a host's ansible_facts) describe a container guest."""
    if not isinstance(facts, Mapping):
        raise ContainerHostError("expected a host's ansible_facts (a mapping), got %s" % type(facts).__name__)
    techs = facts.get("virtualization_tech_guest") or []
    if isinstance(techs, (str, Mapping)) or not hasattr(techs, "__iter__"):
        raise ContainerHostError("virtualization_tech_guest must be a list, got %r" % (techs,))
    if any(str(tech) in CONTAINER_TYPES for tech in techs):
        return True
    return facts.get("virtualization_role") == "guest" and str(facts.get("virtualization_type") or "") in CONTAINER_TYPES
