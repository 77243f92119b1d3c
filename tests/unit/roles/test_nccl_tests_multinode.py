# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nccl_fabric's multi-node nccl-tests (issue 15, item 14), run through the role's tasks.

ansible-playbook on local connections: three inventory hosts in two fabric groups, a
stand-in mpirun that records its argv and environment and prints a captured nccl-tests log
(tests/fixtures/public/nccl_tests). Proves one launch per fabric group (a mixed batch),
ranks reached at their fleet addresses, PATH/LD_LIBRARY_PATH handed on with -x, and the
refusals (DROP firewall without fleet CIDRs, a host without a fleet address).
"""


import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTIONS = os.path.join(ROOT, ".cache", "collections")
LOG = os.path.join(ROOT, "tests", "fixtures", "public", "nccl_tests", "h100-a3mega-2node-16gpu-gcp-ztan.txt")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the role writes its log and result owned by root")

MPIRUN = """#!/bin/sh
printf '%s\\n' "$(hostname)|PATH=$PATH|LD_LIBRARY_PATH=$LD_LIBRARY_PATH|$*" >> "$(dirname "$0")/../calls.txt"
cat "{log}"
"""


def _run(tmp_path, host_vars, extra):
    mpi = tmp_path / "mpi"
    (mpi / "bin").mkdir(parents=True)
    (mpi / "bin" / "mpirun").write_text(MPIRUN.format(log=LOG))
    (mpi / "bin" / "mpirun").chmod(0o755)
    tests = tmp_path / "nccl-tests" / "build"
    tests.mkdir(parents=True)
    (tests / "all_reduce_perf").write_text("")
    common = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "nccl_fabric_run_nccl_tests": True, "nccl_fabric_nccl_tests_mode": "multi",
        "nccl_fabric_nccl_tests_mpi_home": str(mpi), "nccl_fabric_nccl_tests_dir": str(tmp_path / "nccl-tests"),
        "nccl_fabric_nccl_tests_log": str(tmp_path) + "/{{ inventory_hostname }}.log",
        "nccl_fabric_nccl_tests_result": str(tmp_path) + "/{{ inventory_hostname }}.json",
    }
    common.update(extra)
    inventory = {"all": {"vars": common, "children": {
        "fabric_a": {"hosts": {"a1": host_vars.get("a1", {}), "a2": host_vars.get("a2", {})},
                     "vars": {"nccl_fabric_group": "fabric_a"}},
        "fabric_b": {"hosts": {"b1": host_vars.get("b1", {})}, "vars": {"nccl_fabric_group": "fabric_b"}},
    }}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    play = [{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Run nccl-tests", "ansible.builtin.include_role": {
            "name": "gpucloud.fleet.nccl_fabric", "tasks_from": "nccl_tests"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"),
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_STDOUT_CALLBACK="json")
    run = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i",
                          str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")], cwd=str(tmp_path), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300,
                         check=False)
    calls = tmp_path / "mpi" / "calls.txt"
    return run, (calls.read_text().splitlines() if calls.exists() else [])


def _failures(run):
    start = run.stdout.find("{")
    report = json.loads(run.stdout[start:])
    return dict((host, result.get("msg", "")) for play in report["plays"] for task in play["tasks"]
                for host, result in task["hosts"].items() if result.get("failed"))


ADDRESSES = {"a1": {"nccl_fabric_nccl_tests_address": "10.30.1.1"},
             "a2": {"nccl_fabric_nccl_tests_address": "10.30.1.2"},
             "b1": {"nccl_fabric_nccl_tests_address": "10.30.2.1"}}


def test_one_launch_per_fabric_group_at_fleet_addresses(tmp_path):
    run, calls = _run(tmp_path, ADDRESSES, {"firewall_fleet_cidrs": ["10.30.0.0/16"]})
    assert run.returncode == 0, run.stdout[-3000:]
    assert len(calls) == 2, calls
    argv = dict((call.split("|")[3].split(" -H ")[1].split()[0], call) for call in calls)
    assert sorted(argv) == ["10.30.1.1:8,10.30.1.2:8", "10.30.2.1:8"]
    group_a = argv["10.30.1.1:8,10.30.1.2:8"]
    assert " -np 16 " in group_a
    mpi = str(tmp_path / "mpi")
    assert "-x PATH=%s/bin:/usr/local/cuda/bin:" % mpi in group_a
    assert "-x LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/lib:%s/lib" % mpi in group_a
    assert "|PATH=%s/bin:" % mpi in group_a
    assert (tmp_path / "a1.json").exists() and (tmp_path / "b1.json").exists()
    assert not (tmp_path / "a2.json").exists()


def test_drop_policy_without_fleet_cidrs_is_refused(tmp_path):
    run, calls = _run(tmp_path, ADDRESSES, {})
    assert run.returncode != 0
    assert calls == []
    failures = _failures(run)
    assert sorted(failures) == ["a1", "b1"]
    assert "input policy is DROP" in failures["a1"] and "firewall_fleet_cidrs is empty" in failures["a1"]


def test_accept_policy_needs_no_fleet_cidrs(tmp_path):
    run, calls = _run(tmp_path, ADDRESSES, {"nccl_fabric_nccl_tests_firewall_input_policy": "ACCEPT"})
    assert run.returncode == 0, run.stdout[-3000:]
    assert len(calls) == 2


def test_host_without_fleet_address_is_refused(tmp_path):
    hosts = dict(ADDRESSES, a2={})
    run, calls = _run(tmp_path, hosts, {"firewall_fleet_cidrs": ["10.30.0.0/16"]})
    failures = _failures(run)
    assert "a1" in failures and "no fleet network address for a2" in failures["a1"]
    assert "ansible_host" not in failures["a1"]
    assert [call for call in calls if "10.30.1." in call] == []
