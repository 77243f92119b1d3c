# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: os_vars_files.yml beside this file.


from ansible.errors import AnsibleFilterError

# The facts the candidate list is built from; `setup` with gather_subset [min] gives all three.
REQUIRED_FACTS = ("distribution", "distribution_major_version", "os_family")


def os_vars_files(facts):
    """The per-OS vars file names a role tries, most specific first, ending in default.yml.

    Distribution and major version, distribution, OS family and major version, OS family,
    default: Debian_12.yml, Debian.yml, default.yml for Debian 12 (the family's names are the
    distribution's there, and repeats are dropped); Rocky_9.yml, Rocky.yml, RedHat_9.yml,
    RedHat.yml, default.yml for Rocky Linux 9.
    """
    if not isinstance(facts, dict):
        raise AnsibleFilterError("os_vars_files: expected ansible_facts (a dict), got %s" % type(facts).__name__)
    values = {}
    for key in REQUIRED_FACTS:
        value = facts.get(key)
        if value is None or not str(value).strip():
            raise AnsibleFilterError(
                "os_vars_files: ansible_facts has no %s; gather it first (setup with gather_subset: [min])" % key)
        values[key] = str(value).strip()
    if "/" in values["distribution"] + values["os_family"] + values["distribution_major_version"]:
        raise AnsibleFilterError("os_vars_files: a fact with '/' cannot name a vars file: %r" % (values,))
    major = values["distribution_major_version"]
    candidates = []
    for name in (values["distribution"] + "_" + major, values["distribution"],
                 values["os_family"] + "_" + major, values["os_family"], "default"):
        if name + ".yml" not in candidates:
            candidates.append(name + ".yml")
    return candidates


class FilterModule(object):
    def filters(self):
        return {"os_vars_files": os_vars_files}
