# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""plugin_utils/plain_data.py: the one converter from Ansible's values to plain data."""

from collections.abc import Mapping

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.plain_data import plain


class Tagged(str):
    """Stands in for Ansible's tagged strings (a str subclass)."""


class Lazy(Mapping):
    """Stands in for Ansible's lazy mappings (a Mapping that is not a dict)."""

    def __init__(self, data):
        self._data = data

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def test_nested_lazy_containers_and_tagged_strings_become_plain():
    value = Lazy({Tagged("hosts"): (Tagged("a1"), Lazy({"gpu": [1, 2.5, None, True]})), 3: "x"})
    result = plain(value)
    assert result == {"hosts": ["a1", {"gpu": [1, 2.5, None, True]}], 3: "x"}
    assert isinstance(result, dict)
    key = next(iter(result))
    assert not isinstance(key, Tagged) and not isinstance(result["hosts"][0], Tagged)
    assert isinstance(result["hosts"], list) and isinstance(result["hosts"][1], dict)


def test_scalars_pass_through():
    assert plain(7) == 7 and plain(None) is None
    assert plain(Tagged("x")) == "x" and not isinstance(plain(Tagged("x")), Tagged)
