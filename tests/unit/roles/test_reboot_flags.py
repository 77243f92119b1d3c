# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One reboot satisfies every role (docs/development.md, "Reboots"): every `<role>_reboot_required`
flag a role sets must be cleared by the shared reboot (roles/host_prep/tasks/reboot_now.yml),
else the second handler of the same run reboots the node again."""

import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _set_fact_keys(node):
    """Every key set by an ansible.builtin.set_fact anywhere in a task list (blocks included)."""
    if isinstance(node, list):
        for item in node:
            yield from _set_fact_keys(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ("ansible.builtin.set_fact", "set_fact") and isinstance(value, dict):
                yield from value
            elif key in ("block", "rescue", "always", "tasks", "handlers"):
                yield from _set_fact_keys(value)


def _role_flags():
    flags = {}
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "*", "*.yml")):
        if os.path.basename(os.path.dirname(path)) not in ("tasks", "handlers"):
            continue
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
        for key in _set_fact_keys(data):
            if key.endswith("_reboot_required") and key != "gpucloud_reboot_required":
                flags.setdefault(key, []).append(os.path.relpath(path, ROOT))
    return flags


def _cleared_by_reboot_now():
    with open(os.path.join(ROOT, "roles", "host_prep", "tasks", "reboot_now.yml"), encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    cleared = {}
    for task in data:
        for inner in task.get("block", []):
            facts = inner.get("ansible.builtin.set_fact")
            if isinstance(facts, dict) and facts.get("gpucloud_reboot_required") is False:
                cleared.update(facts)
    return cleared


def test_the_shared_reboot_clears_every_role_flag():
    flags = _role_flags()
    cleared = _cleared_by_reboot_now()
    # The roles known to raise a flag today; a new one must join reboot_now's list.
    assert {"host_prep_reboot_required", "nvidia_driver_reboot_required",
            "nccl_fabric_reboot_required", "gpu_sharing_reboot_required"} <= set(flags)
    missing = {flag: where for flag, where in flags.items() if cleared.get(flag) is not False}
    assert not missing, "flags set by roles but not cleared by reboot_now.yml: %s" % missing
