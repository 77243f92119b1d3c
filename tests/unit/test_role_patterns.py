# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every role follows the patterns of docs/development.md, "Patterns every role follows".

One mechanism, one way: the per-OS variables loader (tasks/set_vars.yml), the order at the top
of tasks/main.yml, the names of the per-OS vars files, and the apt install tasks. Each check_*
function takes a role directory and returns the departures it finds, so a role copied
elsewhere can be checked the same way.
"""

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = os.path.join(ROOT, "roles")
ALL_ROLES = sorted(r for r in os.listdir(ROLES) if os.path.isfile(os.path.join(ROLES, r, "tasks", "main.yml")))

# The loader every role's tasks/set_vars.yml starts with, character for character.
LOADER = '''---
# The per-OS variables loader, the same in every role (docs/development.md, "Patterns every
# role follows"; tests/unit/test_role_patterns.py): only facts are read, nothing changes.
- name: Gather the facts that choose the per-OS variables
  ansible.builtin.setup:
    gather_subset: [min]
  when: >-
    ansible_facts.distribution is not defined or ansible_facts.distribution_major_version is not defined
    or ansible_facts.os_family is not defined

- name: Load the per-OS variables (distribution_major, distribution, family_major, family, default)
  ansible.builtin.include_vars:
    file: "{{ lookup('ansible.builtin.first_found', files=ansible_facts | gpucloud.fleet.os_vars_files, paths=[role_path ~ '/vars']) }}"
'''

# What may follow the loader in set_vars.yml: it runs before validate.yml, so it only reads
# (more facts, derived values, refusals) and never changes the host.
READ_ONLY = {"ansible.builtin.setup", "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.debug"}

# Per-OS vars files: <distribution or family>[_<major version>].yml (first_found's candidates,
# plugins/filter/os_vars_files.py), default.yml, and main.yml for what every OS shares.
VARS_NAME = re.compile(r"^(?P<name>[A-Za-z]+)(_(?P<major>[0-9]+))?\.yml$")
KNOWN_OS = {"Debian", "Ubuntu", "RedHat", "Rocky", "AlmaLinux", "CentOS"}

# Task files whose apt tasks are being reworked by another change of issue 20 (check mode of
# the RDMA stack); they come to the pattern with it. Nothing else may be listed here.
PACKAGES_PENDING = set()

UNTIL = "{reg} is success or 'Could not get lock' not in ({reg}.msg | default(''))"
CACHE_VALID_TIME = re.compile(
    r"^\{\{ (?:(?P<var>\w+_apt_cache_valid_time)|3600) if (?P<lists>__\w+_apt_lists)\.matched > 0 else 0 \}\}$")


def _load(path):
    with open(path) as handle:
        return yaml.safe_load(handle) or []


def _walk(tasks):
    for task in tasks or []:
        if isinstance(task, dict):
            yield task
            for key in ("block", "rescue", "always"):
                yield from _walk(task.get(key))


def _module(task):
    for key in task:
        if key.startswith("ansible.builtin.") or key.startswith("community.") or key.startswith("gpucloud."):
            return key
    return None


def _when(task):
    when = task.get("when", [])
    return [str(w) for w in (when if isinstance(when, list) else [when])]


def check_loader(role_dir):
    """set_vars.yml starts with LOADER; roles with per-OS vars files have one."""
    problems = []
    role = os.path.basename(role_dir)
    vars_dir = os.path.join(role_dir, "vars")
    per_os = [f for f in sorted(os.listdir(vars_dir)) if f != "main.yml"] if os.path.isdir(vars_dir) else []
    set_vars = os.path.join(role_dir, "tasks", "set_vars.yml")
    if not os.path.isfile(set_vars):
        if per_os:
            problems.append("%s: vars/%s without tasks/set_vars.yml to load them" % (role, ", vars/".join(per_os)))
        return problems
    with open(set_vars) as handle:
        text = handle.read()
    if not text.startswith(LOADER):
        problems.append("%s: tasks/set_vars.yml does not start with the shared loader (docs/development.md)" % role)
    if "default.yml" not in per_os:
        problems.append("%s: has tasks/set_vars.yml but no vars/default.yml for first_found to end in" % role)
    for task in list(_walk(_load(set_vars)))[2:]:
        module = _module(task)
        reads = module in READ_ONLY or (
            module == "ansible.builtin.command" and task.get("check_mode") is False and task.get("changed_when") is False)
        if not reads:
            problems.append("%s: set_vars.yml task %r (%s) may change the host; it belongs after validate.yml"
                            % (role, task.get("name"), module))
    for root, _dirs, files in os.walk(os.path.join(role_dir, "tasks")):
        for name in files:
            path = os.path.join(root, name)
            if path != set_vars and name.endswith(".yml"):
                with open(path) as handle:
                    body = handle.read()
                if "first_found" in body or "include_vars" in body:
                    problems.append("%s: %s loads variables itself; only set_vars.yml does"
                                    % (role, os.path.relpath(path, role_dir)))
    return problems


def check_vars_names(role_dir):
    """vars/ holds main.yml, default.yml and <OS>[_<major>].yml only."""
    problems = []
    role = os.path.basename(role_dir)
    vars_dir = os.path.join(role_dir, "vars")
    for name in sorted(os.listdir(vars_dir)) if os.path.isdir(vars_dir) else []:
        if name in ("main.yml", "default.yml"):
            continue
        match = VARS_NAME.match(name)
        if not match or match.group("name") not in KNOWN_OS:
            problems.append("%s: vars/%s is not <distribution or os_family>[_<major>].yml (e.g. Debian_13.yml)"
                            % (role, name))
    return problems


def check_main_order(role_dir):
    """main.yml: set_vars.yml first (where the role has one), validate.yml next, then the rest."""
    role = os.path.basename(role_dir)
    tasks = _load(os.path.join(role_dir, "tasks", "main.yml"))
    includes = [t.get("ansible.builtin.import_tasks") for t in tasks[:2]]
    expected = ["set_vars.yml", "validate.yml"] if os.path.isfile(os.path.join(role_dir, "tasks", "set_vars.yml")) \
        else ["validate.yml"]
    problems = []
    if includes[:len(expected)] != expected:
        problems.append("%s: tasks/main.yml starts with %s, not %s" % (role, includes, expected))
    elif expected[0] == "set_vars.yml" and (tasks[0].get("name") != "Load the per-OS variables" or tasks[0].get("when")):
        problems.append("%s: the set_vars.yml import is named 'Load the per-OS variables' and has no condition" % role)
    return problems


CONDITIONS = ("when", "loop", "with_items", "loop_control")


def check_main_imports(role_dir):
    """main.yml imports (import_tasks) the task files it always runs and includes
    (include_tasks) only those behind a condition or a loop: a dynamic include costs the
    controller a file load and a variable build per host on every run, a skipped one
    almost nothing (docs/development.md, "Static imports, conditional includes")."""
    role = os.path.basename(role_dir)
    problems = []
    for task in _load(os.path.join(role_dir, "tasks", "main.yml")):
        conditional = any(key in task for key in CONDITIONS)
        if "ansible.builtin.include_tasks" in task and not conditional:
            problems.append("%s: '%s' includes %s with no condition: import it"
                            % (role, task.get("name"), task["ansible.builtin.include_tasks"]))
        if "ansible.builtin.import_tasks" in task and conditional:
            problems.append("%s: '%s' imports %s behind a condition or loop: include it"
                            % (role, task.get("name"), task["ansible.builtin.import_tasks"]))
    return problems


def _apt_problems(role, rel, tasks):
    problems = []
    flat = list(_walk(tasks))
    for index, task in enumerate(flat):
        if "ansible.builtin.package" in task:
            problems.append("%s: %s: %r uses ansible.builtin.package; use apt/dnf (docs/development.md)"
                            % (role, rel, task.get("name")))
        apt = task.get("ansible.builtin.apt")
        if apt is None:
            continue
        where = "%s: %s: %r" % (role, rel, task.get("name"))
        if apt.get("lock_timeout") != 600:
            problems.append("%s: lock_timeout %r, not 600" % (where, apt.get("lock_timeout")))
        if "name" not in apt:
            continue
        reg = task.get("register")
        if not reg:
            problems.append("%s: installs without register/until/retries" % where)
        elif (task.get("until"), task.get("retries"), task.get("delay")) != (UNTIL.format(reg=reg), 30, 10):
            problems.append("%s: retry is not until: %s, retries: 30, delay: 10" % (where, UNTIL.format(reg=reg)))
        if not apt.get("update_cache"):
            continue
        # A plain install: it refreshes apt itself.
        match = CACHE_VALID_TIME.match(str(apt.get("cache_valid_time", "")))
        if apt.get("state") != "present":
            problems.append("%s: state %r, not present" % (where, apt.get("state")))
        if not match:
            problems.append("%s: cache_valid_time %r is not '{{ <role>_apt_cache_valid_time (or 3600) if "
                            "__<role>_apt_lists.matched > 0 else 0 }}'" % (where, apt.get("cache_valid_time")))
        else:
            if match.group("var") and match.group("var") != role + "_apt_cache_valid_time":
                problems.append("%s: cache_valid_time uses %s, not %s_apt_cache_valid_time" % (where, match.group("var"), role))
            finds = [t for t in flat[:index] if t.get("register") == match.group("lists")
                     and (t.get("ansible.builtin.find") or {}).get("paths") == "/var/lib/apt/lists"]
            if not finds:
                problems.append("%s: no ansible.builtin.find of /var/lib/apt/lists registers %s before it"
                                % (where, match.group("lists")))
        if not any("not ansible_check_mode" in w for w in _when(task)):
            problems.append("%s: runs in check mode (apt does not refresh its lists then); add "
                            "'not ansible_check_mode' and the check-mode report" % where)
        reports = [t for t in flat[index + 1:] if "ansible.builtin.debug" in t and t.get("changed_when") is True
                   and any("ansible_check_mode" in w and "not ansible_check_mode" not in w for w in _when(t))
                   and str(t["ansible.builtin.debug"].get("msg", "")).startswith("Would refresh apt and install ")]
        if not reports:
            problems.append("%s: no check-mode report ('Would refresh apt and install ...', changed_when: true) "
                            "follows it" % where)
    return problems


def check_packages(role_dir):
    """Every apt task in the role's task files follows the package install pattern."""
    role = os.path.basename(role_dir)
    problems = []
    tasks_dir = os.path.join(role_dir, "tasks")
    for name in sorted(os.listdir(tasks_dir)):
        rel = "tasks/" + name
        if name.endswith(".yml") and role + "/" + rel not in PACKAGES_PENDING:
            problems.extend(_apt_problems(role, rel, _load(os.path.join(tasks_dir, name))))
    return problems


