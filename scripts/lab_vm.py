#!/usr/bin/env python3
"""QEMU virtual-machine nodes of the gpucloud.fleet lab (scripts/lab.py, kind "vm").

A VM node boots the base disk that scripts/build-vm-image.sh makes (Debian 12 with its
own kernel, GRUB on UEFI, udev, DKMS) through a qcow2 overlay, with emulated NVMe data
disks and user-mode (slirp) networking: the guest reaches the fleet's containers, the
Debian mirror and the host's loopback (10.0.2.2) through the host's NAT, and the
controller reaches the guest's sshd (and any `forward` ports) on 127.0.0.1.
Per-node state (ports, pid, groups, paths) is state.json in
GPUCLOUD_VMS_DIR/<fleet>/<name>/ (default /var/tmp/gpucloud-lab/vms).
The pure parts (spec checks, GPT arithmetic, QEMU argv, inventory entries) are unit
tested in tests/unit/scripts/test_lab_vm.py.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

SECTOR = 512
ALIGN_SECTORS = 2048  # 1 MiB, what sfdisk and parted align partitions to
GPT_BACKUP_SECTORS = 33  # backup partition entries (32 sectors) + backup header
ESP_MIB = 100

VM_KEYS = ("name", "image", "kind", "groups", "memory_mib", "cpus", "nvme_disks", "forward")
VM_IMAGES = ("debian12",)
DEFAULT_MEMORY_MIB = 2048
DEFAULT_CPUS = 2
MAX_NVME_DISKS = 8
VM_BOOT_TIMEOUT = 600
KVM_PROBE_SECONDS = 60
ACCELS = ("auto", "kvm", "tcg")
GUEST_IP = "10.0.2.15"
OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
QEMU = "qemu-system-x86_64"
# systemd prints this on the serial console (systemd.show_status=1) once the kernel and
# the initramfs are done: a KVM guest that hangs after the decompressor never does.
BOOT_MARKER = b"Welcome to "
SSH_OPTIONS = ("-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "LogLevel=ERROR", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10")
NAT_NOTE = ("QEMU user networking: the fleet sees this VM's connections coming from the "
            "host's address on the fleet network (lab_ip); reach its ports through "
            "127.0.0.1 (ansible_port, lab_forwarded_ports)")


class VMError(Exception):
    """A problem the operator can fix; lab.py prints it without a traceback."""


# ---- pure parts -------------------------------------------------------------------------

def gpt_layout(disk_mib, esp_mib=ESP_MIB):
    """Sector arithmetic of the base disk: an ESP at 1 MiB, then one Linux root partition.

    The root partition ends on a 1 MiB boundary before the backup GPT, and mkfs.ext4
    must be given exactly its size (bigger and the initramfs fails to mount it)."""
    total = disk_mib * 2048
    esp_start = ALIGN_SECTORS
    esp_sectors = esp_mib * 2048
    root_start = esp_start + esp_sectors
    usable_end = total - GPT_BACKUP_SECTORS - 1  # last usable LBA
    root_sectors = (usable_end + 1 - root_start) // ALIGN_SECTORS * ALIGN_SECTORS
    if root_sectors < 256 * 2048:
        raise VMError("a %d MiB disk leaves no room for a root file system "
                      "(ESP %d MiB, need at least 256 MiB more)" % (disk_mib, esp_mib))
    return {
        "disk_bytes": total * SECTOR,
        "esp_start": esp_start,
        "esp_sectors": esp_sectors,
        "esp_offset": esp_start * SECTOR,
        "root_start": root_start,
        "root_sectors": root_sectors,
        "root_offset": root_start * SECTOR,
        "root_kib": root_sectors * SECTOR // 1024,
    }


def _int_in(name, key, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise VMError("VM node '%s': %s must be an integer from %d to %d, not %r"
                      % (name, key, low, high, value))
    return value


def validate_vm_spec(spec):
    """Check a VM node spec; return it with defaults filled in (a new dict)."""
    name = spec.get("name")
    unknown = set(spec) - set(VM_KEYS)
    if unknown:
        raise VMError("VM node '%s': unknown keys %s (allowed: %s)"
                      % (name, ", ".join(sorted(unknown)), ", ".join(VM_KEYS)))
    image = spec.get("image", "debian12")
    if image not in VM_IMAGES:
        raise VMError("VM node '%s': image '%s' has no VM base disk (allowed: %s)"
                      % (name, image, ", ".join(VM_IMAGES)))
    groups = spec.get("groups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
        raise VMError("VM node '%s': groups must be a list of names" % name)
    disks = spec.get("nvme_disks", [])
    if not isinstance(disks, list) or len(disks) > MAX_NVME_DISKS:
        raise VMError("VM node '%s': nvme_disks must be a list of at most %d sizes in GiB"
                      % (name, MAX_NVME_DISKS))
    ports = spec.get("forward", [])
    if not isinstance(ports, list):
        raise VMError("VM node '%s': forward must be a list of guest TCP ports" % name)
    for port in ports:
        _int_in(name, "a forward port", port, 1, 65535)
    if 22 in ports or len(set(ports)) != len(ports):
        raise VMError("VM node '%s': forward lists a port twice or 22 (sshd is always "
                      "forwarded)" % name)
    return {
        "name": name,
        "image": image,
        "kind": "vm",
        "groups": list(groups),
        "memory_mib": _int_in(name, "memory_mib", spec.get("memory_mib", DEFAULT_MEMORY_MIB),
                              512, 262144),
        "cpus": _int_in(name, "cpus", spec.get("cpus", DEFAULT_CPUS), 1, 64),
        "nvme_disks": [_int_in(name, "an nvme_disks size (GiB)", d, 1, 4096) for d in disks],
        "forward": list(ports),
    }


def nvme_serial(index):
    """Serial number of data disk INDEX (at most 20 characters for QEMU's nvme device)."""
    return "gpucloud-nvme%d" % index


def qemu_argv(state, accel, qemu=QEMU, ovmf_code=OVMF_CODE):
    """QEMU's argv for the VM described by STATE (see new_state), under ACCEL (kvm|tcg)."""
    if accel not in ("kvm", "tcg"):
        raise VMError("accelerator must be kvm or tcg, not %r" % accel)
    d = state["dir"]
    forwards = ["hostfwd=tcp:127.0.0.1:%d-:22" % state["ssh_port"]]
    for guest, host in sorted(state["forwarded"].items(), key=lambda kv: int(kv[0])):
        forwards.append("hostfwd=tcp:127.0.0.1:%d-:%d" % (host, int(guest)))
    argv = [qemu, "-name", "gpucloud-%s-%s" % (state["fleet"], state["name"]),
            "-machine", "q35", "-accel", accel,
            "-smp", str(state["cpus"]), "-m", str(state["memory_mib"]),
            "-drive", "if=pflash,format=raw,unit=0,readonly=on,file=%s" % ovmf_code,
            "-drive", "if=pflash,format=raw,unit=1,file=%s/vars.fd" % d,
            # A throwaway lab disk: guest flushes need not reach the host's disk.
            "-drive", "if=none,id=root,format=qcow2,cache=unsafe,discard=unmap,file=%s/disk.qcow2" % d,
            "-device", "virtio-blk-pci,drive=root,bootindex=0"]
    for index in range(len(state["nvme_disks"])):
        argv += ["-drive", "if=none,id=nvme%d,format=raw,cache=unsafe,file=%s/nvme%d.img"
                 % (index, d, index),
                 "-device", "nvme,serial=%s,drive=nvme%d" % (nvme_serial(index), index)]
    argv += ["-netdev", "user,id=net0," + ",".join(forwards),
             "-device", "virtio-net-pci,netdev=net0",
             "-device", "virtio-rng-pci",
             "-fw_cfg", "name=opt/gpucloud/hostname,string=%s" % state["name"],
             "-fw_cfg", "name=opt/gpucloud/authorized_keys,file=%s/authorized_keys" % d,
             "-chardev", "file,id=serial0,path=%s/serial.log,append=on" % d,
             "-serial", "chardev:serial0",
             "-display", "none", "-monitor", "none",
             "-daemonize", "-pidfile", "%s/qemu.pid" % d]
    return argv


def inventory_host(state, key_path, lab_ip):
    """Inventory variables of a VM node: SSH through its forwarded port on 127.0.0.1."""
    return {
        "ansible_connection": "ansible.builtin.ssh",
        "ansible_host": "127.0.0.1",
        "ansible_port": state["ssh_port"],
        "ansible_user": "root",
        "ansible_ssh_private_key_file": key_path,
        # VMs are re-created with new host keys under the same address and other ports.
        "ansible_ssh_common_args": " ".join(SSH_OPTIONS[:6]),
        "ansible_python_interpreter": "/usr/bin/python3",
        "lab_ip": lab_ip,
        "lab_kind": "vm",
        "lab_vm_accel": state.get("accel"),
        "lab_vm_guest_ip": GUEST_IP,
        "lab_vm_nat": NAT_NOTE,
        "lab_forwarded_ports": {str(g): h for g, h in sorted(
            state["forwarded"].items(), key=lambda kv: int(kv[0]))},
    }


def accel_cache_key(kernel_release, qemu_version):
    return "%s | %s" % (kernel_release, qemu_version)


def pick_accel(requested, kvm_usable, cached):
    """kvm | tcg | probe, from GPUCLOUD_VM_ACCEL, /dev/kvm and a cached verdict."""
    if requested not in ACCELS:
        raise VMError("GPUCLOUD_VM_ACCEL=%s: allowed values are %s" % (requested, ", ".join(ACCELS)))
    if requested != "auto":
        return requested
    if not kvm_usable:
        return "tcg"
    return cached or "probe"


def kvm_support(cpuinfo, modules):
    """(usable, reason): whether /dev/kvm can run a stock distribution kernel, from the text
    of /proc/cpuinfo and the names under /sys/module. KVM needs the CPU's vmx (Intel) or svm
    (AMD) flag; without either, a /dev/kvm comes from PVM (kvm_pvm), which runs only guest
    kernels built for it (docs/metal-lane.md, "Cost")."""
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    if flags & {"vmx", "svm"}:
        return True, "the CPU has %s" % "/".join(sorted(flags & {"vmx", "svm"}))
    if "kvm_pvm" in modules:
        return False, ("no vmx/svm CPU flag; /dev/kvm is PVM (kvm_pvm), which runs only PVM-built "
                       "guest kernels")
    return False, "no vmx/svm CPU flag"


def is_vm_process(cmdline_args, vm_dir):
    """True when CMDLINE_ARGS (a /proc/PID/cmdline split) is QEMU running the VM in VM_DIR."""
    if not cmdline_args or not os.path.basename(cmdline_args[0]).startswith("qemu-system"):
        return False
    disk = "file=%s/disk.qcow2" % vm_dir
    return any(arg.endswith(disk) for arg in cmdline_args)


# ---- state ------------------------------------------------------------------------------

def vms_root():
    return os.environ.get("GPUCLOUD_VMS_DIR", "/var/tmp/gpucloud-lab/vms")


def vm_dir(fleet, name):
    return os.path.join(vms_root(), fleet, name)


def new_state(fleet, spec):
    return dict(spec, fleet=fleet, dir=vm_dir(fleet, spec["name"]), ssh_port=0,
                forwarded={str(p): 0 for p in spec["forward"]}, accel=None, base=None)


def save_state(state):
    path = os.path.join(state["dir"], "state.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(state, fh, indent=2, sort_keys=True)
    os.replace(path + ".tmp", path)


def load_states(fleet=None):
    """States of the lab's VMs (all fleets or one), each with 'state': running|stopped."""
    root = vms_root()
    fleets = [fleet] if fleet else (sorted(os.listdir(root)) if os.path.isdir(root) else [])
    result = []
    for fl in fleets:
        base = os.path.join(root, fl)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name, "state.json")
            if not os.path.exists(path):
                continue
            with open(path) as fh:
                state = json.load(fh)
            state["state"] = "running" if running_pid(state) else "stopped"
            result.append(state)
    return result


def running_pid(state):
    """QEMU's pid for this VM when it runs, else None (the pid is checked, not trusted)."""
    try:
        with open(os.path.join(state["dir"], "qemu.pid")) as fh:
            pid = int(fh.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            args = [a.decode(errors="replace") for a in fh.read().split(b"\0") if a]
    except (OSError, ValueError):
        return None
    return pid if is_vm_process(args, state["dir"]) else None


# ---- side effects -----------------------------------------------------------------------

def _run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if proc.returncode != 0:
        raise VMError("%s failed (rc=%d): %s" % (" ".join(argv[:3]), proc.returncode,
                                                 (proc.stderr or proc.stdout).strip()[-2000:]))
    return proc


def base_disk():
    """Path of the current base disk; scripts/build-vm-image.sh builds it when missing."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "build-vm-image.sh")
    print("lab: VM base disk: %s (builds it when missing or outdated)" % script, file=sys.stderr)
    proc = subprocess.run([script], stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise VMError("building the VM base disk failed (%s, rc=%d)" % (script, proc.returncode))
    return proc.stdout.strip().splitlines()[-1]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _verdict_path():
    return os.path.join(os.environ.get("GPUCLOUD_VM_DIR", "/var/tmp/gpucloud-lab/vm"),
                        "accel-verdict.json")


def _accel_key():
    version = _run([QEMU, "--version"]).stdout.splitlines()[0].strip()
    return accel_cache_key(os.uname().release, version)


def _cached_verdict():
    try:
        with open(_verdict_path()) as fh:
            return json.load(fh).get(_accel_key())
    except (OSError, ValueError):
        return None


def _store_verdict(accel):
    path = _verdict_path()
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {}
    data[_accel_key()] = accel
    with open(path, "w") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)


def _kvm_support():
    """(usable, reason) on this machine, booting nothing."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "no usable /dev/kvm"
    try:
        with open("/proc/cpuinfo") as fh:
            cpuinfo = fh.read()
        modules = os.listdir("/sys/module")
    except OSError as exc:
        return False, "cannot read the CPU flags (%s)" % exc
    return kvm_support(cpuinfo, modules)


def _kvm_usable():
    return _kvm_support()[0]


def prepare_disks(state, base, key_path):
    """A fresh overlay over BASE, a VARS copy, sparse NVMe files and the key for fw_cfg."""
    d = state["dir"]
    os.makedirs(d, exist_ok=True)
    for name in ("disk.qcow2", "vars.fd", "serial.log"):
        if os.path.exists(os.path.join(d, name)):
            os.unlink(os.path.join(d, name))
    _run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", base, "-F", "raw",
          os.path.join(d, "disk.qcow2")])
    shutil.copyfile(OVMF_VARS, os.path.join(d, "vars.fd"))
    for index, size in enumerate(state["nvme_disks"]):
        with open(os.path.join(d, "nvme%d.img" % index), "wb") as fh:
            fh.truncate(size * 1024 ** 3)
    shutil.copyfile(key_path + ".pub", os.path.join(d, "authorized_keys"))
    state["base"] = base


