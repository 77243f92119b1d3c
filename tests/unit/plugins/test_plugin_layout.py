# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where code lives (docs/development.md, "Where code goes").

* plugins/module_utils/ holds what runs on a node: code a module imports (Ansible ships it
  in the module's AnsiballZ payload) or a role copies to the node (the benchmark program's
  benchmark_stats.py, the parsers the metrics collector shares with the modules). A program
  only its role runs (the collector's gpu_metrics.py) is a file of that role.
* plugins/plugin_utils/ holds controller-only code (acceptance, rollout, package tables,
  the Kubernetes and container-toolkit planners), as ansible.utils does; no module may
  import it, since it never reaches a node.
* A filter is a thin wrapper: an error raised while handling another is chained
  (``raise AnsibleFilterError(...) from exc``) so that -vvv shows where it came from.
"""

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(ROOT, "plugins")
PKG = "ansible_collections.gpucloud.fleet.plugins."


def _py(folder):
    path = os.path.join(PLUGINS, folder)
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".py") and f != "__init__.py")


def _name(path):
    return os.path.splitext(os.path.basename(path))[0]


def collection_imports(path):
    """(package, name) pairs of the collection's plugins that the Python file PATH imports."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PKG):
            rest = node.module[len(PKG):].split(".")
            if len(rest) == 1:  # from ...plugins.module_utils import a, b
                found.update((rest[0], alias.name) for alias in node.names)
            else:  # from ...plugins.module_utils.a import x
                found.add((rest[0], rest[1]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PKG):
                    rest = alias.name[len(PKG):].split(".")
                    if len(rest) > 1:
                        found.add((rest[0], rest[1]))
    return found


def node_side_module_utils():
    """module_utils names that reach a node: imported by a module (transitively), or named in a
    role or playbook that copies it to the node."""
    reached = set()
    todo = list(_py("modules"))
    while todo:
        for package, name in collection_imports(todo.pop()):
            if package == "module_utils" and name not in reached:
                reached.add(name)
                todo.append(os.path.join(PLUGINS, "module_utils", name + ".py"))
    for name in shipped_module_utils():
        reached.add(name)
        for package, dep in collection_imports(os.path.join(PLUGINS, "module_utils", name + ".py")):
            if package == "module_utils":
                reached.add(dep)
    return reached


def shipped_module_utils():
    """module_utils names a role or playbook copies to a node as a whole file (named as
    NAME.py outside a YAML comment: a comment that cites a file ships nothing)."""
    shipped_text = []
    for top in ("roles", "playbooks"):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".yml", ".yaml", ".j2")):
                    with open(os.path.join(dirpath, f), encoding="utf-8") as handle:
                        shipped_text.append(re.sub(r"(?m)(^|\s)#.*$", "", handle.read()))
    shipped_text = "\n".join(shipped_text)
    return set(_name(p) for p in _py("module_utils") if re.search(r"\b%s\.py\b" % re.escape(_name(p)), shipped_text))


def test_every_module_util_reaches_a_node():
    controller_only = sorted(set(_name(p) for p in _py("module_utils")) - node_side_module_utils())
    assert controller_only == [], (
        "plugins/module_utils/ holds code no module imports and no role ships to a node: %s; "
        "controller-only code goes to plugins/plugin_utils/" % controller_only)


