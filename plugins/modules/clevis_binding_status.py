#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: clevis_binding_status
short_description: Tell whether a LUKS volume's Clevis keyslot must be (re)bound to Tang
version_added: 0.1.0
description:
  - Checks one LUKS2 volume as the C(disk_encryption) role needs it, in this order, changing nothing.
  - The recovery passphrase must open O(recovery_keyslot) (C(cryptsetup open --test-passphrase));
    otherwise the module fails, since a keyslot that cannot be proven must not be rewritten.
  - Reads the binding of O(keyslot) with C(clevis luks list) and compares it with an C(sss) pin of
    threshold O(threshold) over exactly the Tang servers O(servers) (no other pin; URLs compare
    without a trailing slash).
  - When it matches, asks C(clevis luks report) whether the servers rotated the keys recorded in
    the binding; a server that does not answer fails the module.
  - When nothing needs rebinding, proves that the Tang servers unlock O(keyslot)
    (C(clevis luks pass) into C(cryptsetup open --test-passphrase)) and fails if they do not.
  - Returns the LUKS UUID too.
author:
  - gpucloud.fleet contributors (@gpucloud)
extends_documentation_fragment:
  - gpucloud.fleet.read_only
options:
  device:
    description: The LUKS device.
    type: path
    required: true
  keyslot:
    description: The keyslot bound by Clevis.
    type: int
    required: true
  servers:
    description: The Tang servers' URLs the binding must use.
    type: list
    elements: str
    required: true
  threshold:
    description: How many of O(servers) must answer to unlock (the C(sss) pin's C(t)).
    type: int
    required: true
  recovery_keyslot:
    description: The keyslot of the recovery passphrase.
    type: int
    required: true
  recovery_passphrase:
    description: The recovery passphrase, given to C(cryptsetup) on its standard input.
    type: str
    required: true
  require_current:
    description:
      - Fail unless the binding is as wanted, its keys are current and it unlocks (used right after binding).
    type: bool
    default: false
requirements:
  - C(cryptsetup), C(clevis) with C(clevis-luks).
seealso:
  - module: gpucloud.fleet.disk_preflight
  - name: Clevis
    description: The C(clevis luks) commands.
    link: https://github.com/latchset/clevis
"""

EXAMPLES = r"""
- name: Read the Clevis binding of keyslot 1
  gpucloud.fleet.clevis_binding_status:
    device: /dev/nvme1n1
    keyslot: 1
    servers: [http://tang1.example.net, http://tang2.example.net]
    threshold: 1
    recovery_keyslot: 0
    recovery_passphrase: "{{ vault_recovery_passphrase }}"
  register: binding

- name: Say why the keyslot would be rebound
  ansible.builtin.debug:
    msg: "{{ binding.rebind_reason }}"
  when: binding.rebind_reason | length > 0
"""

RETURN = r"""
bound:
  description: Whether anything is bound to O(keyslot).
  returned: success
  type: bool
  sample: true
matches:
  description: Whether the binding is C(sss) with O(threshold) over exactly O(servers).
  returned: success
  type: bool
  sample: true
binding:
  description: The pin and its configuration as C(clevis luks list) printed them; V(null) when unbound.
  returned: success
  type: dict
  sample: {pin: sss, config: {t: 1, pins: {tang: [{url: "http://tang1.example.net"}]}}}
rotated_keys:
  description: The thumbprints C(clevis luks report) named as rotated (empty when current or not asked).
  returned: success
  type: list
  elements: str
  sample: [UVcWseaygZeBf-eIbS99D_CbsyJeHG9Upuy8FglMJBg]
rebind_reason:
  description: V(not bound), V(servers or threshold changed), V(Tang keys rotated), or empty when nothing is to change.
  returned: success
  type: str
  sample: Tang keys rotated
unlocks:
  description: V(true) when the Tang servers were shown to unlock O(keyslot); V(null) when not tried because it is to be rebound.
  returned: success
  type: bool
  sample: true
uuid:
  description: The LUKS UUID of O(device).
  returned: success
  type: str
  sample: 7cc4411d-34dc-4fae-b9eb-64f28ebcc520
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.disk_encryption import (
    ClevisBinding,
    DiskEncryptionError,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            device=dict(type="path", required=True),
            keyslot=dict(type="int", required=True, no_log=False),
            servers=dict(type="list", elements="str", required=True),
            threshold=dict(type="int", required=True),
            recovery_keyslot=dict(type="int", required=True, no_log=False),
            recovery_passphrase=dict(type="str", required=True, no_log=True),
            require_current=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )

    def run(argv, data=None, binary=False):
        return module.run_command(
            argv, data=data, binary_data=True, encoding=None if binary else "utf-8",
            environ_update={"LC_ALL": "C"},
        )

    checker = ClevisBinding(
        run,
        cryptsetup=module.get_bin_path("cryptsetup", required=True),
        clevis=module.get_bin_path("clevis", required=True),
    )
    params = module.params
    try:
        result = checker.status(
            params["device"], params["keyslot"], params["servers"], params["threshold"],
            params["recovery_keyslot"], params["recovery_passphrase"], params["require_current"],
        )
    except DiskEncryptionError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
