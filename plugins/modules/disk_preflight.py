#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: disk_preflight
short_description: Check the Tang servers answer and refuse to format block devices that carry data
version_added: 0.1.0
description:
  - First, when O(tang_servers) is given, asks every Tang server, from the node (which is what must
    reach them at boot), for its advertisement (C(GET <server>/adv), 10 s timeout) and fails, before any
    device is read, when a server does not answer 200 or advertises no signing (C(verify)) and exchange
    (C(deriveKey)) key. In check mode a server that does not answer is only reported, in a warning and
    RV(tang_unreachable) (a dry run of a new fleet meets Tang servers that the same run sets up); one
    that answers without both keys fails in both modes.
  - Reads the signatures (partition tables, filesystems, LUKS headers, md superblocks) of every
    device the C(disk_encryption) role would use, with C(wipefs --json), which only lists.
  - Fails, before any device is changed, when a device cannot be probed, or when it carries a
    signature and is neither listed in O(allow_format) nor an existing LUKS volume named in
    O(volume_devices) (such a volume is only bound and registered, never formatted).
  - When O(md_devices) is given and the array C(/dev/md/<md_name>) does not exist yet, its
    members are probed instead of the array.
  - Reports whether the kernel has device-mapper (C(/sys/module/dm_mod), module or built-in).
  - Changes nothing.
author:
  - gpucloud.fleet contributors (@gpucloud)
extends_documentation_fragment:
  - gpucloud.fleet.read_only
options:
  volume_devices:
    description: The devices of the volumes to encrypt (C(/dev/...) paths; the array's path may be one).
    type: list
    elements: str
    default: []
  md_devices:
    description: The members of the md array to create; empty when there is no array.
    type: list
    elements: str
    default: []
  md_name:
    description: The array's name; it is C(/dev/md/<md_name>).
    type: str
    default: checkpoints
  allow_format:
    description: Devices whose signatures may be wiped and whose contents may be destroyed.
    type: list
    elements: str
    default: []
  tang_servers:
    description: Tang server URLs (C(http://host[:port])) that must all answer with keys; empty for no check.
    type: list
    elements: str
    default: []
requirements:
  - C(wipefs) (util-linux).
notes:
  - The refusal names the role variable C(disk_encryption_allow_format), and the Tang failure
    C(disk_encryption_tang_servers), since that is what an operator changes.
seealso:
  - module: gpucloud.fleet.clevis_binding_status
"""

EXAMPLES = r"""
- name: Check every device is safe to use before changing any
  gpucloud.fleet.disk_preflight:
    volume_devices: [/dev/nvme1n1, /dev/md/checkpoints]
    md_devices: [/dev/nvme2n1, /dev/nvme3n1]
    md_name: checkpoints
    allow_format: [/dev/nvme2n1]
    tang_servers: [http://tang1.example.com, http://tang2.example.com:8080]
  register: preflight

- name: Wipe the allowed array members that carry signatures
  ansible.builtin.command:
    argv: [wipefs, --all, "{{ item }}"]
  loop: "{{ preflight.signatures | dict2items | selectattr('value') | map(attribute='key') | list }}"
  changed_when: true
"""

RETURN = r"""
md_path:
  description: The array's path, C(/dev/md/<md_name>).
  returned: always
  type: str
  sample: /dev/md/checkpoints
md_exists:
  description: Whether the array exists (always V(false) without O(md_devices)).
  returned: always
  type: bool
  sample: false
probed:
  description: The devices probed, in order.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvme1n1, /dev/nvme2n1, /dev/nvme3n1]
signatures:
  description: Every probed device with the types of its signatures, each once, in the order C(wipefs) gave them.
  returned: always
  type: dict
  sample: {/dev/nvme1n1: [crypto_LUKS], /dev/nvme2n1: [ext4], /dev/nvme3n1: []}
tang_unreachable:
  description: The servers that did not answer, each with why (only check mode gets this far with any).
  returned: always
  type: list
  elements: str
  sample: ["http://tang2.example.com:8080 (Request failed: [Errno 111] Connection refused)"]
dm_loaded:
  description: Whether the kernel has device-mapper (C(/sys/module/dm_mod) exists).
  returned: always
  type: bool
  sample: true
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.gpucloud.fleet.plugins.module_utils.disk_encryption import (
    DiskEncryptionError,
    md_path,
    preflight,
    tang_check,
)


def _fetch(module):
    def fetch(url):
        response, info = fetch_url(module, url, method="GET", timeout=10)
        body = response.read() if response is not None else b""
        return info.get("status", -1), body.decode("utf-8", "replace"), info.get("msg", "")
    return fetch


def main():
    module = AnsibleModule(
        argument_spec=dict(
            volume_devices=dict(type="list", elements="str", default=[]),
            md_devices=dict(type="list", elements="str", default=[]),
            md_name=dict(type="str", default="checkpoints"),
            allow_format=dict(type="list", elements="str", default=[]),
            tang_servers=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        unreachable, warning = tang_check(_fetch(module), params["tang_servers"], module.check_mode)
        if warning:
            module.warn(warning)
        result = preflight(
            run=lambda argv: module.run_command(argv, environ_update={"LC_ALL": "C"}),
            wipefs=module.get_bin_path("wipefs", required=True),
            volume_devices=params["volume_devices"],
            md_devices=params["md_devices"],
            md_name=params["md_name"],
            allow_format=params["allow_format"],
            # lexists: /dev/md/<name> is a udev symlink; the role's stat did not follow it either.
            md_exists=os.path.lexists(md_path(params["md_name"])),
        )
    except DiskEncryptionError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, tang_unreachable=unreachable, dm_loaded=os.path.exists("/sys/module/dm_mod"),
                     **result)


if __name__ == "__main__":
    main()
