"""Unit tests of the pure parts of the lab's VM nodes (scripts/lab_vm.py, scripts/lab.py)."""
import importlib.util
import os
import sys

import pytest

SCRIPTS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts")


def _load(name):
    path = os.path.join(SCRIPTS, "%s.py" % name)
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)  # lab.py imports lab_vm as a sibling
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab_vm = _load("lab_vm")
lab = _load("lab")


# ---- GPT / offsets ------------------------------------------------------------------------

def test_layout_of_the_6_gib_base_disk():
    layout = lab_vm.gpt_layout(6144)
    assert layout["disk_bytes"] == 6 * 1024 ** 3
    assert layout["esp_start"] == 2048 and layout["esp_offset"] == 1024 ** 2
    assert layout["esp_sectors"] == 100 * 2048
    assert layout["root_start"] == 2048 + 204800
    assert layout["root_offset"] == layout["root_start"] * 512
    # ends on a MiB boundary before the backup GPT (33 sectors at the end)
    end = layout["root_start"] + layout["root_sectors"]
    assert end % 2048 == 0
    assert end <= 6144 * 2048 - 33
    assert layout["root_kib"] * 2 == layout["root_sectors"]
    assert layout["root_kib"] == 6187008


def test_layout_uses_every_whole_mib():
    # a disk of N MiB leaves N - 1 (GPT) - 100 (ESP) - 1 (backup GPT, rounded up) MiB
    layout = lab_vm.gpt_layout(1024)
    assert layout["root_sectors"] == (1024 - 1 - 100 - 1) * 2048


def test_layout_refuses_a_disk_too_small():
    with pytest.raises(lab_vm.VMError, match="no room"):
        lab_vm.gpt_layout(300)


# ---- spec validation ---------------------------------------------------------------------

def test_vm_spec_defaults():
    spec = lab_vm.validate_vm_spec({"name": "gpu1", "kind": "vm"})
    assert spec == {"name": "gpu1", "image": "debian12", "kind": "vm", "groups": [],
                    "memory_mib": 2048, "cpus": 2, "nvme_disks": [], "forward": []}


def test_vm_spec_full():
    spec = lab_vm.validate_vm_spec({"name": "gpu1", "kind": "vm", "image": "debian12",
                                    "groups": ["gpu_nodes"], "memory_mib": 4096, "cpus": 1,
                                    "nvme_disks": [1, 2], "forward": [9100, 7500]})
    assert spec["nvme_disks"] == [1, 2] and spec["forward"] == [9100, 7500]


@pytest.mark.parametrize("extra, message", [
    ({"privileged": True}, "unknown keys privileged"),
    ({"image": "debian13"}, "no VM base disk"),
    ({"memory_mib": 100}, "memory_mib must be an integer from 512"),
    ({"memory_mib": "2G"}, "memory_mib must be an integer"),
    ({"cpus": True}, "cpus must be an integer"),
    ({"nvme_disks": [0]}, "nvme_disks size"),
    ({"nvme_disks": 2}, "nvme_disks must be a list"),
    ({"nvme_disks": [1] * 9}, "at most 8"),
    ({"forward": [22]}, "sshd is always forwarded"),
    ({"forward": [80, 80]}, "twice"),
    ({"forward": [70000]}, "forward port must be an integer"),
    ({"groups": "gpu"}, "groups must be a list"),
])
def test_vm_spec_rejects(extra, message):
    with pytest.raises(lab_vm.VMError, match=message):
        lab_vm.validate_vm_spec(dict({"name": "gpu1", "kind": "vm"}, **extra))


def test_lab_validate_specs_dispatches_on_kind():
    lab.validate_specs([{"name": "gpu1", "kind": "vm", "nvme_disks": [1]},
                        {"name": "tang1", "image": "debian12", "privileged": True}])
    with pytest.raises(lab.LabError, match="unknown kind 'lxc'"):
        lab.validate_specs([{"name": "x", "image": "debian12", "kind": "lxc"}])
    with pytest.raises(lab.LabError, match="unknown keys nvme_disks"):
        lab.validate_specs([{"name": "x", "image": "debian12", "nvme_disks": [1]}])
    with pytest.raises(lab.LabError, match="memory_mib"):
        lab.validate_specs([{"name": "x", "kind": "vm", "memory_mib": 1}])


