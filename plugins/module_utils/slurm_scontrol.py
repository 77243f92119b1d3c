# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parsers for what Slurm's own tools print about a GPU node (issue 31, acceptance).

Pure functions over text, tested on real output of Slurm 22.05.8 (Debian 12) and 23.11.4 (Ubuntu
24.04) in tests/fixtures/slurm/scontrol/:

- ``parse_node``: ``scontrol show node -o NAME``: one line of ``Key=Value`` fields. Two values hold
  spaces: ``OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC ...`` (a word without ``=`` continues the value
  before it) and ``Reason=`` (free text, the last field of the line in both versions, with the
  ``[user@time]`` Slurm appends split off);
- ``parse_state``: ``IDLE+DRAIN``, ``DOWN*+DRAIN``, ``MIXED``: the base state, its flags and the
  ``*`` of a node that does not respond;
- ``parse_gres``: ``gpu:h200:8(S:0-1),mps:32``: name, type, count and socket binding per GRES;
- ``parse_sinfo``: ``sinfo -N -h -o SINFO_FORMAT``;
- ``parse_smoke``: the output of SMOKE_SCRIPT run by ``srun --gres=gpu:N``;
- ``parse_mpi_list``: ``srun --mpi=list``.
Text that is not the tool's output raises ``ValueError``.
"""

import re

# The smoke job srun runs on the node: the GPUs Slurm hands the job (CUDA_VISIBLE_DEVICES) and, for
# every GPU device file, whether the job may open it. The job's device cgroup answers an open() of
# a device it denies with EPERM ("Operation not permitted"), under cgroup v1 and v2 alike; any other
# answer (opened, or ENXIO where no driver is behind the file) means the cgroup lets it through.
SMOKE_SCRIPT = """echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-}"
for d in /dev/nvidia[0-9]*; do
  [ -c "$d" ] || continue
  if msg=$( (: <"$d") 2>&1 ); then echo "device $d open"; else echo "device $d ${msg##*: }"; fi
done
"""
DENIED = "Operation not permitted"
SINFO_FORMAT = "%N|%P|%T|%G|%E"

_KEY_RE = re.compile(r"[A-Za-z][A-Za-z0-9_/:.]*=")
_REASON_RE = re.compile(r"(?:^|\s)Reason=(.*)\Z")
_REASON_BY_RE = re.compile(r"(.*?)\s*\[([^\[\]@]*)@([^\[\]]*)\]\Z")
_GRES_RE = re.compile(r"([a-z][a-z0-9_]*)(?::([^:()]+))?:([0-9]+)([KMGTP]?)(?:\(S:([0-9,-]+)\))?")
_SUFFIX = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4, "P": 1024 ** 5}
_DEVICE_RE = re.compile(r"device (/dev/nvidia[0-9]+) (.+)")
_NONE = ("", "(null)", "none", "N/A")


def _fields(line, first_key):
    """KEY=VALUE fields of one scontrol -o line; a word without '=' continues the value before it."""
    line = line.strip()
    if not line.startswith(first_key + "="):
        raise ValueError("not scontrol output: expected a line starting with %s=, got %r" % (first_key, line[:80]))
    fields, key = {}, None
    for word in line.split():
        match = _KEY_RE.match(word)
        if match:
            key = match.group(0)[:-1]
            fields[key] = word[match.end():]
        else:
            fields[key] = (fields[key] + " " + word).strip()
    return fields


def _one_line(text, what):
    if not isinstance(text, str):
        raise ValueError("%s output must be text, got %s" % (what, type(text).__name__))
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ValueError("%s -o prints one line per record, got %d lines" % (what, len(lines)))
    return lines[0]


def parse_state(text):
    """``DOWN*+DRAIN`` -> {base: down, flags: [drain], not_responding: True}."""
    if not isinstance(text, str) or not re.fullmatch(r"[A-Z_]+[*~#!%$@^-]?(\+[A-Z_]+)*", text.strip()):
        raise ValueError("not a Slurm node state: %r" % (text,))
    parts = text.strip().split("+")
    base = parts[0]
    marker = base[-1] if not base[-1].isalpha() and base[-1] != "_" else ""
    base = base.rstrip("*~#!%$@^-")
    flags = [flag.lower() for flag in parts[1:]]
    return {"text": text.strip(), "base": base.lower(), "flags": flags,
            "not_responding": marker == "*" or "not_responding" in flags}


def parse_gres(text):
    """``gpu:h200:8(S:0-1),mps:32`` -> [{name, type, count, sockets}]; ``(null)`` -> []."""
    text = (text or "").strip()
    if text in _NONE:
        return []
    items = []
    for part in re.split(r",(?![^()]*\))", text):
        match = _GRES_RE.fullmatch(part.strip())
        if match is None:
            raise ValueError("GRES %r is not name[:type]:count[(S:sockets)]" % part)
        name, kind, count, suffix, sockets = match.groups()
        items.append({"name": name, "type": kind, "count": int(count) * _SUFFIX[suffix], "sockets": sockets})
    return items


def gres_counts(items):
    """[{name: gpu, type: h200, count: 8}] -> {"gpu:h200": 8}, the keys slurm.gres_plan's counts use."""
    counts = {}
    for item in items:
        key = item["name"] if not item["type"] else "%s:%s" % (item["name"], item["type"])
        counts[key] = counts.get(key, 0) + item["count"]
    return counts


