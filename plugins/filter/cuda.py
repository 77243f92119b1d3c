# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: cuda_min_driver.yml and cuda_driver_compatible.yml beside this file.


from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.cuda_compat import (
    cuda_min_driver as _cuda_min_driver,
    driver_supports_cuda,
)


def cuda_min_driver(version):
    try:
        return _cuda_min_driver(version)
    except ValueError as exc:
        raise AnsibleFilterError("cuda_min_driver: %s" % exc) from exc


def cuda_driver_compatible(driver, cuda_version, minor_compat=False):
    if not isinstance(minor_compat, bool):
        raise AnsibleFilterError("cuda_driver_compatible: minor_compat must be a boolean, got %r" % (minor_compat,))
    try:
        return driver_supports_cuda(driver, cuda_version, minor_compat=minor_compat)
    except ValueError as exc:
        raise AnsibleFilterError("cuda_driver_compatible: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {
            "cuda_min_driver": cuda_min_driver,
            "cuda_driver_compatible": cuda_driver_compatible,
        }
