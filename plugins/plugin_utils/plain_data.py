# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Ansible's values as plain Python data, for the pure plan functions the filters call.

Ansible hands filters lazy mappings and lists and tagged strings (subclasses of ``str``
carrying their origin); the plan functions compare, sort and serialise plain dicts, lists
and strings. One converter for every filter that needs it.
"""

from collections.abc import Mapping


def plain(value):
    """VALUE with every mapping a dict, every list or tuple a list and every string a str."""
    if isinstance(value, Mapping):
        return dict((plain(key) if isinstance(key, str) else key, plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, str):
        return str(value)
    return value
