#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: compliance_evidence
short_description: Run read-only probes on a node and return their output as evidence
version_added: 0.1.0
description:
  - Runs each probe's command once (an argv list, never a shell unless the probe asks for
    C(sh -c)) with C(LC_ALL=C), and returns its exit status, output and the UTC time it started.
  - A missing program is recorded with rc 127, not raised; a probe with a O(probes[].skip)
    reason is recorded as skipped with that reason.
  - Only reads, so it runs the same in check mode. playbooks/compliance.yml joins the result
    against the control map with P(gpucloud.fleet.compliance_node_report#filter).
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: The probes only read; they run in check mode too.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
options:
  probes:
    description: The probes.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Evidence name (unique).
        type: str
        required: true
      argv:
        description: Command and arguments.
        type: list
        elements: str
        required: true
      skip:
        description: Non-empty - do not run; record this reason.
        type: str
        default: ""
"""

EXAMPLES = r"""
- name: Read the effective sshd settings and the loaded audit rules
  gpucloud.fleet.compliance_evidence:
    probes:
      - {name: sshd_effective, argv: [/usr/sbin/sshd, -T]}
      - {name: auditctl_rules, argv: [auditctl, -l], skip: "a container shares the host's kernel"}
  register: evidence
"""

RETURN = r"""
evidence:
  description: Per probe name, C(command), C(rc), C(stdout), C(stderr) and C(start) (UTC, ISO 8601), or C(skipped) and C(reason).
  returned: always
  type: dict
"""

import datetime

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpucloud.fleet.plugins.module_utils.compliance import ComplianceError, collect


def main():
    module = AnsibleModule(
        argument_spec=dict(probes=dict(type="list", elements="dict", required=True, options=dict(
            name=dict(type="str", required=True),
            argv=dict(type="list", elements="str", required=True),
            skip=dict(type="str", default=""),
        ))),
        supports_check_mode=True,
    )
    env = {"LC_ALL": "C", "LANG": "C"}

    def run(argv):
        return module.run_command(argv, environ_update=env, handle_exceptions=False)

    def now():
        return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    try:
        evidence = collect(module.params["probes"], run, now)
    except ComplianceError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, evidence=evidence)


if __name__ == "__main__":
    main()