def _launch(state, accel):
    """Start QEMU (daemonized) on fresh ports; retry when a port was taken meanwhile."""
    for attempt in range(3):
        state["ssh_port"] = free_port()
        state["forwarded"] = {g: free_port() for g in state["forwarded"]}
        state["accel"] = accel
        proc = subprocess.run(qemu_argv(state, accel), capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            save_state(state)
            return
        if "hostfwd" not in proc.stderr or attempt == 2:
            raise VMError("VM '%s': QEMU failed to start: %s" % (state["name"], proc.stderr.strip()))


def _serial_size(state):
    try:
        return os.path.getsize(os.path.join(state["dir"], "serial.log"))
    except OSError:
        return 0


def _saw_boot_marker(state, offset):
    try:
        with open(os.path.join(state["dir"], "serial.log"), "rb") as fh:
            fh.seek(offset)
            return BOOT_MARKER in fh.read()
    except OSError:
        return False


def kill(state, grace=10):
    """Stop this VM's QEMU (SIGTERM, then SIGKILL); only a pid proven to be it."""
    pid = running_pid(state)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and running_pid(state):
        time.sleep(0.2)
    if running_pid(state):
        os.kill(pid, signal.SIGKILL)
        while running_pid(state):
            time.sleep(0.1)
    return True


def start(state, base, key_path, fresh):
    """Boot the VM; under GPUCLOUD_VM_ACCEL=auto, probe KVM once per host kernel + QEMU."""
    requested = os.environ.get("GPUCLOUD_VM_ACCEL", "auto")
    accel = pick_accel(requested, _kvm_usable(), _cached_verdict() if requested == "auto" else None)
    if accel == "probe":
        offset = _serial_size(state)
        _launch(state, "kvm")
        deadline = time.time() + KVM_PROBE_SECONDS
        while time.time() < deadline and running_pid(state) and not _saw_boot_marker(state, offset):
            time.sleep(1)
        if _saw_boot_marker(state, offset):
            _store_verdict("kvm")
            print("lab: VM %s: KVM booted it: using KVM" % state["name"], file=sys.stderr)
            return
        kill(state, grace=1)
        _store_verdict("tcg")
        print("lab: VM %s: under KVM the guest showed no systemd output within %d s: using TCG "
              "from now on (verdict cached in %s)"
              % (state["name"], KVM_PROBE_SECONDS, _verdict_path()), file=sys.stderr)
        if fresh:
            prepare_disks(state, base, key_path)
        accel = "tcg"
    _launch(state, accel)
    print("lab: VM %s: QEMU started under %s (ssh on 127.0.0.1:%d)"
          % (state["name"], accel.upper(), state["ssh_port"]), file=sys.stderr)


def ssh_argv(state, key_path, *command):
    return (["ssh"] + list(SSH_OPTIONS) + ["-i", key_path, "-p", str(state["ssh_port"]),
                                           "root@127.0.0.1"] + list(command))


def ssh(state, key_path, *command, stdin=None, timeout=120):
    return subprocess.run(ssh_argv(state, key_path, *command), input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)


def wait_booted(state, key_path, deadline):
    """Wait until SSH works and systemd says running/degraded; return (state, seconds)."""
    started = time.time()
    said = "no SSH yet"
    refused = 0
    while time.time() < deadline:
        if not running_pid(state):
            raise VMError("VM '%s' stopped while booting; serial log: %s/serial.log"
                          % (state["name"], state["dir"]))
        try:
            proc = ssh(state, key_path, "systemctl", "is-system-running", "--wait",
                       timeout=max(5, min(300, deadline - time.time())))
            said = proc.stdout.strip() or proc.stderr.strip() or said
        except subprocess.TimeoutExpired:
            continue
        refused = refused + 1 if "Permission denied" in said else 0
        if refused >= 3:
            raise VMError("VM '%s' refuses the lab key (%s): did gpucloud-vm-identity.service "
                          "fail? serial log: %s/serial.log" % (state["name"], said, state["dir"]))
        if said in ("running", "degraded"):
            if said == "degraded":
                failed = ssh(state, key_path, "systemctl", "--failed", "--no-legend",
                             "--plain").stdout.strip()
                print("lab: warning: VM %s booted degraded; failed units:\n%s"
                      % (state["name"], failed), file=sys.stderr)
            return said, time.time() - started
        time.sleep(2)
    raise VMError("VM '%s' did not finish booting in time (last answer: %s); serial log: "
                  "%s/serial.log" % (state["name"], said, state["dir"]))


def start_vms(fleet, specs, key_path, taken_names):
    """Create (or restart) the VMs of SPECS; return their states, booting."""
    checked = [validate_vm_spec(s) for s in specs]
    existing = {s["name"]: s for s in load_states()}
    for spec in checked:
        other = existing.get(spec["name"])
        if other and other["fleet"] != fleet:
            raise VMError("a VM named '%s' already belongs to fleet '%s'"
                          % (spec["name"], other["fleet"]))
        if spec["name"] in taken_names:
            raise VMError("a container named '%s' exists: VM names must be unique" % spec["name"])
    for tool in (QEMU, "qemu-img", "ssh"):
        if shutil.which(tool) is None:
            raise VMError("%s is not installed: apt-get install $(grep -v '^#' requirements/vm.deb)"
                          % tool)
    base = base_disk() if any(s["name"] not in existing for s in checked) else None
    states = []
    for spec in checked:
        state = existing.get(spec["name"])
        if state is None:
            state = new_state(fleet, spec)
            prepare_disks(state, base, key_path)
            save_state(state)
            start(state, base, key_path, fresh=True)
        elif state["state"] != "running":
            # Powered off (or the host rebooted): boot again from its own disks.
            start(state, state["base"], key_path, fresh=False)
        states.append(state)
    return states


def destroy_vms(fleet=None):
    """Kill the VMs of FLEET (or all) and remove their state; return their names."""
    gone = []
    for state in load_states(fleet):
        kill(state)
        shutil.rmtree(state["dir"])
        gone.append(state["name"])
        parent = os.path.dirname(state["dir"])
        if not os.listdir(parent):
            os.rmdir(parent)
    return gone


def _cli(argv=None):
    parser = argparse.ArgumentParser(prog="lab_vm.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_layout = sub.add_parser("layout", help="print the base disk's GPT layout as shell variables")
    p_layout.add_argument("disk_mib", type=int)
    sub.add_parser("accel", help="print the accelerator a VM would get (kvm, tcg or probe) and why, "
                                 "booting nothing")
    args = parser.parse_args(argv)
    if args.cmd == "accel":
        requested = os.environ.get("GPUCLOUD_VM_ACCEL", "auto")
        usable, reason = _kvm_support()
        try:
            cached = _cached_verdict() if requested == "auto" and usable else None
        except (VMError, OSError):  # QEMU not installed yet: no verdict for it either
            cached = None
        accel = pick_accel(requested, usable, cached)
        why = ("GPUCLOUD_VM_ACCEL=%s" % requested if requested != "auto"
               else "cached verdict for this kernel and QEMU" if cached else reason)
        print("%s %s" % (accel, why))
        return 0
    if args.cmd == "layout":
        for key, value in sorted(gpt_layout(args.disk_mib).items()):
            print("%s=%d" % (key.upper(), value))
    return 0


if __name__ == "__main__":
    sys.exit(_cli())
