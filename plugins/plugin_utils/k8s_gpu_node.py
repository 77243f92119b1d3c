# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the k8s_gpu_node role sends to a cluster: node labels and taints, the ``nvidia``
RuntimeClass, the NVIDIA device plugin (and GPU Feature Discovery) per hardware profile, or the
GPU Operator's Helm values. Pure functions over plain data; a bad input raises ``ValueError``
naming what is wrong. The device plugin's config file itself comes from device_plugin_config.py.

Sources (read, not copied):

- github.com/NVIDIA/k8s-device-plugin v0.20.0 (commit 1b826acc6af3079d8923bac395c3124b8861a9a6):
  deployments/static/nvidia-device-plugin.yml lines 15-54 (the DaemonSet: toleration of
  nvidia.com/gpu, priorityClassName system-node-critical, image nvcr.io/nvidia/k8s-device-plugin:v0.20.0,
  no privilege escalation and every capability dropped, /var/lib/kubelet/device-plugins mounted);
  deployments/static/gpu-feature-discovery-daemonset.yaml lines 14-68 (GFD: the same image,
  /usr/bin/gpu-feature-discovery, privileged, features.d and /sys mounted, MIG_STRATEGY);
  deployments/helm/nvidia-device-plugin/templates/daemonset-device-plugin.yml lines 185-206
  (CONFIG_FILE, NVIDIA_MIG_MONITOR_DEVICES=all with MIG, NVIDIA_VISIBLE_DEVICES=all,
  NVIDIA_DRIVER_CAPABILITIES=compute,utility) and _helpers.tpl lines 91-105 and 127-135
  (CAP_SYS_ADMIN instead of "drop ALL" once a MIG strategy other than none is possible);
  cmd/nvidia-device-plugin/main.go lines 176-179 (CONFIG_FILE) and 227-234 (MPS needs mpsRoot
  and the chart's mps-control-daemon DaemonSet, templates/daemonset-mps-control-daemon.yml,
  which this module does not render: MPS profiles are refused in manifests mode).
  The chart selects one config per node through a config-manager sidecar and the node label
  nvidia.com/device-plugin.config; the manifests here give each profile its own ConfigMap and
  DaemonSet instead, selected by the profile label, and roll the pods through a hash of the
  config in the pod template (the plugin does not re-read its file).
- github.com/NVIDIA/gpu-operator v26.7.0 (commit 10ee5b3638b89e11e949412aafa5ba99279c3721),
  deployments/gpu-operator/values.yaml: mig.strategy (line 135), driver.enabled (138),
  toolkit.enabled (230), devicePlugin repository/version (241-245) and config.create/name/
  default/data (271-279), dcgmExporter.enabled (300), gfd enabled/repository/version (359-363),
  migManager.enabled (371), validator repository/version (58-62), operator repository/version/
  runtimeClass (72-81). Its device plugin and GFD
  are v0.20.0, the version whose config schema roles/k8s_gpu_node/files/schemas mirrors.
