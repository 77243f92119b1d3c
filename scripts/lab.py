#!/usr/bin/env python3
"""The gpucloud.fleet lab: named fleets of systemd containers and QEMU VMs.

Every lab node is a Debian container booted with systemd as PID 1 from the local
base images (scripts/build-images.sh), on its fleet's own podman network
gpucloud-FLEET (members resolve each other by name through /etc/hosts). Molecule scenarios (molecule/shared/create.yml)
and the main job (make lab-up) create their nodes through this one tool, so a lab
node is the same thing everywhere.

    lab.py create FLEET --node NAME=IMAGE [--node ...]     # IMAGE: debian12 | debian13 | ubuntu2404 | ubuntu2204
    lab.py create FLEET --node gpu1=debian12,vm,nvme=1,nvme=1,forward=9100   # a QEMU VM
    lab.py create FLEET --spec nodes.json [--inventory FILE]
    lab.py list [FLEET]
    lab.py destroy FLEET | --all
    lab.py inventory FLEET [--transport ssh]                 # YAML inventory on stdout

A node spec (JSON list entry or NAME=IMAGE[,OPTION...]) knows: name, image,
groups, capabilities (default NET_ADMIN, for iptables), privileged, devices,
volumes, publish, tmpfs, restart (a podman restart policy: "always" brings a
container whose systemd ran `reboot` back up, the lab's stand-in for a reboot). Containers carry the labels gpucloud.lab=1 and
gpucloud.fleet=FLEET; nothing without those labels is ever touched.
Downloaded .deb files are kept across runs: each node's /var/cache/apt/archives is
GPUCLOUD_APT_CACHE/nodes/<node> (default /var/tmp/gpucloud-apt-cache), seeded from
and given back to a pool per image by hard links.
Every node runs sshd (the images carry openssh-server and make their own host keys at
first boot) and trusts the lab key GPUCLOUD_LAB_SSH_KEY (default
/var/tmp/gpucloud-lab/ssh/id_ed25519, made on first use), so an inventory can reach
the nodes either with the podman connection (`--transport podman`, the default: no
network needed) or over SSH on the fleet network (`--transport ssh`: one round trip per
task with pipelining and ControlPersist, as on real hosts, about twice as fast).
A privileged node sees the host's loop devices as they were when it started, so
create() first makes sure there is one free loop device per privileged node.

VM nodes (`"kind": "vm"`, scripts/lab_vm.py) are for what a container cannot prove:
their own kernel (nouveau, DKMS modules, modprobe), GRUB and reboots, udev, md,
device-mapper (LUKS open) and NVMe disks. Spec keys: name, image (debian12), kind,
groups, memory_mib (2048), cpus (2), nvme_disks (sizes in GiB: emulated NVMe disks),
forward (guest TCP ports reachable on 127.0.0.1). The first VM builds the base disk
(scripts/build-vm-image.sh, cached under GPUCLOUD_VM_DIR, default
/var/tmp/gpucloud-lab/vm); each VM boots a qcow2 overlay of it through OVMF and its
own GRUB, with user-mode networking (NATed by the host: it reaches the fleet's
containers, the Debian mirror and the host's loopback at 10.0.2.2). Its state lives in
GPUCLOUD_VMS_DIR/<fleet>/<name>/ (default /var/tmp/gpucloud-lab/vms). The inventory
reaches a VM over SSH on 127.0.0.1:<forwarded port> whatever --transport says, and
tells lab_kind, lab_vm_accel and lab_forwarded_ports. GPUCLOUD_VM_ACCEL=auto|kvm|tcg:
auto probes KVM once per host kernel + QEMU version (KVM guests hang after the kernel
decompressor on the CI machines) and falls back to TCG; TCG boots took 40-100 s on two
busy cores (docs/development.md), so VMs wait up to 600 s unless --boot-timeout says
otherwise.
Environment: scripts/env.sh (CONTAINERS_CONF, GPUCLOUD_IMAGE_PREFIX,
GPUCLOUD_APT_CACHE, GPUCLOUD_LAB_SSH_KEY).
"""

