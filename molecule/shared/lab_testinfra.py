"""pytest plugin for every scenario's testinfra verifier (loaded via PYTEST_PLUGINS).

Molecule points testinfra at its Ansible inventory. Lab containers are checked through
testinfra's native podman:// backend (a plain `podman exec`), whether the scenario reaches
them with the podman connection or over SSH:
- testinfra's ansible backend does not know the podman connection and falls back to one
  Ansible ad-hoc module per check (seconds each);
- its SSH backend takes exit status 255 for an SSH failure, and nvidia-smi exits 255 when
  it cannot reach a driver, which is what the lab's GPU-less containers must show.
Any other host (a lab VM) stays on ansible://.
"""
import subprocess

from testinfra.utils.ansible_runner import AnsibleRunner

PODMAN_CONNECTIONS = ("podman", "containers.podman.podman")
LAB_LABEL = "gpucloud.lab"  # scripts/lab.py LABEL_LAB


def lab_containers():
    """Names of the running lab containers (none when podman is missing)."""
    try:
        proc = subprocess.run(["podman", "ps", "--filter", "label=%s=1" % LAB_LABEL, "--format", "{{.Names}}"],
                              capture_output=True, text=True, check=False)
    except OSError:
        return set()
    return set(proc.stdout.split()) if proc.returncode == 0 else set()


def pytest_configure(config):
    inventory = getattr(config.option, "ansible_inventory", None)
    if not inventory or config.option.hosts:
        return
    runner = AnsibleRunner(inventory)
    containers = lab_containers()
    specs = []
    for name in runner.get_hosts("all"):
        hostvars = runner.get_variables(name)
        if hostvars.get("ansible_connection") in PODMAN_CONNECTIONS:
            specs.append("podman://%s" % hostvars.get("ansible_host", name))
        elif name in containers:
            specs.append("podman://%s" % name)
        else:
            specs.append("ansible://%s" % name)
    if specs:
        config.option.hosts = ",".join(specs)