def test_parse_node_vm_options():
    spec = lab.parse_node("gpu1=debian12,vm,memory=3072,cpus=1,nvme=1,nvme=2,forward=9100,group=g")
    assert spec == {"name": "gpu1", "image": "debian12", "kind": "vm", "memory_mib": 3072,
                    "cpus": 1, "nvme_disks": [1, 2], "forward": [9100], "groups": ["g"]}
    with pytest.raises(lab.LabError, match="forward=PORT"):
        lab.parse_node("gpu1=debian12,vm,nvme=big")


# ---- QEMU argv -----------------------------------------------------------------------------

def _state(**kw):
    spec = lab_vm.validate_vm_spec({"name": "gpu1", "kind": "vm", "nvme_disks": [1, 1],
                                    "forward": [9100]})
    state = dict(spec, fleet="f", dir="/var/tmp/vms/f/gpu1", ssh_port=40022,
                 forwarded={"9100": 41234}, accel="tcg", base="/b.raw")
    state.update(kw)
    return state


def _opt(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_qemu_argv():
    argv = lab_vm.qemu_argv(_state(), "tcg")
    assert argv[0] == "qemu-system-x86_64"
    assert _opt(argv, "-machine") == ["q35"] and _opt(argv, "-accel") == ["tcg"]
    assert _opt(argv, "-smp") == ["2"] and _opt(argv, "-m") == ["2048"]
    drives = _opt(argv, "-drive")
    assert drives[0] == "if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/OVMF/OVMF_CODE_4M.fd"
    assert drives[1] == "if=pflash,format=raw,unit=1,file=/var/tmp/vms/f/gpu1/vars.fd"
    assert "format=qcow2" in drives[2] and drives[2].endswith("file=/var/tmp/vms/f/gpu1/disk.qcow2")
    assert drives[3].endswith("file=/var/tmp/vms/f/gpu1/nvme0.img")
    assert drives[4].endswith("file=/var/tmp/vms/f/gpu1/nvme1.img")
    devices = _opt(argv, "-device")
    assert "nvme,serial=gpucloud-nvme0,drive=nvme0" in devices
    assert "nvme,serial=gpucloud-nvme1,drive=nvme1" in devices
    assert "virtio-rng-pci" in devices
    assert _opt(argv, "-netdev") == [
        "user,id=net0,hostfwd=tcp:127.0.0.1:40022-:22,hostfwd=tcp:127.0.0.1:41234-:9100"]
    assert _opt(argv, "-fw_cfg") == [
        "name=opt/gpucloud/hostname,string=gpu1",
        "name=opt/gpucloud/authorized_keys,file=/var/tmp/vms/f/gpu1/authorized_keys"]
    assert _opt(argv, "-display") == ["none"]
    assert "-daemonize" in argv and _opt(argv, "-pidfile") == ["/var/tmp/vms/f/gpu1/qemu.pid"]
    assert "-no-reboot" not in argv  # a guest reboot resets and continues
    assert _opt(argv, "-chardev") == ["file,id=serial0,path=/var/tmp/vms/f/gpu1/serial.log,append=on"]


def test_qemu_argv_sizes_and_accel():
    argv = lab_vm.qemu_argv(_state(memory_mib=4096, cpus=4, nvme_disks=[]), "kvm")
    assert _opt(argv, "-accel") == ["kvm"] and _opt(argv, "-m") == ["4096"]
    assert _opt(argv, "-smp") == ["4"]
    assert not [d for d in _opt(argv, "-device") if d.startswith("nvme")]
    with pytest.raises(lab_vm.VMError):
        lab_vm.qemu_argv(_state(), "auto")


# ---- accelerator choice, pid check ------------------------------------------------------------

@pytest.mark.parametrize("requested, kvm, cached, expected", [
    ("tcg", True, "kvm", "tcg"),
    ("kvm", False, None, "kvm"),
    ("auto", False, None, "tcg"),
    ("auto", True, None, "probe"),
    ("auto", True, "tcg", "tcg"),
    ("auto", True, "kvm", "kvm"),
])
def test_pick_accel(requested, kvm, cached, expected):
    assert lab_vm.pick_accel(requested, kvm, cached) == expected


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "lab_vm")


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_kvm_support_on_the_ci_machine_is_pvm_and_unusable():
    cpuinfo = _fixture("cpuinfo-ci-machine.txt")
    modules = _fixture("sys-module-kvm-ci-machine.txt").split()
    usable, reason = lab_vm.kvm_support(cpuinfo, modules)
    assert not usable
    assert "kvm_pvm" in reason and "PVM-built" in reason
    assert lab_vm.kvm_support(cpuinfo, ["kvm"]) == (False, "no vmx/svm CPU flag")


