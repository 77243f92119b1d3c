#!/usr/bin/env python3
"""Rollout speed and scale of playbooks/site.yml on the container lab.

For each fleet size N (default 1, 2, 4, 8): create a lab fleet of N Debian 12 GPU nodes
and one Tang server (scripts/lab.py, reached over SSH by default), give every GPU node
its loop-device data disk (playbooks/lab/prepare.yml), run site.yml once (first
converge, with the profile_tasks/profile_roles callbacks), then R more times
(idempotent re-runs), then once more (--canary-repeats) under the lab's canary-first
rollout policy, and destroy the fleet. Records wall time, per-node cost, tasks run and changed, and the
slowest tasks; writes bench/results/site_scaling.json, the `site_scaling` section of
docs/benchmarks.md and docs/bench-site-scaling.png.

    source scripts/env.sh && bench/site_scaling.py --sizes 1,2,4,8 --repeats 3

The measured runs use one batch (rollout_serial 100%%, --serial) so that they show how a
run grows with the nodes it covers; the canary column shows what the lab's policy
([1, "100%%"]: the canary alone, then the rest) adds on top.

Before and after a change, in one sitting: measure the older commit from a worktree,
then this checkout, and put both in the section:

    git worktree add /tmp/gpucloud-before <commit>
    bench/site_scaling.py --sizes 1,2,4 --tree /tmp/gpucloud-before --label before
    bench/site_scaling.py --sizes 1,2,4 --before before

`--tree DIR` runs DIR's site.yml, inventories/lab and ansible.cfg with DIR as the
gpucloud.fleet collection, and writes only bench/results/site_scaling.<label>.json;
`--before LABEL` adds that file's numbers beside this checkout's in docs/benchmarks.md.

Not part of the test suite: it takes many minutes and its numbers depend on the
machine. Requires the lab (scripts/setup.sh) and inventories/lab/group_vars.
"""


import argparse
import json
import os
import re
import resource
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


def tree_env(tree):
    """Environment that makes TREE the gpucloud.fleet collection and its ansible.cfg the
    configuration (TREE None: this checkout, as scripts/env.sh set it up)."""
    env = dict(os.environ)
    if tree:
        collections = os.path.join(tempfile.mkdtemp(prefix="gpucloud-bench-tree-"), "collections")
        os.makedirs(os.path.join(collections, "ansible_collections", "gpucloud"))
        os.symlink(tree, os.path.join(collections, "ansible_collections", "gpucloud", "fleet"))
        env["ANSIBLE_COLLECTIONS_PATH"] = collections
        env["ANSIBLE_CONFIG"] = os.path.join(tree, "ansible.cfg")
    return env


def run_playbook(inventory_dir, playbook, extra_args, profile, env):
    env = dict(env)
    # verify's reports go beside the temporary inventory, not into it (Ansible would read
    # them as inventory sources) and not into the checkout
    env["GPUCLOUD_REPORT_DIR"] = inventory_dir + ".reports"
    if profile:
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks,ansible.posix.profile_roles"
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "12"
        env["PROFILE_TASKS_SORT_ORDER"] = "descending"
    argv = ["ansible-playbook", "-i", inventory_dir, playbook] + extra_args
    usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - t0
    usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU of ansible-playbook, its forks and their ssh clients: the controller's share
    # (the nodes' sshd and modules run in the containers, outside this process tree).
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    out = proc.stdout + proc.stderr
    result = parse_run(out)
    result.update(wall_s=round(wall, 2), controller_cpu_s=round(cpu, 2), rc=proc.returncode)
    if proc.returncode != 0:
        sys.stderr.write(out[-6000:])
        raise SystemExit("site_scaling: %s failed (rc=%d); see the output above"
                         % (" ".join(argv), proc.returncode))
    return result


