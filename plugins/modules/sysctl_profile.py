#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


DOCUMENTATION = r"""
module: sysctl_profile
short_description: Persist a sysctl profile in one sysctl.d file and apply it where the kernel allows
version_added: 0.1.0
description:
  - Writes all of O(settings) to the one file O(path) (the whole file, sorted by key), so they
    apply at every boot, and writes the values that differ to the running kernel through
    C(/proc/sys), in one call.
  - A key the running kernel does not have, or may not write (a container sees C(/proc/sys)
    read-only), is reported in RV(not_applied) and as a warning, not failed on; the file still
    holds it for the next boot.
  - Reads the sysctl.d directories the way C(systemd-sysctl) does and warns when a file applied
    after O(path) at boot sets one of the keys to another value (RV(overridden_at_boot)), or when
    O(path) is not read at boot at all.
author:
  - gpucloud.fleet contributors (@gpucloud)
attributes:
  check_mode:
    support: full
    description: Reports whether the file would change and which values would be written to the running kernel.
  diff_mode:
    support: full
    description: Shows the file before and after, and the running kernel's values before and after.
options:
  settings:
    description:
      - Sysctl key (dotted, or with slashes as C(sysctl.d) allows) to value. Booleans are written as
        V(1) and V(0); runs of whitespace in a value become one space, as the kernel prints them.
    type: dict
    required: true
  path:
    description:
      - The profile's file, written whole and owned by root with mode C(0644). To win over other
        files at boot its name must sort after theirs (for example C(99-zz-...conf)).
    type: path
    required: true
  comment:
    description: Text written at the top of the file, each line as a C(#) comment.
    type: str
    default: Managed by Ansible (gpucloud.fleet.sysctl_profile); local changes are overwritten.
  apply:
    description: Also write differing values to the running kernel. V(false) only persists them.
    type: bool
    default: true
requirements:
  - Linux with C(/proc/sys). No C(sysctl) binary is needed.
notes:
  - Runs as root to write O(path) and C(/proc/sys).
seealso:
  - module: ansible.posix.sysctl
  - name: sysctl.d(5)
    description: Configuration directories, their priority and the order files are applied in.
    link: https://www.freedesktop.org/software/systemd/man/latest/sysctl.d.html
"""

EXAMPLES = r"""
- name: Persist and apply the GPU/RDMA sysctl profile
  gpucloud.fleet.sysctl_profile:
    path: /etc/sysctl.d/99-zz-gpucloud-host-prep.conf
    settings:
      vm.max_map_count: 1048576
      net.core.rmem_max: 268435456
      net.ipv4.tcp_rmem: "4096 87380 134217728"
  register: sysctl_result

- name: Show what the running kernel did not take
  ansible.builtin.debug:
    var: sysctl_result.not_applied
"""

RETURN = r"""
path:
  description: The profile's file.
  returned: always
  type: str
  sample: /etc/sysctl.d/99-zz-gpucloud-host-prep.conf
file_changed:
  description: Whether the file was (in check mode, would be) written or its mode or owner fixed.
  returned: always
  type: bool
settings:
  description: The profile as written to the file, keys in dotted form, values as strings.
  returned: always
  type: dict
  sample: {vm.max_map_count: "1048576", net.ipv4.tcp_rmem: "4096 87380 134217728"}
applied:
  description: Values written (in check mode, that would be written) to the running kernel.
  returned: always
  type: dict
  sample: {vm.max_map_count: "1048576"}
not_applied:
  description: Keys the running kernel did not take, with the reason; they apply at the next boot if the kernel has them.
  returned: always
  type: dict
  sample: {kernel.yama.ptrace_scope: not in this kernel, net.core.rmem_max: "read-only here (is 4194304, profile 268435456)"}
overridden_at_boot:
  description: Keys a sysctl.d file applied after O(path) sets to another value, with that file and value.
  returned: always
  type: dict
  sample: {vm.max_map_count: {file: /etc/sysctl.d/99-zzz-local.conf, value: "65530"}}
boot_order:
  description: The sysctl.d files C(systemd-sysctl) applies at boot, in order, with O(path) among them.
  returned: always
  type: list
  elements: str
  sample: [/usr/lib/sysctl.d/50-pid-max.conf, /etc/sysctl.d/99-sysctl.conf, /etc/sysctl.d/99-zz-gpucloud-host-prep.conf]
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpucloud.fleet.plugins.module_utils.sysctl import (
    ProcSys,
    SysctlProfileError,
    ensure,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            path=dict(type="path", required=True),
            comment=dict(type="str", default="Managed by Ansible (gpucloud.fleet.sysctl_profile); "
                                             "local changes are overwritten."),
            apply=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    params = module.params

    def writer(path, text):
        """Write through Ansible's atomic_move: same-filesystem rename, SELinux context of
        the destination (or its default), then mode 0644 and root ownership."""
        fd, tmp = tempfile.mkstemp(dir=module.tmpdir)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        module.atomic_move(tmp, path)
        file_args = module.load_file_common_arguments(dict(path=path, mode="0644", owner="root", group="root"))
        module.set_fs_attributes_if_different(file_args, False)

    try:
        result = ensure(params["settings"], params["path"], params["comment"], params["apply"],
                        module.check_mode, ProcSys(), writer=writer)
    except (SysctlProfileError, OSError) as exc:
        module.fail_json(msg="%s: %s" % (params["path"], exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