def module_utils_uses(path):
    """{module_utils name: names the Python file PATH uses from it}; None where a module is
    imported whole and only passed around, so that its use cannot be told."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    uses, aliases = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PKG + "module_utils"):
            rest = node.module[len(PKG):].split(".")
            if len(rest) == 1:  # from ...plugins.module_utils import a: a.x is used
                for alias in node.names:
                    uses.setdefault(alias.name, set())
                    aliases[alias.asname or alias.name] = alias.name
            else:
                uses.setdefault(rest[1], set()).update(alias.name for alias in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            uses[aliases[node.value.id]].add(node.attr)
    return {name: (names or None) for name, names in uses.items()}


def top_level_definitions(path):
    """{top-level name of PATH: (is a function or class, the names its definition refers to)}."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names, code = [node.name], True
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names, code = [t.id for t in targets if isinstance(t, ast.Name)], False
        else:
            continue
        refs = set(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
        for name in names:
            defs[name] = (code, refs)
    return defs


def controller_only_definitions():
    """{module_utils name: functions and classes of it that no node-side code reaches}: what a
    module imports from it (transitively, within the file and across module_utils), for every
    module_utils file that reaches a node through an import rather than as a whole copied file."""
    wanted = {}
    todo = list(_py("modules"))
    for dirpath, _dirs, files in os.walk(os.path.join(ROOT, "roles")):
        todo += [os.path.join(dirpath, f) for f in files if f.endswith(".py")]
    seen = set()
    while todo:
        for name, names in module_utils_uses(todo.pop()).items():
            if names is None or wanted.get(name, set()) is None:
                wanted[name] = None
            else:
                wanted.setdefault(name, set()).update(names)
            path = os.path.join(PLUGINS, "module_utils", name + ".py")
            if path not in seen and os.path.exists(path):
                seen.add(path)
                todo.append(path)
    found, shipped = {}, shipped_module_utils()
    for name, names in sorted(wanted.items()):
        path = os.path.join(PLUGINS, "module_utils", name + ".py")
        if names is None or name in shipped or not os.path.exists(path):
            continue
        defs = top_level_definitions(path)
        reached, stack = set(), [n for n in names if n in defs]
        while stack:
            n = stack.pop()
            if n not in reached:
                reached.add(n)
                stack += [r for r in defs[n][1] if r in defs and r not in reached]
        left = set(n for n, (code, _refs) in defs.items() if code and n not in reached)
        if left:
            found[name] = left
    return found


# Functions that a node-side module_utils file holds although no node-side code calls them, and
# why each stays where it is. Anything else a module does not reach belongs in plugin_utils/.
NOT_NODE_SIDE_BUT_STAYS = {
    # The mig-parted config that gpu_sharing's plan (plugin_utils/gpu_sharing.py) renders is built
    # from the same per-GPU-family profile table the nvidia_mig_layout module checks a layout
    # against (_FAMILIES); splitting the table is the gpu_sharing owner's call.
    "mig_layout": {"_is_int", "_validate_entry", "mig_parted_config", "profiles_of",
                   "render_mig_parted_config", "validate_mig_parted_config"},
    # nccl_fabric's filter (nccl_ib_hcas) reads the dict this file's nvidia_topology parser
    # returns; moving it is the nccl_fabric owner's call.
    "topology": {"_hca_link_layer", "nccl_ib_hcas"},
    # Called by unit tests only (no controller code either): not controller code to move.
    "containerd_config": {"containerd_config_version"},
    "redact": {"_lines", "_run", "redact_text"},
    "sysctl": {"boot_values", "parse_sysctl_a"},
}


def test_node_side_module_utils_hold_no_controller_only_code():
    extra = dict((name, sorted(left - NOT_NODE_SIDE_BUT_STAYS.get(name, set())))
                 for name, left in controller_only_definitions().items())
    extra = dict((name, left) for name, left in extra.items() if left)
    assert extra == {}, (
        "module_utils files hold functions no module or node-side program reaches (they ride to "
        "every node in the AnsiballZ payload); move them to plugins/plugin_utils/: %s" % extra)


@pytest.mark.parametrize("path", _py("modules") + _py("module_utils"), ids=_name)
def test_node_side_code_never_imports_plugin_utils(path):
    bad = sorted(name for package, name in collection_imports(path) if package == "plugin_utils")
    assert bad == [], "%s imports plugin_utils %s, which never reaches a node" % (os.path.relpath(path, ROOT), bad)


def unchained_raises(source, filename="<filter>"):
    """Line numbers of `raise X(...)` inside an except handler without `from ...`."""
    lines = []
    for handler in ast.walk(ast.parse(source, filename)):
        if isinstance(handler, ast.ExceptHandler):
            for node in ast.walk(handler):
                if isinstance(node, ast.Raise) and node.exc is not None and node.cause is None:
                    lines.append(node.lineno)
    return sorted(lines)


def test_unchained_raises_are_found():
    source = ("def f(x):\n    try:\n        return int(x)\n    except ValueError as exc:\n"
              "        raise RuntimeError('bad %s' % exc)\n")
    assert unchained_raises(source) == [5]
    assert unchained_raises(source.replace("% exc)", "% exc) from exc")) == []


@pytest.mark.parametrize("path", _py("filter"), ids=_name)
def test_filters_chain_the_error_they_wrap(path):
    with open(path, encoding="utf-8") as handle:
        assert unchained_raises(handle.read(), path) == []