def parse_tres(text):
    """``cpu=2,mem=1M,gres/gpu=2`` -> {"cpu": "2", "mem": "1M", "gres/gpu": "2"}; empty -> {}."""
    text = (text or "").strip()
    if text in _NONE:
        return {}
    tres = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError("TRES %r is not key=value" % part)
        tres[key] = value
    return tres


def parse_node(text):
    """One node of ``scontrol show node -o NAME``; raises ValueError for "Node x not found" and the like."""
    line = _one_line(text, "scontrol show node")
    reason = None
    match = _REASON_RE.search(line)
    if match:
        line = line[:match.start()]
        reason = match.group(1).strip()
    fields = _fields(line, "NodeName")
    if "State" not in fields:
        raise ValueError("scontrol show node line of %s has no State=" % fields["NodeName"])
    reason_by = reason_at = None
    if reason:
        by = _REASON_BY_RE.fullmatch(reason)
        if by:
            reason, reason_by, reason_at = by.group(1), by.group(2), by.group(3)
    gres = parse_gres(fields.get("Gres"))
    partitions = fields.get("Partitions", "")
    return {
        "name": fields["NodeName"],
        "state": parse_state(fields["State"]),
        "reason": reason or None,
        "reason_by": reason_by,
        "reason_at": reason_at,
        "gres": gres,
        "gres_counts": gres_counts(gres),
        "partitions": [] if partitions in _NONE else partitions.split(","),
        "cfg_tres": parse_tres(fields.get("CfgTRES")),
        "alloc_tres": parse_tres(fields.get("AllocTRES")),
        "version": fields.get("Version"),
        "cpus": int(fields["CPUTot"]) if fields.get("CPUTot", "").isdigit() else None,
        "fields": fields,
    }


def parse_sinfo(text):
    """``sinfo -N -h -o SINFO_FORMAT`` -> [{node, partition, default, state, gres, reason}], one per node and partition."""
    rows = []
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        cells = line.split("|", 4)
        if len(cells) != 5:
            raise ValueError("sinfo line %r is not %s" % (line, SINFO_FORMAT))
        node, partition, state, gres, reason = cells
        rows.append({"node": node, "partition": partition.rstrip("*"), "default": partition.endswith("*"),
                     "state": state, "gres": parse_gres(gres), "reason": None if reason in _NONE else reason})
    return rows


def parse_smoke(text):
    """SMOKE_SCRIPT's output -> {cuda_visible_devices: [...], devices: {path: answer}, allowed: [...], denied: [...]}."""
    visible, devices = None, {}
    for line in (text or "").splitlines():
        if line.startswith("CUDA_VISIBLE_DEVICES="):
            value = line.split("=", 1)[1].strip()
            visible = [item for item in value.split(",") if item] if value else []
            continue
        match = _DEVICE_RE.fullmatch(line.strip())
        if match:
            devices[match.group(1)] = match.group(2)
        elif line.strip():
            raise ValueError("smoke job line %r is neither CUDA_VISIBLE_DEVICES= nor device <path> <answer>" % line)
    if visible is None:
        raise ValueError("the smoke job printed no CUDA_VISIBLE_DEVICES line: did it run?")
    order = sorted(devices, key=lambda path: int(path[len("/dev/nvidia"):]))
    return {"cuda_visible_devices": visible, "devices": devices,
            "allowed": [path for path in order if devices[path] != DENIED],
            "denied": [path for path in order if devices[path] == DENIED]}


def parse_mpi_list(text):
    """``srun --mpi=list`` -> {types: [...], pmix_versions: [...], pmix: bool}."""
    types, versions, seen = [], [], False
    for line in (text or "").splitlines():
        if line.startswith("MPI plugin types are"):
            seen = True
        elif line.startswith("specific pmix plugin versions available:"):
            versions = [item.strip() for item in line.split(":", 1)[1].split(",") if item.strip()]
        elif seen and line.startswith(("\t", " ")) and line.strip():
            types.append(line.strip())
    if not seen:
        raise ValueError("not srun --mpi=list output: no 'MPI plugin types are' line")
    return {"types": types, "pmix_versions": versions, "pmix": "pmix" in types}


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else (value or "")


