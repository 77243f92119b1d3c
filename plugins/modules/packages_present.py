#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: packages_present
short_description: Install what is missing of a package list in one transaction, and hold it
version_added: 0.1.0
description:
  - The one way the collection's roles install packages, with apt (Debian, Ubuntu) or dnf
    (RHEL family).
  - Asks dpkg (or rpm) once which of the packages are installed, at the version asked where
    one is given. When all are, nothing else runs.
  - Otherwise installs the missing ones in one C(apt-get install) or C(dnf install). apt's
    package lists are refreshed first only when O(update_cache=true), when there are none or
    the last refresh is older than O(cache_valid_time), or when the lists do not offer a
    missing package (or the version asked). A package still not offered after the refresh
    fails the task, naming it, before anything is installed.
  - While another apt, dpkg or unattended-upgrades holds a lock, retries every 10 seconds up
    to O(lock_timeout) seconds (apt also waits on dpkg's lock itself for that long).
  - With O(hold=true) every listed package is held (C(apt-mark hold), or C(dnf versionlock add)
    which needs C(python3-dnf-plugin-versionlock)); holding again what is held changes nothing.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description:
      - Reports exactly the packages a real run would install and hold, and whether it would
        refresh apt's lists, without refreshing, installing or holding anything.
      - apt's lists are not refreshed in check mode, so a package they do not offer yet is still
        reported as to be installed, and listed in RV(not_offered).
  diff_mode:
    support: full
    description: Each package with its installed version and hold, before and after.
options:
  name:
    description:
      - The packages, each C(name) or C(name=version).
      - A version may end in C(*) (C(nvidia-utils-580-server=580.95.05-*)); with dnf the
        entry is installed as C(name-version).
      - An installed package at another version than asked counts as missing.
    type: list
    elements: str
    required: true
  hold:
    description:
      - Hold every listed package after the install (C(apt-mark hold) / C(dnf versionlock add)).
      - With apt the install may then move a held package to the version asked
        (C(--allow-change-held-packages)).
    type: bool
    default: false
  manager:
    description: The package manager; V(auto) takes apt where C(apt-get) exists, else dnf.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  update_cache:
    description:
      - Refresh the package lists before installing, however fresh they are (a repository the
        role configures just changed). Only when something is missing.
    type: bool
    default: false
  cache_valid_time:
    description:
      - Seconds after which apt's lists count as stale and are refreshed before an install.
      - dnf refreshes expired metadata itself.
    type: int
    default: 3600
  install_recommends:
    description: Install recommended (apt) or weak (dnf) dependencies too.
    type: bool
    default: false
  allow_downgrade:
    description: Let apt install a version older than the installed one (dnf does so for an explicit version).
    type: bool
    default: false
  lock_timeout:
    description: Seconds to wait for another apt, dpkg or unattended-upgrades holding a lock.
    type: int
    default: 600
requirements:
  - dpkg and apt-get, or rpm and dnf (dnf's versionlock plugin for O(hold=true)).
seealso:
  - module: ansible.builtin.apt
  - module: ansible.builtin.dnf
"""

EXAMPLES = r"""
- name: Install the encryption packages
  gpucloud.fleet.packages_present:
    name: [cryptsetup-bin, clevis, clevis-luks]

- name: Install the driver at the locked version and hold it
  gpucloud.fleet.packages_present:
    name:
      - nvidia-utils-580-server=580.95.05-*
      - libnvidia-compute-580-server=580.95.05-*
    hold: true
    update_cache: "{{ __repository_file is changed }}"
    allow_downgrade: true

- name: Show what would be installed, without a change
  gpucloud.fleet.packages_present:
    name: [tang]
  check_mode: true
  diff: true
"""

RETURN = r"""
manager:
  description: The package manager used.
  returned: always
  type: str
  sample: apt
packages:
  description: The packages asked for, duplicates removed.
  returned: always
  type: list
  elements: str
  sample: [tang, cryptsetup-bin]
installed:
  description: The packages installed by this run (in check mode, those a real run would install).
  returned: always
  type: list
  elements: str
  sample: [tang]
held:
  description: The packages held by this run (in check mode, those a real run would hold).
  returned: always
  type: list
  elements: str
  sample: []
cache_updated:
  description: Whether the package lists were refreshed (in check mode, would be).
  returned: always
  type: bool
  sample: true
refresh_reason:
  description: Why the lists were (or would be) refreshed; V(null) when they were not.
  returned: always
  type: str
  sample: lists older than 3600 s
not_offered:
  description: In check mode, the packages to install that apt's lists, not refreshed, do not offer yet.
  returned: always
  type: list
  elements: str
  sample: [tang]
commands:
  description: The commands that changed or refreshed something (none in check mode).
  returned: always
  type: list
  elements: str
  sample: ["apt-get install -y -q ... tang"]
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.packages import Packages, PackagesError
from ansible_collections.gpucloud.fleet.plugins.module_utils.runner import Runner


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="list", elements="str", required=True),
            hold=dict(type="bool", default=False),
            manager=dict(type="str", default="auto", choices=["auto", "apt", "dnf"]),
            update_cache=dict(type="bool", default=False),
            cache_valid_time=dict(type="int", default=3600),
            install_recommends=dict(type="bool", default=False),
            allow_downgrade=dict(type="bool", default=False),
            lock_timeout=dict(type="int", default=600),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    manager = params.pop("manager")
    if manager == "auto":
        manager = "apt" if module.get_bin_path("apt-get") else "dnf"
    packages = Packages(run=Runner(module, environ={"DEBIAN_FRONTEND": "noninteractive"}),
                        manager=manager, sleep=time.sleep, now=time.time)
    try:
        result = packages.ensure(params.pop("name"), check_mode=module.check_mode, **params)
    except PackagesError as exc:
        module.fail_json(msg="packages_present: %s" % exc, commands=packages.commands)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
