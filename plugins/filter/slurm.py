# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: slurm_*.yml beside this file. The logic and its sources live in
# plugins/plugin_utils/slurm.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import slurm


def _call(name, func, *args):
    try:
        return func(*args)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc)) from exc


def slurm_gres_plan(profile):
    return _call("slurm_gres_plan", slurm.expected_gres, profile)


def slurm_gres_conf(profile, topology, sharing_plan=None, readings=None, autodetect="off", cores=True):
    if not cores and isinstance(topology, dict):
        topology = dict(topology, affinity={})
    node = _call("slurm_gres_conf", slurm.node_readings, readings) if readings is not None else None
    return _call("slurm_gres_conf", slurm.gres_conf_checked, profile, topology, sharing_plan, node, autodetect)


def slurm_conf(settings, hostvars=None):
    """SETTINGS as plugin_utils.slurm.slurm_conf takes them; with HOSTVARS, ``nodes`` lists host names
    whose facts and profiles are read from it."""
    if hostvars is not None and isinstance(settings, dict):
        settings = dict(settings, nodes=_call("slurm_conf", slurm.cluster_nodes, settings.get("nodes"), hostvars))
    return _call("slurm_conf", slurm.slurm_conf, settings)


def slurm_cgroup_conf(cgroup_v2):
    return _call("slurm_cgroup_conf", slurm.cgroup_conf, cgroup_v2)


class FilterModule(object):
    def filters(self):
        return {
            "slurm_gres_plan": slurm_gres_plan,
            "slurm_gres_conf": slurm_gres_conf,
            "slurm_conf": slurm_conf,
            "slurm_cgroup_conf": slurm_cgroup_conf,
        }
