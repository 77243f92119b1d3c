#!/usr/bin/env python3
"""The firewall role beside a peer: gpucloud.fleet.firewall against geerlingguy.firewall.

On two fresh Debian 12 lab nodes (scripts/lab.py, the podman connection by default), in
one sitting: apply gpucloud.fleet.firewall to one node with the lab's policy
(inventories/lab: TCP 22 open to all, the controller allowed, everything else dropped,
IPv4 and IPv6) and geerlingguy.firewall to the other with the same open port; then re-run
each --repeats times. Records wall time, the controller's CPU (ansible-playbook and its
children), the tasks run and what changed; writes bench/results/firewall_peer.json and the
`firewall_peer` section of docs/benchmarks.md.

    git clone https://github.com/geerlingguy/ansible-role-firewall /tmp/geerlingguy.firewall
    source scripts/env.sh && bench/firewall_peer.py --peer-role /tmp/geerlingguy.firewall

The peer is not vendored: pass a checkout of it. It reads top-level facts
(`ansible_service_mgr`), so its runs set ANSIBLE_INJECT_FACT_VARS=True; ours run with the
repository's ansible.cfg, which turns that injection off.

Not part of the test suite: its numbers depend on the machine.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  pylint: disable=wrong-import-position
import site_scaling  # noqa: E402  pylint: disable=wrong-import-position

ROOT = report.ROOT
LAB = os.path.join(ROOT, "scripts", "lab.py")

OURS = """- name: gpucloud.fleet.firewall with the lab's policy
  hosts: fwpeer-ours
  gather_facts: true
  gather_subset: [min]
  roles:
    - gpucloud.fleet.firewall
"""

PEER = """- name: geerlingguy.firewall with the same open port
  hosts: fwpeer-peer
  gather_facts: true
  gather_subset: [min]
  vars:
    firewall_allowed_tcp_ports: ["22"]
    firewall_allowed_udp_ports: []
    firewall_enable_ipv6: true
  roles:
    - role: %s