@pytest.mark.parametrize("role", ALL_ROLES)
def test_per_os_variables_load_the_one_way(role):
    assert check_loader(os.path.join(ROLES, role)) == []


@pytest.mark.parametrize("role", ALL_ROLES)
def test_per_os_vars_files_are_named_one_way(role):
    assert check_vars_names(os.path.join(ROLES, role)) == []


@pytest.mark.parametrize("role", ALL_ROLES)
def test_main_loads_then_validates_before_anything_else(role):
    assert check_main_order(os.path.join(ROLES, role)) == []


@pytest.mark.parametrize("role", ALL_ROLES)
def test_main_imports_what_it_always_runs(role):
    assert check_main_imports(os.path.join(ROLES, role)) == []


def test_the_import_check_can_fail(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "main.yml").write_text(
        "- name: Always\n  ansible.builtin.include_tasks: a.yml\n"
        "- name: Sometimes\n  ansible.builtin.import_tasks: b.yml\n  when: x | bool\n"
        "- name: Fine\n  ansible.builtin.import_tasks: c.yml\n")
    assert check_main_imports(str(tmp_path)) == [
        "%s: 'Always' includes a.yml with no condition: import it" % tmp_path.name,
        "%s: 'Sometimes' imports b.yml behind a condition or loop: include it" % tmp_path.name]


@pytest.mark.parametrize("role", ALL_ROLES)
def test_apt_tasks_follow_the_package_pattern(role):
    assert check_packages(os.path.join(ROLES, role)) == []


def test_pending_files_still_exist():
    # A stale entry would hide nothing, but says something untrue about the tree.
    for rel in PACKAGES_PENDING:
        assert os.path.isfile(os.path.join(ROLES, rel)), rel


def test_the_loader_written_in_the_docs_is_the_one_checked():
    with open(os.path.join(ROOT, "docs", "development.md")) as handle:
        doc = handle.read()
    assert LOADER.split("---\n", 1)[1] in doc