import argparse
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time

import lab_vm

LABEL_LAB = "gpucloud.lab"
LABEL_FLEET = "gpucloud.fleet"
LABEL_GROUPS = "gpucloud.groups"
IMAGES = ("debian12", "debian13", "ubuntu2404", "ubuntu2204")
DEFAULT_CAPS = ("NET_ADMIN",)
BOOT_TIMEOUT = 90
TRANSPORTS = ("podman", "ssh")
LOOP_CTL_ADD = 0x4C80
CONTAINER_KEYS = ("name", "image", "kind", "groups", "capabilities", "privileged",
                  "devices", "volumes", "publish", "tmpfs", "restart")
KINDS = ("container", "vm")
RESTART_POLICIES = ("no", "always", "on-failure", "unless-stopped")
HOSTS_BEGIN, HOSTS_END = "# gpucloud-lab begin", "# gpucloud-lab end"


class LabError(Exception):
    """A problem the operator can fix; printed without a traceback."""


def network_name(fleet):
    return "gpucloud-%s" % fleet


def _apt_cache_root():
    return os.environ.get("GPUCLOUD_APT_CACHE", "/var/tmp/gpucloud-apt-cache")


def _apt_pool(image_ref_):
    return os.path.join(_apt_cache_root(), image_ref_.replace("/", "_").replace(":", "_"))


def _link_debs(src, dst):
    """Hard-link the .deb files of SRC that DST lacks (same file system: no copy)."""
    if not os.path.isdir(src):
        return
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        target = os.path.join(dst, name)
        if name.endswith(".deb") and not os.path.exists(target):
            try:
                os.link(os.path.join(src, name), target)
            except OSError:
                shutil.copy2(os.path.join(src, name), target)


def apt_cache_dir(name, image_ref_):
    """Host directory mounted at the node's /var/cache/apt/archives.

    One directory per node: apt holds a lock on its archive directory for a whole
    download, so nodes sharing one would wait on each other. It is seeded with
    hard links from the image's pool, and destroy() gives new downloads back to the
    pool, so packages are downloaded once per image across lab runs."""
    path = os.path.join(_apt_cache_root(), "nodes", name)
    os.makedirs(os.path.join(path, "partial"), exist_ok=True)
    _link_debs(_apt_pool(image_ref_), path)
    return path


def harvest_apt_cache(name, image_ref_):
    """Give node NAME's downloaded packages back to its image's pool."""
    _link_debs(os.path.join(_apt_cache_root(), "nodes", name), _apt_pool(image_ref_))


def ssh_key():
    """Path of the lab's private SSH key; made (ed25519, no passphrase) when missing."""
    path = os.environ.get("GPUCLOUD_LAB_SSH_KEY", "/var/tmp/gpucloud-lab/ssh/id_ed25519")
    if not os.path.exists(path):
        if shutil.which("ssh-keygen") is None:
            raise LabError("ssh-keygen is not installed: run scripts/setup.sh as root")
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpucloud-lab",
                        "-f", path], check=True, capture_output=True)
    return path


def authorize_ssh(name):
    """Let the lab key log in as root on node NAME (added to root's authorized_keys once)."""
    with open(ssh_key() + ".pub") as fh:
        key = fh.read().strip()
    podman("exec", name, "sh", "-c",
           'umask 077 && mkdir -p /root/.ssh && touch /root/.ssh/authorized_keys && '
           '{ grep -qxF "$1" /root/.ssh/authorized_keys || echo "$1" >> /root/.ssh/authorized_keys; }',
           "sh", key)


def free_loop_devices():
    """Loop devices of this host with no backing file."""
    free = []
    for dev in os.listdir("/sys/block"):
        if dev.startswith("loop") and not os.path.exists("/sys/block/%s/loop/backing_file" % dev):
            free.append(dev)
    return sorted(free)


