# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import hashlib

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import k8s_gpu_node as kgn

H200 = {"name": "h200_sxm", "gpu_model": "H200", "mig": False}
A100 = {"name": "a100_80g_pcie", "gpu_model": "A100 80GB PCIe",
        "mig": {"strategy": "mixed", "layout": "all-1g.10gb"}, "sharing": {"mode": "time-slicing", "replicas": 2}}


def by_kind(objects, kind):
    return [obj for obj in objects if obj["kind"] == kind]


def test_node_labels():
    assert kgn.node_labels(A100) == {"gpucloud.io/profile": "a100_80g_pcie", "gpucloud.io/gpu-product": "A100-80GB-PCIe"}
    assert kgn.node_labels(H200, "example.org", operator=True) == {
        "example.org/profile": "h200_sxm", "example.org/gpu-product": "H200",
        "nvidia.com/device-plugin.config": "h200_sxm"}
    assert kgn.node_labels({"name": "x"}) == {"gpucloud.io/profile": "x"}


@pytest.mark.parametrize("profile,prefix,message", [
    ({"name": "has space"}, "gpucloud.io", "is not a label value"),
    ({"name": ""}, "gpucloud.io", "is not a label value"),
    ({"name": "ok"}, "Bad_Prefix", "is not a DNS subdomain"),
    ({"name": "ok", "gpu_model": "  "}, "gpucloud.io", "empty label value"),
])
def test_node_labels_refuse(profile, prefix, message):
    with pytest.raises(ValueError, match=message):
        kgn.node_labels(profile, prefix)


def test_label_value_like_gfd():
    assert kgn.label_value("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert kgn.label_value(" (x) ") == "x"
    assert len(kgn.label_value("a" * 100)) == 63


def test_plan_taints_adds_keeps_replaces_and_removes():
    current = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "t"},
               {"key": "old", "effect": "NoSchedule"},
               {"key": "nvidia.com/gpu", "value": "false", "effect": "NoSchedule"},
               {"key": "keep", "effect": "NoExecute", "timeAdded": "t0"}]
    wanted = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
              {"key": "keep", "effect": "NoExecute"}]
    taints, changed = kgn.plan_taints(current, wanted, remove=["old", "node.kubernetes.io/unschedulable"])
    assert changed
    assert taints == [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "t"},
                      {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                      {"key": "keep", "effect": "NoExecute", "timeAdded": "t0"}]
    again, changed = kgn.plan_taints(taints, wanted, remove=["old"])
    assert not changed and again == taints


def test_plan_taints_without_wishes_keeps_everything():
    current = [{"key": "a", "effect": "NoSchedule"}]
    assert kgn.plan_taints(current, []) == (current, False)
    assert kgn.plan_taints(None, []) == ([], False)


@pytest.mark.parametrize("wanted,remove,message", [
    ([{"key": "a", "effect": "NoSchedul"}], [], r"effect must be one of"),
    ([{"key": "a", "effect": "NoSchedule", "efect": "x"}], [], "unknown key"),
    ([{"key": "a b", "effect": "NoSchedule"}], [], "must be 1-63"),
    ([{"key": "a", "value": "x y", "effect": "NoSchedule"}], [], "not a label value"),
    ([{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}], [], "named twice"),
    ([{"key": "a", "effect": "NoSchedule"}], ["a"], "names a key that k8s_gpu_node_taints sets"),
    ("a", [], "must be a list"),
])
def test_plan_taints_refuses(wanted, remove, message):
    with pytest.raises(ValueError, match=message):
        kgn.plan_taints([], wanted, remove)


