"""pytest plugin for every scenario's testinfra verifier (loaded via PYTEST_PLUGINS).

Molecule points testinfra at its Ansible inventory. testinfra's ansible backend does
not know the podman connection and falls back to running one Ansible ad-hoc module
per check (seconds each). Lab nodes reached with containers.podman.podman are
rewritten here to testinfra's native podman:// backend (a plain `podman exec`);
any other host stays on ansible://.
"""
from testinfra.utils.ansible_runner import AnsibleRunner

PODMAN_CONNECTIONS = ("podman", "containers.podman.podman")


def pytest_configure(config):
    inventory = getattr(config.option, "ansible_inventory", None)
    if not inventory or config.option.hosts:
        return
    runner = AnsibleRunner(inventory)
    specs = []
    for name in runner.get_hosts("all"):
        hostvars = runner.get_variables(name)
        if hostvars.get("ansible_connection") in PODMAN_CONNECTIONS:
            specs.append("podman://%s" % hostvars.get("ansible_host", name))
        else:
            specs.append("ansible://%s" % name)
    if specs:
        config.option.hosts = ",".join(specs)
