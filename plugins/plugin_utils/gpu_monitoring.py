# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Who publishes a GPU node's series, and what Prometheus scrapes there.

gpu_source() is the one answer to gpu_monitoring_gpu_source: gpucloud.fleet.gpu_monitoring
installs DCGM where it says "dcgm", and gpucloud.fleet.monitoring_server scrapes dcgm-exporter
on exactly those nodes (scrape_targets()). "auto" is DCGM where a DCGM version is set and the
host can run nv-hostengine (it needs the GPUs and the driver's devices, which a container does
not get), the collector everywhere else. Pure: no Ansible objects.
"""

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.container_host import ContainerHostError, is_container

SOURCES = ("auto", "dcgm", "collector")


class GpuMonitoringError(ValueError):
    """A setting that cannot give a GPU series source or a scrape target."""


def gpu_source(requested, dcgm_version, facts):
    """'dcgm' or 'collector' for gpu_monitoring_gpu_source REQUESTED on a host with FACTS."""
    if not isinstance(requested, str) or requested not in SOURCES:
        raise GpuMonitoringError("gpu_monitoring_gpu_source must be one of %s, got %r" % (", ".join(SOURCES), requested))
    if requested != "auto":
        return requested
    version = "" if dcgm_version is None else str(dcgm_version).strip()
    try:
        in_container = is_container(facts)
    except ContainerHostError as exc:
        raise GpuMonitoringError(str(exc)) from exc
    return "dcgm" if version and not in_container else "collector"


def _first(*values):
    """The first value that is set and not empty (Jinja's default(x, true) chain)."""
    for value in values:
        if value not in (None, ""):
            return value
    return None


def scrape_target(node, hostvars):
    """{node, profile, address, dcgm} for NODE, read from its HOSTVARS (inventory and facts).

    address: monitoring_server_target_address, else ansible_host, else the default IPv4
    address gathered earlier, else the node's name; an IPv6 address comes in brackets.
    dcgm: monitoring_server_scrape_dcgm where set, else whether gpu_source() says "dcgm".
    """
    if not isinstance(hostvars, Mapping):
        raise GpuMonitoringError("%s: hostvars must be a mapping, got %s" % (node, type(hostvars).__name__))
    facts = hostvars.get("ansible_facts") or {}
    if not isinstance(facts, Mapping):
        raise GpuMonitoringError("%s: ansible_facts must be a mapping, got %s" % (node, type(facts).__name__))
    default_ipv4 = facts.get("default_ipv4") or {}
    address = str(_first(hostvars.get("monitoring_server_target_address"), hostvars.get("ansible_host"),
                         default_ipv4.get("address") if isinstance(default_ipv4, Mapping) else None, node))
    lock = hostvars.get("gpucloud_version_lock") or {}
    dcgm_version = hostvars.get("gpu_monitoring_dcgm_version")
    if dcgm_version is None:
        dcgm_version = lock.get("dcgm", "") if isinstance(lock, Mapping) else ""
    try:
        source = gpu_source(hostvars.get("gpu_monitoring_gpu_source", "auto"), dcgm_version, facts)
    except GpuMonitoringError as exc:
        raise GpuMonitoringError("%s: %s" % (node, exc)) from exc
    override = hostvars.get("monitoring_server_scrape_dcgm")
    if override is None:
        dcgm = source == "dcgm"
    else:
        try:
            dcgm = boolean(override, strict=True)
        except TypeError as exc:
            raise GpuMonitoringError("%s: monitoring_server_scrape_dcgm must be a boolean, got %r"
                                     % (node, override)) from exc
    profile = hostvars.get("gpucloud_profile") or {}
    return {
        "node": node,
        "profile": str(profile.get("name") or "") if isinstance(profile, Mapping) else "",
        "address": "[%s]" % address if ":" in address else address,
        "dcgm": dcgm,
    }


def scrape_targets(nodes, hostvars):
    """One scrape_target() per node of NODES, sorted by name; HOSTVARS maps node -> its variables."""
    if isinstance(nodes, (str, Mapping)) or not hasattr(nodes, "__iter__"):
        raise GpuMonitoringError("expected a list of GPU nodes, got %r" % (nodes,))
    if not isinstance(hostvars, Mapping):
        raise GpuMonitoringError("hostvars must be a mapping node -> variables, got %s" % type(hostvars).__name__)
    targets = []
    for node in sorted(str(n) for n in nodes):
        if node not in hostvars:
            raise GpuMonitoringError("%s is in the GPU node group but not in the inventory's hostvars" % node)
        targets.append(scrape_target(node, hostvars[node]))
    return targets