def _job(run, argv):
    rc, out, err = run(argv)
    return {"ran": True, "rc": rc, "stdout": _text(out), "stderr": _text(err).strip()}


def observe(run, node, smoke_gpus=0, partition=None, mpi_list=False, nccl=None, check_mode=False,
            nccl_parse=None):
    """What the node looks like to Slurm; RUN is ``Runner(module, missing="rc")`` (argv -> rc, out, err).

    Reads ``systemctl is-active slurmd``, ``scontrol show node -o NODE`` and ``sinfo -N -h -n NODE``.
    Only when asked, and never in check mode (each is a job): the smoke job (``srun -w NODE
    --gres=gpu:SMOKE_GPUS`` running SMOKE_SCRIPT), ``srun --mpi=list`` (MPI_LIST, or NCCL), and the
    NCCL run (``srun --mpi=pmix -N nodes --ntasks-per-node=G --gres=gpu:G COMMAND``) where the
    build lists pmix; NCCL_PARSE turns its output into the nccl-tests result. Never raises on what
    it sees: a node that is not registered, a job that fails, are reported.
    """
    result = {"node_name": node, "registered": False, "node": None, "error": None, "partitions": [],
              "slurmd": None, "smoke": {"asked": smoke_gpus, "ran": False}, "mpi": None,
              "nccl": {"asked": bool(nccl), "ran": False}}
    if nccl:
        result["nccl"].update(nodes=int(nccl["nodes"]), gpus_per_node=int(nccl["gpus_per_node"]))
    rc, out, err = run(["systemctl", "is-active", "slurmd"])
    result["slurmd"] = _text(out).strip() or _text(err).strip() or "unknown"
    rc, out, err = run(["scontrol", "show", "node", "-o", node])
    if rc != 0:
        result["error"] = "scontrol show node -o %s failed (rc=%d): %s" % (node, rc, (_text(err) or _text(out)).strip())
    else:
        try:
            result["node"] = parse_node(_text(out))
            result["registered"] = True
        except ValueError as exc:
            result["error"] = "scontrol show node -o %s: %s" % (node, exc)
    rc, out, err = run(["sinfo", "-N", "-h", "-n", node, "-o", SINFO_FORMAT])
    if rc == 0:
        try:
            result["partitions"] = parse_sinfo(_text(out))
        except ValueError as exc:
            result["error"] = result["error"] or "sinfo: %s" % exc
    where = ["-p", partition] if partition else []
    if smoke_gpus:
        if check_mode:
            result["smoke"]["skipped"] = "check mode: the smoke job is not started"
        else:
            smoke = _job(run, ["srun", "-w", node, "-N", "1", "-n", "1", "--gres=gpu:%d" % smoke_gpus,
                               "--immediate=60", "--time=2", "--job-name=gpucloud-smoke"] + where
                         + ["sh", "-c", SMOKE_SCRIPT])
            if smoke["rc"] == 0:
                try:
                    smoke.update(parse_smoke(smoke["stdout"]))
                except ValueError as exc:
                    smoke["error"] = str(exc)
            else:
                smoke["error"] = "srun failed (rc=%d): %s" % (smoke["rc"], smoke["stderr"] or smoke["stdout"].strip())
            result["smoke"].update(smoke)
    if (mpi_list or nccl) and not check_mode:
        rc, out, err = run(["srun", "--mpi=list"])
        try:
            result["mpi"] = parse_mpi_list(_text(out) + _text(err))
        except ValueError as exc:
            result["mpi"] = {"error": "srun --mpi=list (rc=%d): %s" % (rc, exc), "pmix": False}
    if nccl:
        if check_mode:
            result["nccl"]["skipped"] = "check mode: the NCCL job is not started"
        elif not result["mpi"].get("pmix"):
            result["nccl"]["skipped"] = "not available: this Slurm build lists no pmix MPI plugin (srun --mpi=list)"
        else:
            gpus = int(nccl["gpus_per_node"])
            job = _job(run, ["srun", "--mpi=pmix", "-N", str(int(nccl["nodes"])), "--ntasks-per-node=%d" % gpus,
                             "--gres=gpu:%d" % gpus, "--immediate=120", "--job-name=gpucloud-nccl"] + where
                       + list(nccl["command"]))
            if job["rc"] == 0 and nccl_parse is not None:
                try:
                    job["result"] = nccl_parse(job["stdout"])
                except ValueError as exc:
                    job["error"] = str(exc)
            elif job["rc"] != 0:
                job["error"] = "srun --mpi=pmix failed (rc=%d): %s" % (job["rc"], job["stderr"] or job["stdout"].strip())
            result["nccl"].update(job)
    return result
