# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.container_runtime's task files on localhost: validate.yml refuses bad settings by
name, and docker.yml merges a real daemon.json in a temporary folder (check mode, write, re-run).
The lab has no dockerd, so this is where the Docker path runs through Ansible."""


import json
import re
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ansible_env, assert_outcomes, case_play, run_cases, run_playbook

# Modules run on localhost (set_vars gathers facts, docker.yml writes files): with the test's own Python.
ENV = ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable)
GOOD = {"container_runtime_source": "nvidia", "gpucloud_version_lock": {"container_toolkit": "1.17.8"}}

CASES = {
    "good": ({}, None),
    "none_without_version": ({"container_runtime_source": "none", "gpucloud_version_lock": {}}, None),
    "no_version": ({"gpucloud_version_lock": {}}, "container_runtime_version must be"),
    "short_version": ({"container_runtime_version": "1.17"}, "container_runtime_version must be"),
    "bad_source": ({"container_runtime_source": "cuda_repo"}, "container_runtime_source=cuda_repo is not available"),
    "mirror_without_key": ({"container_runtime_source": "mirror", "container_runtime_mirror_url": "http://m/"},
                           "needs container_runtime_mirror_url"),
    "relative_path": ({"container_runtime_containerd_config": "containerd.toml"},
                      "container_runtime_containerd_config must be an absolute path"),
    "cdi_extension": ({"container_runtime_cdi_spec": "/etc/cdi/nvidia.yml"}, "reads only \\*.yaml and \\*.json"),
}


def test_validate_refuses_bad_settings_by_name(tmp_path):
    plays = [case_play(case, "container_runtime", dict(GOOD, **overrides), tasks_from=("set_vars", "validate"))
             for case, (overrides, _expected) in CASES.items()]
    outcomes, _output = run_cases(tmp_path, plays, env=ENV)
    assert_outcomes(outcomes, CASES)


def docker_play(config, set_default=False):
    return [{
        "name": "Docker", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"container_runtime_docker_config": str(config), "container_runtime_set_default": set_default,
                 "__container_runtime_has_docker": True, "__container_runtime_docker_active": False},
        "tasks": [{"name": "Run docker.yml", "ansible.builtin.include_role": {
            "name": "gpucloud.fleet.container_runtime", "tasks_from": "docker"}}],
    }]


def recap(output):
    match = re.search(r"localhost\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=(\d+)", output)
    assert match, output[-3000:]
    return int(match.group(1)), int(match.group(2))


EXISTING = {"log-driver": "json-file", "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}, "live-restore": True}


@pytest.mark.parametrize("existing", [EXISTING, None])
def test_docker_daemon_json_check_write_rerun(tmp_path, existing):
    config = tmp_path / "docker" / "daemon.json"
    if existing is not None:
        config.parent.mkdir()
        config.write_text(json.dumps(existing, indent=2) + "\n")
    before = config.read_text() if existing is not None else None
    playbook = tmp_path / "docker.yml"
    playbook.write_text(yaml.safe_dump(docker_play(config), sort_keys=False))

    checked = run_playbook(tmp_path, playbook, args=["--check", "--diff"], env=ENV)
    assert recap(checked.stdout)[1] == 0 and recap(checked.stdout)[0] >= 1
    assert (config.read_text() if config.exists() else None) == before
    assert '"nvidia"' in checked.stdout  # the diff shows the runtime to be added

    first = run_playbook(tmp_path, playbook, env=ENV)
    assert recap(first.stdout)[1] == 0 and recap(first.stdout)[0] >= 1
    written = json.loads(config.read_text())
    assert written["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime", "args": []}
    assert "default-runtime" not in written
    if existing is not None:
        assert list(written) == list(existing)
        assert written["runtimes"]["kata"] == existing["runtimes"]["kata"] and written["live-restore"] is True
    # dockerd is not running here: nothing is restarted, the role says when the file is read.
    assert "Docker reads the file at its next start" in first.stdout

    again = run_playbook(tmp_path, playbook, env=ENV)
    assert recap(again.stdout) == (0, 0)


def test_check_mode_with_nvidias_repository_needs_no_network(tmp_path):
    """site.yml --check on fresh nodes (molecule/example_check) must not reach NVIDIA: get_url
    sends a HEAD request even in check mode, so the role reports the key it would fetch."""
    play = [{
        "name": "Repository", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": dict(GOOD, container_runtime_nvidia_repo_key_url="http://127.0.0.1:9/gpgkey",
                     __container_runtime_keyring_dir=str(tmp_path / "keyrings"),
                     __container_runtime_nvidia_list=str(tmp_path / "absent.list")),
        "tasks": [{"name": "Run %s.yml" % name, "ansible.builtin.include_role": {
            "name": "gpucloud.fleet.container_runtime", "tasks_from": name}} for name in ("set_vars", "repository")],
    }]
    playbook = tmp_path / "repository.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    run = run_playbook(tmp_path, playbook, args=["--check"], env=ENV)
    changed, failed = recap(run.stdout)
    assert failed == 0 and changed >= 2, run.stdout[-3000:]
    assert "Would fetch http://127.0.0.1:9/gpgkey" in run.stdout
    assert not (tmp_path / "keyrings").exists()