"""


import hashlib
import re

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import device_plugin_config as dpc

DEVICE_PLUGIN_VERSION = "v0.20.0"
GPU_OPERATOR_VERSION = "v26.7.0"
DEFAULT_REGISTRY = "nvcr.io/nvidia"
DEFAULT_LABEL_PREFIX = "gpucloud.io"
OPERATOR_CONFIG_LABEL = "nvidia.com/device-plugin.config"
OPERATOR_CONFIG_MAP = "gpucloud-device-plugin-config"
DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"
CONFIG_DIR = "/etc/nvidia-device-plugin"
MODES = ("manifests", "operator")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# The upstream DaemonSets tolerate these (static manifest line 31-34, chart values tolerations).
BASE_TOLERATIONS = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)

# Matched with fullmatch: "$" would let a trailing newline through (and into the API server).
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_IMAGE_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([-a-z0-9._]*[a-z0-9])?)*")
# The longest object name prefix: gpu-feature-discovery-<profile> must stay a DNS label (63).
_LONGEST_PREFIX = "gpu-feature-discovery-"


def _is_label_value(value):
    return isinstance(value, str) and len(value) <= 63 and bool(_LABEL_VALUE.fullmatch(value))


def _is_dns_subdomain(value):
    return isinstance(value, str) and len(value) <= 253 and bool(_DNS_SUBDOMAIN.fullmatch(value))


def check_label_key(key, what="label key"):
    """Refuse a key that is not a Kubernetes qualified name ([prefix/]name)."""
    if not isinstance(key, str) or not key:
        raise ValueError("%s must be a non-empty string, got %r" % (what, key))
    prefix, sep, name = key.rpartition("/")
    if sep and not prefix:
        raise ValueError("%s %r: an empty prefix before '/' (write the key without '/', or prefix/name)"
                         % (what, key))
    if prefix and not _is_dns_subdomain(prefix):
        raise ValueError("%s %r: the prefix %r is not a DNS subdomain" % (what, key, prefix))
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise ValueError("%s %r: the name %r must be 1-63 letters, digits, '-', '_' or '.', starting and "
                         "ending with a letter or digit" % (what, key, name))
    return key


def check_label_prefix(prefix):
    """Refuse a label prefix that is not a DNS subdomain (an empty one would give the key /profile)."""
    if not _is_dns_subdomain(prefix):
        raise ValueError("label prefix %r is not a DNS subdomain such as gpucloud.io (lower-case letters, digits, "
                         "'-' and '.', at most 253 characters)" % (prefix,))
    return prefix


def label_value(text):
    """A label value from free text: runs of other characters become '-', at most 63 characters.

    The way GPU Feature Discovery turns "NVIDIA A100 80GB PCIe" into a label value
    (nvidia.com/gpu.product=NVIDIA-A100-80GB-PCIe).
    """
    if not isinstance(text, str):
        raise ValueError("a label value must come from a string, got %r" % (text,))
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text.strip())[:63]
    value = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)
    if not value:
        raise ValueError("%r gives an empty label value" % (text,))
    return value


def profile_object_name(name):
    """The DNS-label form of a profile name (h200_sxm -> h200-sxm) used in object names."""
    if not isinstance(name, str) or not name:
        raise ValueError("the hardware profile needs a name, got %r" % (name,))
    dns = name.lower().replace("_", "-").replace(".", "-")
    if not _DNS_LABEL.fullmatch(dns) or len(_LONGEST_PREFIX + dns) > 63:
        raise ValueError("profile name %r: object names need it as a DNS label (letters, digits, '-', '_', '.'; "
                         "at most %d characters), got %r" % (name, 63 - len(_LONGEST_PREFIX), dns))
    return dns


def node_labels(profile, label_prefix=DEFAULT_LABEL_PREFIX, operator=False):
    """The labels a GPU node gets from its hardware profile.

    <prefix>/profile=<profile name> (the DaemonSets' nodeSelector), <prefix>/gpu-product=<gpu_model as
    a label value> when the profile names one, and in operator mode
    nvidia.com/device-plugin.config=<profile name> (the key of the profile's config in the
    operator's ConfigMap).
    """
    if not isinstance(profile, dict):
        raise ValueError("the hardware profile must be a mapping, got %r" % (profile,))
    name = profile.get("name")
    if not _is_label_value(name) or not name:
        raise ValueError("profile name %r is not a label value (1-63 letters, digits, '-', '_', '.', starting "
                         "and ending with a letter or digit)" % (name,))
    check_label_prefix(label_prefix)
    labels = {label_prefix + "/profile": name}
    if profile.get("gpu_model") is not None:
        labels[label_prefix + "/gpu-product"] = label_value(str(profile["gpu_model"]))
    if operator:
        labels[OPERATOR_CONFIG_LABEL] = name
    return labels


def check_taints(taints, what="k8s_gpu_node_taints"):
    """Refuse taints that are not {key, value?, effect}; return them as plain dicts."""
    if not isinstance(taints, list):
        raise ValueError("%s must be a list of {key, value, effect}, got %r" % (what, taints))
    out, seen = [], set()
    for index, taint in enumerate(taints):
        where = "%s[%d]" % (what, index)
        if not isinstance(taint, dict):
            raise ValueError("%s must be a mapping with key and effect, got %r" % (where, taint))
        unknown = sorted(set(taint) - {"key", "value", "effect"})
        if unknown:
            raise ValueError("%s has unknown key(s) %s; allowed: key, value, effect" % (where, ", ".join(unknown)))
        check_label_key(taint.get("key"), "%s.key" % where)
        if taint.get("effect") not in TAINT_EFFECTS:
            raise ValueError("%s.effect must be one of %s, got %r"
                             % (where, ", ".join(TAINT_EFFECTS), taint.get("effect")))
        value = taint.get("value")
        if value is not None and not _is_label_value(value):
            raise ValueError("%s.value %r is not a label value" % (where, value))
        if (taint["key"], taint["effect"]) in seen:
            raise ValueError("%s: %s:%s is named twice" % (where, taint["key"], taint["effect"]))
        seen.add((taint["key"], taint["effect"]))
        item = {"key": taint["key"], "effect": taint["effect"]}
        if value:
            item["value"] = value
        out.append(item)
    return out


def plan_taints(current, wanted, remove=None):
    """The node's taints after adding WANTED and dropping the keys in REMOVE.

    current: the node's spec.taints (None when it has none). A taint is identified by key and
    effect, as the API server does; one of ours replaces a current one with the same key and
    effect (its value may differ). Every other current taint stays, in its place; taints the
    control plane put there (node.kubernetes.io/*) are never removed, even when named.
    Returns (taints, changed).
    """
    current = _current_taints(current)
    wanted = check_taints(wanted)
    remove = [] if remove is None else remove
    if not isinstance(remove, list):
        raise ValueError("k8s_gpu_node_taints_remove must be a list of taint keys, got %r" % (remove,))
    for index, key in enumerate(remove):
        check_label_key(key, "k8s_gpu_node_taints_remove[%d]" % index)
    wanted_ids = {(taint["key"], taint["effect"]) for taint in wanted}
    if any(taint["key"] in remove for taint in wanted):
        raise ValueError("k8s_gpu_node_taints_remove names a key that k8s_gpu_node_taints sets: %s"
                         % ", ".join(sorted({t["key"] for t in wanted if t["key"] in remove})))
    kept = []
    for taint in current:
        ident = (taint.get("key"), taint.get("effect"))
        if ident in wanted_ids:
            continue
        if taint.get("key") in remove and not str(taint.get("key")).startswith("node.kubernetes.io/"):
            continue
        kept.append(taint)
    by_id = {(taint.get("key"), taint.get("effect")): taint for taint in current}
    result = kept[:]
    for taint in wanted:
        old = by_id.get((taint["key"], taint["effect"]))
        # Keep the API server's own fields (timeAdded of NoExecute taints) when nothing else changed.
        if old is not None and old.get("value") == taint.get("value"):
            result.append(old)
        else:
            result.append(taint)
    return result, _taint_set(result) != _taint_set(current)


def _current_taints(current, what="the node's taints"):
    """The node's spec.taints as a list of dicts, each with a string key and effect (the API server's
    taints always have both; anything else is refused by name, not sorted into a TypeError)."""
    if current is None:
        return []
    if not isinstance(current, list):
        raise ValueError("%s must be a list of {key, value, effect}, got %r" % (what, current))
    out = []
    for index, taint in enumerate(current):
        where = "%s[%d]" % (what, index)
        if not isinstance(taint, dict):
            raise ValueError("%s must be a mapping with key and effect, got %r" % (where, taint))
        for field in ("key", "effect"):
            if not isinstance(taint.get(field), str) or not taint[field]:
                raise ValueError("%s has no %s (a non-empty string), got %r" % (where, field, taint))
        out.append(dict(taint))
    return out


def _taint_set(taints):
    return sorted((t.get("key"), t.get("effect"), t.get("value") or "") for t in taints)


def _image(registry, name, version):
    if not isinstance(registry, str) or not _IMAGE_PREFIX.fullmatch(registry):
        raise ValueError("registry %r is not an image repository prefix such as nvcr.io/nvidia or "
                         "mirror.example.com:5000/nvidia" % (registry,))
    return "%s/%s:%s" % (registry, name, version)


def _settings(settings):
    settings = dict(settings or {})
    known = {"mode", "namespace", "registry", "gfd", "runtime_class", "plugin_runtime_class", "flags",
             "label_prefix", "tolerations", "operator_mig_strategy"}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError("unknown setting(s) %s" % ", ".join(unknown))
    out = {
        "mode": settings.get("mode", "manifests"),
        "namespace": settings.get("namespace", "nvidia-device-plugin"),
        "registry": settings.get("registry", DEFAULT_REGISTRY),
        "gfd": settings.get("gfd", False),
        "runtime_class": settings.get("runtime_class", "nvidia"),
        "plugin_runtime_class": settings.get("plugin_runtime_class", True),
        "flags": settings.get("flags") or {},
        "label_prefix": settings.get("label_prefix", DEFAULT_LABEL_PREFIX),
        "tolerations": settings.get("tolerations") or {},
        "operator_mig_strategy": settings.get("operator_mig_strategy", "single"),
    }
    if out["mode"] not in MODES:
        raise ValueError("mode must be one of %s, got %r" % (", ".join(MODES), out["mode"]))
    if not isinstance(out["namespace"], str) or not _DNS_LABEL.fullmatch(out["namespace"]) \
            or len(out["namespace"]) > 63:
        raise ValueError("namespace %r is not a DNS label" % (out["namespace"],))
    if not _is_dns_subdomain(out["runtime_class"]):
        raise ValueError("runtime class name %r is not a DNS subdomain" % (out["runtime_class"],))
    check_label_prefix(out["label_prefix"])
    for key in ("gfd", "plugin_runtime_class"):
        if not isinstance(out[key], bool):
            raise ValueError("%s must be true or false, got %r" % (key, out[key]))
    if out["operator_mig_strategy"] not in dpc.MIG_STRATEGIES:
        raise ValueError("operator MIG strategy must be one of %s, got %r"
                         % (", ".join(dpc.MIG_STRATEGIES), out["operator_mig_strategy"]))
    _image(out["registry"], "k8s-device-plugin", DEVICE_PLUGIN_VERSION)
    out["tolerations"] = _tolerations_by_profile(out["tolerations"])
    return out


def _tolerations_by_profile(pairs):
    """{profile name: taints} from [[profile name, that node's taints], ...]: the union per profile."""
    if isinstance(pairs, dict):
        pairs = list(pairs.items())
    if not isinstance(pairs, list):
        raise ValueError("tolerations must be a list of [profile name, taints] pairs, got %r" % (pairs,))
    out = {}
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError("tolerations must be [profile name, taints] pairs, got %r" % (pair,))
        name, taints = pair
        for taint in check_taints(list(taints or []), "taints of a node of profile %s" % name):
            taint = {"key": taint["key"], "effect": taint["effect"]}
            if taint not in out.setdefault(name, []):
                out[name].append(taint)
    return out


def _profiles(profiles):
    """{name: profile} from a list of hardware profiles (one per host: repeats are fine if equal)."""
    if not isinstance(profiles, list) or not profiles:
        raise ValueError("no hardware profiles given: every GPU node of the play needs gpucloud_profile")
    by_name, by_object = {}, {}
    for profile in profiles:
        if not isinstance(profile, dict):
            raise ValueError("a hardware profile must be a mapping, got %r" % (profile,))
        name = profile.get("name")
        dns = profile_object_name(name)
        if name in by_name and by_name[name] != profile:
            raise ValueError("two different hardware profiles are named %s: one name, one config" % name)
        # h200_sxm and h200.sxm are both h200-sxm in object names: one ConfigMap would overwrite the other.
        other = by_object.setdefault(dns, name)
        if other != name:
            raise ValueError("profiles %s and %s both give the object name %s (its '_' and '.' become '-'): "
                             "rename one" % (min(other, name), max(other, name), dns))
        by_name[name] = profile
    return dict(sorted(by_name.items()))


def runtime_class(name="nvidia", handler="nvidia"):
    """The RuntimeClass whose handler is containerd's nvidia runtime."""
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpucloud.fleet"}},
            "handler": handler}


def _config_text(profile, flags, mode):
    sharing = profile.get("sharing") or {}
    if isinstance(sharing, dict) and sharing.get("mode") == "mps" and mode == "manifests":
        raise ValueError("profile %s: sharing.mode mps needs the device plugin's MPS control daemon "
                         "(the Helm chart's mps-control-daemon DaemonSet), which manifests mode does not "
                         "deploy: use k8s_gpu_node_mode operator, or time-slicing" % profile.get("name"))
    return dpc.device_plugin_config(profile, flags)


def _tolerations(extra):
    out = [dict(item) for item in BASE_TOLERATIONS]
    for taint in extra:
        item = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
        if item not in out:
            out.append(item)
    return out


def _labels(component, profile_name, label_prefix):
    return {"app.kubernetes.io/name": component, "app.kubernetes.io/version": DEVICE_PLUGIN_VERSION[1:],
            "app.kubernetes.io/managed-by": "gpucloud.fleet", label_prefix + "/profile": profile_name}


def _daemonset(component, name, namespace, profile_name, label_prefix, pod_spec, config_hash):
    selector = {"app.kubernetes.io/name": component, label_prefix + "/profile": profile_name}
    return {
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(component, profile_name, label_prefix)},
        "spec": {
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": _labels(component, profile_name, label_prefix),
                             "annotations": {label_prefix + "/config-sha256": config_hash}},
                "spec": pod_spec,
            },
        },
    }


def _device_plugin_pod(image, profile_name, config_map, mig, tolerations, settings):
    env = [{"name": "CONFIG_FILE", "value": CONFIG_DIR + "/config.yaml"}]
    if mig:
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
    env += [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    security = ({"capabilities": {"add": ["SYS_ADMIN"]}} if mig else
                {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}})
    spec = {
        "nodeSelector": {settings["label_prefix"] + "/profile": profile_name},
        "tolerations": tolerations,
        "priorityClassName": "system-node-critical",
        "containers": [{
            "name": "nvidia-device-plugin-ctr",
            "image": image,
            "env": env,
            "securityContext": security,
            "volumeMounts": [
                {"name": "kubelet-device-plugins-dir", "mountPath": DEVICE_PLUGINS_DIR},
                {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            ],
        }],
        "volumes": [
            {"name": "kubelet-device-plugins-dir", "hostPath": {"path": DEVICE_PLUGINS_DIR, "type": "Directory"}},
            {"name": "config", "configMap": {"name": config_map}},
        ],
    }
    if settings["plugin_runtime_class"]:
        spec["runtimeClassName"] = settings["runtime_class"]
    return spec


def _gfd_pod(image, profile_name, config_map, strategy, tolerations, settings):
    env = [{"name": "CONFIG_FILE", "value": CONFIG_DIR + "/config.yaml"},
           {"name": "MIG_STRATEGY", "value": strategy}]
    if strategy != "none":
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
    env += [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}]
    spec = {
        "nodeSelector": {settings["label_prefix"] + "/profile": profile_name},
        "tolerations": tolerations,
        "priorityClassName": "system-node-critical",
        "containers": [{
            "name": "gpu-feature-discovery",
            "image": image,
            "command": ["/usr/bin/gpu-feature-discovery"],
            "env": env,
            "securityContext": {"privileged": True},
            "volumeMounts": [
                {"name": "output-dir", "mountPath": "/etc/kubernetes/node-feature-discovery/features.d"},
                {"name": "host-sys", "mountPath": "/sys"},
                {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            ],
        }],
        "volumes": [
            {"name": "output-dir", "hostPath": {"path": "/etc/kubernetes/node-feature-discovery/features.d",
                                                "type": "DirectoryOrCreate"}},
            {"name": "host-sys", "hostPath": {"path": "/sys", "type": "Directory"}},
            {"name": "config", "configMap": {"name": config_map}},
        ],
    }
    if settings["plugin_runtime_class"]:
        spec["runtimeClassName"] = settings["runtime_class"]
    return spec


def cluster_manifests(profiles, settings=None):
    """Every cluster object the role applies, in apply order, as plain dicts.

    profiles: the hardware profiles of the play's GPU nodes (a list; one per host is fine).
    settings: mode (manifests|operator), namespace, registry, gfd, runtime_class,
    plugin_runtime_class, flags (device_plugin_config flags), label_prefix, tolerations
    ([[profile name, taints of one of its nodes], ...]: each profile's DaemonSets tolerate the
    union).

    manifests mode: the RuntimeClass, the Namespace (unless kube-system), then per profile a
    ConfigMap nvidia-device-plugin-<profile> holding config.yaml, the device plugin DaemonSet of
    the same name and, with gfd, gpu-feature-discovery-<profile>. operator mode: the RuntimeClass
    only (the operator's chart creates the rest from operator_values()).
    """
    settings = _settings(settings)
    by_name = _profiles(profiles)
    objects = [runtime_class(settings["runtime_class"])]
    if settings["mode"] == "operator":
        for profile in by_name.values():
            _config_text(profile, settings["flags"], "operator")
        return objects
    namespace = settings["namespace"]
    if namespace != "kube-system":
        objects.append({"apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace, "labels": {"app.kubernetes.io/managed-by": "gpucloud.fleet"}}})
    image = _image(settings["registry"], "k8s-device-plugin", DEVICE_PLUGIN_VERSION)
    for name, profile in by_name.items():
        dns = profile_object_name(name)
        text = _config_text(profile, settings["flags"], "manifests")
        strategy = dpc.build_device_plugin_config(profile, settings["flags"])["flags"]["migStrategy"]
        config_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
        config_map = "nvidia-device-plugin-" + dns
        tolerations = _tolerations(settings["tolerations"].get(name, []))
        objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": config_map, "namespace": namespace,
                                     "labels": _labels("nvidia-device-plugin", name, settings["label_prefix"])},
                        "data": {"config.yaml": text}})
        objects.append(_daemonset(
            "nvidia-device-plugin", config_map, namespace, name, settings["label_prefix"],
            _device_plugin_pod(image, name, config_map, strategy != "none", tolerations, settings), config_hash))
        if settings["gfd"]:
            objects.append(_daemonset(
                "gpu-feature-discovery", "gpu-feature-discovery-" + dns, namespace, name, settings["label_prefix"],
                _gfd_pod(image, name, config_map, strategy, tolerations, settings), config_hash))
    return objects


def operator_values(profiles, settings=None):
    """Helm values for NVIDIA's GPU Operator (GPU_OPERATOR_VERSION) over a host-managed stack.

    The driver, the container toolkit and the MIG manager stay off (the collection manages them
    on the host); dcgm-exporter stays off (gpu_monitoring runs the node's exporter). The chart
    creates the ConfigMap OPERATOR_CONFIG_MAP with one key per profile, and each node's
    nvidia.com/device-plugin.config label (node_labels(operator=True)) picks its profile's key.
    """
    settings = dict(settings or {}, mode="operator")
    settings = _settings(settings)
    by_name = _profiles(profiles)
    data = {name: _config_text(profile, settings["flags"], "operator") for name, profile in by_name.items()}
    registry = settings["registry"]
    return {
        "operator": {"repository": registry, "version": GPU_OPERATOR_VERSION,
                     "runtimeClass": settings["runtime_class"]},
        "validator": {"repository": registry, "version": GPU_OPERATOR_VERSION},
        "mig": {"strategy": settings["operator_mig_strategy"]},
        "driver": {"enabled": False},
        "toolkit": {"enabled": False},
        "migManager": {"enabled": False},
        "dcgmExporter": {"enabled": False},
        "devicePlugin": {
            "enabled": True, "repository": registry, "image": "k8s-device-plugin", "version": DEVICE_PLUGIN_VERSION,
            "config": {"create": True, "name": OPERATOR_CONFIG_MAP, "default": "", "data": data},
        },
        "gfd": {"enabled": settings["gfd"], "repository": registry, "image": "k8s-device-plugin",
                "version": DEVICE_PLUGIN_VERSION},
    }