def ensure_loop_devices(count):
    """Make sure COUNT loop devices are free, adding new ones through /dev/loop-control.

    A privileged container sees the host's /dev/loop* nodes as they were when it
    started: one that `losetup --find` adds later exists only on the host."""
    free = free_loop_devices()
    if len(free) >= count or not os.path.exists("/dev/loop-control"):
        return free
    taken = {int(d[4:]) for d in os.listdir("/sys/block") if d.startswith("loop") and d[4:].isdigit()}
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        number = 0
        while len(free) < count:
            if number not in taken:
                fcntl.ioctl(fd, LOOP_CTL_ADD, number)
                free.append("loop%d" % number)
            number += 1
    except OSError as exc:
        raise LabError("could not add loop devices for the privileged nodes: %s" % exc) from exc
    finally:
        os.close(fd)
    return free


def image_ref(image):
    if "/" in image or ":" in image:
        return image
    if image not in IMAGES:
        raise LabError("unknown image '%s' (allowed: %s, or a full image reference)"
                       % (image, ", ".join(IMAGES)))
    prefix = os.environ.get("GPUCLOUD_IMAGE_PREFIX", "localhost/gpucloud")
    return "%s/%s:latest" % (prefix, image)


def podman(*args, check=True, timeout=None):
    exe = shutil.which("podman")
    if exe is None:
        raise LabError("podman is not installed: run scripts/setup.sh as root "
                       "(installs podman, runc and the base images)")
    proc = subprocess.run([exe] + list(args), capture_output=True, text=True,
                          timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise LabError("podman %s failed (rc=%d): %s"
                       % (" ".join(args[:2]), proc.returncode, proc.stderr.strip()))
    return proc


def parse_node(text):
    """NAME=IMAGE[,privileged][,cap=X][,group=G][,device=D] -> spec dict.

    VM nodes: NAME=IMAGE,vm[,memory=MIB][,cpus=N][,nvme=GIB...][,forward=PORT...]."""
    if "=" not in text:
        raise LabError("--node '%s': expected NAME=IMAGE[,OPTION...]" % text)
    name, rest = text.split("=", 1)
    parts = rest.split(",")
    spec = {"name": name, "image": parts[0]}
    for opt in parts[1:]:
        key, dummy, value = opt.partition("=")
        if key == "privileged" and not value:
            spec["privileged"] = True
        elif key == "cap" and value:
            spec.setdefault("capabilities", list(DEFAULT_CAPS)).append(value)
        elif key == "group" and value:
            spec.setdefault("groups", []).append(value)
        elif key == "device" and value:
            spec.setdefault("devices", []).append(value)
        elif key == "vm" and not value:
            spec["kind"] = "vm"
        elif key in ("memory", "cpus", "nvme", "forward") and value.isdigit():
            field = {"memory": "memory_mib", "nvme": "nvme_disks", "forward": "forward"}.get(key, key)
            if key in ("nvme", "forward"):
                spec.setdefault(field, []).append(int(value))
            else:
                spec[field] = int(value)
        else:
            raise LabError("--node '%s': unknown option '%s' (allowed: privileged, cap=X, "
                           "group=G, device=D; for VMs: vm, memory=MIB, cpus=N, nvme=GIB, "
                           "forward=PORT)" % (text, opt))
    return spec


def validate_specs(specs):
    seen = set()
    for spec in specs:
        name = spec.get("name")
        if not name or not all(c.isalnum() or c in "-_." for c in name):
            raise LabError("invalid node name %r: use letters, digits, '-', '_', '.'" % name)
        if name in seen:
            raise LabError("node name '%s' appears twice" % name)
        seen.add(name)
        kind = spec.get("kind", "container")
        if kind not in KINDS:
            raise LabError("node '%s': unknown kind '%s' (allowed: %s)" % (name, kind, ", ".join(KINDS)))
        if kind == "vm":
            try:
                lab_vm.validate_vm_spec(spec)
            except lab_vm.VMError as exc:
                raise LabError(str(exc)) from exc
            continue
        if not spec.get("image"):
            raise LabError("node '%s' has no image" % name)
        unknown = set(spec) - set(CONTAINER_KEYS)
        if unknown:
            raise LabError("node '%s': unknown keys %s (allowed: %s; VM keys need \"kind\": \"vm\")"
                           % (name, ", ".join(sorted(unknown)), ", ".join(CONTAINER_KEYS)))
        if spec.get("restart", "no") not in RESTART_POLICIES:
            raise LabError("node '%s': restart must be one of %s, got %r"
                           % (name, ", ".join(RESTART_POLICIES), spec["restart"]))


def containers(fleet=None):
    """[{name, fleet, groups, state, image}] of lab containers (all fleets or one)."""
    filters = ["--filter", "label=%s=1" % LABEL_LAB]
    if fleet:
        filters += ["--filter", "label=%s=%s" % (LABEL_FLEET, fleet)]
    out = podman("ps", "-a", "--format", "json", *filters).stdout
    result = []
    for c in json.loads(out or "[]"):
        labels = c.get("Labels") or {}
        groups = labels.get(LABEL_GROUPS, "")
        result.append({
            "name": c["Names"][0],
            "fleet": labels.get(LABEL_FLEET),
            "groups": [g for g in groups.split(",") if g],
            "state": c.get("State"),
            "image": c.get("Image"),
            "kind": "container",
        })
    return sorted(result, key=lambda c: c["name"])


def vms(fleet=None):
    """[{name, fleet, groups, state, image, kind, ssh_port, ssh_key, accel}] of lab VMs."""
    return [{"name": s["name"], "fleet": s["fleet"], "groups": s["groups"], "state": s["state"],
             "image": "vm:%s" % s["image"], "kind": "vm", "ssh_port": s["ssh_port"],
             "ssh_key": ssh_key(), "accel": s["accel"],
             "forwarded_ports": s["forwarded"]} for s in lab_vm.load_states(fleet)]


def nodes_of(fleet=None):
    """Containers and VMs of FLEET (or of every fleet), by name."""
    return sorted(containers(fleet) + vms(fleet), key=lambda n: n["name"])


def ensure_network(fleet):
    net = network_name(fleet)
    if podman("network", "exists", net, check=False).returncode != 0:
        podman("network", "create", "--label", "%s=1" % LABEL_LAB,
               "--label", "%s=%s" % (LABEL_FLEET, fleet), net)


def remove_networks(fleet=None):
    """Remove the lab networks of FLEET (or of every fleet) that no container uses."""
    filters = ["--filter", "label=%s=1" % LABEL_LAB]
    if fleet:
        filters += ["--filter", "label=%s=%s" % (LABEL_FLEET, fleet)]
    for net in podman("network", "ls", "--format", "{{.Name}}", *filters).stdout.split():
        users = podman("ps", "-a", "--filter", "network=%s" % net, "--format", "{{.Names}}").stdout.split()
        if not users:
            podman("network", "rm", net)


def container_ip(name, fleet):
    out = podman("inspect", "--format", "{{json .NetworkSettings.Networks}}", name).stdout
    nets = json.loads(out or "{}") or {}
    net = nets.get(network_name(fleet)) or {}
    return net.get("IPAddress") or None


def wait_booted(name, deadline):
    """Wait until systemd in NAME reports running (or degraded, with the failed units)."""
    state = "unknown"
    while time.time() < deadline:
        proc = podman("exec", name, "systemctl", "is-system-running", check=False)
        state = proc.stdout.strip() or proc.stderr.strip()
        if state in ("running", "degraded"):
            break
        time.sleep(0.5)
    else:
        raise LabError("node '%s' did not finish booting within %ds (systemd says: %s)"
                       % (name, BOOT_TIMEOUT, state))
    if state == "degraded":
        failed = podman("exec", name, "systemctl", "--failed", "--no-legend", "--plain",
                        check=False).stdout.strip()
        print("lab: warning: %s booted degraded; failed units:\n%s" % (name, failed),
              file=sys.stderr)
    return state


def network_gateway(fleet):
    """The host's address on the fleet network: where a (NATed) VM's connections come from."""
    proc = podman("network", "inspect", "--format", "{{range .Subnets}}{{.Gateway}} {{end}}",
                  network_name(fleet), check=False)
    return (proc.stdout.split() or [None])[0]


def create(fleet, specs, boot_timeout=None):
    validate_specs(specs)
    vm_specs = [s for s in specs if s.get("kind") == "vm"]
    specs = [s for s in specs if s.get("kind", "container") == "container"]
    for state in lab_vm.load_states():
        if state["name"] in {s["name"] for s in specs}:
            raise LabError("a VM named '%s' (fleet %s) exists: node names must be unique"
                           % (state["name"], state["fleet"]))
    refs = {s["name"]: image_ref(s["image"]) for s in specs}
    for ref in sorted(set(refs.values())):
        if podman("image", "exists", ref, check=False).returncode != 0:
            raise LabError("image %s is missing: run scripts/setup.sh (or "
                           "scripts/build-images.sh) to build it" % ref)
    existing = {c["name"]: c for c in containers()}
    for spec in specs:
        other = existing.get(spec["name"])
        if other and other["fleet"] != fleet:
            raise LabError("a container named '%s' already belongs to fleet '%s'"
                           % (spec["name"], other["fleet"]))
    foreign = podman("ps", "-a", "--format", "{{.Names}}").stdout.split()
    for spec in specs:
        if spec["name"] in foreign and spec["name"] not in existing:
            raise LabError("a container named '%s' exists and is not a lab node; "
                           "not touching it" % spec["name"])
    ensure_network(fleet)
    ensure_loop_devices(sum(1 for s in specs if s.get("privileged") and s["name"] not in existing))
    for spec in specs:
        name = spec["name"]
        if name in existing:
            if existing[name]["state"] != "running":
                podman("start", name)
            continue
        args = ["run", "--detach", "--name", name, "--hostname", name,
                "--network", network_name(fleet), "--systemd", "always",
                "--volume", "%s:/var/cache/apt/archives" % apt_cache_dir(name, refs[name]),
                "--label", "%s=1" % LABEL_LAB, "--label", "%s=%s" % (LABEL_FLEET, fleet),
                "--label", "%s=%s" % (LABEL_GROUPS, ",".join(spec.get("groups", [])))]
        for cap in spec.get("capabilities", DEFAULT_CAPS):
            args += ["--cap-add", cap]
        if spec.get("privileged"):
            args.append("--privileged")
        for dev in spec.get("devices", []):
            args += ["--device", dev]
        for vol in spec.get("volumes", []):
            args += ["--volume", vol]
        for port in spec.get("publish", []):
            args += ["--publish", port]
        for tmp in spec.get("tmpfs", []):
            args += ["--tmpfs", tmp]
        # "always": podman starts the container again when its systemd exits, which is what
        # `reboot` inside it does - the lab's stand-in for a reboot (molecule/remediation).
        if spec.get("restart"):
            args += ["--restart", spec["restart"]]
        args += [refs[name], "/sbin/init"]
        podman(*args)
    try:
        # Builds the base disk when missing, and may probe KVM: containers boot meanwhile.
        states = lab_vm.start_vms(fleet, vm_specs, ssh_key(), set(foreign)) if vm_specs else []
    except lab_vm.VMError as exc:
        raise LabError(str(exc)) from exc
    started = time.time()
    deadline = started + (boot_timeout or BOOT_TIMEOUT)
    for spec in specs:
        wait_booted(spec["name"], deadline)
        authorize_ssh(spec["name"])
    deadline = started + (boot_timeout or lab_vm.VM_BOOT_TIMEOUT)
    for state in states:
        try:
            said, seconds = lab_vm.wait_booted(state, ssh_key(), deadline)
        except lab_vm.VMError as exc:
            raise LabError(str(exc)) from exc
        print("lab: VM %s up (%s, %s) %.0f s after start" % (state["name"], said,
                                                             state["accel"].upper(), seconds),
              file=sys.stderr)
    write_hosts(fleet)
    return nodes_of(fleet)


def merge_hosts(current, lines):
    """/etc/hosts text CURRENT with the lab's block replaced by LINES."""
    kept, skipping = [], False
    for line in current.splitlines():
        if line == HOSTS_BEGIN:
            skipping = True
        elif line == HOSTS_END:
            skipping = False
        elif not skipping:
            kept.append(line)
    return "\n".join(kept + [HOSTS_BEGIN] + lines + [HOSTS_END]) + "\n"


def write_hosts(fleet):
    """Let fleet members resolve the fleet's containers by name (no DNS plugin is assumed).

    VMs are not listed: their own address is NATed, the fleet cannot dial it."""
    nodes = containers(fleet)
    addresses = {n["name"]: container_ip(n["name"], fleet) for n in nodes}
    lines = ["%s %s" % (ip, name) for name, ip in sorted(addresses.items()) if ip]
    for n in nodes:
        # /etc/hosts is a bind mount podman manages: rewrite it in place, never rename it.
        text = merge_hosts(podman("exec", n["name"], "cat", "/etc/hosts").stdout, lines)
        exe = shutil.which("podman")
        subprocess.run([exe, "exec", "-i", n["name"], "sh", "-c", "cat > /etc/hosts"],
                       input=text, text=True, check=True, capture_output=True)
    for state in lab_vm.load_states(fleet):
        if state["state"] != "running":
            continue
        proc = lab_vm.ssh(state, ssh_key(), "cat", "/etc/hosts")
        if proc.returncode != 0:
            raise LabError("VM %s: reading /etc/hosts over SSH failed: %s"
                           % (state["name"], proc.stderr.strip()))
        proc = lab_vm.ssh(state, ssh_key(), "cat > /etc/hosts.lab && mv /etc/hosts.lab /etc/hosts",
                          stdin=merge_hosts(proc.stdout, lines))
        if proc.returncode != 0:
            raise LabError("VM %s: writing /etc/hosts over SSH failed: %s"
                           % (state["name"], proc.stderr.strip()))


def destroy(fleet=None):
    nodes = containers(fleet)
    names = [n["name"] for n in nodes]
    for n in nodes:
        harvest_apt_cache(n["name"], n["image"])
    if names:
        podman("rm", "--force", "--time", "5", *names)
    names += lab_vm.destroy_vms(fleet)
    remove_networks(fleet)
    return sorted(names)


def inventory(fleet, transport="podman"):
    """An Ansible YAML inventory of FLEET, reached with the podman connection or over SSH."""
    if transport not in TRANSPORTS:
        raise LabError("unknown transport '%s' (allowed: %s)" % (transport, ", ".join(TRANSPORTS)))
    nodes = containers(fleet)
    states = lab_vm.load_states(fleet)
    if not nodes and not states:
        raise LabError("fleet '%s' has no nodes (lab.py list shows the fleets)" % fleet)
    hosts = {}
    groups = {}
    gateway = network_gateway(fleet) if states else None
    for state in states:
        hosts[state["name"]] = lab_vm.inventory_host(state, ssh_key(), gateway)
        for g in state["groups"]:
            groups.setdefault(g, []).append(state["name"])
    for n in nodes:
        ip = container_ip(n["name"], fleet)
        if transport == "ssh":
            if not ip:
                raise LabError("node '%s' has no address on %s: is it running?"
                               % (n["name"], network_name(fleet)))
            host = {"ansible_connection": "ansible.builtin.ssh", "ansible_host": ip,
                    "ansible_user": "root", "ansible_ssh_private_key_file": ssh_key(),
                    # Lab nodes are re-created with new host keys under the same addresses.
                    "ansible_ssh_common_args": "-o StrictHostKeyChecking=no "
                                               "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"}
        else:
            host = {"ansible_connection": "containers.podman.podman", "ansible_host": n["name"]}
        host.update({"ansible_python_interpreter": "/usr/bin/python3", "lab_ip": ip,
                     "lab_kind": "container"})
        hosts[n["name"]] = host
        for g in n["groups"]:
            groups.setdefault(g, []).append(n["name"])
    inv = {"all": {"children": {"lab": {"hosts": dict(sorted(hosts.items()))}}}}
    for g, members in sorted(groups.items()):
        inv["all"]["children"][g] = {"hosts": {m: {} for m in members}}
    return inv


def to_yaml(data, indent=0):
    """Minimal YAML writer for inventories (str/int/bool/None/dict values only)."""
    pad = "  " * indent
    out = []
    for key, value in data.items():
        if str(key).isdigit():
            key = json.dumps(str(key))  # a port number as a key stays a string
        if isinstance(value, dict):
            if value:
                out.append("%s%s:" % (pad, key))
                out.append(to_yaml(value, indent + 1))
            else:
                out.append("%s%s: {}" % (pad, key))
        else:
            out.append("%s%s: %s" % (pad, key, json.dumps(value)))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="lab.py", description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_create = sub.add_parser("create", help="create (or start) the nodes of a fleet")
    p_create.add_argument("fleet")
    p_create.add_argument("--node", action="append", default=[], metavar="NAME=IMAGE[,OPT]")
    p_create.add_argument("--spec", help="JSON file (or - for stdin) with a list of node specs")
    p_create.add_argument("--inventory", help="also write the fleet's YAML inventory here")
    p_create.add_argument("--transport", choices=TRANSPORTS, default="podman",
                          help="how that inventory reaches the nodes (default podman)")
    p_create.add_argument("--boot-timeout", type=int,
                          help="seconds to wait for the nodes to boot (default: %d for "
                               "containers, %d for VMs)" % (BOOT_TIMEOUT, lab_vm.VM_BOOT_TIMEOUT))
    p_list = sub.add_parser("list", help="list lab nodes")
    p_list.add_argument("fleet", nargs="?")
    p_list.add_argument("--json", action="store_true")
    p_destroy = sub.add_parser("destroy", help="remove a fleet's nodes and network")
    p_destroy.add_argument("fleet", nargs="?")
    p_destroy.add_argument("--all", action="store_true")
    p_inv = sub.add_parser("inventory", help="print the fleet's YAML inventory")
    p_inv.add_argument("fleet")
    p_inv.add_argument("--transport", choices=TRANSPORTS, default="podman")
    args = parser.parse_args(argv)

    try:
        if args.cmd == "create":
            specs = [parse_node(n) for n in args.node]
            if args.spec:
                with (sys.stdin if args.spec == "-" else open(args.spec)) as fh:
                    specs += json.load(fh)
            if not specs:
                raise LabError("create %s: give at least one --node or --spec" % args.fleet)
            nodes = create(args.fleet, specs, args.boot_timeout)
            if args.inventory:
                with open(args.inventory, "w") as fh:
                    fh.write("---\n# written by scripts/lab.py; the lab fleet '%s'\n" % args.fleet)
                    fh.write(to_yaml(inventory(args.fleet, args.transport)) + "\n")
            print("lab: fleet %s up: %s" % (args.fleet, ", ".join(n["name"] for n in nodes)))
        elif args.cmd == "list":
            nodes = nodes_of(args.fleet)
            if args.json:
                print(json.dumps(nodes, indent=2))
            else:
                for n in nodes:
                    print("%-24s %-16s %-10s %s" % (n["name"], n["fleet"], n["state"],
                                                    ",".join(n["groups"]) or "-"))
        elif args.cmd == "destroy":
            if bool(args.fleet) == bool(args.all):
                raise LabError("destroy: name one fleet or give --all")
            gone = destroy(None if args.all else args.fleet)
            print("lab: removed %d node(s)%s" % (len(gone), (": " + ", ".join(gone)) if gone else ""))
        elif args.cmd == "inventory":
            print(to_yaml(inventory(args.fleet, args.transport)))
    except LabError as exc:
        print("lab: error: %s" % exc, file=sys.stderr)
        return 1
    except subprocess.TimeoutExpired as exc:
        print("lab: error: timed out: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
