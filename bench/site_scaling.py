#!/usr/bin/env python3
"""Rollout speed and scale of playbooks/site.yml on the container lab.

For each fleet size N (default 1, 2, 4, 8): create a lab fleet of N Debian 12 nodes,
run site.yml once (first converge, with the profile_tasks/profile_roles callbacks),
then R more times (idempotent re-runs), and destroy the fleet. Records wall time,
per-node cost, tasks run and changed, and the slowest tasks; writes
bench/results/site_scaling.json, the `site_scaling` section of docs/benchmarks.md and
docs/bench-site-scaling.png.

    source scripts/env.sh && bench/site_scaling.py --sizes 1,2,4,8 --repeats 3

Not part of the test suite: it takes many minutes and its numbers depend on the
machine. Requires the lab (scripts/setup.sh) and inventories/lab/group_vars.
"""

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  pylint: disable=wrong-import-position

ROOT = report.ROOT
LAB = os.path.join(ROOT, "scripts", "lab.py")
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"
                   r"\s+skipped=(\d+)\s+rescued=(\d+)\s+ignored=(\d+)")
PROFILE_LINE = re.compile(r"^(.+?)\s-{3,}\s+(\d+\.\d+)s$")


def parse_run(output):
    """Totals from ansible-playbook output: per-host recap, task headers, profile lines."""
    hosts = {}
    for line in output.splitlines():
        m = RECAP.match(line.strip())
        if m:
            hosts[m.group(1)] = {k: int(v) for k, v in zip(
                ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored"),
                m.groups()[1:])}
    tasks = len(re.findall(r"^TASK \[", output, re.M))
    return {
        "hosts": hosts,
        "tasks": tasks,
        "changed": sum(h["changed"] for h in hosts.values()),
        "failed": sum(h["failed"] + h["unreachable"] for h in hosts.values()),
        "profile": profile_table(output, "TASKS RECAP"),
        "profile_roles": [row for row in profile_table(output, "ROLES RECAP") if row[0] != "total"],
    }


def profile_table(output, title):
    """Rows (name, seconds) of the profile_tasks ("TASKS RECAP") or profile_roles
    ("ROLES RECAP") table printed after the play recap."""
    if title not in output:
        return []
    rows = []
    for line in output.split(title, 1)[1].splitlines()[3:]:
        m = PROFILE_LINE.match(line.strip())
        if not m:
            if not line.strip() or "RECAP" in line:
                break
            continue
        rows.append((m.group(1).strip(), float(m.group(2))))
    return rows


def run_playbook(inventory_dir, playbook, extra_args, profile):
    env = dict(os.environ)
    if profile:
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks,ansible.posix.profile_roles"
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "12"
        env["PROFILE_TASKS_SORT_ORDER"] = "descending"
    argv = ["ansible-playbook", "-i", inventory_dir, playbook] + extra_args
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    result = parse_run(out)
    result.update(wall_s=round(wall, 2), rc=proc.returncode)
    if proc.returncode != 0:
        sys.stderr.write(out[-6000:])
        raise SystemExit("site_scaling: %s failed (rc=%d); see the output above"
                         % (" ".join(argv), proc.returncode))
    return result


def make_inventory(fleet, size, image, group):
    """A lab fleet of SIZE nodes in GROUP, with inventories/lab's group_vars."""
    specs = [{"name": "%s-%d" % (fleet, i + 1), "image": image, "groups": [group]}
             for i in range(size)]
    inv_dir = tempfile.mkdtemp(prefix="gpucloud-bench-")
    spec_file = os.path.join(inv_dir, "spec.json")
    with open(spec_file, "w") as fh:
        json.dump(specs, fh)
    subprocess.run([sys.executable, LAB, "create", fleet, "--spec", spec_file,
                    "--inventory", os.path.join(inv_dir, "hosts.yml")], check=True)
    os.remove(spec_file)
    lab = os.path.join(ROOT, "inventories", "lab")
    for entry in os.listdir(lab):
        # the lab's groups and group_vars; its generated host list is the main job's
        if not entry.startswith("hosts.generated"):
            os.symlink(os.path.join(lab, entry), os.path.join(inv_dir, entry))
    return inv_dir


