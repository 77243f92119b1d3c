# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every role follows the patterns of docs/development.md, "Patterns every role follows".

One mechanism, one way: the per-OS variables loader (tasks/set_vars.yml), the order at the top
of tasks/main.yml, the names of the per-OS vars files, and package installation (only through
gpucloud.fleet.packages_present). Each check_*
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

# Roles whose package tasks are still to be converted to gpucloud.fleet.packages_present (issue 29,
# item 1). Every role is converted: nothing may be listed here, and a role leaves the list once it
# installs no other way (test_roles_still_to_convert_still_need_it).
PACKAGES_STILL_TO_CONVERT = set()

# Installs packages_present cannot do, each with its reason: (role, task name).
# - EPEL's release package on Red Hat Enterprise Linux comes from its URL (EPEL's instructions;
#   Red Hat's repositories carry no epel-release), and packages_present takes names only.
PACKAGES_OTHER_WAY = {("nvidia_driver", "Add EPEL, which carries dkms, from its release package's URL (Red Hat Enterprise Linux)")}

# What installs or holds a package in a command line.
INSTALL_COMMAND = re.compile(r"\b(apt-get|apt|aptitude|dnf|yum)\s+(-\S+\s+)*(install|reinstall)\b"
                             r"|\bapt-mark\s+hold\b|\bdnf\s+(-\S+\s+)*versionlock\s+add\b|\bdpkg\s+(-\S+\s+)*(-i|--install)\b")


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


def _install_problem(task):
    """How TASK installs or holds a package other than through packages_present, or None."""
    for module in ("ansible.builtin.apt", "ansible.builtin.dnf", "ansible.builtin.yum", "ansible.builtin.package"):
        args = task.get(module)
        if isinstance(args, dict) and (args.get("name") or args.get("deb")) and args.get("state", "present") not in (
                "absent", "removed"):
            return module
    selections = task.get("ansible.builtin.dpkg_selections")
    if isinstance(selections, dict) and selections.get("selection") == "hold":
        return "ansible.builtin.dpkg_selections (hold)"
    if "community.general.dnf_versionlock" in task:
        return "community.general.dnf_versionlock"
    for module in ("ansible.builtin.command", "ansible.builtin.shell"):
        args = task.get(module)
        if args is None:
            continue
        line = args if isinstance(args, str) else " ".join(
            str(a) for a in (args.get("argv") or [args.get("cmd", "")]))
        if INSTALL_COMMAND.search(line):
            return "%s (%s)" % (module, line)
    return None


def check_packages(role_dir):
    """No task of the role installs or holds packages other than with gpucloud.fleet.packages_present."""
    role = os.path.basename(role_dir)
    problems = []
    for folder in ("tasks", "handlers"):
        for root, _dirs, files in os.walk(os.path.join(role_dir, folder)):
            for name in sorted(files):
                if not name.endswith(".yml"):
                    continue
                path = os.path.join(root, name)
                for task in _walk(_load(path)):
                    how = _install_problem(task)
                    if how and (role, task.get("name")) not in PACKAGES_OTHER_WAY:
                        problems.append("%s: %s: %r installs or holds packages with %s; use "
                                        "gpucloud.fleet.packages_present (docs/development.md)"
                                        % (role, os.path.relpath(path, role_dir), task.get("name"), how))
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


@pytest.mark.parametrize("role", [r for r in ALL_ROLES if r not in PACKAGES_STILL_TO_CONVERT])
def test_no_role_installs_packages_any_other_way(role):
    assert check_packages(os.path.join(ROLES, role)) == []


@pytest.mark.parametrize("role", sorted(PACKAGES_STILL_TO_CONVERT))
def test_roles_still_to_convert_still_need_it(role):
    # A converted role left on the list would escape the check above for no reason.
    assert role in ALL_ROLES and check_packages(os.path.join(ROLES, role)) != []


@pytest.mark.parametrize("task", [
    "- name: A\n  ansible.builtin.apt:\n    name: tang\n",
    "- name: A\n  ansible.builtin.dnf:\n    name: [tang]\n    state: latest\n",
    "- name: A\n  ansible.builtin.package:\n    name: tang\n",
    "- name: A\n  ansible.builtin.apt:\n    deb: /tmp/x.deb\n",
    "- name: A\n  ansible.builtin.dpkg_selections:\n    name: tang\n    selection: hold\n",
    "- name: A\n  community.general.dnf_versionlock:\n    name: [tang]\n",
    "- name: A\n  ansible.builtin.command:\n    argv: [apt-get, -y, install, tang]\n",
    "- name: A\n  ansible.builtin.shell: apt-mark hold tang\n",
    "- name: B\n  block:\n    - name: A\n      ansible.builtin.command: dnf -y install tang\n",
])
def test_the_package_check_finds_every_other_way(tmp_path, task):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "main.yml").write_text(task)
    assert len(check_packages(str(tmp_path))) == 1


def test_the_package_check_lets_removals_refreshes_and_the_module_through(tmp_path):
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "main.yml").write_text(
        "- name: A\n  ansible.builtin.apt:\n    name: ufw\n    state: absent\n"
        "- name: B\n  ansible.builtin.apt:\n    update_cache: true\n"
        "- name: C\n  gpucloud.fleet.packages_present:\n    name: [tang]\n    hold: true\n"
        "- name: D\n  ansible.builtin.command:\n    argv: [apt-mark, showhold]\n")
    assert check_packages(str(tmp_path)) == []


def test_every_install_let_through_is_still_there():
    for role, name in PACKAGES_OTHER_WAY:
        tasks_dir = os.path.join(ROLES, role, "tasks")
        found = [task for file in os.listdir(tasks_dir) if file.endswith(".yml")
                 for task in _walk(_load(os.path.join(tasks_dir, file))) if task.get("name") == name]
        assert len(found) == 1 and _install_problem(found[0]), (role, name)


def test_the_loader_written_in_the_docs_is_the_one_checked():
    with open(os.path.join(ROOT, "docs", "development.md")) as handle:
        doc = handle.read()
    assert LOADER.split("---\n", 1)[1] in doc
