# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every object the k8s_gpu_node role can render, through the role's own validate.yml and
render.yml (ansible-playbook on localhost, no API call), checked with
`kubernetes-validate --strict` for KUBERNETES_VERSION; every device plugin config in them against
the strict JSON Schema; a manifest with a typo is refused by the same check."""


import copy
import json
import os
import subprocess
import sys

import jsonschema
import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.k8s.k8s_cases import (
    KUBERNETES_VERSION, example_profiles, load_schema, variant_profiles)
from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import run_playbook

VALIDATOR = jsonschema.Draft202012Validator(load_schema())
ROLE = "gpucloud.fleet.k8s_gpu_node"
ROLE_VALIDATE = {"name": ROLE, "tasks_from": "validate"}
TAINTS = [{"key": "gpucloud.io/dedicated", "value": "training", "effect": "NoSchedule"},
          {"key": "nvidia.com/gpu", "effect": "NoExecute"}]
MODES = {
    "manifests-gfd": {"k8s_gpu_node_gfd": True, "k8s_gpu_node_registry": "registry.example.com:5000/nvidia"},
    "manifests-kube-system": {"k8s_gpu_node_namespace": "kube-system", "k8s_gpu_node_plugin_runtime_class": False},
    "operator": {"k8s_gpu_node_mode": "operator", "k8s_gpu_node_gfd": True},
}


def render(work, mode):
    """Run the role's validate.yml and render.yml over one host per profile; (objects, values)."""
    profiles = dict(example_profiles(), **variant_profiles())
    if mode != "operator":
        del profiles["h100_mps"]  # MPS needs operator mode (test_mps_needs_operator_mode)
    kubeconfig = work / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    hosts = {}
    for index, (name, profile) in enumerate(sorted(profiles.items())):
        hosts["node%d" % index] = {"gpucloud_profile": profile, "k8s_gpu_node_taints": TAINTS if index % 2 else []}
    inventory = work / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "vars": dict(
        MODES[mode], ansible_connection="local", ansible_python_interpreter=sys.executable,
        k8s_gpu_node_kubeconfig=str(kubeconfig), k8s_gpu_node_operator_values_file=str(work / "values.yaml"))}}))
    out = work / "rendered.json"
    playbook = work / "render.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Render", "hosts": "all", "gather_facts": False,
        "tasks": [
            {"name": "Validate", "ansible.builtin.include_role": ROLE_VALIDATE},
            {"name": "Render", "ansible.builtin.include_role": {"name": ROLE, "tasks_from": "render"}},
            {"name": "Write", "run_once": True, "ansible.builtin.copy": {
                "dest": str(out), "mode": "0600",
                "content": "{{ {'objects': __k8s_gpu_node_objects, 'values': __k8s_gpu_node_operator_values,"
                           " 'labels': dict(ansible_play_hosts | map('extract', hostvars, '__k8s_gpu_node_labels')"
                           " | map('to_json') | zip(ansible_play_hosts) | map('reverse'))} | to_json }}"}},
        ]}]))
    run = run_playbook(work, playbook, inventory)
    assert run.returncode == 0, run.stdout[-4000:]
    return json.loads(out.read_text())


def kubernetes_validate(paths):
    exe = os.path.join(os.path.dirname(sys.executable), "kubernetes-validate")
    return subprocess.run([exe, "--strict", "--kubernetes-version", KUBERNETES_VERSION] + [str(p) for p in paths],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)


def write_objects(work, objects):
    paths = []
    for index, obj in enumerate(objects):
        path = work / ("%02d-%s-%s.yaml" % (index, obj["kind"].lower(), obj["metadata"]["name"]))
        path.write_text(yaml.safe_dump(obj, sort_keys=False))
        paths.append(path)
    return paths


@pytest.fixture(scope="module", params=sorted(MODES))
def rendered(request, tmp_path_factory):
    work = tmp_path_factory.mktemp(request.param)
    return request.param, work, render(work, request.param)