def measure(size, args):
    fleet = "bench%d" % size
    inv_dir = make_inventory(fleet, size, args.image, args.group)
    try:
        first = run_playbook(inv_dir, args.playbook, args.extra, profile=True)
        reruns = [run_playbook(inv_dir, args.playbook, args.extra, profile=False)
                  for dummy in range(args.repeats)]
    finally:
        subprocess.run([sys.executable, LAB, "destroy", fleet], check=False)
        shutil.rmtree(inv_dir, ignore_errors=True)
    return {
        "nodes": size,
        "first_wall_s": first["wall_s"],
        "first_tasks": first["tasks"],
        "first_changed": first["changed"],
        "rerun_walls_s": [r["wall_s"] for r in reruns],
        "rerun_median_s": round(report.median([r["wall_s"] for r in reruns]), 2),
        "rerun_tasks": reruns[0]["tasks"] if reruns else None,
        "rerun_changed": max(r["changed"] for r in reruns) if reruns else None,
        "profile_first": first["profile"][:12],
        "profile_roles_first": first["profile_roles"],
    }


def extrapolate(rows, forks):
    """Least-squares a + b*N on the re-run medians; 1,000 nodes in batches of `forks`."""
    xs = [r["nodes"] for r in rows]
    ys = [r["rerun_median_s"] for r in rows]
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    return {"fixed_s": round(a, 2), "per_node_s": round(b, 3),
            "nodes_1000_one_controller_s": round(a + b * 1000, 1),
            "batches_at_forks": math.ceil(1000 / forks)}


def plot(rows, path):
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return False
    xs = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [r["first_wall_s"] for r in rows], "o-", label="first converge")
    ax.plot(xs, [r["rerun_median_s"] for r in rows], "s-", label="idempotent re-run (median)")
    ax.set_xlabel("lab nodes")
    ax.set_ylabel("wall time (s)")
    ax.set_xticks(xs)
    ax.set_title("site.yml on the container lab")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def markdown(rows, model, args, machine):
    one = rows[0]["rerun_median_s"] if rows else float("nan")
    lines = [
        "## site.yml rollout and re-run by fleet size",
        "",
        "Machine: %s. Lab nodes: %s containers (systemd), podman connection. "
        "Re-run medians of %d runs; `%s`%s." % (
            machine, args.image, args.repeats, os.path.relpath(args.playbook, ROOT),
            (" with " + " ".join(args.extra)) if args.extra else ""),
        "",
        "| nodes | first converge (s) | tasks | changed | re-run median (s) | per node (s) "
        "| vs 1 node | re-run changed |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append("| %d | %.1f | %d | %d | %.1f | %.2f | %.2fx | %s |" % (
            r["nodes"], r["first_wall_s"], r["first_tasks"], r["first_changed"],
            r["rerun_median_s"], r["rerun_median_s"] / r["nodes"], r["rerun_median_s"] / one,
            r["rerun_changed"]))
    lines += ["", "![site.yml wall time against node count](bench-site-scaling.png)", ""]
    if rows:
        lines += ["Slowest tasks of the first converge on %d node(s) (profile_tasks):" % rows[-1]["nodes"], "",
                  "| task | s |", "| --- | ---: |"]
        lines += ["| %s | %.2f |" % (name.replace("|", "\\|"), secs) for name, secs in rows[-1]["profile_first"]]
        lines += ["", "Time by role (profile_roles):", "", "| role or action | s |", "| --- | ---: |"]
        lines += ["| %s | %.2f |" % (name, secs) for name, secs in rows[-1]["profile_roles_first"]]
    if model:
        lines += ["", "Linear fit of the re-run medians: %.1f s fixed + %.3f s per node "
                  "(at forks=%d every node of these sizes runs in one batch)." % (
                      model["fixed_s"], model["per_node_s"], args.forks)]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image", default="debian12")
    parser.add_argument("--group", default="lab_gpu")
    parser.add_argument("--playbook", default=os.path.join(ROOT, "playbooks", "site.yml"))
    parser.add_argument("--forks", type=int, default=25, help="the forks setting in ansible.cfg")
    parser.add_argument("extra", nargs="*", help="extra ansible-playbook arguments (after --)")
    args = parser.parse_args()
    if not os.path.exists(args.playbook):
        raise SystemExit("site_scaling: %s does not exist" % args.playbook)
    rows = [measure(int(s), args) for s in args.sizes.split(",")]
    model = extrapolate(rows, args.forks)
    machine = report.machine_description()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "site_scaling.json"), "w") as fh:
        json.dump({"machine": machine, "rows": rows, "model": model}, fh, indent=2)
    plot(rows, os.path.join(ROOT, "docs", "bench-site-scaling.png"))
    report.update_section("site_scaling", markdown(rows, model, args, machine))
    print(markdown(rows, model, args, machine))


if __name__ == "__main__":
    main()
