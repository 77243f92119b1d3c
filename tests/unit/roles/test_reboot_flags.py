# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One home for reboots (docs/development.md, "Reboots"): every role that needs a reboot records its
reason through gpucloud.fleet.node_reboot (tasks_from: record) under its own name, which is how the
one reboot clears its `<role>_reboot_required` flag; no role reaches into another role by path, and
no role but node_reboot sets the collection-wide flag or reboots."""

import glob
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _tasks(node):
    """Every task in a task list, blocks included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            if key in node:
                yield from _tasks(node[key])


def _role_files():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "*", "*.yml"))):
        if os.path.basename(os.path.dirname(path)) in ("tasks", "handlers"):
            with open(path, encoding="utf-8") as handle:
                yield os.path.relpath(path, ROOT), handle.read()


def _role_of(relpath):
    return relpath.split(os.sep)[1]


def test_every_role_flag_is_recorded_through_node_reboot_under_the_role_name():
    flags, records = {}, {}
    for relpath, text in _role_files():
        role = _role_of(relpath)
        if role == "node_reboot":
            continue
        for task in _tasks(yaml.safe_load(text)):
            facts = task.get("ansible.builtin.set_fact")
            if isinstance(facts, dict):
                for key in facts:
                    if key.endswith("_reboot_required") and key != "gpucloud_reboot_required":
                        flags.setdefault(key, set()).add(role)
            include = task.get("ansible.builtin.include_role") or {}
            if include.get("name") == "gpucloud.fleet.node_reboot" and include.get("tasks_from") == "record":
                records.setdefault(role, set()).add((task.get("vars") or {}).get("node_reboot_by"))
    # The roles known to need reboots today; the reboot clears "<node_reboot_by>_reboot_required".
    assert {"host_prep_reboot_required", "nvidia_driver_reboot_required",
            "nccl_fabric_reboot_required", "gpu_sharing_reboot_required"} <= set(flags)
    for flag, roles in flags.items():
        for role in roles:
            assert flag == role + "_reboot_required", (flag, role)
            assert records.get(role) == {role}, "%s sets %s but records its reboot as %s" % (role, flag, records.get(role))


def test_no_role_includes_another_by_path_or_reboots_itself():
    for relpath, text in _role_files():
        for task in _tasks(yaml.safe_load(text)):
            for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks", "include_tasks", "import_tasks"):
                target = task.get(key)
                target = target.get("file", "") if isinstance(target, dict) else str(target or "")
                assert not re.search(r"role_path\s*\}\}\s*/\.\./", target), (relpath, target)
            if _role_of(relpath) == "node_reboot":
                continue
            assert "ansible.builtin.reboot" not in task and "reboot" not in task, relpath
            facts = task.get("ansible.builtin.set_fact")
            assert not (isinstance(facts, dict) and "gpucloud_reboot_required" in facts), \
                "%s sets gpucloud_reboot_required: record a reason through gpucloud.fleet.node_reboot" % relpath
