# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""molecule/k8s_gpu_node/fake_kube_api.py speaks enough of the API for a drain by eviction.

The fake (not Kubernetes) runs on a free port; a real ansible-playbook on localhost takes a node
through remediate_quarantine.yml's and remediate_return.yml's Kubernetes steps against it (the
same modules, options and taint filter) and the fake's record shows what was sent, in order.

kubernetes.core.k8s_drain (6.2.0) fails the task at the first eviction answered 429 (a
PodDisruptionBudget that allows no disruption); it does not retry as kubectl drain does. The
playbook below therefore drains once with remediate_quarantine.yml's options, expects that to
fail on the pod the budget protects, and drains again: the retry remediate_quarantine.yml makes
(until succeeded, within remediation_drain_timeout), which molecule/remediation runs through.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FAKE = os.path.join(ROOT, "molecule", "k8s_gpu_node", "fake_kube_api.py")
NODE = "k8s-gpu-a"
NODES = [
    {"apiVersion": "v1", "kind": "Node",
     "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}},
     "spec": {"taints": [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"}]}},
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "k8s-gpu-b"}, "spec": {}},
]


def _pod(namespace, name, node, owner_kind, annotations=None):
    # containers and the owner reference's four fields: the kubernetes client refuses a pod without them.
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {},
                         "ownerReferences": [{"apiVersion": "apps/v1" if owner_kind != "Job" else "batch/v1",
                                              "kind": owner_kind, "name": name.rsplit("-", 1)[0],
                                              "uid": "00000000-0000-0000-0000-%012d" % len(name)}]},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}}


# batch-0 sorts first on the node, so the budget's refusal comes before web-0's eviction.
PDB_POD = _pod("jobs", "batch-0", NODE, "Job", {"fake.gpucloud.io/pdb-refusals": "1"})
DS_POD = _pod("nvidia-device-plugin", "nvidia-device-plugin-h200-sxm-x7k2p", NODE, "DaemonSet")
OTHER_NODE_POD = _pod("jobs", "other-0", "k8s-gpu-b", "ReplicaSet")
ADDED_POD = _pod("jobs", "web-0", NODE, "ReplicaSet")

DRAIN = """\
      kubernetes.core.k8s_drain:
        kubeconfig: "{{ kubeconfig }}"
        name: "{{ node }}"
        state: drain
        delete_options:
          ignore_daemonsets: true
          delete_emptydir_data: true
          disable_eviction: false
          wait_timeout: 20
          wait_sleep: 1
"""

PLAYBOOK = """\
- name: Quarantine, drain and return a node as the remediation playbook does
  hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  tasks:
    - name: Read the node
      kubernetes.core.k8s_info:
        kubeconfig: "{{ kubeconfig }}"
        api_version: v1
        kind: Node
        name: "{{ node }}"
      register: before

    - name: Taint the node with the fault, other taints stay
      kubernetes.core.k8s:
        kubeconfig: "{{ kubeconfig }}"
        state: patched
        merge_type: merge
        definition:
          apiVersion: v1
          kind: Node
          metadata: {name: "{{ node }}"}
          spec:
            taints: >-
              {{ (before.resources[0].spec.taints | default(none)
                  | gpucloud.fleet.k8s_gpu_node_taints([{'key': 'gpucloud.io/remediation',
                                                         'value': 'hw', 'effect': 'NoSchedule'}])).taints }}

    - name: Cordon the node
      kubernetes.core.k8s_drain:
        kubeconfig: "{{ kubeconfig }}"
        name: "{{ node }}"
        state: cordon

    - name: Drain the node by eviction (the budget refuses batch-0 once)
%(drain)s      register: first_drain
      ignore_errors: true

    - name: Drain the node again
%(drain)s      register: second_drain

    - name: The first drain stopped at the budget, the second evicted
      ansible.builtin.assert:
        that:
          - first_drain is failed
          - "'disruption budget' in first_drain.msg"
          - second_drain is changed
        fail_msg: "{{ first_drain | to_json }} {{ second_drain | to_json }}"

    - name: Read the node back
      kubernetes.core.k8s_info:
        kubeconfig: "{{ kubeconfig }}"
        api_version: v1
        kind: Node
        name: "{{ node }}"
      register: back

    - name: Remove the remediation taint
      kubernetes.core.k8s:
        kubeconfig: "{{ kubeconfig }}"
        state: patched
        merge_type: merge
        definition:
          apiVersion: v1
          kind: Node
          metadata: {name: "{{ node }}"}
          spec:
            taints: >-
              {{ (back.resources[0].spec.taints | default(none)
                  | gpucloud.fleet.k8s_gpu_node_taints([], ['gpucloud.io/remediation'])).taints }}

    - name: Uncordon the node
      kubernetes.core.k8s_drain:
        kubeconfig: "{{ kubeconfig }}"
        name: "{{ node }}"
        state: uncordon
""" % {"drain": DRAIN}

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
  - name: fake
    cluster: {server: "%s"}
