# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Issue 28 item 13, across the roles: a validate.yml check written with '$' lets a value with a
trailing newline through ('$' also matches before a final newline); each check here ends with \\Z.

One ansible-playbook run on localhost (connection local; validate.yml only reads variables)
applies every case as its own play and records which task refused it.
"""


import os
import sys

import pytest
import yaml

from ansible_collections.gpucloud.fleet.tests.unit.roles.playbook_cases import ROOT, ansible_env, case_play, run_cases

# host_prep checks everything in one plan (plugins/plugin_utils/host_prep.py), one task.
HOST_PREP = "Check the settings and plan the sysctl profile"

# (case id, role, variables, task expected to refuse it or None)
CASES = [
    ("host-prep-timeout-newline", "host_prep", {"host_prep_reboot_timeout": "900\n"}, HOST_PREP),
    ("host-prep-cmdline-newline", "host_prep", {"host_prep_kernel_cmdline": ["iommu=pt\n"]}, HOST_PREP),
    ("host-prep-cmdline-ok", "host_prep", {"host_prep_kernel_cmdline": ["iommu=pt", "quiet"]}, None),
    ("host-prep-sysctl-key-newline", "host_prep", {"host_prep_sysctl_extra": {"vm.swappiness\n": 10}}, HOST_PREP),
    ("host-prep-bmc-newline", "host_prep", {"host_prep_bmc_address": "bmc.example.net\n", "host_prep_bmc_username": "u",
                                            "host_prep_bmc_password": "p"}, HOST_PREP),
    ("nccl-timeout-newline", "nccl_fabric", {"nccl_fabric_nccl_tests_timeout": "60\n"},
     "Check the settings and compute this host's IPoIB addresses"),
    ("cuda-version-newline", "cuda_toolkit", {"cuda_toolkit_versions": ["12.8\n"], "cuda_toolkit_default": "12.8\n"},
     "Require well-formed toolkit versions and a default among them"),
    ("grafana-interval-newline", "grafana_dashboards", {"grafana_dashboards_datasource_scrape_interval": "15s\n"},
     "Check the settings fit together"),
    ("grafana-uid-newline", "grafana_dashboards", {"grafana_dashboards_folder_uid": "gpucloud\n"},
     "Check the settings fit together"),
    ("grafana-ok", "grafana_dashboards", {}, None),
]

# Roles whose validate.yml reads what set_vars.yml derives.
TASKS_FROM = {"cuda_toolkit": ("set_vars", "validate")}
# validate.yml runs after main.yml has loaded the OS family's vars; load Debian's here.
OS_VARS = {role: os.path.join(ROOT, "roles", role, "vars", "Debian.yml") for role in ("nccl_fabric", "host_prep")}


def _with_os_vars(role, variables):
    if role in OS_VARS and os.path.exists(OS_VARS[role]):
        with open(OS_VARS[role]) as handle:
            return dict(yaml.safe_load(handle) or {}, **variables)
    return variables


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    plays = [{"name": "Gather the facts validate.yml reads", "hosts": "localhost", "connection": "local",
              "gather_facts": True, "gather_subset": ["min"], "tasks": []}]
    plays += [case_play(case_id, role, _with_os_vars(role, variables), tasks_from=TASKS_FROM.get(role, ("validate",)))
              for case_id, role, variables, _task in CASES]
    return run_cases(tmp_path_factory.mktemp("validate_end_anchors"), plays,
                     env=ansible_env(ANSIBLE_PYTHON_INTERPRETER=sys.executable))[0]


@pytest.mark.parametrize("case_id,role,variables,task", CASES, ids=[case[0] for case in CASES])
def test_a_trailing_newline_is_refused(outcomes, case_id, role, variables, task):
    outcome = outcomes[case_id]
    if task is None:
        # Later checks may refuse the case for this machine's reasons; none of those named above.
        assert outcome["task"] not in [case[3] for case in CASES if case[3]], outcome
    else:
        assert outcome["task"] == task, outcome
