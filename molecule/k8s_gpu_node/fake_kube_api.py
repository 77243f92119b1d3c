# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A FAKE Kubernetes API server for molecule/k8s_gpu_node: not Kubernetes, no kubelet, no scheduler.

It speaks just enough of the API for kubernetes.core (kubernetes Python client 37) to talk to it:
/version, discovery (/api, /apis, /api/v1, /apis/apps/v1, /apis/node.k8s.io/v1) for Node,
Namespace, ConfigMap, DaemonSet and RuntimeClass; GET of an object or a collection, POST (create),
PATCH, each honouring ?dryRun=All by answering without storing. Patches of any content type are
applied as JSON merge patches (RFC 7386: lists replaced whole; a real API server merges some
lists by key with strategic merge patches). A create in a namespace that does not exist is
refused with 404, as a real API server does. It validates no schema and runs no controller.

Every request is recorded; POST /__fake/mark?phase=NAME adds a marker; GET /__fake/log and
GET /__fake/objects return the record and the stored objects for the scenario's verify.
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
    "v1": [("nodes", "Node", False), ("namespaces", "Namespace", False), ("configmaps", "ConfigMap", True)],
    "apps/v1": [("daemonsets", "DaemonSet", True)],
    "node.k8s.io/v1": [("runtimeclasses", "RuntimeClass", False)],
}
KINDS = {(gv, plural): (kind, namespaced) for gv, items in RESOURCES.items() for plural, kind, namespaced in items}


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


class State:
    def __init__(self, nodes):
        self.lock = threading.Lock()
        self.objects = {}
        self.log = []
        self.version = 1
        for node in nodes:
            self.objects[("v1", "nodes", "", node["metadata"]["name"])] = self.stamp(node)

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
        """(group/version, plural, namespace, name) or None."""
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            gv, rest = parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            gv, rest = parts[1] + "/" + parts[2], parts[3:]
        else:
            return None
        if not rest:
            return gv, None, "", None
        if rest[0] == "namespaces" and len(rest) >= 3:
            return gv, rest[2], rest[1], rest[3] if len(rest) > 3 else None
        return gv, rest[0], "", rest[1] if len(rest) > 1 else None

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
            return {"kind": "APIResourceList", "groupVersion": route[0], "resources": [
                {"name": plural, "singularName": kind.lower(), "namespaced": namespaced, "kind": kind,
                 "verbs": ["create", "get", "list", "patch"]} for plural, kind, namespaced in RESOURCES[route[0]]]}
        return None

    def _handle(self, method):
        url = urlparse(self.path)
        query = parse_qs(url.query)
        body = self._body() if method in ("POST", "PATCH") else None
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
            code, answer = self._api(method, url.path, body, dry_run, entry)
            entry["status"] = code
            return self._send(code, answer)

    def _api(self, method, path, body, dry_run, entry):
        state = self.state
        if method == "GET":
            found = self._discovery(path)
            if found is not None:
                return 200, found
        route = self._route(path)
        if not route or (route[0], route[1]) not in KINDS:
            return status(404, "NotFound", "the server could not find the requested resource (fake)")
        gv, plural, namespace, name = route
        kind, namespaced = KINDS[(gv, plural)]
        key = (gv, plural, namespace, name)
        if method == "GET" and name:
            if key not in state.objects:
                return status(404, "NotFound", '%s "%s" not found' % (plural, name))
            return 200, state.objects[key]
        if method == "GET":
            items = [obj for (g, p, ns, _n), obj in sorted(state.objects.items())
                     if (g, p) == (gv, plural) and (not namespace or ns == namespace)]
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
        return status(405, "MethodNotAllowed", "%s %s is not served by the fake" % (method, path))

    def do_GET(self):  # noqa: N802 (http.server's names)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")

    def do_PATCH(self):  # noqa: N802
        self._handle("PATCH")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", required=True, help="JSON file: a list of Node objects to start with")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--pid-file", required=True)
    parser.add_argument("--max-seconds", type=int, default=900)
    args = parser.parse_args()
    with open(args.nodes) as handle:
        Handler.state = State(json.load(handle))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(args.pid_file, "w") as handle:
        handle.write("%d\n" % os.getpid())
    with open(args.port_file + ".tmp", "w") as handle:
        handle.write("%d\n" % server.server_address[1])
    os.replace(args.port_file + ".tmp", args.port_file)
    timer = threading.Timer(args.max_seconds, server.shutdown)
    timer.daemon = True
    timer.start()
    server.serve_forever()
    os.unlink(args.pid_file)


if __name__ == "__main__":
    main()