def test_manifests_per_profile():
    objects = kgn.cluster_manifests([H200, A100, H200], {
        "gfd": True, "flags": {"nvidia_driver_root": "/"},
        "tolerations": [["h200_sxm", [{"key": "gpucloud.io/dedicated", "value": "training", "effect": "NoSchedule"}]],
                        ["h200_sxm", []], ["a100_80g_pcie", None]]})
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("RuntimeClass", "nvidia"), ("Namespace", "nvidia-device-plugin"),
        ("ConfigMap", "nvidia-device-plugin-a100-80g-pcie"), ("DaemonSet", "nvidia-device-plugin-a100-80g-pcie"),
        ("DaemonSet", "gpu-feature-discovery-a100-80g-pcie"),
        ("ConfigMap", "nvidia-device-plugin-h200-sxm"), ("DaemonSet", "nvidia-device-plugin-h200-sxm"),
        ("DaemonSet", "gpu-feature-discovery-h200-sxm")]
    assert objects[0]["handler"] == "nvidia"
    cm = {o["metadata"]["name"]: o for o in by_kind(objects, "ConfigMap")}
    a100_config = yaml.safe_load(cm["nvidia-device-plugin-a100-80g-pcie"]["data"]["config.yaml"])
    assert a100_config["flags"] == {"migStrategy": "mixed", "nvidiaDriverRoot": "/"}
    assert a100_config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}]
    ds = {o["metadata"]["name"]: o for o in by_kind(objects, "DaemonSet")}
    h200 = ds["nvidia-device-plugin-h200-sxm"]["spec"]["template"]
    a100 = ds["nvidia-device-plugin-a100-80g-pcie"]["spec"]["template"]
    assert h200["spec"]["nodeSelector"] == {"gpucloud.io/profile": "h200_sxm"}
    assert h200["spec"]["runtimeClassName"] == "nvidia"
    assert h200["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert h200["spec"]["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    # MIG needs CAP_SYS_ADMIN and the MIG monitor devices (helm chart _helpers.tpl 127-135).
    assert a100["spec"]["containers"][0]["securityContext"] == {"capabilities": {"add": ["SYS_ADMIN"]}}
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in a100["spec"]["containers"][0]["env"]
    assert {"key": "gpucloud.io/dedicated", "operator": "Exists", "effect": "NoSchedule"} in h200["spec"]["tolerations"]
    assert {"key": "gpucloud.io/dedicated", "operator": "Exists", "effect": "NoSchedule"} \
        not in a100["spec"]["tolerations"]
    text = cm["nvidia-device-plugin-h200-sxm"]["data"]["config.yaml"]
    assert h200["metadata"]["annotations"]["gpucloud.io/config-sha256"] == hashlib.sha256(text.encode()).hexdigest()
    gfd = ds["gpu-feature-discovery-a100-80g-pcie"]["spec"]["template"]["spec"]
    assert {"name": "MIG_STRATEGY", "value": "mixed"} in gfd["containers"][0]["env"]
    assert gfd["volumes"][-1] == {"name": "config", "configMap": {"name": "nvidia-device-plugin-a100-80g-pcie"}}


def test_manifests_kube_system_mirror_and_no_runtime_class():
    objects = kgn.cluster_manifests([H200], {"namespace": "kube-system", "registry": "mirror.example:5000/nvidia",
                                             "plugin_runtime_class": False, "runtime_class": "nvidia-cdi"})
    assert [o["kind"] for o in objects] == ["RuntimeClass", "ConfigMap", "DaemonSet"]
    assert objects[0]["metadata"]["name"] == "nvidia-cdi"
    pod = objects[2]["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod
    assert pod["containers"][0]["image"] == "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0"


def test_operator_mode():
    mps = {"name": "h100_mps", "sharing": {"mode": "mps", "replicas": 4}}
    assert [o["kind"] for o in kgn.cluster_manifests([H200, mps], {"mode": "operator"})] == ["RuntimeClass"]
    values = kgn.operator_values([H200, mps, A100], {"gfd": True, "registry": "mirror.example/nvidia"})
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["migManager"] == {"enabled": False}
    assert values["devicePlugin"]["version"] == "v0.20.0"
    assert values["devicePlugin"]["repository"] == "mirror.example/nvidia"
    data = values["devicePlugin"]["config"]["data"]
    assert sorted(data) == ["a100_80g_pcie", "h100_mps", "h200_sxm"]
    assert yaml.safe_load(data["h100_mps"])["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert values["gfd"]["enabled"] is True


@pytest.mark.parametrize("profiles,settings,message", [
    ([], None, "no hardware profiles"),
    ([{"name": "x", "sharing": {"mode": "mps", "replicas": 2}}], None, "manifests mode does not deploy"),
    ([H200, dict(H200, gpu_model="other")], None, "two different hardware profiles are named h200_sxm"),
    ([{"name": "Bad Name"}], None, "DNS label"),
    ([{"name": "a" * 42}], None, "at most 41 characters"),
    ([H200], {"mode": "helm"}, "mode must be one of"),
    ([H200], {"namespce": "x"}, "unknown setting"),
    ([H200], {"namespace": "Kube_System"}, "not a DNS label"),
    ([H200], {"registry": "https://nvcr.io/nvidia"}, "not an image repository prefix"),
    ([H200], {"gfd": "yes"}, "gfd must be true or false"),
    ([{"name": "x", "sharing": {"mode": "time-slicing", "replicas": 1}}], None, "at least 2"),
    ([H200], {"tolerations": [["h200_sxm", [{"key": "k"}]]]}, "effect must be one of"),
])
def test_manifests_refuse(profiles, settings, message):
    with pytest.raises(ValueError, match=message):
        kgn.cluster_manifests(profiles, settings)


# Issue 28 item 13: every name check holds to the end of the string (a trailing newline is not a
# name), a label key has a non-empty prefix before its '/', and two profiles never share objects.
NEWLINE_SETTINGS = [
    ({"namespace": "nvidia-device-plugin\n"}, "namespace"),
    ({"registry": "nvcr.io/nvidia\n"}, "registry"),
    ({"runtime_class": "nvidia\n"}, "runtime class"),
    ({"label_prefix": "gpucloud.io\n"}, "label prefix"),
    ({"label_prefix": ""}, "label prefix"),
    ({"label_prefix": "/"}, "label prefix"),
    ({"tolerations": [["h200_sxm", [{"key": "gpu\n", "effect": "NoSchedule"}]]]}, "key"),
    ({"tolerations": [["h200_sxm", [{"key": "/gpu", "effect": "NoSchedule"}]]]}, "key"),
]


@pytest.mark.parametrize("settings,word", NEWLINE_SETTINGS, ids=[repr(s) for s, _w in NEWLINE_SETTINGS])
def test_manifests_refuse_names_with_a_trailing_newline_or_an_empty_prefix(settings, word):
    with pytest.raises(ValueError, match=word):
        kgn.cluster_manifests([H200], settings)
    with pytest.raises(ValueError, match=word):
        kgn.operator_values([H200], settings)


@pytest.mark.parametrize("name", ["h200_sxm\n", "h200\n_sxm", "h200_sxm\r", "\nh200"])
def test_profile_names_with_a_newline_are_refused_everywhere(name):
    with pytest.raises(ValueError, match="profile name"):
        kgn.node_labels({"name": name})
    with pytest.raises(ValueError, match="profile name"):
        kgn.cluster_manifests([{"name": name}])
    with pytest.raises(ValueError, match="profile name"):
        kgn.profile_object_name(name)


@pytest.mark.parametrize("prefix", ["", "/", "gpucloud.io\n", "gpucloud.io/", "-bad.io", "a" * 254])
def test_node_labels_refuse_a_bad_label_prefix(prefix):
    with pytest.raises(ValueError, match="label prefix"):
        kgn.node_labels(H200, prefix)


@pytest.mark.parametrize("taint,message", [
    ({"key": "/gpu", "effect": "NoSchedule"}, "empty prefix"),
    ({"key": "nvidia.com/\n", "effect": "NoSchedule"}, "must be 1-63"),
    ({"key": "gpu\n", "effect": "NoSchedule"}, "must be 1-63"),
    ({"key": "nvidia.com\n/gpu", "effect": "NoSchedule"}, "not a DNS subdomain"),
    ({"key": "gpu", "value": "present\n", "effect": "NoSchedule"}, "not a label value"),
    ({"key": "gpu", "effect": "NoSchedule\n"}, "effect must be one of"),
])
def test_taints_with_a_trailing_newline_or_an_empty_prefix_are_refused(taint, message):
    with pytest.raises(ValueError, match=message):
        kgn.plan_taints(None, [taint])


@pytest.mark.parametrize("remove", [["/gpu"], ["gpu\n"]])
def test_taint_removals_are_checked_the_same_way(remove):
    with pytest.raises(ValueError, match=r"k8s_gpu_node_taints_remove\[0\]"):
        kgn.plan_taints(None, [], remove)


@pytest.mark.parametrize("names", [("h200_sxm", "h200.sxm"), ("h200-sxm", "H200_SXM"), ("a.b", "a_b")])
def test_profiles_whose_object_names_collide_are_refused(names):
    profiles = [{"name": names[0]}, {"name": names[1], "gpu_model": "other"}]
    with pytest.raises(ValueError, match="both give the object name"):
        kgn.cluster_manifests(profiles)
    with pytest.raises(ValueError, match="both give the object name"):
        kgn.operator_values(profiles)


# Issue 28 item 17: plan_taints given a taint without a key (from the node or from the inventory)
# says which one, instead of a TypeError from sorting None against a string.
@pytest.mark.parametrize("current,wanted,message", [
    ([{"effect": "NoSchedule"}], [{"key": "a", "effect": "NoSchedule"}], r"the node's taints\[0\]"),
    ([{"key": "a"}], [{"key": "a", "effect": "NoSchedule"}], r"the node's taints\[0\]"),
    ([{"key": "a", "effect": "NoSchedule"}, {"key": None, "effect": "NoSchedule"}], [], r"the node's taints\[1\]"),
    (["gpu"], [], r"the node's taints\[0\] must be a mapping"),
    ({"key": "a"}, [], "the node's taints must be a list"),
    (None, [{"effect": "NoSchedule"}], r"k8s_gpu_node_taints\[0\].key must be a non-empty string"),
    (None, [{"key": None, "effect": "NoSchedule"}], r"k8s_gpu_node_taints\[0\].key must be a non-empty string"),
])
def test_plan_taints_names_a_taint_without_a_key(current, wanted, message):
    with pytest.raises(ValueError, match=message):
        kgn.plan_taints(current, wanted)


def test_plan_taints_refuses_removals_that_are_not_a_list():
    with pytest.raises(ValueError, match="k8s_gpu_node_taints_remove must be a list"):
        kgn.plan_taints(None, [], "gpu")
