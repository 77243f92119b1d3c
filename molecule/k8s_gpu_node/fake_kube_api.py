# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A FAKE Kubernetes API server for molecule/k8s_gpu_node and kubernetes.core.k8s_drain: not Kubernetes.

It speaks just enough of the API for kubernetes.core (kubernetes Python client 37) to talk to it:
/version, discovery (/api, /apis, /api/v1, /apis/apps/v1, /apis/node.k8s.io/v1) for Node,
Namespace, ConfigMap, Pod (with its pods/eviction subresource), DaemonSet and RuntimeClass; GET of
an object or a collection, POST (create), PATCH, and DELETE of a pod, each honouring ?dryRun=All by
answering without storing. Patches of any content type are applied as JSON merge patches (RFC
7386: lists replaced whole; a real API server merges some lists by key with strategic merge
patches). A create in a namespace that does not exist is refused with 404, as a real API server
does. It validates no schema and runs no controller; a subresource other than pods/eviction is 404.

Pods, for a drain (kubernetes.core.k8s_drain: cordon, list the node's pods, evict, read each until
404, uncordon): a list (/api/v1/pods or /api/v1/namespaces/NS/pods) honours only the field
selector spec.nodeName=NODE (on pods); every other field selector, and every labelSelector, is
ignored and the list comes back unfiltered. There is no scheduler and no kubelet: a pod stays on
the spec.nodeName it was given, and a pod without status gets phase Running when it names a node
(Pending when not), as if a kubelet ran it. POST .../pods/NAME/eviction (policy/v1 Eviction)
stands in for the kubelet too: the pod is deleted from the store at once (no grace period, no
Terminating), and the answer is 201 with a Success Status. PodDisruptionBudgets exist only as the
pod annotation fake.gpucloud.io/pdb-refusals: "N": that pod's first N evictions are refused with
429 TooManyRequests and the Status a real API server sends when a budget forbids the eviction
(a dry run is refused the same way but uses up no refusal); the next one evicts it. No
PodDisruptionBudget objects, no policy/v1 group in discovery.

Seeding: --nodes FILE (a JSON list of Node objects) and --pods FILE (a JSON list of Pod objects;
metadata.namespace defaults to "default", and each pod's namespace is registered as a Namespace,
as a cluster that runs the pod has it). A test adds pods while the fake runs with an ordinary
POST /api/v1/namespaces/NS/pods.

