#!/usr/bin/env python
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Time gpucloud.fleet's read-only modules against ``ansible -m ping``.

Not a test: a measurement. Each case is one ad-hoc ``ansible`` run, timed from
start to exit, repeated N times after one untimed warm-up; the report gives
the median (and min/max) per case and the median minus ping's, which is what
the module itself costs on top of Ansible's own round trip.

Cases: ``ansible.builtin.ping``; ``gpucloud.fleet.nvidia_gpu_facts`` (source
auto) and with ``src`` = the H200 capture; ``gpucloud.fleet.nvidia_topology``
with ``src`` = a captured matrix; ``gpucloud.fleet.ib_info`` with ``src`` = a
captured ibstat; ``gpucloud.fleet.nccl_tests_result`` on a captured log. When the
first run finds a GPU, also ``nvidia_gpu_facts`` with ``source=nvml`` and
``source=nvidia-smi`` and a live ``nvidia_topology``. nvidia_persistence is left
out: it is not read-only.

Usage (from the repository root):

    .venv/bin/python bench/modules_vs_ping.py --lab          # a lab node over SSH -> docs/benchmarks.md
    .venv/bin/python bench/modules_vs_ping.py                # localhost, local connection (the GPU host)
    .venv/bin/python bench/modules_vs_ping.py -n 20 --out /tmp/modules.md
    .venv/bin/python bench/modules_vs_ping.py -i inventories/lab --limit gpu01 \\
        --topology-src /tmp/topo.txt --gpu-info-src /tmp/smi.xml

With ``--lab`` the script creates a one-node lab fleet reached over SSH, copies
the captures to it, measures, writes the ``modules_vs_ping`` section of
docs/benchmarks.md and removes the fleet. Otherwise the ``src`` files must exist
on the target; the defaults are fixture files of this repository, so they only
work against localhost. ANSIBLE_COLLECTIONS_PATH
is set to .cache/collections, where this script links the repository as
ansible_collections/gpucloud/fleet (the link tests/conftest.py makes).
"""


import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpucloud", "fleet")
H200 = os.path.join(ROOT, "tests", "fixtures", "h200-ubuntu2404-driver580")
DEFAULT_TOPOLOGY_SRC = os.path.join(ROOT, "tests", "fixtures", "public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
DEFAULT_GPU_INFO_SRC = os.path.join(H200, "nvidia-smi_-q_-x.xml")
DEFAULT_IBSTAT_SRC = os.path.join(ROOT, "tests", "fixtures", "public", "ibstat", "azure-ndv4-a100-8x-cx6vf-hdr-ibpanic-gpud.txt")
DEFAULT_NCCL_LOG = os.path.join(ROOT, "tests", "fixtures", "public", "nccl_tests", "h100-a3mega-2node-16gpu-gcp-ztan.txt")
LAB = os.path.join(ROOT, "scripts", "lab.py")
LAB_FLEET = "benchmods"
LAB_DIR = "/tmp/gpucloud-bench"
LAB_INVENTORY_DIR = os.path.join(tempfile.gettempdir(), "gpucloud-benchmods-inventory")
TARGET_RATIO = 1.3

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  pylint: disable=wrong-import-position


def collection_link():
    """Make .cache/collections/ansible_collections/gpucloud/fleet point at the repository."""
    if not os.path.lexists(LINK):
        os.makedirs(os.path.dirname(LINK), exist_ok=True)
        os.symlink(os.path.relpath(ROOT, os.path.dirname(LINK)), LINK)
    return COLLECTIONS


def ansible_binary():
    beside = os.path.join(os.path.dirname(sys.executable), "ansible")
    return beside if os.path.exists(beside) else shutil.which("ansible")


def environment():
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = collection_link()
    env.setdefault("ANSIBLE_CONFIG", os.path.join(ROOT, "ansible.cfg"))
    env["ANSIBLE_CALLBACK_RESULT_FORMAT"] = "json"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    return env


def base_command(args):
    command = [args.ansible]
    if args.inventory:
        command += ["-i", args.inventory, args.limit or "all"]
    else:
        # Local runs use this interpreter, so the module sees the same pynvml as the bench.
        command += ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
                    args.limit or "localhost"]
    return command


def results(stdout):
    """The JSON results of the default callback's ``host | STATUS => {...}`` blocks."""
    found = []
    for block in stdout.split(" => ")[1:]:
        end = block.find("\n}")
        try:
            found.append(json.loads(block[:end + 2]))
        except ValueError:
            continue
    return found


