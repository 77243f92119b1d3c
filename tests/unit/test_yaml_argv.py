# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Every argv list in the tree is a list of strings.

YAML reads an unquoted list item that holds ': ' or ends in ':' as a mapping:
`- --only-binary=:all:` is `{'--only-binary=:all': None}`. Ansible's command module then
passes the mapping's text to the program, which refuses it. molecule/training_benchmark's
prepare hid exactly that behind a `creates:` that a cached wheelhouse satisfied, and a fresh
machine failed (issue 28). The check reads every YAML file that Ansible runs (roles,
playbooks, Molecule scenarios, extensions) and names each argv item that is not a scalar.
"""

import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TREES = ("roles", "playbooks", "molecule", "extensions", "inventories")


def _yaml_files():
    for tree in TREES:
        for base, dirs, files in os.walk(os.path.join(ROOT, tree)):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in sorted(files):
                if name.endswith((".yml", ".yaml")):
                    yield os.path.join(base, name)


def bad_argv_items(node, where=""):
    """Return 'path: item' for each argv item below node that is not a plain scalar."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "argv" and isinstance(value, list):
                for index, item in enumerate(value):
                    if not isinstance(item, (str, int, float)) or isinstance(item, bool):
                        found.append("%sargv[%d] is %s %r: quote it" % (where, index, type(item).__name__, item))
            else:
                found.extend(bad_argv_items(value, "%s%s." % (where, key)))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found.extend(bad_argv_items(item, "%s[%d]." % (where, index)))
    return found


FILES = sorted(_yaml_files())


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, ROOT) for p in FILES])
def test_argv_items_are_strings(path):
    with open(path) as handle:
        try:
            docs = list(yaml.safe_load_all(handle))
        except yaml.YAMLError:
            pytest.skip("not plain YAML (a Jinja template)")
    assert bad_argv_items(docs) == []


def test_the_argv_check_can_fail():
    doc = yaml.safe_load("- ansible.builtin.command:\n    argv:\n      - pip\n      - --only-binary=:all:\n      - true\n")
    assert bad_argv_items(doc) == [
        "[0].ansible.builtin.command.argv[1] is dict {'--only-binary=:all': None}: quote it",
        "[0].ansible.builtin.command.argv[2] is bool True: quote it",
    ]
