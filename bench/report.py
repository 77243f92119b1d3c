"""Shared helpers for the benchmarks: machine description, medians, and writing one
named section of docs/benchmarks.md without disturbing the others."""

import os
import platform
import re
import statistics
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DOC = os.path.join(ROOT, "docs", "benchmarks.md")

HEADER = """# Benchmarks

Numbers measured by the scripts in `bench/` (`make bench`), never by the test suite.
Each section names the machine it ran on and how many runs its medians come from;
a section is rewritten only by the benchmark that owns it.
"""


def machine_description():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal"):
                    mem_gib = int(line.split()[1]) / 1024 / 1024
                    break
    except OSError:
        pass
    try:
        core = subprocess.run(["ansible", "--version"], capture_output=True, text=True,
                              check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        core = "ansible: not found"
    return "%s, %d cores, %.0f GiB RAM, %s, Python %s, %s" % (
        cpu, os.cpu_count() or 0, mem_gib, platform.platform(terse=True),
        platform.python_version(), core)


def median(values):
    return statistics.median(values) if values else float("nan")


def update_section(name, markdown, path=BENCH_DOC):
    """Replace (or append) the section delimited by bench:<name> markers."""
    begin = "<!-- bench:%s begin -->" % name
    end = "<!-- bench:%s end -->" % name
    block = "%s\n%s\n%s" % (begin, markdown.strip(), end)
    text = HEADER
    if os.path.exists(path):
        with open(path) as fh:
            text = fh.read()
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if pattern.search(text):
        text = pattern.sub(lambda m: block, text)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text if text.endswith("\n") else text + "\n")