def run_once(command, env):
    start = time.perf_counter()
    completed = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, check=False)
    return time.perf_counter() - start, completed


def answer_note(stdout):
    """What the module answered, so a fast row is not mistaken for a full read."""
    found = results(stdout)
    if not found:
        return ""
    answer = found[0]
    if "driver_loaded" in answer:
        return "source %s, driver_loaded %s, %s GPUs" % (
            answer.get("source"), str(answer.get("driver_loaded")).lower(), answer.get("gpu_count"))
    if "nvlink_pairs" in answer:
        return "%s GPUs, %s NICs" % (answer.get("gpu_count"), answer.get("nic_count"))
    return ""


def measure(name, command, env, repeat):
    _seconds, warm = run_once(command, env)
    if warm.returncode != 0:
        first = (warm.stdout.strip() or warm.stderr.strip()).splitlines()
        return {"name": name, "error": "rc=%d: %s" % (warm.returncode, first[0] if first else "")}, warm
    times = []
    for _repeat in range(repeat):
        seconds, completed = run_once(command, env)
        if completed.returncode != 0:
            return {"name": name, "error": "rc=%d on a timed run" % completed.returncode}, completed
        times.append(seconds)
    return {
        "name": name,
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "n": len(times),
        "note": answer_note(warm.stdout),
    }, warm


def module_command(base, module, arguments=""):
    command = base + ["-m", module]
    if arguments:
        command += ["-a", arguments]
    return command


