# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: version_outliers.yml beside this file.


import re

from ansible.errors import AnsibleFilterError

from collections.abc import Mapping

_DIGITS_RE = re.compile(r"([0-9]+)")


def _natural_key(version):
    """'2.21.5' > '2.9.1': ASCII digit runs compare as numbers, the rest as text.

    [0-9], not isdigit(): '²'.isdigit() is true, yet int('²') raises.
    """
    return [(0, int(part), "") if _DIGITS_RE.fullmatch(part) else (1, 0, part)
            for part in _DIGITS_RE.split(version) if part]


def _normalise(value, host, component):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AnsibleFilterError("version_outliers: %s.%s must be a version string, got %r" % (host, component, value))
    text = str(value).strip()
    return text or None


def version_outliers(hostvars_map):
    if not isinstance(hostvars_map, Mapping):
        raise AnsibleFilterError("version_outliers: expected a mapping of host -> {component: version}, got %s"
                                 % type(hostvars_map).__name__)
    versions = {}
    for host, components in hostvars_map.items():
        if components is None:
            components = {}
        if not isinstance(components, Mapping):
            raise AnsibleFilterError("version_outliers: the value for host %s must be a mapping of component -> "
                                     "version, got %s" % (host, type(components).__name__))
        versions[str(host)] = dict((str(name), _normalise(value, host, name)) for name, value in components.items())

    hosts = sorted(versions)
    components = sorted(set(name for per_host in versions.values() for name in per_host))
    report = {}
    for component in components:
        values = dict((host, versions[host].get(component)) for host in hosts)
        if len(set(values.values())) == 1:
            continue
        counts = {}
        for value in values.values():
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        majority = max(counts, key=lambda v: (counts[v], _natural_key(v), v))
        report[component] = {
            "majority": majority,
            "outliers": dict((host, value) for host, value in values.items() if value != majority),
        }
    return report


class FilterModule(object):
    def filters(self):
        return {"version_outliers": version_outliers}
