# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""slurm_controller's cluster_validate and slurm_gpu_node's validate.yml refuse bad settings by name
before any change (one ansible-playbook run on localhost; the task files only read, and gather the
facts of the local stand-in hosts)."""

import re

import pytest

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import case_play, run_cases

KEY = "lab-munge-key-0123456789-abcdefghijklmnopqrstuvwxyz"
PROFILE = {"name": "lab_h200", "gpu_model": "H200", "gpu_count": 8, "mig": False}
INVENTORY = """
all:
  hosts:
    localhost: {ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}"}
  children:
    slurm_controllers:
      hosts:
        ctl-01: {ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}"}
    slurm_gpu_nodes:
      hosts:
        gpu-01: {ansible_connection: local, ansible_python_interpreter: "{{ ansible_playbook_python }}",
                 gpucloud_profile: {name: lab_h200, gpu_model: H200, gpu_count: 8, mig: false}}
"""
CONTROLLER = {
    "good": ({"slurm_munge_key": KEY}, None),
    "no key": ({}, r"slurm_munge_key: missing or shorter than 32 characters"),
    "short key": ({"slurm_munge_key": "abc"}, r"slurm_munge_key: missing or shorter than 32 characters"),
    "cluster name": ({"slurm_munge_key": KEY, "slurm_cluster_name": "GPU Cloud"},
                     r"slurm_conf: slurm_cluster_name must be lower-case"),
    "stranger in a partition": ({"slurm_munge_key": KEY, "slurm_partitions": [{"name": "gpu", "nodes": ["gpu-99"]}]},
                                r"slurm_partitions\[0\]\.nodes names gpu-99, not in the slurm_gpu_nodes group"),
    "bad max_time": ({"slurm_munge_key": KEY, "slurm_partitions": [{"name": "gpu", "max_time": "forever"}]},
                     r"slurm_partitions\[0\]\.max_time must be a Slurm time"),
}
NODE = {
    "node good": ({"slurm_munge_key": KEY, "gpucloud_profile": PROFILE}, None),
    "node without a profile": ({"slurm_munge_key": KEY}, r"gpucloud_profile: localhost needs its hardware profile"),
    "node profile without GPUs": ({"slurm_munge_key": KEY, "gpucloud_profile": dict(PROFILE, gpu_count=0)},
                                  r"slurm_gres_plan: gpucloud_profile.gpu_count must be at least 1"),
    "node short key": ({"slurm_munge_key": "abc", "gpucloud_profile": PROFILE},
                       r"slurm_munge_key: missing or shorter than 32 characters"),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    work = tmp_path_factory.mktemp("slurm_validate")
    (work / "hosts.yml").write_text(INVENTORY)
    plays = [case_play(case, "slurm_controller", variables, tasks_from=("cluster_validate",))
             for case, (variables, _expected) in CONTROLLER.items()]
    plays += [case_play(case, "slurm_gpu_node", variables, tasks_from=("validate",))
              for case, (variables, _expected) in NODE.items()]
    return run_cases(work, plays, inventory=work / "hosts.yml")


@pytest.mark.parametrize("case", sorted(dict(CONTROLLER, **NODE)))
def test_each_bad_setting_is_refused_by_name(outcomes, case):
    result, _output = outcomes
    expected = dict(CONTROLLER, **NODE)[case][1]
    if expected is None:
        assert result[case]["task"] is None, result[case]
    else:
        assert result[case]["task"] is not None, (case, result[case])
        assert re.search(expected, result[case]["msg"]), (case, result[case])


def test_the_munge_key_never_reaches_the_output(outcomes):
    _result, output = outcomes
    assert KEY not in output