def test_kvm_support_with_a_vmx_flag():
    # The captured flags with vmx added: what a host exposing Intel VT-x shows.
    cpuinfo = _fixture("cpuinfo-ci-machine.txt").replace("flags\t\t: ", "flags\t\t: vmx ")
    assert "vmx" in cpuinfo
    assert lab_vm.kvm_support(cpuinfo, ["kvm", "kvm_intel"]) == (True, "the CPU has vmx")


def test_pick_accel_rejects_unknown():
    with pytest.raises(lab_vm.VMError, match="GPUCLOUD_VM_ACCEL=hvf"):
        lab_vm.pick_accel("hvf", True, None)


def test_accel_cache_key_names_kernel_and_qemu():
    key = lab_vm.accel_cache_key("6.1.0-28-amd64", "QEMU emulator version 7.2.15")
    assert "6.1.0-28-amd64" in key and "7.2.15" in key


def test_is_vm_process():
    argv = lab_vm.qemu_argv(_state(), "tcg")
    argv[0] = "/usr/bin/qemu-system-x86_64"
    assert lab_vm.is_vm_process(argv, "/var/tmp/vms/f/gpu1")
    assert not lab_vm.is_vm_process(argv, "/var/tmp/vms/f/gpu2")
    assert not lab_vm.is_vm_process(["/usr/bin/sleep", "file=/var/tmp/vms/f/gpu1/disk.qcow2"],
                                    "/var/tmp/vms/f/gpu1")
    assert not lab_vm.is_vm_process([], "/var/tmp/vms/f/gpu1")


# ---- inventory -----------------------------------------------------------------------------

def test_inventory_host_for_a_vm():
    host = lab_vm.inventory_host(_state(), "/k/id_ed25519", "10.89.0.1")
    assert host["ansible_host"] == "127.0.0.1" and host["ansible_port"] == 40022
    assert host["ansible_connection"] == "ansible.builtin.ssh"
    assert host["ansible_user"] == "root"
    assert host["ansible_ssh_private_key_file"] == "/k/id_ed25519"
    assert "StrictHostKeyChecking=no" in host["ansible_ssh_common_args"]
    assert host["lab_ip"] == "10.89.0.1" and host["lab_kind"] == "vm"
    assert host["lab_vm_accel"] == "tcg" and host["lab_vm_guest_ip"] == "10.0.2.15"
    assert host["lab_forwarded_ports"] == {"9100": 41234}
    assert "NAT" in host["lab_vm_nat"] or "networking" in host["lab_vm_nat"]


def test_inventory_mixes_vms_and_containers(monkeypatch):
    monkeypatch.setattr(lab, "containers", lambda fleet=None: [
        {"name": "tang1", "fleet": "f", "groups": ["tang_servers"], "state": "running",
         "image": "x", "kind": "container"}])
    monkeypatch.setattr(lab, "container_ip", lambda name, fleet: "10.89.0.2")
    monkeypatch.setattr(lab, "network_gateway", lambda fleet: "10.89.0.1")
    monkeypatch.setattr(lab, "ssh_key", lambda: "/k/id_ed25519")
    vm = dict(_state(groups=["gpu_nodes"]), state="running")
    monkeypatch.setattr(lab.lab_vm, "load_states", lambda fleet=None: [vm])
    inv = lab.inventory("f", "podman")
    hosts = inv["all"]["children"]["lab"]["hosts"]
    assert hosts["gpu1"]["ansible_port"] == 40022 and hosts["gpu1"]["lab_kind"] == "vm"
    assert hosts["gpu1"]["lab_ip"] == "10.89.0.1"
    assert hosts["tang1"]["ansible_connection"] == "containers.podman.podman"
    assert hosts["tang1"]["lab_kind"] == "container"
    assert inv["all"]["children"]["gpu_nodes"] == {"hosts": {"gpu1": {}}}
    assert inv["all"]["children"]["tang_servers"] == {"hosts": {"tang1": {}}}
    text = lab.to_yaml(inv)
    assert '"9100": 41234' in text


def test_merge_hosts_replaces_only_the_lab_block():
    current = "127.0.0.1 localhost\n# gpucloud-lab begin\n10.0.0.9 old\n# gpucloud-lab end\n"
    merged = lab.merge_hosts(current, ["10.89.0.2 tang1"])
    assert merged == ("127.0.0.1 localhost\n# gpucloud-lab begin\n10.89.0.2 tang1\n"
                      "# gpucloud-lab end\n")
    assert lab.merge_hosts(merged, ["10.89.0.2 tang1"]) == merged
