# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""playbooks/remediate.yml picks the scheduler of the node it remediates, not of the fleet.

In a fleet with a Slurm partition for one profile (the example inventory's shape), a node of
another profile is not Slurm's: draining it with scontrol would fail on a node slurmctld does not
know. remediate.yml runs here for real in check mode (localhost connection, a state dir of the
test's own) and its printed plan names the scheduler of every step.
"""

import json
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[3]

INVENTORY = """\
all:
  children:
    gpu_nodes:
      children:
        a100_80g_pcie:
          hosts:
            gpu-a: {}
        h200_sxm:
          hosts:
            gpu-h: {}
    slurm_controllers:
      hosts:
        ctl: {}
    slurm_gpu_nodes:
      children:
        h200_sxm: {}
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
    gpucloud_profile_groups: [a100_80g_pcie, h200_sxm]
    remediation_state_dir: %s
"""


def _alert(node):
    return {"status": "firing", "startsAt": "2026-12-03T10:00:00Z",
            "labels": {"alertname": "GpuXidFatal", "node": node, "gpu": "0", "xid": "79", "class": "hw"}}


def _plan(tmp_path, node):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(INVENTORY % (tmp_path / "state"))
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    run = subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks" / "remediate.yml"), "--check",
         "-e", json.dumps({"remediate_node": node, "remediate_alert": _alert(node)})],
        cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=300, check=False)
    found = re.search(r'"msg": "remediation plan (\{.*\})"', run.stdout)
    assert found, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(found.group(1).encode().decode("unicode_escape"))


def _schedulers(plan):
    return sorted(set(step["scheduler"] for step in plan["steps"] if "scheduler" in step))


def test_a_node_outside_slurm_gpu_nodes_is_not_drained_through_slurm(tmp_path):
    assert _schedulers(_plan(tmp_path, "gpu-a")) == ["none"]


def test_a_slurm_gpu_node_is_drained_through_slurm(tmp_path):
    assert _schedulers(_plan(tmp_path, "gpu-h")) == ["slurm"]