def test_every_manifest_passes_kubernetes_validate_strict(rendered):
    mode, work, result = rendered
    paths = write_objects(work, result["objects"])
    run = kubernetes_validate(paths)
    assert run.returncode == 0, run.stdout
    assert run.stdout.count(" passed for resource ") == len(paths), run.stdout
    kinds = sorted({obj["kind"] for obj in result["objects"]})
    assert kinds == (["RuntimeClass"] if mode == "operator" else
                     ["ConfigMap", "DaemonSet", "Namespace", "RuntimeClass"] if mode == "manifests-gfd" else
                     ["ConfigMap", "DaemonSet", "RuntimeClass"])


def test_every_device_plugin_config_validates_against_the_schema(rendered):
    mode, _work, result = rendered
    if mode == "operator":
        configs = result["values"]["devicePlugin"]["config"]["data"]
    else:
        configs = {obj["metadata"]["name"]: obj["data"]["config.yaml"]
                   for obj in result["objects"] if obj["kind"] == "ConfigMap"}
    expected = len(example_profiles()) + len(variant_profiles()) - (0 if mode == "operator" else 1)
    assert len(configs) == expected
    for name, text in configs.items():
        assert sorted(e.message for e in VALIDATOR.iter_errors(yaml.safe_load(text))) == [], name


def test_per_profile_objects_and_labels(rendered):
    mode, _work, result = rendered
    labels = {host: json.loads(value) for host, value in result["labels"].items()}
    assert all(value["gpucloud.io/profile"] for value in labels.values())
    assert any(value.get("gpucloud.io/gpu-product") == "A100-80GB-PCIe" for value in labels.values())
    assert all(("nvidia.com/device-plugin.config" in value) == (mode == "operator") for value in labels.values())
    daemonsets = [obj for obj in result["objects"] if obj["kind"] == "DaemonSet"]
    if mode == "operator":
        values = result["values"]
        assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
        assert not daemonsets
        return
    plugins = [ds for ds in daemonsets if ds["metadata"]["name"].startswith("nvidia-device-plugin-")]
    selectors = sorted(ds["spec"]["template"]["spec"]["nodeSelector"]["gpucloud.io/profile"] for ds in plugins)
    assert selectors == sorted(set(json.loads(v)["gpucloud.io/profile"] for v in result["labels"].values()))
    # Nodes of odd index carry TAINTS; their profiles' pods tolerate them, the others' do not.
    tolerated = [ds for ds in plugins if {"key": "gpucloud.io/dedicated", "operator": "Exists", "effect": "NoSchedule"}
                 in ds["spec"]["template"]["spec"]["tolerations"]]
    assert 0 < len(tolerated) < len(plugins)


def test_kubernetes_validate_refuses_a_typo(tmp_path, rendered):
    _mode, _work, result = rendered
    daemonset = copy.deepcopy(next((o for o in result["objects"] if o["kind"] == "DaemonSet"), None)
                              or result["objects"][0])
    if daemonset["kind"] == "DaemonSet":
        # An extra key beside the right one: only --strict refuses it (Kubernetes would drop it).
        daemonset["spec"]["template"]["spec"]["nodeSelecter"] = {"gpucloud.io/profile": "x"}
    else:
        daemonset["handlr"] = "nvidia"
    run = kubernetes_validate(write_objects(tmp_path, [daemonset]))
    assert run.returncode != 0, run.stdout
    assert "nodeSelecter" in run.stdout or "handlr" in run.stdout, run.stdout


def test_mps_needs_operator_mode(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}\n")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node0": {
        "gpucloud_profile": variant_profiles()["h100_mps"], "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable, "k8s_gpu_node_kubeconfig": str(kubeconfig)}}}}))
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump([{"name": "Validate", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Validate", "ansible.builtin.include_role": ROLE_VALIDATE}]}]))
    run = run_playbook(tmp_path, playbook, inventory)
    assert run.returncode != 0
    assert "profile h100_mps: sharing.mode mps needs the device plugin's MPS control daemon" in run.stdout, \
        run.stdout[-3000:]
