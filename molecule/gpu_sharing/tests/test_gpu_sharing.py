"""Verify gpucloud.fleet.gpu_sharing on the lab nodes' real unit, process and file state."""
import json
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA = os.path.join(ROOT, "roles", "gpu_sharing", "files", "schemas", "mig-parted-config-v1.schema.json")
UNIT = "nvidia-cuda-mps-control.service"
PIPE = "/run/nvidia-mps"
# Anchored: host.run's own `sh -c "pgrep ..."` holds the pattern too, and would match it.
DAEMON = "pgrep -f '^/usr/bin/nvidia-cuda-mps-control -d'"


def _mps_node(host):
    if host.backend.get_hostname() != "gpu_sharing-mps":
        pytest.skip("MPS runs on gpu_sharing-mps only")


def _control(host, command):
    return host.run("echo %s | CUDA_MPS_PIPE_DIRECTORY=%s nvidia-cuda-mps-control" % (command, PIPE))


def test_mps_daemon_runs_as_a_service(host):
    _mps_node(host)
    assert host.package("nvidia-cuda-mps").is_installed
    service = host.service(UNIT)
    assert service.is_enabled
    assert service.is_running
    assert host.run(DAEMON).rc == 0


def test_mps_daemon_answers_get_server_list(host):
    _mps_node(host)
    out = _control(host, "get_server_list")
    # No client has asked for a server, so the list is empty; rc 0 says the daemon answered
    # on the pipe. Without a daemon the command fails.
    assert out.rc == 0, out.stderr
    assert host.run("CUDA_MPS_PIPE_DIRECTORY=/tmp/gpucloud-no-daemon sh -c 'echo get_server_list | nvidia-cuda-mps-control'").rc != 0


def test_mps_limits_reach_the_daemons_environment(host):
    _mps_node(host)
    pid = host.run("systemctl show -p MainPID --value %s" % UNIT).stdout.strip()
    assert pid not in ("", "0")
    environ = host.run("tr '\\0' '\\n' < /proc/%s/environ" % pid).stdout.splitlines()
    # 4 replicas: 100 / 4 percent of the threads; 80000 MiB / 4 on each of the 2 GPUs.
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in environ
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20000M,1=20000M" in environ
    assert "CUDA_MPS_PIPE_DIRECTORY=%s" % PIPE in environ


def test_mps_stop_and_start(host):
    _mps_node(host)
    assert host.run("systemctl stop %s" % UNIT).rc == 0
    assert not host.service(UNIT).is_running
    assert host.run(DAEMON).rc == 1
    assert _control(host, "get_server_list").rc != 0
    assert host.run("systemctl start %s" % UNIT).rc == 0
    assert _control(host, "get_server_list").rc == 0


def test_no_mps_where_the_profile_time_slices(host):
    if host.backend.get_hostname() != "gpu_sharing-mig":
        pytest.skip("the time-slicing node")
    assert not host.file("/etc/systemd/system/%s" % UNIT).exists
    # Anchored: host.run's own `sh -c "pgrep ..."` holds the pattern too.
    assert host.run("pgrep -f '^/bin/sleep infinity'").rc == 1
    assert host.run("systemctl is-enabled %s" % UNIT).rc != 0


def test_mig_config_written_and_strict(host):
    if host.backend.get_hostname() != "gpu_sharing-mig":
        pytest.skip("the MIG node")
    jsonschema = pytest.importorskip("jsonschema")
    text = host.file("/etc/gpucloud/mig-parted.yaml").content_string
    config = yaml.safe_load(text)
    with open(SCHEMA) as handle:
        jsonschema.Draft202012Validator(json.load(handle)).validate(config)
    assert config["mig-configs"] == {"all-1g.10gb": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}


def test_mig_layout_recreated_at_boot(host):
    if host.backend.get_hostname() != "gpu_sharing-mig":
        pytest.skip("the MIG node")
    script = host.file("/usr/local/sbin/gpucloud-mig-layout")
    assert script.mode == 0o755
    assert "-cgi 1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb,1g.10gb -C" in script.content_string
    assert host.run("sh -n /usr/local/sbin/gpucloud-mig-layout").rc == 0
    assert host.service("gpucloud-mig-layout.service").is_enabled


def test_nvidia_mig_manager_unit_masked_on_every_node(host):
    """One owner of the boot-time MIG layout: NVIDIA's unit (all-disabled at boot) is masked."""
    assert host.run("systemctl is-enabled nvidia-mig-manager.service").stdout.strip() == "masked"
    assert host.file("/etc/systemd/system/nvidia-mig-manager.service").linked_to == "/dev/null"


def test_boot_unit_orders_after_fabric_manager(host):
    if host.backend.get_hostname() != "gpu_sharing-mig":
        pytest.skip("the MIG node")
    unit = host.file("/etc/systemd/system/gpucloud-mig-layout.service").content_string
    assert "After=nvidia-persistenced.service nvidia-fabricmanager.service" in unit