def make_inventory(fleet, size, args, root):
    """A lab fleet of SIZE GPU nodes (group lab_gpu) and a Tang server, with
    inventories/lab's groups and group_vars, and its data disks attached."""
    specs = [{"name": "%s-gpu-%d" % (fleet, i + 1), "image": args.image, "groups": ["lab_gpu"],
              "privileged": True} for i in range(size)]
    specs.append({"name": "%s-tang" % fleet, "image": args.image, "groups": ["tang_servers"]})
    inv_dir = tempfile.mkdtemp(prefix="gpucloud-bench-")
    spec_file = os.path.join(inv_dir, "spec.json")
    with open(spec_file, "w") as fh:
        json.dump(specs, fh)
    subprocess.run([sys.executable, LAB, "create", fleet, "--spec", spec_file,
                    "--transport", args.transport,
                    "--inventory", os.path.join(inv_dir, "hosts.yml")], check=True)
    os.remove(spec_file)
    lab = os.path.join(root, "inventories", "lab")
    for entry in os.listdir(lab):
        # the lab's groups and group_vars; its generated host list is the main job's
        if not entry.startswith("hosts.generated"):
            os.symlink(os.path.join(lab, entry), os.path.join(inv_dir, entry))
    subprocess.run(["ansible-playbook", "-i", inv_dir,
                    os.path.join(root, "playbooks", "lab", "prepare.yml")],
                   check=True, stdout=subprocess.DEVNULL, env=args.env)
    return inv_dir


def remove_fleet(fleet, inv_dir):
    subprocess.run(["ansible-playbook", "-i", inv_dir,
                    os.path.join(ROOT, "playbooks", "lab", "cleanup.yml")],
                   check=False, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, LAB, "destroy", fleet], check=False)
    shutil.rmtree(inv_dir, ignore_errors=True)
    shutil.rmtree(inv_dir + ".reports", ignore_errors=True)


def measure(size, args):
    fleet = "bench%d" % size
    inv_dir = make_inventory(fleet, size, args, args.root)
    # site_serial too: a --tree from before the rollout role (main at 9796a0a) reads that name.
    one_batch = args.extra + ["-e", json.dumps({"rollout_serial": args.serial, "site_serial": args.serial})]
    try:
        first = run_playbook(inv_dir, args.playbook, one_batch, profile=True, env=args.env)
        # Every run prints the profile (the same small cost for every size); the tables
        # show the last re-run's.
        reruns = [run_playbook(inv_dir, args.playbook, one_batch, profile=True, env=args.env)
                  for dummy in range(args.repeats)]
        canary = [run_playbook(inv_dir, args.playbook, args.extra, profile=True, env=args.env)
                  for dummy in range(args.canary_repeats)]
        profile_rerun = reruns[-1]
    finally:
        remove_fleet(fleet, inv_dir)
    return {
        "nodes": size,
        "first_wall_s": first["wall_s"],
        "first_tasks": first["tasks"],
        "first_changed": first["changed"],
        "rerun_walls_s": [r["wall_s"] for r in reruns],
        "rerun_median_s": round(report.median([r["wall_s"] for r in reruns]), 2),
        "rerun_controller_cpu_s": round(report.median([r["controller_cpu_s"] for r in reruns]), 2),
        "rerun_tasks": reruns[0]["tasks"] if reruns else None,
        "rerun_host_tasks": sum(h["ok"] for h in reruns[0]["hosts"].values()) if reruns else None,
        "rerun_changed": max(r["changed"] for r in reruns),
        "canary_walls_s": [r["wall_s"] for r in canary],
        "canary_median_s": round(report.median([r["wall_s"] for r in canary]), 2) if canary else None,
        "canary_changed": max(r["changed"] for r in canary) if canary else None,
        "profile_first": first["profile"][:12],
        "profile_roles_first": first["profile_roles"],
        "profile_rerun": profile_rerun["profile"][:12],
        "profile_roles_rerun": profile_rerun["profile_roles"],
    }


def results_path(label):
    return os.path.join(ROOT, "bench", "results", "site_scaling.%s.json" % label)


