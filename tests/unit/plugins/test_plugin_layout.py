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
    shipped_text = []
    for top in ("roles", "playbooks"):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".yml", ".yaml", ".j2")):
                    with open(os.path.join(dirpath, f), encoding="utf-8") as handle:
                        shipped_text.append(handle.read())
    shipped_text = "\n".join(shipped_text)
    for path in _py("module_utils"):
        name = _name(path)
        if re.search(r"\b%s\.py\b" % re.escape(name), shipped_text):
            reached.add(name)
            for package, dep in collection_imports(path):
                if package == "module_utils":
                    reached.add(dep)
    return reached


def test_every_module_util_reaches_a_node():
    controller_only = sorted(set(_name(p) for p in _py("module_utils")) - node_side_module_utils())
    assert controller_only == [], (
        "plugins/module_utils/ holds code no module imports and no role ships to a node: %s; "
        "controller-only code goes to plugins/plugin_utils/" % controller_only)


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