"""


def git_commit(path):
    proc = subprocess.run(["git", "-C", path, "log", "-1", "--format=%h %cs"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "?"


def make_fleet(args):
    specs = [{"name": "fwpeer-ours", "image": args.image, "groups": ["lab_gpu"], "privileged": True},
             {"name": "fwpeer-peer", "image": args.image, "groups": ["peer"], "privileged": True}]
    inv_dir = tempfile.mkdtemp(prefix="gpucloud-fwpeer-")
    spec_file = os.path.join(inv_dir, "spec.json")
    with open(spec_file, "w") as fh:
        json.dump(specs, fh)
    subprocess.run([sys.executable, LAB, "create", "fwpeer", "--spec", spec_file,
                    "--transport", args.transport, "--inventory", os.path.join(inv_dir, "hosts.yml")],
                   check=True)
    os.remove(spec_file)
    lab = os.path.join(ROOT, "inventories", "lab")
    for entry in os.listdir(lab):
        if not entry.startswith("hosts.generated"):
            os.symlink(os.path.join(lab, entry), os.path.join(inv_dir, entry))
    return inv_dir


def run(inv_dir, playbook, env):
    usage0 = site_scaling.resource.getrusage(site_scaling.resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", inv_dir, playbook], capture_output=True,
                          text=True, env=env, check=False)
    wall = time.monotonic() - t0
    usage1 = site_scaling.resource.getrusage(site_scaling.resource.RUSAGE_CHILDREN)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        sys.stderr.write(out[-6000:])
        raise SystemExit("firewall_peer: %s failed (rc=%d)" % (playbook, proc.returncode))
    parsed = site_scaling.parse_run(out)
    host = next(iter(parsed["hosts"].values()))
    return {"wall_s": round(wall, 2),
            "cpu_s": round((usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime), 2),
            "tasks": parsed["tasks"], "ok": host["ok"], "skipped": host["skipped"],
            "changed": host["changed"]}


def measure(name, inv_dir, playbook, env, repeats):
    first = run(inv_dir, playbook, env)
    reruns = [run(inv_dir, playbook, env) for dummy in range(repeats)]
    return {"role": name, "first": first, "reruns": reruns,
            "rerun_wall_median_s": round(report.median([r["wall_s"] for r in reruns]), 2),
            "rerun_cpu_median_s": round(report.median([r["cpu_s"] for r in reruns]), 2),
            "rerun_changed": max(r["changed"] for r in reruns)}


def markdown(rows, args, machine, peer_commit):
    lines = [
        "## The firewall role beside geerlingguy.firewall",
        "",
        "Machine: %s. One Debian 12 lab node each (`%s` image, systemd containers), reached over %s, "
        "measured one after the other in one sitting with `bench/firewall_peer.py --repeats %d` on %s. "
        "geerlingguy.firewall at %s with TCP 22 open and IPv6 on; gpucloud.fleet.firewall with the "
        "lab's policy (inventories/lab: TCP 22 open, the controller allowed, IPv4 and IPv6). Re-run "
        "columns are medians of %d runs; CPU is the controller's (ansible-playbook and its children)." % (
            machine, args.image, "the podman connection" if args.transport == "podman" else "SSH",
            args.repeats, time.strftime("%Y-%m-%d"), peer_commit, args.repeats),
        "",
        "| role | first run (s) | re-run (s) | re-run CPU (s) | tasks run | ok / skipped | changed on re-run |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for r in rows:
        last = r["reruns"][-1]
        lines.append("| %s | %.1f | %.1f | %.1f | %d | %d / %d | %d |" % (
            r["role"], r["first"]["wall_s"], r["rerun_wall_median_s"], r["rerun_cpu_median_s"],
            last["tasks"], last["ok"], last["skipped"], r["rerun_changed"]))
    lines += ["", "What the extra tasks of gpucloud.fleet.firewall buy: validation of every port, name and "
              "CIDR before anything changes, IPv6 parity, a rule diff shown in check mode, a rollback "
              "that restores the previous rules when the controller loses the node, and the rules "
              "persisted for boot by the distribution's loader (docs/roles/firewall.md). geerlingguy's "
              "role flushes and rewrites the rules from a shell script at every service restart."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--peer-role", required=True, help="a checkout of geerlingguy/ansible-role-firewall")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image", default="debian12")
    parser.add_argument("--transport", choices=("ssh", "podman"), default="podman")
    args = parser.parse_args()
    peer = os.path.abspath(args.peer_role)
    if not os.path.isfile(os.path.join(peer, "tasks", "main.yml")):
        raise SystemExit("firewall_peer: %s is not a role checkout (no tasks/main.yml)" % peer)
    inv_dir = make_fleet(args)
    # Beside the inventory, not in it: Ansible reads every file of an inventory directory.
    pb_dir = tempfile.mkdtemp(prefix="gpucloud-fwpeer-playbooks-")
    try:
        ours_pb = os.path.join(pb_dir, "ours.yml")
        peer_pb = os.path.join(pb_dir, "peer.yml")
        with open(ours_pb, "w") as fh:
            fh.write(OURS)
        with open(peer_pb, "w") as fh:
            fh.write(PEER % json.dumps(peer))
        peer_env = dict(os.environ, ANSIBLE_INJECT_FACT_VARS="True")
        # The peer installs iptables with the package module, which needs apt's lists (the
        # lab images ship none); not measured.
        subprocess.run(["ansible", "-i", inv_dir, "fwpeer-peer", "-m", "ansible.builtin.apt",
                        "-a", "update_cache=true"], check=True, stdout=subprocess.DEVNULL)
        rows = [measure("gpucloud.fleet.firewall", inv_dir, ours_pb, dict(os.environ), args.repeats),
                measure("geerlingguy.firewall", inv_dir, peer_pb, peer_env, args.repeats)]
    finally:
        subprocess.run([sys.executable, LAB, "destroy", "fwpeer"], check=False)
        shutil.rmtree(inv_dir, ignore_errors=True)
        shutil.rmtree(pb_dir, ignore_errors=True)
    machine = report.machine_description()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "firewall_peer.json"), "w") as fh:
        json.dump({"machine": machine, "peer": git_commit(peer), "rows": rows}, fh, indent=2)
    text = markdown(rows, args, machine, git_commit(peer))
    report.update_section("firewall_peer", text)
    print(text)


if __name__ == "__main__":
    main()
