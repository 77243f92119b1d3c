# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Slurm configuration of a GPU node, rendered from what the collection already knows (issue 31).

Pure functions, no Ansible objects: a hardware profile (``gpucloud_profile``), the node's parsed
``nvidia-smi topo -m`` (``module_utils/topology.parse_topo_matrix``), the gpu_sharing plan
(``plugin_utils/gpu_sharing.gpu_sharing_plan``: one source of truth for MIG and MPS) and a
facts-like dict of the node go in; the text of ``gres.conf``, the ``slurm.conf`` node line and
``cgroup.conf`` comes out, and ``slurm_conf`` renders the whole ``slurm.conf`` from the cluster's
settings and every node's facts, the one function both roles (``slurm_controller``,
``slurm_gpu_node``) call, so the file is byte-identical on the controller and on the nodes. Inputs
that would give Slurm a wrong node raise ``SlurmConfigError`` naming the input.

Sources, read at Slurm 26.11 (github.com/SchedMD/slurm, commit
284c3b95f08a2dc2478499837b03355e1b9c5c75): doc/man/man5/gres.conf.5 (``Cores`` are *logical core*
indexes, "Core 0 will be the first core on the first socket", all the cores of a socket given
together; ``File`` is required for every gpu GRES and ``MultipleFiles`` replaces it for MIG;
``Type`` "should match or be a substring of the value that is detected, using an underscore in
lieu of any spaces"; the GPU index is the PCI bus order, "the minor number ... used in the device
file ... is not necessarily the same"; mps ``Count`` per ``File``), doc/html/gres.shtml
("MPS Management": a job's share of a GPU is its mps count over the GPU's configured count;
"MIG Management": Type a substring of the MIG profile NVML reports), doc/man/man5/slurm.conf.5
(node lines; "Nodes which register to the system with less than the configured resources (e.g.
too little memory), will be placed in the DOWN state") and doc/man/man5/cgroup.conf.5
(``CgroupPlugin=cgroup/v1|cgroup/v2|autodetect``, ``ConstrainDevices``). The same manuals at the
tags slurm-22-05-8-1 (Debian 12) and slurm-23-11-4-1 (Ubuntu 24.04) already have every keyword used
here: ``AutoDetect=off``, ``MultipleFiles``, logical core indexes, ``CgroupPlugin=cgroup/v2``.

NVML autodetection (``AutoDetect=nvml``) needs slurmd's ``gpu_nvml`` plugin, built against NVML.
Debian 12's ``slurm-wlm-basic-plugins`` 22.05.8-4+deb12u3 ships ``gpu_generic.so`` and the
``gres_gpu``/``gres_mps`` plugins but no ``gpu_nvml.so`` (its file list, read 2026-12-03), and its
main archive has no NVML plugin package (``apt-cache search slurm-wlm``); Ubuntu 24.04 has Slurm
23.11.4 with an AMD ``slurm-wlm-rsmi-plugin`` and no NVML one (issue 31; not checked here).
``AutoDetect=nvidia`` (no NVML, no MIG) exists only from Slurm 24.11. So on the distributions' own
packages the explicit lines written here are the configuration (``AutoDetect=off``), and
``AutoDetect=nvml`` is for sites that build slurmd with NVML: then these lines are its sanity check,
and a mismatch drains the node.
"""

import re

from ansible_collections.gpucloud.fleet.plugins.module_utils import mig_layout

GRES_TYPE_RE = re.compile(r"[a-z0-9][a-z0-9_.+-]*")
NODE_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CPU_LIST_RE = re.compile(r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*")
_MIG_MINOR_RE = re.compile(r"(\S+)\s+([0-9]+)")
AUTODETECT = ("off", "nvml")
NODE_KEYS = ("cpus", "sockets", "cores", "threads", "memory_mb")
# RealMemory below MemTotal: 2 % of it, at least 1 GiB (see real_memory).
MEMORY_RESERVE_PERCENT = 2
MEMORY_RESERVE_MIN_MB = 1024


class SlurmConfigError(ValueError):
    """An input that would give Slurm a wrong picture of the node."""


def _whole(value, name, least=0):
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"[0-9]+", str(value).strip()):
        raise SlurmConfigError("%s must be a whole number, got %r" % (name, value))
    number = int(str(value).strip())
    if number < least:
        raise SlurmConfigError("%s must be at least %d, got %d" % (name, least, number))
    return number


def gres_type(profile):
    """The GRES Type of the profile's GPUs: ``slurm.gres_type``, else ``gpu_model`` in lower case.

    Spaces become underscores, as Slurm writes the name NVML reports (``NVIDIA H100 80GB HBM3`` is
    detected as ``nvidia_h100_80gb_hbm3``), so the derived type (``h100_80gb_hbm3``) is a substring of
    it and passes AutoDetect's sanity check.
    """
    slurm = profile.get("slurm") or {}
    if not isinstance(slurm, dict):
        raise SlurmConfigError("gpucloud_profile.slurm must be a mapping, got %r" % (slurm,))
    value = slurm.get("gres_type")
    name = "gpucloud_profile.slurm.gres_type"
    if value is None:
        value = "_".join(str(profile.get("gpu_model") or "").lower().split())
        name = "gpucloud_profile.gpu_model"
    if not isinstance(value, str) or not GRES_TYPE_RE.fullmatch(value):
        raise SlurmConfigError("%s gives no usable GRES type (%r): lower-case letters, digits and _ . + - only, "
                               "no ':' ',' '=' or spaces" % (name, value))
    return value


def parse_cpu_list(text, name="CPU list"):
    """``0-55,112-167`` -> sorted list of CPU numbers; raises on anything else."""
    if not isinstance(text, str) or not _CPU_LIST_RE.fullmatch(text):
        raise SlurmConfigError("%s must be a list like 0-55,112-167, got %r" % (name, text))
    cpus = set()
    for part in text.split(","):
        first, _sep, last = part.partition("-")
        first, last = int(first), int(last or first)
        if last < first:
            raise SlurmConfigError("%s has a descending range %s" % (name, part))
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_ranges(numbers):
    """[0, 1, 2, 5, 7, 8] -> ``0-2,5,7-8``, as Slurm writes core and device lists."""
    parts = []
    numbers = sorted(set(numbers))
    start = None
    for position, number in enumerate(numbers):
        if start is None:
            start = number
        if position + 1 == len(numbers) or numbers[position + 1] != number + 1:
            parts.append("%d" % start if start == number else "%d-%d" % (start, number))
            start = None
    return ",".join(parts)


def node_shape(node):
    """Check the facts-like node dict; return its cpus, sockets, cores (per socket), threads, memory_mb.

    Keys, as the setup module gives them: ``cpus`` (ansible_processor_vcpus), ``sockets``
    (ansible_processor_count), ``cores`` per socket (ansible_processor_cores), ``threads`` per
    core (ansible_processor_threads_per_core), ``memory_mb`` (ansible_memtotal_mb).
    """
    if not isinstance(node, dict):
        raise SlurmConfigError("the node facts must be a mapping of %s, got %r" % (", ".join(NODE_KEYS), node))
    shape = dict((key, _whole(node.get(key), "node %s" % key, least=1)) for key in NODE_KEYS)
    if shape["sockets"] * shape["cores"] * shape["threads"] != shape["cpus"]:
        raise SlurmConfigError("node cpus %d is not sockets %d x cores %d x threads %d: facts of another host?"
                               % (shape["cpus"], shape["sockets"], shape["cores"], shape["threads"]))
    return shape


def cpu_cores(cpus, shape, where):
    """Logical core indexes (gres.conf ``Cores``) of a GPU's CPU affinity.

    Linux numbers the first thread of every core first, socket by socket, then the second threads
    in the same order (CPU n and n + sockets x cores are one core), which is what nvidia-smi's
    affinity ``0-55,112-167`` shows; so CPU n is core n mod (sockets x cores). Slurm binds GRES to
    whole sockets: a list that covers part of a socket is refused (unless the node reads NUMA
    nodes as sockets, ``numa_node_as_socket``).
    """
    cores_total = shape["sockets"] * shape["cores"]
    outside = [cpu for cpu in cpus if cpu >= shape["cpus"]]
    if outside:
        raise SlurmConfigError("%s: CPU affinity %s lies outside the node's CPUs 0-%d"
                               % (where, format_ranges(outside), shape["cpus"] - 1))
    cores = sorted(set(cpu % cores_total for cpu in cpus))
    if not shape.get("numa_node_as_socket"):
        for socket in range(shape["sockets"]):
            own = set(range(socket * shape["cores"], (socket + 1) * shape["cores"]))
            part = own.intersection(cores)
            if part and part != own:
                raise SlurmConfigError(
                    "%s: cores %s are part of socket %d (cores %s); gres.conf Cores must name whole sockets "
                    "(set numa_node_as_socket with SlurmdParameters=numa_node_as_socket for NUMA-node binding)"
                    % (where, format_ranges(part), socket, format_ranges(own)))
    return cores


def parse_mig_minors(text):
    """``/proc/driver/nvidia-caps/mig-minors`` -> {``gpu0/gi7/access``: 66, ...}."""
    minors = {}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _MIG_MINOR_RE.fullmatch(line.strip())
        if match is None:
            raise SlurmConfigError("mig-minors line %r is not '<capability> <minor>'" % line)
        minors[match.group(1)] = int(match.group(2))
    return minors


def _gpu_minors(node, count):
    minors = (node or {}).get("gpu_minors")
    if minors is None:
        return list(range(count))
    if not isinstance(minors, list) or len(minors) != count:
        raise SlurmConfigError("node gpu_minors must list the minor number of each of the %d GPUs in nvidia-smi "
                               "index order, got %r" % (count, minors))
    numbers = [_whole(minor, "node gpu_minors[%d]" % index) for index, minor in enumerate(minors)]
    if len(set(numbers)) != count:
        raise SlurmConfigError("node gpu_minors repeats a minor number: %r" % (minors,))
    return numbers


def _desired_mig_layout(profile):
    """The profile's MIG layout (mig_layout.desired_layout), its errors named as SlurmConfigError."""
    family = mig_layout.family_of(profile.get("gpu_model"))
    if family is None:
        raise SlurmConfigError("gpucloud_profile.gpu_model %r is not a MIG GPU this collection knows (%s)"
                               % (profile.get("gpu_model"), ", ".join(mig_layout.FAMILIES)))
    try:
        return mig_layout.desired_layout(profile, family)
    except mig_layout.MigLayoutError as exc:
        raise SlurmConfigError("gpucloud_profile.mig: %s" % exc) from exc


def _mig_lines(profile, node, minors, cores_of):
    """One gpu GRES per MIG device: Type is its MIG profile, MultipleFiles its GPU and capabilities."""
    want = _desired_mig_layout(profile)
    instances = (node or {}).get("mig_instances")
    caps = (node or {}).get("mig_minors")
    if not isinstance(instances, list) or not isinstance(caps, dict):
        raise SlurmConfigError("MIG layout %s: node mig_instances (nvidia-smi mig -lgi, parsed) and node "
                               "mig_minors (/proc/driver/nvidia-caps/mig-minors, parsed) are needed for the "
                               "MIG device files" % want["name"])
    lines, counts = [], {}
    for index, minor in enumerate(minors):
        have = [item for item in instances if item.get("gpu") == index]
        found = {}
        for item in have:
            found[item.get("profile")] = found.get(item.get("profile"), 0) + 1
        if found != want["devices"]:
            raise SlurmConfigError("GPU%d has MIG devices %s, layout %s wants %s: apply the layout first"
                                   % (index, sorted(found.items()), want["name"], sorted(want["devices"].items())))
        for item in sorted(have, key=lambda entry: entry.get("instance_id")):
            files = ["/dev/nvidia%d" % minor]
            # gpu_sharing creates each instance with -C: one compute instance, id 0.
            for cap in ("gpu%d/gi%s/access" % (minor, item.get("instance_id")),
                        "gpu%d/gi%s/ci0/access" % (minor, item.get("instance_id"))):
                if cap not in caps:
                    raise SlurmConfigError("node mig_minors has no %s" % cap)
                files.append("/dev/nvidia-caps/nvidia-cap%d" % caps[cap])
            lines.append("Name=gpu Type=%s MultipleFiles=%s%s" % (item["profile"], ",".join(files), cores_of(index)))
            counts["gpu:%s" % item["profile"]] = counts.get("gpu:%s" % item["profile"], 0) + 1
    return lines, counts


def gres_plan(profile, topology, sharing_plan=None, node=None):
    """The gres.conf lines and the node's GRES counts (``{"gpu:h200": 8}``) from one reading.

    - PROFILE: ``gpucloud_profile`` (``gpu_count``, ``gpu_model``, ``mig``, optional
      ``slurm.gres_type``);
    - TOPOLOGY: ``parse_topo_matrix`` of the node; its GPU count must be the profile's;
    - SHARING_PLAN: ``gpu_sharing_plan``; ``mode: mps`` adds ``Name=mps`` per GPU with
      ``Count`` = the profile's ``sharing.replicas`` (a job asking ``--gres=mps:1`` gets one
      replica's share, the 100/replicas percent gpu_sharing sets), ``mig_wanted`` one GRES per MIG
      device;
    - NODE: ``node_shape``'s keys (needed for ``Cores``), optional ``numa_node_as_socket``,
      ``gpu_minors`` (``minor_number`` of each GPU in nvidia-smi index order, from ``nvidia-smi
      -q -x``; without it /dev/nvidia<index>, which is only right where minors follow the PCI
      order), and for MIG ``mig_instances`` and ``mig_minors``.
    """
    if not isinstance(profile, dict):
        raise SlurmConfigError("gpucloud_profile must be the node's hardware profile, got %r" % (profile,))
    if not isinstance(topology, dict) or not isinstance(topology.get("gpus"), list):
        raise SlurmConfigError("the topology must be what nvidia_topology returns (parse_topo_matrix), got %r"
                               % (topology,))
    expected = _whole(profile.get("gpu_count"), "gpucloud_profile.gpu_count", least=1)
    gpus = topology["gpus"]
    if len(gpus) != expected:
        raise SlurmConfigError("the topology has %d GPUs (%s), gpucloud_profile.gpu_count is %d: "
                               "is this node of profile %s?" % (len(gpus), ", ".join(gpus) or "none", expected,
                                                                profile.get("name", "?")))
    sharing_plan = sharing_plan or {}
    shape = node_shape(node) if node is not None else None
    if shape is not None:
        shape["numa_node_as_socket"] = bool(node.get("numa_node_as_socket"))
    minors = _gpu_minors(node, expected)

    def cores_of(index):
        cpus = (topology.get("affinity") or {}).get(gpus[index], {}).get("cpus")
        if cpus in (None, "", "N/A"):
            return ""
        if shape is None:
            raise SlurmConfigError("%s has CPU affinity %s: the node facts (%s) are needed to give it as Slurm "
                                   "core indexes" % (gpus[index], cpus, ", ".join(NODE_KEYS)))
        cores = cpu_cores(parse_cpu_list(cpus, "%s CPU affinity" % gpus[index]), shape, gpus[index])
        return " Cores=%s" % format_ranges(cores)

    if sharing_plan.get("mig_wanted") or isinstance(profile.get("mig"), dict):
        lines, counts = _mig_lines(profile, node, minors, cores_of)
    else:
        kind = gres_type(profile)
        lines = ["Name=gpu Type=%s File=/dev/nvidia%d%s" % (kind, minor, cores_of(index))
                 for index, minor in enumerate(minors)]
        counts = {"gpu:%s" % kind: expected}
    if sharing_plan.get("mode") == "mps":
        replicas = _whole(((profile.get("sharing") or {}).get("replicas")), "gpucloud_profile.sharing.replicas", least=1)
        lines.extend("Name=mps Count=%d File=/dev/nvidia%d" % (replicas, minor) for minor in minors)
        counts["mps"] = replicas * expected
    return {"lines": lines, "counts": counts}


def gres_conf(profile, topology, sharing_plan=None, node=None, autodetect="off"):
    """Text of the node's gres.conf: see ``gres_plan``.

    AUTODETECT ``off`` (the default: the distributions' slurmd has no NVML plugin) makes the explicit
    lines the configuration; ``nvml`` has slurmd detect the GPUs and check them against these lines.
    """
    if autodetect not in AUTODETECT:
        raise SlurmConfigError("autodetect must be one of %s, got %r" % (", ".join(AUTODETECT), autodetect))
    plan = gres_plan(profile, topology, sharing_plan, node)
    header = ["# Managed by gpucloud.fleet: the GPUs of profile %s from this node's nvidia-smi topo -m."
              % profile.get("name", "?"),
              "AutoDetect=%s" % autodetect]
    return "\n".join(header + plan["lines"]) + "\n"


def real_memory(memory_mb):
    """RealMemory for a node whose MemTotal is MEMORY_MB: 2 % below it, at least 1024 MB below.

    slurmd registers the memory it finds; a node that registers less than its configured
    RealMemory is set DOWN/INVALID ("Low RealMemory") and takes no jobs. MemTotal is not fixed: a
    new kernel, a crashkernel reservation or firmware taking memory lowers it by tens to hundreds of
    MB, so RealMemory equal to today's total would take the node out after such an update. 2 % (at
    least 1 GiB) leaves that room and keeps the OS's own share out of job allocations.
    """
    total = _whole(memory_mb, "node memory_mb", least=1)
    reserve = max(MEMORY_RESERVE_MIN_MB, total * MEMORY_RESERVE_PERCENT // 100)
    if reserve >= total:
        raise SlurmConfigError("node memory_mb %d leaves nothing after the %d MB reserve" % (total, reserve))
    return total - reserve


def node_line(name, node, gres=None):
    """The slurm.conf NodeName line: CPUs, Sockets, CoresPerSocket, ThreadsPerCore, RealMemory, Gres.

    NODE as in ``node_shape``; GRES the counts of ``gres_plan`` (``{"gpu:h200": 8, "mps": 32}``).
    """
    if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name):
        raise SlurmConfigError("node name %r is not a host name Slurm accepts" % (name,))
    shape = node_shape(node)
    parts = ["NodeName=%s" % name, "CPUs=%d" % shape["cpus"], "Sockets=%d" % shape["sockets"],
             "CoresPerSocket=%d" % shape["cores"], "ThreadsPerCore=%d" % shape["threads"],
             "RealMemory=%d" % real_memory(shape["memory_mb"])]
    if gres:
        if not isinstance(gres, dict):
            raise SlurmConfigError("gres must map GRES names to counts, got %r" % (gres,))
        items = []
        for key in sorted(gres):
            if not isinstance(key, str) or not re.fullmatch(r"[a-z]+(?::%s)?" % GRES_TYPE_RE.pattern, key):
                raise SlurmConfigError("GRES name %r is not name or name:type" % (key,))
            items.append("%s:%d" % (key, _whole(gres[key], "gres %s" % key, least=1)))
        parts.append("Gres=%s" % ",".join(items))
    return " ".join(parts)


def cgroup_conf(cgroup_v2):
    """cgroup.conf: devices confined to the job's GRES, with the plugin of the host's cgroup version."""
    if not isinstance(cgroup_v2, bool):
        raise SlurmConfigError("cgroup_v2 must be true or false, got %r" % (cgroup_v2,))
    return "\n".join([
        "# Managed by gpucloud.fleet: a job sees only the GPUs it was given.",
        "CgroupPlugin=%s" % ("cgroup/v2" if cgroup_v2 else "cgroup/v1"),
        "ConstrainDevices=yes",
    ]) + "\n"


def expected_gres(profile):
    """The GRES counts a node of PROFILE registers (``{"gpu:h200": 8}``), from the profile alone.

    The same counts as ``gres_plan`` gives from the node's own reading (``gres_conf_checked``
    refuses a node where they differ): ``gpu:<type>`` per GPU, one ``gpu:<MIG profile>`` per
    MIG device of the profile's layout, and ``mps`` = replicas x GPUs where the profile shares
    with MPS. The controller writes every node line from these, so it needs no reading of the
    nodes' GPUs.
    """
    if not isinstance(profile, dict):
        raise SlurmConfigError("gpucloud_profile must be the node's hardware profile, got %r" % (profile,))
    count = _whole(profile.get("gpu_count"), "gpucloud_profile.gpu_count", least=1)
    if isinstance(profile.get("mig"), dict):
        want = _desired_mig_layout(profile)
        counts = dict(("gpu:%s" % name, number * count) for name, number in want["devices"].items())
    else:
        counts = {"gpu:%s" % gres_type(profile): count}
    sharing = profile.get("sharing") or {}
    if not isinstance(sharing, dict):
        raise SlurmConfigError("gpucloud_profile.sharing must be a mapping, got %r" % (sharing,))
    if sharing.get("mode") == "mps":
        counts["mps"] = _whole(sharing.get("replicas"), "gpucloud_profile.sharing.replicas", least=1) * count
    return counts


def gres_conf_checked(profile, topology, sharing_plan=None, node=None, autodetect="off"):
    """``gres_conf``, refused when the node's GRES differ from what the profile promises the controller."""
    plan = gres_plan(profile, topology, sharing_plan, node)
    want = expected_gres(profile)
    if plan["counts"] != want:
        raise SlurmConfigError("this node's GPUs give GRES %s, profile %s promises the controller %s"
                               % (_gres_text(plan["counts"]), profile.get("name", "?"), _gres_text(want)))
    return gres_conf(profile, topology, sharing_plan, node, autodetect)


def _gres_text(counts):
    return ",".join("%s:%s" % (key, counts[key]) for key in sorted(counts)) or "none"


CLUSTER_NAME_RE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
PARTITION_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
TIME_RE = re.compile(r"INFINITE|UNLIMITED|[0-9]+(?:-[0-9]{1,2})?(?::[0-9]{1,2}){0,2}")
PARTITION_KEYS = ("name", "nodes", "default", "max_time")
# What the roles fix, not the inventory: munge, cons_tres with cgroup confinement, the health
# program around every job. A batch job whose prolog failed is requeued held (slurm.conf(5),
# Prolog; "launch_failed_requeued_held"): `scontrol release` lets it start on another node.
# SchedulerParameters=nohold_on_prolog_fail would requeue it unheld, but Ubuntu 24.04's slurmctld
# 23.11.4 without accounting storage then leaves every job pending as InvalidAccount (measured in a
# lab container 2026-12-03), so it is not set.
SLURM_CONF_KEYS = ("cluster_name", "controllers", "nodes", "partitions", "slurm_user", "state_save_location",
                   "slurmd_spool_dir", "log_dir", "prolog", "epilog", "health_check_program",
                   "health_check_interval")


def _path(value, name):
    if not isinstance(value, str) or not re.fullmatch(r"/[A-Za-z0-9._/+-]*", value):
        raise SlurmConfigError("%s must be an absolute path without spaces, got %r" % (name, value))
    return value


def _partitions(partitions, names):
    if not isinstance(partitions, list) or not partitions:
        raise SlurmConfigError("slurm_partitions must list at least one partition {name, nodes, default, max_time}, "
                               "got %r" % (partitions,))
    lines, seen, defaults = [], set(), 0
    for index, part in enumerate(partitions):
        where = "slurm_partitions[%d]" % index
        if not isinstance(part, dict):
            raise SlurmConfigError("%s must be a mapping {name, nodes, default, max_time}, got %r" % (where, part))
        unknown = sorted(str(key) for key in part if key not in PARTITION_KEYS)
        if unknown:
            raise SlurmConfigError("%s has unknown key(s) %s; allowed: %s"
                                   % (where, ", ".join(unknown), ", ".join(PARTITION_KEYS)))
        name = part.get("name")
        if not isinstance(name, str) or not PARTITION_NAME_RE.fullmatch(name) or name.lower() == "default":
            raise SlurmConfigError("%s.name must be a partition name (letters, digits, _ -), got %r" % (where, name))
        if name in seen:
            raise SlurmConfigError("%s.name %s is given twice" % (where, name))
        seen.add(name)
        members = part.get("nodes")
        if members is None:
            members = list(names)
        if not isinstance(members, list) or not all(isinstance(item, str) for item in members):
            raise SlurmConfigError("%s.nodes must list Slurm GPU node names, got %r" % (where, members))
        strangers = sorted(set(members) - set(names))
        if strangers:
            raise SlurmConfigError("%s.nodes names %s, not in the slurm_gpu_nodes group (%s)"
                                   % (where, ", ".join(strangers), ", ".join(names) or "empty"))
        if not members:
            raise SlurmConfigError("%s (%s) has no nodes" % (where, name))
        default = part.get("default", False)
        if not isinstance(default, bool):
            raise SlurmConfigError("%s.default must be true or false, got %r" % (where, default))
        defaults += default
        max_time = part.get("max_time", "INFINITE")
        if not isinstance(max_time, str) or not TIME_RE.fullmatch(max_time):
            raise SlurmConfigError("%s.max_time must be a Slurm time (INFINITE, minutes, [days-]hours:minutes:seconds), "
                                   "got %r" % (where, max_time))
        ordered = [node for node in names if node in members]
        lines.append("PartitionName=%s Nodes=%s Default=%s MaxTime=%s State=UP"
                     % (name, ",".join(ordered), "YES" if default else "NO", max_time))
    if defaults > 1:
        raise SlurmConfigError("slurm_partitions: %d partitions say default: true, Slurm takes one" % defaults)
    return lines


def slurm_conf(settings):
    """Text of slurm.conf for the whole cluster: the same bytes on the controller and every node.

    SETTINGS: ``cluster_name``; ``controllers`` (host names, the first is the primary, others
    backups); ``nodes``: one ``{name, facts, gres}`` per Slurm GPU node (``facts`` as in
    ``node_shape``, ``gres`` the counts of ``expected_gres``), written in name order so the
    inventory's order does not change the file; ``partitions`` (``slurm_partitions``: ``name``,
    ``nodes`` (default: every node), ``default``, ``max_time``); ``slurm_user``, the paths
    ``state_save_location``, ``slurmd_spool_dir``, ``log_dir``, ``prolog``, ``epilog``,
    ``health_check_program`` and ``health_check_interval`` (seconds, 0: none).

    A failing Prolog drains the node ("Prolog error", or the reason the health program set first,
    which slurmctld keeps) and requeues a batch job, held (slurm.conf(5), Prolog; the same at 22.05
    and 23.11); ``PrologFlags=Alloc`` runs it when the job is allocated, before its first step.
    """
    if not isinstance(settings, dict):
        raise SlurmConfigError("the slurm.conf settings must be a mapping of %s, got %r"
                               % (", ".join(SLURM_CONF_KEYS), settings))
    missing = [key for key in SLURM_CONF_KEYS if key not in settings]
    if missing:
        raise SlurmConfigError("the slurm.conf settings lack %s" % ", ".join(missing))
    cluster = settings["cluster_name"]
    if not isinstance(cluster, str) or not CLUSTER_NAME_RE.fullmatch(cluster):
        raise SlurmConfigError("slurm_cluster_name must be lower-case letters, digits, _ and - (at most 40, a letter "
                               "first), got %r" % (cluster,))
    controllers = settings["controllers"]
    if not isinstance(controllers, list) or not controllers:
        raise SlurmConfigError("the slurm_controllers group is empty: slurm.conf needs its SlurmctldHost")
    for host in controllers:
        if not isinstance(host, str) or not NODE_NAME_RE.fullmatch(host):
            raise SlurmConfigError("controller name %r is not a host name Slurm accepts" % (host,))
    nodes = settings["nodes"]
    if not isinstance(nodes, list) or not nodes:
        raise SlurmConfigError("the slurm_gpu_nodes group is empty: slurm.conf needs at least one node")
    node_lines, names, gres_names = [], [], set()
    for entry in sorted(nodes, key=lambda item: str((item or {}).get("name") if isinstance(item, dict) else item)):
        if not isinstance(entry, dict):
            raise SlurmConfigError("each node must be {name, facts, gres}, got %r" % (entry,))
        name = entry.get("name")
        if name in names:
            raise SlurmConfigError("node %s is given twice" % name)
        try:
            node_lines.append(node_line(name, entry.get("facts"), entry.get("gres")))
        except SlurmConfigError as exc:
            raise SlurmConfigError("node %s: %s" % (name, exc)) from exc
        names.append(name)
        gres_names.update(key.split(":")[0] for key in (entry.get("gres") or {}))
    user = settings["slurm_user"]
    if not isinstance(user, str) or not re.fullmatch(r"[a-z_][a-z0-9_-]*", user):
        raise SlurmConfigError("slurm_user must be a user name, got %r" % (user,))
    interval = _whole(settings["health_check_interval"], "health_check_interval")
    lines = [
        "# Managed by gpucloud.fleet (slurm_controller and slurm_gpu_node): the same file on every host.",
        "ClusterName=%s" % cluster,
    ]
    lines.extend("SlurmctldHost=%s" % host for host in controllers)
    lines.extend([
        "SlurmUser=%s" % user,
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "StateSaveLocation=%s" % _path(settings["state_save_location"], "state_save_location"),
        "SlurmdSpoolDir=%s" % _path(settings["slurmd_spool_dir"], "slurmd_spool_dir"),
        "SlurmctldLogFile=%s/slurmctld.log" % _path(settings["log_dir"], "log_dir"),
        "SlurmdLogFile=%s/slurmd.log" % settings["log_dir"],
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "GresTypes=%s" % ",".join(sorted(gres_names | {"gpu"})),
        "ReturnToService=1",
        "PrologFlags=Alloc",
        "Prolog=%s" % _path(settings["prolog"], "prolog"),
        "Epilog=%s" % _path(settings["epilog"], "epilog"),
    ])
    if interval:
        lines.extend(["HealthCheckProgram=%s" % _path(settings["health_check_program"], "health_check_program"),
                      "HealthCheckInterval=%d" % interval,
                      "HealthCheckNodeState=ANY"])
    lines.extend(node_lines)
    lines.extend(_partitions(settings["partitions"], names))
    return "\n".join(lines) + "\n"


# ansible_facts keys (the setup module's hardware subset) behind node_shape's keys.
FACT_KEYS = (("cpus", "processor_vcpus"), ("sockets", "processor_count"), ("cores", "processor_cores"),
             ("threads", "processor_threads_per_core"), ("memory_mb", "memtotal_mb"))


def facts_node(facts, host="this node"):
    """node_shape's dict from a host's ``ansible_facts`` (hardware subset)."""
    if not isinstance(facts, dict):
        raise SlurmConfigError("%s has no facts: gather them (setup, hardware subset) first" % host)
    missing = [fact for _key, fact in FACT_KEYS if fact not in facts]
    if missing:
        raise SlurmConfigError("the facts of %s lack %s: gather the hardware subset (setup gather_subset hardware)"
                               % (host, ", ".join(missing)))
    return dict((key, facts[fact]) for key, fact in FACT_KEYS)


def node_readings(readings):
    """gres_plan's NODE from what the role read on the node: ``facts`` (ansible_facts), ``smi_xml``
    (``nvidia-smi -q -x``: each GPU's minor number), ``mig_lgi`` (``nvidia-smi mig -lgi``) and
    ``mig_minors`` (``/proc/driver/nvidia-caps/mig-minors``) where the profile has MIG, and
    ``numa_node_as_socket``. Absent readings stay absent (gres_plan says which it needs)."""
    if not isinstance(readings, dict):
        raise SlurmConfigError("the node readings must be a mapping {facts, smi_xml, mig_lgi, mig_minors}, got %r"
                               % (readings,))
    node = facts_node(readings.get("facts"))
    node["numa_node_as_socket"] = bool(readings.get("numa_node_as_socket"))
    try:
        if readings.get("smi_xml"):
            node["gpu_minors"] = [gpu["minor_number"] for gpu in mig_layout.parse_smi_xml(readings["smi_xml"])]
        if readings.get("mig_lgi"):
            node["mig_instances"] = mig_layout.parse_lgi(readings["mig_lgi"])
    except mig_layout.MigLayoutError as exc:
        raise SlurmConfigError("nvidia-smi output: %s" % exc) from exc
    if readings.get("mig_minors"):
        node["mig_minors"] = parse_mig_minors(readings["mig_minors"])
    return node


def cluster_nodes(names, hostvars):
    """slurm_conf's ``nodes`` for the hosts NAMES (the slurm_gpu_nodes group): facts and promised GRES."""
    if not isinstance(names, list):
        raise SlurmConfigError("the slurm_gpu_nodes group must be a list of hosts, got %r" % (names,))
    nodes = []
    for name in names:
        host = hostvars[name]
        profile = host.get("gpucloud_profile")
        if profile is None:
            raise SlurmConfigError("%s has no gpucloud_profile: every Slurm GPU node belongs to a profile group" % name)
        try:
            gres = expected_gres(profile)
        except SlurmConfigError as exc:
            raise SlurmConfigError("%s: %s" % (name, exc)) from exc
        nodes.append({"name": name, "facts": facts_node(host.get("ansible_facts"), name), "gres": gres})
    return nodes
