# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: k8s_gpu_node_*.yml beside this file. The logic and its sources live in
# plugins/plugin_utils/k8s_gpu_node.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import k8s_gpu_node as kgn


def _call(name, func, *args):
    try:
        return func(*args)
    except ValueError as exc:
        raise AnsibleFilterError("%s: %s" % (name, exc)) from exc


def k8s_gpu_node_manifests(profiles, settings=None):
    return _call("k8s_gpu_node_manifests", kgn.cluster_manifests, profiles, settings)


def k8s_gpu_node_operator_values(profiles, settings=None):
    return _call("k8s_gpu_node_operator_values", kgn.operator_values, profiles, settings)


def k8s_gpu_node_labels(profile, label_prefix=kgn.DEFAULT_LABEL_PREFIX, operator=False):
    return _call("k8s_gpu_node_labels", kgn.node_labels, profile, label_prefix, operator)


def k8s_gpu_node_taints(current, wanted, remove=None):
    taints, changed = _call("k8s_gpu_node_taints", kgn.plan_taints, current, wanted, remove)
    return {"taints": taints, "changed": changed}


class FilterModule(object):
    def filters(self):
        return {
            "k8s_gpu_node_manifests": k8s_gpu_node_manifests,
            "k8s_gpu_node_operator_values": k8s_gpu_node_operator_values,
            "k8s_gpu_node_labels": k8s_gpu_node_labels,
            "k8s_gpu_node_taints": k8s_gpu_node_taints,
        }