users:
  - name: fake
    user: {token: fake}
contexts:
  - name: fake
    context: {cluster: fake, user: fake}
current-context: fake
"""


def _call(base, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture(name="fake")
def fixture_fake(tmp_path):
    (tmp_path / "nodes.json").write_text(json.dumps(NODES))
    (tmp_path / "pods.json").write_text(json.dumps([PDB_POD, DS_POD, OTHER_NODE_POD]))
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, FAKE, "--nodes", str(tmp_path / "nodes.json"), "--pods", str(tmp_path / "pods.json"),
         "--port-file", str(port_file), "--pid-file", str(tmp_path / "fake.pid"), "--max-seconds", "120"])
    try:
        deadline = time.monotonic() + 10
        while not port_file.exists():
            assert server.poll() is None and time.monotonic() < deadline, "the fake did not start"
            time.sleep(0.05)
        yield "http://127.0.0.1:%s" % port_file.read_text().strip()
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_pods_are_listed_by_node_evicted_and_deleted(fake):
    code, pods = _call(fake, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dk8s-gpu-b")
    assert code == 200 and [pod["metadata"]["name"] for pod in pods["items"]] == ["other-0"]
    assert pods["items"][0]["status"]["phase"] == "Running"
    # Seeding registered the pods' namespaces, so a pod can be created in one while the fake runs.
    assert _call(fake, "GET", "/api/v1/namespaces/jobs")[0] == 200
    assert _call(fake, "POST", "/api/v1/namespaces/jobs/pods", ADDED_POD)[0] == 201
    assert _call(fake, "POST", "/api/v1/namespaces/nowhere/pods", ADDED_POD)[0] == 404
    code, pods = _call(fake, "GET", "/api/v1/namespaces/jobs/pods?fieldSelector=spec.nodeName%3Dk8s-gpu-a")
    assert [pod["metadata"]["name"] for pod in pods["items"]] == ["batch-0", "web-0"]

    eviction = "/api/v1/namespaces/jobs/pods/batch-0/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "batch-0", "namespace": "jobs"}}
    # A dry run is refused as the real one would be, and uses up no refusal.
    assert _call(fake, "POST", eviction + "?dryRun=All", body)[0] == 429
    code, refused = _call(fake, "POST", eviction, body)
    assert code == 429 and refused["reason"] == "TooManyRequests"
    assert refused["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert _call(fake, "POST", eviction + "?dryRun=All", body)[0] == 201
    assert _call(fake, "GET", "/api/v1/namespaces/jobs/pods/batch-0")[0] == 200
    success = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
    assert _call(fake, "POST", eviction, body) == (201, success)
    assert _call(fake, "GET", "/api/v1/namespaces/jobs/pods/batch-0")[0] == 404
    assert _call(fake, "POST", eviction, body)[0] == 404

    assert _call(fake, "DELETE", "/api/v1/namespaces/jobs/pods/web-0?dryRun=All")[0] == 200
    assert _call(fake, "GET", "/api/v1/namespaces/jobs/pods/web-0")[0] == 200
    assert _call(fake, "DELETE", "/api/v1/namespaces/jobs/pods/web-0")[0] == 200
    assert _call(fake, "GET", "/api/v1/namespaces/jobs/pods/web-0")[0] == 404
    assert _call(fake, "DELETE", "/api/v1/nodes/k8s-gpu-b")[0] == 405

    log = _call(fake, "GET", "/__fake/log")[1]
    evictions = [(entry["dry_run"], entry["status"], entry["persisted"]) for entry in log if entry["path"] == eviction]
    assert evictions == [(True, 429, False), (False, 429, False), (True, 201, False), (False, 201, True), (False, 404, False)]


def _kubernetes_core_missing():
    if not shutil.which("ansible-playbook") or not shutil.which("ansible-galaxy"):
        return "ansible-playbook is not installed (scripts/setup.sh builds the venv)"
    listed = subprocess.run(["ansible-galaxy", "collection", "list", "kubernetes.core", "--format", "json"],
                            capture_output=True, text=True, timeout=60, check=False)
    if listed.returncode != 0 or "kubernetes.core" not in listed.stdout:
        return "the kubernetes.core collection is not installed"
    return None


def test_a_drain_by_eviction_against_the_fake(fake, tmp_path):
    missing = _kubernetes_core_missing()
    if missing:
        pytest.skip(missing)
    assert _call(fake, "POST", "/api/v1/namespaces/jobs/pods", ADDED_POD)[0] == 201
    (tmp_path / "kubeconfig").write_text(KUBECONFIG % fake)
    (tmp_path / "drain.yml").write_text(PLAYBOOK)
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.environ.get("ANSIBLE_COLLECTIONS_PATH") or os.path.join(ROOT, ".cache", "collections"))
    run = subprocess.run(
        ["ansible-playbook", "-i", "localhost,", str(tmp_path / "drain.yml"),
         "-e", json.dumps({"kubeconfig": str(tmp_path / "kubeconfig"), "node": NODE})],
        cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]

    log = [entry for entry in _call(fake, "GET", "/__fake/log")[1] if "mark" not in entry]
    writes = [(entry["method"], entry["path"], entry["status"]) for entry in log if entry["method"] != "GET"]
    node_path = "/api/v1/nodes/" + NODE
    evict = "/api/v1/namespaces/jobs/pods/%s/eviction"
    assert writes == [
        ("POST", "/api/v1/namespaces/jobs/pods", 201),  # the test's own pod, added while the fake ran
        ("PATCH", node_path, 200),  # taint
        ("PATCH", node_path, 200),  # cordon
        ("POST", evict % "batch-0", 429),  # the budget refuses; the first drain fails here
        ("POST", evict % "batch-0", 201),
        ("POST", evict % "web-0", 201),
        ("PATCH", node_path, 200),  # the remediation taint goes
        ("PATCH", node_path, 200),  # uncordon
    ], writes
    bodies = [entry["body"] for entry in log if entry["method"] == "PATCH"]
    assert {"key": "gpucloud.io/remediation", "value": "hw", "effect": "NoSchedule"} in bodies[0]["spec"]["taints"]
    assert bodies[1] == {"spec": {"unschedulable": True}}
    assert bodies[3] == {"spec": {"unschedulable": False}}
    assert not [entry for entry in log if entry["path"].endswith("/eviction") and "jobs/" not in entry["path"]]
    # The drain waited for each evicted pod until the API answered 404.
    assert {entry["path"] for entry in log if entry["method"] == "GET" and entry["status"] == 404} >= {
        "/api/v1/namespaces/jobs/pods/batch-0", "/api/v1/namespaces/jobs/pods/web-0"}

    objects = _call(fake, "GET", "/__fake/objects")[1]
    pods = sorted((obj["metadata"]["namespace"], obj["metadata"]["name"]) for obj in objects if obj["kind"] == "Pod")
    assert pods == [("jobs", "other-0"), ("nvidia-device-plugin", DS_POD["metadata"]["name"])]
    node = [obj for obj in objects if obj["kind"] == "Node" and obj["metadata"]["name"] == NODE][0]
    assert node["spec"] == {"taints": [{"key": "example.com/maintenance", "effect": "PreferNoSchedule"}],
                            "unschedulable": False}
