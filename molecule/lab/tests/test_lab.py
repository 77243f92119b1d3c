"""Verify lab nodes on their real state (testinfra through Molecule's inventory)."""
import pytest

EXPECTED_DEBIAN = {"lab-debian12": "12", "lab-debian13": "13"}


def test_systemd_is_pid1_and_running(host):
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"
    state = host.run("systemctl is-system-running")
    assert state.stdout.strip() == "running", state.stdout + state.stderr


def test_debian_release_matches_platform(host):
    name = host.backend.get_hostname()
    assert host.system_info.distribution == "debian"
    assert host.system_info.release.split(".")[0] == EXPECTED_DEBIAN[name]


def test_python_runs(host):
    out = host.check_output("python3 -c 'import json, sys; print(sys.version_info[0])'")
    assert out == "3"


def test_converge_wrote_identity(host):
    f = host.file("/etc/gpucloud-lab")
    assert f.is_file and f.mode == 0o644 and f.user == "root"
    name = host.backend.get_hostname()
    lines = f.content_string.splitlines()
    assert "node=%s" % name in lines
    assert "debian=%s" % EXPECTED_DEBIAN[name] in lines


@pytest.mark.parametrize("peer", sorted(EXPECTED_DEBIAN))
def test_nodes_resolve_each_other_on_lab_network(host, peer):
    addr = host.check_output("getent hosts %s" % peer).split()[0]
    assert addr.count(".") == 3 and not addr.startswith("127.")


def test_sshd_runs_with_host_keys_of_its_own(host):
    # The image carries no host keys: each node makes its own at first boot (ssh.service drop-in).
    import subprocess
    assert host.service("ssh").is_running
    mine = host.file("/etc/ssh/ssh_host_ed25519_key.pub").content_string
    for peer in EXPECTED_DEBIAN:
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
