"""Verify lab nodes on their real state (testinfra through Molecule's inventory)."""
import pytest

# (distribution, release, Python minor): what each image's archive ships.
EXPECTED = {"lab-debian12": ("debian", "12", 11), "lab-debian13": ("debian", "13", 13),
            "lab-ubuntu2404": ("ubuntu", "24.04", 12), "lab-ubuntu2204": ("ubuntu", "22.04", 10)}


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    assert state.stdout.strip() == "running", state.stdout + state.stderr


def test_release_matches_platform(host):
    distribution, release = EXPECTED[host.backend.get_hostname()][:2]
    assert host.system_info.distribution == distribution
    if distribution == "debian":
        assert host.system_info.release.split(".")[0] == release
    else:
        assert host.system_info.release == release


def test_python_is_the_archives(host):
    # Code that runs on nodes must work on each of these (Ubuntu 22.04: 3.10, no tomllib).
    out = host.check_output("python3 -c 'import sys; print(sys.version_info[0], sys.version_info[1])'")
    assert out == "3 %d" % EXPECTED[host.backend.get_hostname()][2]


def test_apt_trusts_the_archive_of_its_own_os(host):
    # The sources name every component (Debian non-free, Ubuntu restricted and multiverse:
    # the NVIDIA driver packages live there) and a keyring the image carries.
    distribution = EXPECTED[host.backend.get_hostname()][0]
    sources = host.file("/etc/apt/sources.list.d/%s.sources" % distribution)
    assert sources.is_file
    wanted = "non-free" if distribution == "debian" else "restricted universe multiverse"
    assert wanted in sources.content_string
    keyring = sources.content_string.split("Signed-By:")[1].split()[0]
    assert host.file(keyring).is_file


def test_ubuntu_images_offer_the_frozen_driver_snapshot(host):
    # scripts/build-images.sh: the lab's exact Ubuntu driver build comes from the image's
    # snapshot (scripts/ubuntu-nvidia-snapshot.lock), whatever the archive's index lists today.
    distribution, release = EXPECTED[host.backend.get_hostname()][:2]
    if distribution != "ubuntu":
        assert not host.file("/etc/apt/sources.list.d/gpucloud-lab-snapshot.sources").exists
        return
    host.check_output("apt-get update -qq")  # the lab's nodes are reached as root
    build = "580.178.04-0ubuntu0.%s.1" % release
    madison = host.check_output("apt-cache madison nvidia-utils-580-server nvidia-fabricmanager-580")
    offered = [line.split("|")[1].strip() for line in madison.splitlines()
               if "file:/var/lib/gpucloud-lab/ubuntu-snapshot" in line]
    assert offered == [build, build], madison


def test_converge_wrote_identity(host):
    f = host.file("/etc/gpucloud-lab")
    assert f.is_file and f.mode == 0o644 and f.user == "root"
    name = host.backend.get_hostname()
    lines = f.content_string.splitlines()
    assert "node=%s" % name in lines
    distribution, release = EXPECTED[name][:2]
    assert any(line.startswith("os=%s %s" % (distribution.capitalize(), release)) for line in lines), lines


@pytest.mark.parametrize("peer", sorted(EXPECTED))
def test_nodes_resolve_each_other_on_lab_network(host, peer):
    addr = host.check_output("getent hosts %s" % peer).split()[0]
    assert addr.count(".") == 3 and not addr.startswith("127.")


def test_sshd_runs_with_host_keys_of_its_own(host):
    # The image carries no host keys: each node makes its own at first boot (ssh.service drop-in).
    import subprocess
    assert host.service("ssh").is_running
    mine = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string
    for peer in EXPECTED:
        if peer != host.backend.get_hostname():
            theirs = subprocess.run(["podman", "exec", peer, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"],
                                    capture_output=True, text=True, check=True).stdout
            assert theirs and theirs != mine


def test_lab_key_logs_in_over_the_lab_network(host):
    # What `lab.py inventory --transport ssh` relies on: root login with the lab key.
    import os
    import subprocess
    key = os.environ.get("GPUCLOUD_LAB_SSH_KEY", "/var/tmp/gpucloud-lab/ssh/id_ed25519")
    address = host.check_output("ip -4 -o addr show scope global | awk '{print $4}' | cut -d/ -f1 | head -1")
    proc = subprocess.run(
        ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
         "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "root@" + address, "hostname"],
        capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == host.backend.get_hostname()