Every API request is recorded, in order, as {method, path (no query string), dry_run, content_type,
body (of POST, PATCH and DELETE; else null), persisted (whether the store changed), status (HTTP code)};
POST /__fake/mark?phase=NAME adds a {mark: NAME}; GET /__fake/log and GET /__fake/objects return
the record and the stored objects (sorted by group/version, plural, namespace, name).
Listens on 127.0.0.1 at a free port written to --port-file; exits after --max-seconds so that
no process outlives a broken run.
"""

import argparse
import copy
import json
import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

RESOURCES = {
    # group/version: [(plural, kind, namespaced)]
    "v1": [("nodes", "Node", False), ("namespaces", "Namespace", False), ("configmaps", "ConfigMap", True),
           ("pods", "Pod", True)],
    "apps/v1": [("daemonsets", "DaemonSet", True)],
    "node.k8s.io/v1": [("runtimeclasses", "RuntimeClass", False)],
}
KINDS = {(gv, plural): (kind, namespaced) for gv, items in RESOURCES.items() for plural, kind, namespaced in items}
VERBS = ["create", "get", "list", "patch"]
DELETABLE = {("v1", "pods")}
PDB_REFUSALS = "fake.gpucloud.io/pdb-refusals"


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def pod_defaults(pod):
    """A pod as the kubelet the fake stands in for would report it: Running on its node."""
    pod = dict(pod, status=dict(pod.get("status") or {}))
    pod["status"].setdefault("phase", "Running" if (pod.get("spec") or {}).get("nodeName") else "Pending")
    return pod


def node_name_selector(query):
    """The NODE of fieldSelector=spec.nodeName=NODE (or ==NODE), or None; other terms are ignored."""
    for term in query.get("fieldSelector", [""])[0].split(","):
        field, sep, value = term.partition("=")
        if sep and field.strip() == "spec.nodeName":
            return value[1:] if value.startswith("=") else value
    return None


class State:
    def __init__(self, nodes, pods=()):
        self.lock = threading.Lock()
        self.objects = {}
        self.log = []
        self.version = 1
        self.refused = {}  # pod key: evictions refused so far (the PDB annotation's budget)
        for node in nodes:
            self.objects[("v1", "nodes", "", node["metadata"]["name"])] = self.stamp(node)
        for pod in pods:
            namespace = pod["metadata"].get("namespace") or "default"
            if ("v1", "namespaces", "", namespace) not in self.objects:
                self.objects[("v1", "namespaces", "", namespace)] = self.stamp(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace},
                     "status": {"phase": "Active"}})
            pod = dict(pod_defaults(pod), apiVersion="v1", kind="Pod")
            pod["metadata"] = dict(pod["metadata"], namespace=namespace)
            self.objects[("v1", "pods", namespace, pod["metadata"]["name"])] = self.stamp(pod)

    def stamp(self, obj):
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        return obj


def status(code, reason, message):
    return code, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                  "reason": reason, "code": code}


def pdb_refusal():
    """What kube-apiserver answers when a PodDisruptionBudget allows no disruption (eviction.go)."""
    return 429, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                 "message": "Cannot evict pod as it would violate the pod's disruption budget.",
                 "reason": "TooManyRequests",
                 "details": {"causes": [{"reason": "DisruptionBudget",
                                         "message": "The disruption budget fake-pdb needs 1 healthy pods and has 1 currently"}]},
                 "code": 429}


class Handler(BaseHTTPRequestHandler):
    state = None
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet: the record is in /__fake/log
        pass

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"null") if length else None

    def _route(self, path):
        """(group/version, plural, namespace, name, subresource) or None."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            gv, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            gv, rest = parts[1] + "/" + parts[2], parts[3:]
        else:
            return None
        if not rest:
            return gv, None, "", None, None
        namespace = ""
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            return None
        return gv, rest[0], namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None

    def _discovery(self, path):
        if path == "/version":
            return {"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            groups = []
            for gv in RESOURCES:
                if "/" in gv:
                    group, version = gv.split("/")
                    ver = {"groupVersion": gv, "version": version}
                    groups.append({"name": group, "versions": [ver], "preferredVersion": ver})
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        route = self._route(path)
        if route and route[1] is None and route[0] in RESOURCES:
            resources = []
            for plural, kind, namespaced in RESOURCES[route[0]]:
                verbs = sorted(VERBS + ["delete"]) if (route[0], plural) in DELETABLE else VERBS
                resources.append({"name": plural, "singularName": kind.lower(), "namespaced": namespaced,
                                  "kind": kind, "verbs": verbs})
                if (route[0], plural) == ("v1", "pods"):
                    resources.append({"name": "pods/eviction", "singularName": "", "namespaced": True,
                                      "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
            return {"kind": "APIResourceList", "groupVersion": route[0], "resources": resources}
        return None

    def _handle(self, method):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        body = self._body() if method in ("POST", "PATCH", "DELETE") else None
        state = self.state
        with state.lock:
            if url.path == "/__fake/log":
                return self._send(200, state.log)
            if url.path == "/__fake/objects":
                return self._send(200, [obj for _key, obj in sorted(state.objects.items())])
            if url.path == "/__fake/mark" and method == "POST":
                state.log.append({"mark": query.get("phase", [""])[0]})
                return self._send(200, {"marked": True})
            dry_run = query.get("dryRun", [""])[0] == "All"
            entry = {"method": method, "path": url.path, "dry_run": dry_run,
                     "content_type": self.headers.get("Content-Type", ""), "body": body, "persisted": False}
            state.log.append(entry)
            code, answer = self._api(method, url.path, query, body, dry_run, entry)
            entry["status"] = code
            return self._send(code, answer)

    def _api(self, method, path, query, body, dry_run, entry):
        state = self.state
        if method == "GET":
            found = self._discovery(path)
            if found is not None:
                return 200, found
        route = self._route(path)
        if not route or (route[0], route[1]) not in KINDS:
            return status(404, "NotFound", "the server could not find the requested resource (fake)")
        gv, plural, namespace, name, subresource = route
        kind, namespaced = KINDS[(gv, plural)]
        key = (gv, plural, namespace, name)
        if subresource is not None:
            if (gv, plural, subresource) != ("v1", "pods", "eviction"):
                return status(404, "NotFound", "the server could not find the requested resource (fake)")
            if method != "POST":
                return status(405, "MethodNotAllowed", "%s %s is not served by the fake" % (method, path))
            return self._evict(key, body, dry_run, entry)
        if method == "GET" and name:
            if key not in state.objects:
                return status(404, "NotFound", '%s "%s" not found' % (plural, name))
            return 200, state.objects[key]
        if method == "GET":
            node = node_name_selector(query) if (gv, plural) == ("v1", "pods") else None
            items = [obj for (g, p, ns, _n), obj in sorted(state.objects.items())
                     if (g, p) == (gv, plural) and (not namespace or ns == namespace)
                     and (node is None or (obj.get("spec") or {}).get("nodeName") == node)]
            return 200, {"kind": kind + "List", "apiVersion": gv, "metadata": {"resourceVersion": str(state.version)},
                         "items": items}
        if method == "POST" and not name:
            name = (body.get("metadata") or {}).get("name")
            key = (gv, plural, namespace, name)
            if namespaced and ("v1", "namespaces", "", namespace) not in state.objects:
                return status(404, "NotFound", 'namespaces "%s" not found' % namespace)
            if key in state.objects:
                return status(409, "AlreadyExists", '%s "%s" already exists' % (plural, name))
            obj = dict(body, kind=kind, apiVersion=gv)
            if (gv, plural) == ("v1", "pods"):
                obj = pod_defaults(obj)
            if namespaced:
                obj["metadata"] = dict(obj["metadata"], namespace=namespace)
            obj = state.stamp(obj)
            if not dry_run:
                state.objects[key] = obj
                entry["persisted"] = True
            return 201, obj
        if method == "PATCH" and name:
            if key not in state.objects:
                return status(404, "NotFound", '%s "%s" not found' % (plural, name))
            old = state.objects[key]
            new = merge_patch(old, body)
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            if new == old:
                return 200, old
            state.version += 1
            new["metadata"]["resourceVersion"] = str(state.version)
            if not dry_run:
                state.objects[key] = new
                entry["persisted"] = True
            return 200, new
        if method == "DELETE" and name and (gv, plural) in DELETABLE:
            if key not in state.objects:
                return status(404, "NotFound", '%s "%s" not found' % (plural, name))
            obj = state.objects[key]
            if not dry_run:
                self._remove(key)
                entry["persisted"] = True
            return 200, obj
        return status(405, "MethodNotAllowed", "%s %s is not served by the fake" % (method, path))

    def _remove(self, key):
        del self.state.objects[key]
        self.state.refused.pop(key, None)

    def _evict(self, key, body, dry_run, entry):
        """policy/v1 Eviction: refused while the PDB annotation has refusals left, else the pod goes at once."""
        state = self.state
        name = key[3]
        if key not in state.objects:
            return status(404, "NotFound", 'pods "%s" not found' % name)
        named = ((body or {}).get("metadata") or {}).get("name")
        if named and named != name:
            return status(400, "BadRequest", "name in URL does not match name in Eviction object")
        annotations = state.objects[key]["metadata"].get("annotations") or {}
        try:
            refusals = int(annotations.get(PDB_REFUSALS, "0"))
        except ValueError:
            return status(500, "InternalError", "%s must be a whole number (fake)" % PDB_REFUSALS)
        if state.refused.get(key, 0) < refusals:
            if not dry_run:
                state.refused[key] = state.refused.get(key, 0) + 1
            return pdb_refusal()
        if not dry_run:
            self._remove(key)
            entry["persisted"] = True
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_PATCH(self):  # noqa: N802
        self._handle("PATCH")

    def do_DELETE(self):  # noqa: N802
        self._handle("DELETE")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", required=True, help="JSON file: a list of Node objects to start with")
    parser.add_argument("--pods", help="JSON file: a list of Pod objects to start with (none if not given)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("--max-seconds", type=int, default=900)
    args = parser.parse_args()
    with open(args.nodes, encoding="utf-8") as handle:
        nodes = json.load(handle)
    pods = []
    if args.pods:
        with open(args.pods, encoding="utf-8") as handle:
            pods = json.load(handle)
    Handler.state = State(nodes, pods)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.pid_file, "w", encoding="utf-8") as handle:
        handle.write("%d\n" % os.getpid())
    with open(args.port_file + ".tmp", "w", encoding="utf-8") as handle:
        handle.write("%d\n" % server.server_address[1])
    os.replace(args.port_file + ".tmp", args.port_file)
    timer = threading.Timer(args.max_seconds, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()
    os.unlink(args.pid_file)


if __name__ == "__main__":
    main()