def tree_commit(tree):
    proc = subprocess.run(["git", "-C", tree, "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True, check=False)
    return proc.stdout.strip() or "?"


def comparison(before, rows, model, args):
    """Before (a --tree measurement) and after (this checkout), size by size."""
    old = {r["nodes"]: r for r in before["rows"]}
    lines = ["### Before and after, in one sitting", "",
             "Before: %s (measured %s). After: %s. Same machine, same lab, same arguments; "
             "re-run columns are medians of %d runs." % (
                 before.get("commit", "?"), before.get("date", "?"), tree_commit(ROOT), args.repeats), "",
             "| nodes | re-run before (s) | re-run after (s) | host-tasks before | host-tasks after "
             "| controller CPU before (s) | controller CPU after (s) | CPU per node before | CPU per node after |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        b = old.get(r["nodes"])
        if not b:
            continue
        lines.append("| %d | %.1f | %.1f | %d | %d | %.1f | %.1f | %.2f | %.2f |" % (
            r["nodes"], b["rerun_median_s"], r["rerun_median_s"], b["rerun_host_tasks"],
            r["rerun_host_tasks"], b["rerun_controller_cpu_s"], r["rerun_controller_cpu_s"],
            b["rerun_controller_cpu_s"] / r["nodes"], r["rerun_controller_cpu_s"] / r["nodes"]))
    sizes = [r["nodes"] for r in rows if r["nodes"] in old]
    if sizes:
        pooled_before = sum(old[n]["rerun_controller_cpu_s"] for n in sizes) / sum(sizes)
        pooled_after = sum(r["rerun_controller_cpu_s"] for r in rows if r["nodes"] in old) / sum(sizes)
        lines += ["", "Controller CPU per node of an idempotent re-run, pooled over the sizes (total CPU over "
                  "total nodes): **%.2f s before, %.2f s after**." % (pooled_before, pooled_after)]
    if before.get("model") and model:
        lines += ["", "Linear fit, controller CPU: %.1f s fixed + %.2f s per node before, %.1f s fixed + %.2f s "
                  "per node after (a fit over three noisy sizes; read it beside the rows)." % (
                      before["model"]["controller_cpu_fixed_s"], before["model"]["controller_cpu_per_node_s"],
                      model["controller_cpu_fixed_s"], model["controller_cpu_per_node_s"])]
    return "\n".join(lines)


def fit(xs, ys):
    """Least squares y = a + b*x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b


def extrapolate(rows):
    """Fixed + per-node cost of a re-run: wall time, and the controller's CPU."""
    if len(rows) < 2:
        return None
    xs = [r["nodes"] for r in rows]
    a, b = fit(xs, [r["rerun_median_s"] for r in rows])
    ca, cb = fit(xs, [r["rerun_controller_cpu_s"] for r in rows])
    return {"fixed_s": round(a, 2), "per_node_s": round(b, 3),
            "controller_cpu_fixed_s": round(ca, 2), "controller_cpu_per_node_s": round(cb, 3)}


def plot(rows, path):
    try:
        import matplotlib  # pylint: disable=import-outside-toplevel
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
    except ImportError:
        return False
    xs = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [r["first_wall_s"] for r in rows], "o-", label="first converge (one batch)")
    ax.plot(xs, [r["rerun_median_s"] for r in rows], "s-", label="idempotent re-run, one batch (median)")
    if all(r.get("canary_median_s") for r in rows):
        ax.plot(xs, [r["canary_median_s"] for r in rows], "^--", label="re-run, canary first (median)")
    ax.set_xlabel("lab nodes")
    ax.set_ylabel("wall time (s)")
    ax.set_xticks(xs)
    ax.set_title("site.yml on the container lab")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def markdown(rows, model, args, machine):
    one = rows[0]["rerun_median_s"] if rows else float("nan")
    lines = [
        "## site.yml rollout and re-run by fleet size",
        "",
        "Machine: %s. Lab: N Debian 12 GPU-less nodes (`%s` image, systemd containers) and one Tang "
        "server, reached over %s; the lab's `rollout_stages` (cuda_toolkit left out). Measured with "
        "`bench/site_scaling.py --sizes %s --repeats %d` on %s. One batch (`rollout_serial=%s`) unless "
        "the column says canary: then the lab's policy, the canary alone and then the rest. "
        "Medians of %d re-runs (the canary column: %d run); controller CPU is the user+system time of ansible-playbook, its forks "
        "and its ssh clients (the nodes' side runs in the containers, on the same two cores)." % (
            machine, args.image, "SSH (pipelining, ControlPersist)" if args.transport == "ssh"
            else "the podman connection", args.sizes, args.repeats,
            time.strftime("%Y-%m-%d"), args.serial, args.repeats, args.canary_repeats),
        "",
        "| nodes | first converge (s) | tasks | changed | re-run median (s) | re-runs (s) | vs 1 node "
        "| host-tasks | changed | controller CPU (s) | re-run, canary first (s) |",
        "| ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append("| %d | %.1f | %d | %d | %.1f | %s | %.2fx | %d | %s | %.1f | %s |" % (
            r["nodes"], r["first_wall_s"], r["first_tasks"], r["first_changed"],
            r["rerun_median_s"], ", ".join("%.1f" % w for w in r["rerun_walls_s"]),
            r["rerun_median_s"] / one, r["rerun_host_tasks"], r["rerun_changed"],
            r["rerun_controller_cpu_s"],
            "%.1f" % r["canary_median_s"] if r.get("canary_median_s") else "-"))
    lines += ["", "![site.yml wall time against node count](bench-site-scaling.png)", ""]
    if rows:
        last = rows[-1]
        for title, key in (("first converge", "profile_first"), ("idempotent re-run", "profile_rerun")):
            lines += ["Slowest tasks of the %s on %d node(s) (profile_tasks; a task's time is its "
                      "slowest host):" % (title, last["nodes"]), "", "| task | s |", "| --- | ---: |"]
            lines += ["| %s | %.2f |" % (name.replace("|", "\\|"), secs) for name, secs in last[key]]
            lines += [""]
        lines += ["Time by role, %d node(s) (profile_roles):" % last["nodes"], "",
                  "| role or action | first converge (s) | re-run (s) |", "| --- | ---: | ---: |"]
        rerun = dict(last["profile_roles_rerun"])
        lines += ["| %s | %.2f | %s |" % (name, secs, "%.2f" % rerun[name] if name in rerun else "-")
                  for name, secs in last["profile_roles_first"]]
    if model:
        lines += ["", "Linear fit of the re-run medians: %.1f s fixed + %.2f s per node of wall time; "
                  "controller CPU %.1f s fixed + %.2f s per node." % (
                      model["fixed_s"], model["per_node_s"], model["controller_cpu_fixed_s"],
                      model["controller_cpu_per_node_s"])]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--image", default="debian12")
    parser.add_argument("--transport", choices=("ssh", "podman"), default="ssh",
                        help="how Ansible reaches the lab nodes (default ssh)")
    parser.add_argument("--serial", default="100%", help="rollout_serial of the measured runs (default 100%%)")
    parser.add_argument("--canary-repeats", type=int, default=1,
                        help="re-runs under the lab's canary-first policy per size (default 1; 0 skips them)")
    parser.add_argument("--playbook", help="default: playbooks/site.yml of the measured tree")
    parser.add_argument("--tree", help="measure the collection checked out in TREE (a git worktree of "
                        "another commit) and write only bench/results/site_scaling.<label>.json")
    parser.add_argument("--label", default="", help="name of the --tree measurement (e.g. before)")
    parser.add_argument("--before", help="label of a --tree measurement to show beside this one")
    parser.add_argument("extra", nargs="*", help="extra ansible-playbook arguments (after --)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.tree and not args.label:
        parser.error("--tree needs --label")
    args.tree = os.path.abspath(args.tree) if args.tree else None
    args.root = args.tree or ROOT
    args.env = tree_env(args.tree)
    args.playbook = args.playbook or os.path.join(args.root, "playbooks", "site.yml")
    if not os.path.exists(args.playbook):
        raise SystemExit("site_scaling: %s does not exist" % args.playbook)
    before = None
    if args.before:
        with open(results_path(args.before)) as fh:
            before = json.load(fh)
    rows = [measure(int(s), args) for s in args.sizes.split(",")]
    model = extrapolate(rows)
    machine = report.machine_description()
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    if args.tree:
        with open(results_path(args.label), "w") as fh:
            json.dump({"machine": machine, "rows": rows, "model": model, "tree": args.tree,
                       "commit": tree_commit(args.tree), "date": time.strftime("%Y-%m-%d %H:%M")},
                      fh, indent=2)
        print(markdown(rows, model, args, machine))
        return
    with open(os.path.join(ROOT, "bench", "results", "site_scaling.json"), "w") as fh:
        json.dump({"machine": machine, "rows": rows, "model": model}, fh, indent=2)
    plot(rows, os.path.join(ROOT, "docs", "bench-site-scaling.png"))
    text = markdown(rows, model, args, machine)
    if before:
        text += "\n\n" + comparison(before, rows, model, args)
    report.update_section("site_scaling", text)
    print(text)


if __name__ == "__main__":
    main()
