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
