"""Verify the disk_encryption scenario on the real state of the Tang servers and nodes."""
import glob
import json
import os
import stat
import subprocess

import pytest

RECOVERY = "lab-recovery-passphrase-not-secret"
SERVERS = ["http://disk_encryption-tang12", "http://disk_encryption-tang2404"]
THRESHOLD = {"disk_encryption-node12": 2, "disk_encryption-node2404": 1}


def name(host):
    return host.backend.get_hostname()


def is_node(host):
    return name(host) in THRESHOLD


def loop_of(host, kind):
    image = "/var/tmp/disk_encryption-molecule-%s-%s.img" % (name(host), kind)
    out = host.check_output("losetup --noheadings --output NAME --associated %s", image)
    assert out, "no loop device on %s" % image
    return out.splitlines()[0].strip()


@pytest.fixture
def node(host):
    if not is_node(host):
        pytest.skip("encrypted node test")
    return host


@pytest.fixture
def tang(host):
    if is_node(host):
        pytest.skip("Tang server test")
    return host


def test_tang_socket_serves_keys(tang):
    sock = tang.service("tangd.socket")
    assert sock.is_enabled and sock.is_running
    keys = tang.check_output("tang-show-keys 80")
    assert keys.strip()
    # after the rotation in side_effect: two advertised keys, two hidden (rotated) ones
    listing = tang.check_output("ls -A /var/lib/tang").split()
    assert len([k for k in listing if k.endswith(".jwk") and not k.startswith(".")]) == 2
    assert len([k for k in listing if k.startswith(".") and k.endswith(".jwk")]) == 2


def test_volume_is_luks2_with_recovery_and_clevis_slots(node):
    dev = loop_of(node, "data")
    dump = node.check_output("cryptsetup luksDump %s", dev)
    assert "Version:       \t2" in dump or "Version: 2" in " ".join(dump.split())
    keyslots = dump.split("Keyslots:")[1].split("Tokens:")[0]
    assert "  0: luks2" in keyslots and "  1: luks2" in keyslots
    tokens = dump.split("Tokens:")[1].split("Digests:")[0]
    assert "clevis" in tokens and "Keyslot:    1" in tokens


def test_recovery_passphrase_opens_slot0(node):
    dev = loop_of(node, "data")
    cmd = node.run("printf %%s %s | cryptsetup open --test-passphrase --key-slot 0 --key-file - %s",
                   RECOVERY, dev)
    assert cmd.rc == 0, cmd.stderr


def test_clevis_binding_matches_servers_and_threshold(node):
    dev = loop_of(node, "data")
    out = node.check_output("clevis luks list -d %s -s 1", dev)
    assert out.startswith("1: sss '")
    cfg = json.loads(out.split("'", 1)[1].rsplit("'", 1)[0])
    assert cfg["t"] == THRESHOLD[name(node)]
    assert sorted(p["url"] for p in cfg["pins"]["tang"]) == SERVERS


def test_tang_unlocks_the_volume(node):
    dev = loop_of(node, "data")
    # testinfra runs commands with /bin/sh; pipefail needs bash
    cmd = node.run("bash -c 'set -o pipefail; clevis luks pass -d %s -s 1 | "
                   "cryptsetup open --test-passphrase --key-slot 1 --key-file - %s'" % (dev, dev))
    assert cmd.rc == 0, cmd.stderr


def test_binding_is_current_after_rotation(node):
    dev = loop_of(node, "data")
    cmd = node.run("clevis luks report -q -d %s -s 1", dev)
    assert cmd.rc == 0, cmd.stdout + cmd.stderr


def test_crypttab_and_fstab(node):
    dev = loop_of(node, "data")
    uuid = node.check_output("cryptsetup luksUUID %s", dev).strip()
    crypttab = [line.split() for line in node.file("/etc/crypttab").content_string.splitlines()
                if line.strip() and not line.startswith("#")]
    assert ["checkpoints", "UUID=" + uuid, "none", "luks,_netdev,nofail"] in crypttab
    fstab = [line.split() for line in node.file("/etc/fstab").content_string.splitlines()
             if line.strip() and not line.startswith("#")]
    entry = [f for f in fstab if f[1] == "/data/checkpoints"]
    assert len(entry) == 1
    assert entry[0][0] == "/dev/mapper/checkpoints" and entry[0][2] == "xfs"
    assert set(entry[0][3].split(",")) == {"defaults", "noatime", "_netdev", "nofail"}
    assert node.file("/data/checkpoints").is_directory


def test_no_device_mapper_so_not_opened(node):
    # This lab kernel has no device-mapper: the role must not pretend it opened the volume.
    assert not node.file("/sys/module/dm_mod").exists
    assert not node.file("/dev/mapper/checkpoints").exists
    assert not node.mount_point("/data/checkpoints").exists


def test_ext4_disk_left_alone(node):
    dev = loop_of(node, "ext4")
    assert node.run("cryptsetup isLuks %s", dev).rc != 0
    assert node.check_output("blkid -o value -s LABEL %s", dev) == "lab-keep-me"


def test_clevis_systemd_installed(node):
    for pkg in ("clevis-luks", "clevis-systemd", "cryptsetup-bin"):
        assert node.package(pkg).is_installed


def test_header_backup_on_controller(node):
    root = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    assert root, "MOLECULE_EPHEMERAL_DIRECTORY is not set"
    dev = loop_of(node, "data")
    uuid = node.check_output("cryptsetup luksUUID %s", dev).strip()
    path = os.path.join(root, "luks-headers", name(node), "checkpoints-%s.img" % uuid)
    assert os.path.isfile(path), glob.glob(os.path.join(root, "luks-headers", "*", "*"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # the backup is a LUKS header of the same volume, with the rebound Clevis token
    dump = subprocess.run(["cryptsetup", "luksDump", path], capture_output=True, text=True, check=True).stdout
    assert ("UUID:          \t%s" % uuid) in dump or uuid in dump
    assert "clevis" in dump