def markdown(rows, args, gpu_note, version):
    ping = next((row for row in rows if row["name"].startswith("ansible.builtin.ping") and "median" in row), None)
    target = args.limit or ("all" if args.inventory else "localhost")
    lines = [
        "## gpucloud.fleet modules vs `ansible -m ping`",
        "",
        "Measured %s on %s, target `%s`%s, %d timed runs per case after one warm-up; "
        "times are whole `ansible` ad-hoc runs in seconds. %s"
        % (
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            report.machine_description() if args.lab
            else "%s (Python %s, %s)" % (platform.node(), platform.python_version(), version),
            target,
            " (a Debian 12 lab node over SSH, `bench/modules_vs_ping.py --lab`)" if args.lab
            else " from `%s`" % args.inventory if args.inventory else " (local connection)",
            args.repeat,
            gpu_note,
        ),
        "",
        "| case | median | min | max | median - ping | vs ping (target <= %.1fx) | answer |" % TARGET_RATIO,
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        if "error" in row:
            lines.append("| %s | failed: %s | | | | | |" % (row["name"], row["error"].replace("|", "\\|")))
            continue
        extra = "%+.3f" % (row["median"] - ping["median"]) if ping and row is not ping else ""
        ratio = row["median"] / ping["median"] if ping else float("nan")
        verdict = "" if row is ping else (" (met)" if ratio <= TARGET_RATIO else " (missed)")
        lines.append("| %s | %.3f | %.3f | %.3f | %s | %.2fx%s | %s |" % (
            row["name"], row["median"], row["min"], row["max"], extra, ratio, verdict, row["note"]))
    return "\n".join(lines) + "\n"


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("-i", "--inventory", help="inventory (default: localhost with a local connection)")
    parser.add_argument("--limit", help="host pattern (default: localhost, or all with -i)")
    parser.add_argument("-n", "--repeat", type=int, default=10, help="timed runs per case (default 10)")
    parser.add_argument("--out", help="write the markdown section to this file (default: print it)")
    parser.add_argument("--topology-src", default=DEFAULT_TOPOLOGY_SRC,
                        help="captured nvidia-smi topo -m on the target (default: a fixture, local runs only)")
    parser.add_argument("--gpu-info-src", default=DEFAULT_GPU_INFO_SRC,
                        help="captured nvidia-smi -q -x on the target (default: the H200 fixture, local runs only)")
    parser.add_argument("--ibstat-src", default=DEFAULT_IBSTAT_SRC,
                        help="captured ibstat on the target (default: a fixture, local runs only)")
    parser.add_argument("--nccl-log", default=DEFAULT_NCCL_LOG,
                        help="captured nccl-tests log on the target (default: a fixture, local runs only)")
    parser.add_argument("--lab", action="store_true",
                        help="measure on a one-node lab fleet over SSH and write docs/benchmarks.md")
    parser.add_argument("--ansible", default=ansible_binary(), help="ansible executable (default: the one beside this Python)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if not args.ansible:
        parser.error("no ansible executable found; give --ansible")
    if args.lab and args.inventory:
        parser.error("--lab makes its own inventory; leave out -i")
    return args


def lab_up(args, env):
    """A one-node lab fleet over SSH with the captures copied to it; ARGS then point at them."""
    inventory = os.path.join(LAB_INVENTORY_DIR, "hosts.yml")
    os.makedirs(LAB_INVENTORY_DIR, exist_ok=True)
    subprocess.run([sys.executable, LAB, "create", LAB_FLEET, "--node", LAB_FLEET + "-1=debian12",
                    "--transport", "ssh", "--inventory", inventory], check=True, env=env)
    for option in ("gpu_info_src", "topology_src", "ibstat_src", "nccl_log"):
        local = getattr(args, option)
        remote = "%s/%s" % (LAB_DIR, os.path.basename(local))
        subprocess.run([args.ansible, "-i", inventory, "all", "-m", "ansible.builtin.copy",
                        "-a", "src=%s dest=%s/ mode=0644" % (local, LAB_DIR)],
                       check=True, env=env, stdout=subprocess.DEVNULL)
        setattr(args, option, remote)
    args.inventory = inventory


def lab_down(env):
    subprocess.run([sys.executable, LAB, "destroy", LAB_FLEET], check=False, env=env)
    shutil.rmtree(LAB_INVENTORY_DIR, ignore_errors=True)


def main(argv=None):
    args = parse_args(argv)
    env = environment()
    if not args.lab:
        return measure_all(args, env)
    try:
        lab_up(args, env)
        return measure_all(args, env)
    finally:
        lab_down(env)


def measure_all(args, env):
    base = base_command(args)
    version = subprocess.run([args.ansible, "--version"], env=env, stdout=subprocess.PIPE,
                             universal_newlines=True, check=False).stdout.splitlines()[0].strip()

    cases = [
        ("ansible.builtin.ping", module_command(base, "ansible.builtin.ping")),
        ("gpucloud.fleet.nvidia_gpu_facts", module_command(base, "gpucloud.fleet.nvidia_gpu_facts")),
        ("gpucloud.fleet.nvidia_gpu_facts src=(nvidia-smi -q -x capture)",
         module_command(base, "gpucloud.fleet.nvidia_gpu_facts", "src=" + args.gpu_info_src)),
        ("gpucloud.fleet.nvidia_topology src=(topo -m capture)",
         module_command(base, "gpucloud.fleet.nvidia_topology", "src=" + args.topology_src)),
        ("gpucloud.fleet.ib_info src=(ibstat capture)",
         module_command(base, "gpucloud.fleet.ib_info", "src=" + args.ibstat_src)),
        ("gpucloud.fleet.nccl_tests_result path=(nccl-tests log)",
         module_command(base, "gpucloud.fleet.nccl_tests_result", "path=%s fail_on_failure=false" % args.nccl_log)),
    ]
    rows = []
    gpu_note = ""
    for name, command in cases:
        print("timing %s ..." % name, file=sys.stderr)
        row, warm = measure(name, command, env, args.repeat)
        rows.append(row)
        if name == "gpucloud.fleet.nvidia_gpu_facts":
            found = results(warm.stdout)
            facts = found[0] if found else {}
            if facts.get("gpu_count"):
                gpu_note = "GPU present: %d x %s, driver %s; source auto answered with %s." % (
                    facts["gpu_count"], facts["gpus"][0]["name"], facts.get("driver_version"), facts.get("source"))
            else:
                gpu_note = "No GPU on the target (driver_loaded=%s), so no NVML vs nvidia-smi comparison." % (
                    facts.get("driver_loaded"))

    if gpu_note.startswith("GPU present"):
        for name, command in (
            ("gpucloud.fleet.nvidia_gpu_facts source=nvml",
             module_command(base, "gpucloud.fleet.nvidia_gpu_facts", "source=nvml")),
            ("gpucloud.fleet.nvidia_gpu_facts source=nvidia-smi",
             module_command(base, "gpucloud.fleet.nvidia_gpu_facts", "source=nvidia-smi")),
            ("gpucloud.fleet.nvidia_topology (live nvidia-smi topo -m)",
             module_command(base, "gpucloud.fleet.nvidia_topology")),
        ):
            print("timing %s ..." % name, file=sys.stderr)
            rows.append(measure(name, command, env, args.repeat)[0])

    text = markdown(rows, args, gpu_note, version)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)
        print("wrote %s" % args.out, file=sys.stderr)
    elif args.lab:
        report.update_section("modules_vs_ping", text)
        print(text)
        print("wrote the modules_vs_ping section of %s" % report.BENCH_DOC, file=sys.stderr)
    else:
        print(text)
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
