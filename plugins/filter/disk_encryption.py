# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: disk_encryption_plan.yml beside this file. Logic: plugin_utils/disk_encryption.py.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import disk_encryption


def disk_encryption_plan(volumes, tang_servers, tang_threshold, recovery_passphrase, recovery_keyslot,
                         clevis_keyslot, pbkdf, md_devices, md_name, md_level, os_packages):
    try:
        return disk_encryption.plan(volumes, tang_servers, tang_threshold, recovery_passphrase, recovery_keyslot,
                                    clevis_keyslot, pbkdf, md_devices, md_name, md_level, os_packages)
    except disk_encryption.DiskEncryptionPlanError as exc:
        raise AnsibleFilterError("disk_encryption_plan: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"disk_encryption_plan": disk_encryption_plan}
