# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpucloud.fleet.container_runtime's task files on localhost: validate.yml refuses bad settings by
name, and docker.yml merges a real daemon.json in a temporary folder (check mode, write, re-run).
The lab has no dockerd, so this is where the Docker path runs through Ansible."""


import json
import os
import re
import stat
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text
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


EXISTING = {"log-driver": "json-file", "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}}, "live-restore": True,
            "proxies": {"http-proxy": "http://build:s3cr3t-proxy@proxy.example.com:3128"}}


@pytest.mark.parametrize("existing", [EXISTING, None])
def test_docker_daemon_json_check_write_rerun(tmp_path, existing):
    config = tmp_path / "docker" / "daemon.json"
    if existing is not None:
        config.parent.mkdir()
        config.write_text(json.dumps(existing, indent=2) + "\n")
        os.chmod(config, 0o600)
    before = config.read_text() if existing is not None else None
    playbook = tmp_path / "docker.yml"
    playbook.write_text(yaml.safe_dump(docker_play(config), sort_keys=False))

    checked = run_playbook(tmp_path, playbook, args=["--check", "--diff", "-vvv"], env=ENV)
    assert recap(checked.stdout)[1] == 0 and recap(checked.stdout)[0] >= 1
    assert (config.read_text() if config.exists() else None) == before
    assert "added runtime nvidia" in checked.stdout  # the summary says what would change
    # Issue 28 item 3: daemon.json's text (proxy credentials) reaches neither --diff nor -vvv.
    assert "s3cr3t-proxy" not in checked.stdout and "kata-runtime" not in checked.stdout

    first = run_playbook(tmp_path, playbook, args=["--diff", "-vvv"], env=ENV)
    assert recap(first.stdout)[1] == 0 and recap(first.stdout)[0] >= 1
    assert "s3cr3t-proxy" not in first.stdout
    # An existing file keeps its mode (0600 is never widened); a new one is 0600.
    assert stat.S_IMODE(os.stat(config).st_mode) == 0o600
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


def test_daemon_json_that_is_not_json_fails_by_name(tmp_path):
    config = tmp_path / "daemon.json"
    config.write_text('{"proxies": {"http-proxy": "http://u:s3cr3t@p:3128"}')
    playbook = tmp_path / "docker.yml"
    playbook.write_text(yaml.safe_dump(docker_play(config), sort_keys=False))
    run = run_playbook(tmp_path, playbook, env=ENV)
    assert recap(run.stdout)[1] == 1
    assert "docker_nvidia_runtime: daemon.json is not valid JSON" in run.stdout


def containerd_play(config, toml_packages):
    fixture = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "containerd", "default-1.7.24.toml")
    return [{
        "name": "containerd", "hosts": "localhost", "connection": "local", "gather_facts": True,
        "vars": {"container_runtime_containerd_config": str(config), "__container_runtime_has_containerd": True,
                 "__container_runtime_containerd_active": False, "__container_runtime_containerd_version": "1.7.24",
                 "__container_runtime_toml_packages": toml_packages},
        "tasks": [
            {"name": "Run containerd.yml", "ansible.builtin.include_role": {
                "name": "gpucloud.fleet.container_runtime", "tasks_from": "containerd"}}],
    }], fixture


@pytest.mark.parametrize("python_before_311", [True, False])
def test_a_python_without_tomllib_gets_python3_tomli_first(tmp_path, monkeypatch, python_before_311):
    """Issue 27: on Ubuntu 22.04 (Python 3.10) the module needs python3-tomli. Here (Python 3.11+) the
    fact's answer is the real one; the Python 3.10 case comes in as an extra var, since the facts are this host's."""
    config = tmp_path / "config.toml"
    play, fixture = containerd_play(config, ["python3-tomli-gpucloud-absent"])
    (tmp_path / "config").write_text("")
    with open(fixture) as handle:
        (tmp_path / "default").write_text(handle.read())
    monkeypatch.chdir(tmp_path)
    playbook = tmp_path / "containerd.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    # 'cat config default' stands in for 'containerd config default' (a file named default); role
    # vars outrank play vars, so it comes in as an extra var.
    extra = {"__container_runtime_containerd_bin": "/bin/cat"}
    if python_before_311:
        extra["__container_runtime_needs_tomli"] = True
    extra = ["-e", json.dumps(extra)]
    run = run_playbook(tmp_path, playbook, args=["--check"] + extra, env=ENV)
    assert recap(run.stdout)[1] == 0, run.stdout[-3000:]
    if python_before_311:
        assert "SKIPPED containerd config check: python3-tomli-gpucloud-absent is not installed yet" in run.stdout
    else:
        assert "python3-tomli-gpucloud-absent" not in run.stdout
        assert "added runtime nvidia" in run.stdout
    assert not config.exists()


def test_a_symlinked_daemon_json_is_written_through_with_its_mode(tmp_path):
    target = tmp_path / "managed.json"
    target.write_text(json.dumps(EXISTING) + "\n")
    os.chmod(target, 0o600)
    config = tmp_path / "daemon.json"
    config.symlink_to(target)
    playbook = tmp_path / "docker.yml"
    playbook.write_text(yaml.safe_dump(docker_play(config), sort_keys=False))
    run = run_playbook(tmp_path, playbook, env=ENV)
    assert recap(run.stdout)[1] == 0
    assert config.is_symlink() and "nvidia" in json.loads(target.read_text())["runtimes"]
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600


MIG_2X3G = ("GPU 0: NVIDIA H200 (UUID: GPU-4fc604de-9030-742c-d69f-594418e871d5)\n"
            "  MIG 3g.71gb     Device  0: (UUID: MIG-0a1b2c3d-0000-5000-8000-000000000001)\n"
            "  MIG 3g.71gb     Device  1: (UUID: MIG-0a1b2c3d-0000-5000-8000-000000000002)\n")
MIG_7X1G = MIG_2X3G.splitlines(True)[0] + "".join(
    "  MIG 1g.18gb     Device  %d: (UUID: MIG-0a1b2c3d-0000-5000-8000-00000000001%d)\n" % (n, n) for n in range(7))


def test_the_cdi_spec_follows_the_mig_layout(tmp_path):
    """Issue 28 item 9: cdi.yml on localhost with a stand-in nvidia-smi and nvidia-ctk. A MIG layout
    change (gpucloud.fleet.gpu_sharing runs first) regenerates the spec; the same layout keeps it."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "scripts", "nvsim"))
    import nvsim_ctk  # pylint: disable=import-outside-toplevel
    spec_source = tmp_path / "generated.yaml"
    spec_source.write_text(nvsim_ctk.render(nvsim_ctk.build_spec("h200-hgx8", "580.95.05"), "x.yaml"))
    proc = tmp_path / "version"
    proc.write_text(fixture_text("h200-ubuntu2404-driver580", "proc_driver_nvidia_version.txt"))
    layout = tmp_path / "layout.txt"
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n[ \"$1\" = -L ] && exec cat %s\nexit 9\n" % layout)
    ctk = tmp_path / "nvidia-ctk"
    calls = tmp_path / "ctk-calls"
    ctk.write_text("#!/bin/sh\necho \"$*\" >> %s\ncp %s \"${3#--output=}\"\n" % (calls, spec_source))
    for tool in (smi, ctk):
        os.chmod(tool, 0o755)
    record = tmp_path / "record" / "cdi-driver-version"
    play = [{
        "name": "CDI", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars": {"container_runtime_cdi_spec": str(tmp_path / "cdi" / "nvidia.yaml"),
                 "__container_runtime_driver_package_regex": "^$"},
        "tasks": [{"name": "Read the packages", "ansible.builtin.package_facts": {"manager": "auto"}},
                  {"name": "Run cdi.yml", "ansible.builtin.include_role": {
                      "name": "gpucloud.fleet.container_runtime", "tasks_from": "cdi"}}],
    }]
    (tmp_path / "cdi").mkdir()
    playbook = tmp_path / "cdi.yml"
    playbook.write_text(yaml.safe_dump(play, sort_keys=False))
    extra = ["-e", json.dumps({"__container_runtime_proc_version_file": str(proc), "__container_runtime_nvidia_smi": str(smi),
                               "__container_runtime_ctk": str(ctk), "__container_runtime_cdi_record": str(record)})]

    def run():
        result = run_playbook(tmp_path, playbook, args=extra, env=ENV)
        assert recap(result.stdout)[1] == 0, result.stdout[-3000:]
        return result.stdout

    layout.write_text(MIG_2X3G)
    run()
    assert record.read_text().startswith("580.159.04\nlayout sha256:")
    assert len(calls.read_text().splitlines()) == 1
    run()
    assert len(calls.read_text().splitlines()) == 1  # the same layout: the spec is kept
    first_record = record.read_text()
    layout.write_text(MIG_7X1G)
    run()
    assert len(calls.read_text().splitlines()) == 2 and record.read_text() != first_record
