#!/usr/bin/env python3
"""What an idempotent re-run of some stages of site.yml costs the controller, role by role.

Creates a lab fleet of one Debian 12 GPU node and one Tang server (scripts/lab.py, over SSH,
with its loop-device data disk: playbooks/lab/prepare.yml), converges
`playbooks/site.yml --tags TAGS` once, re-runs it with the json callback, and prints the
re-run's host-tasks of the GPU node by role and status (ok, changed, skipped) with the
controller CPU (user+system time of ansible-playbook, its forks and its ssh clients) and
the wall time. The task list of the re-run goes to --tasks-out. The fleet is destroyed at
the end, also on failure.

    source scripts/env.sh
    bench/role_rerun.py hp host_prep                    # one stage (with preflight, always)
    bench/role_rerun.py de tang_server,disk_encryption  # a stage and what it needs first
    bench/role_rerun.py nd host_prep,nvidia_driver --tree /tmp/gpucloud-before

The host-tasks are the number to compare: on the controller every task that runs costs
about the same whatever it does (docs/benchmarks.md), a skipped one less. CPU and wall
move with the machine's load; compare them only within one sitting. Issue 29's per-role
rows in docs/benchmarks.md were measured with this script.

Not part of the test suite. Requires the lab (scripts/setup.sh).
"""

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import site_scaling  # noqa: E402  pylint: disable=wrong-import-position


def count(result, host):
    """(counts by (role, status), task lines) of HOST in a json-callback RESULT."""
    counts = collections.Counter()
    lines = []
    for play in result["plays"]:
        for task in play["tasks"]:
            res = task["hosts"].get(host)
            if res is None:
                continue
            status = "skipped" if res.get("skipped") else ("changed" if res.get("changed") else "ok")
            name = task["task"]["name"]
            role = name.split(" : ")[0] if " : " in name else "(playbook)"
            counts[(role, status)] += 1
            lines.append("%s %-30s %s" % (status[0], (res.get("action") or "")[:30], name))
    return counts, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("fleet", help="name of the lab fleet (lowercase letters and digits, unused)")
    parser.add_argument("tags", help="site.yml tags to run, e.g. host_prep or tang_server,disk_encryption")
    parser.add_argument("--tree", help="measure the collection checked out in TREE (a git worktree)")
    parser.add_argument("--tasks-out", help="where to write the re-run's task list (default: FLEET.tasks "
                        "in the current directory)")
    parser.add_argument("extra", nargs="*", help="extra ansible-playbook arguments (after --)")
    args = parser.parse_args()
    root = os.path.abspath(args.tree) if args.tree else site_scaling.ROOT
    env = site_scaling.tree_env(args.tree and root)
    lab_args = argparse.Namespace(image="debian12", transport="ssh", env=env)
    inv = site_scaling.make_inventory(args.fleet, 1, lab_args, root)
    playbook = os.path.join(root, "playbooks", "site.yml")
    argv = ["-e", json.dumps({"rollout_serial": "100%", "site_serial": "100%"}), "--tags", args.tags] + args.extra
    try:
        first = site_scaling.run_playbook(inv, playbook, argv, profile=False, env=env)
        print("converge: wall %.1f s, controller CPU %.1f s, changed %d"
              % (first["wall_s"], first["controller_cpu_s"], first["changed"]))
        run_env = dict(env, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", GPUCLOUD_REPORT_DIR=inv + ".reports")
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.monotonic()
        proc = subprocess.run(["ansible-playbook", "-i", inv, playbook] + argv, capture_output=True, text=True,
                              env=run_env, check=False)
        wall = time.monotonic() - start
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
        if proc.returncode:
            sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-3000:])
            raise SystemExit("role_rerun: the re-run failed (rc=%d)" % proc.returncode)
        counts, lines = count(json.loads(proc.stdout), args.fleet + "-gpu-1")
        with open(args.tasks_out or args.fleet + ".tasks", "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
        print("re-run: wall %.1f s, controller CPU %.1f s" % (wall, cpu))
        for (role, status), number in sorted(counts.items()):
            print("  %-36s %-8s %d" % (role, status, number))
    finally:
        site_scaling.remove_fleet(args.fleet, inv)


if __name__ == "__main__":
    main()
