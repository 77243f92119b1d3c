# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


class ModuleDocFragment(object):
    # The attributes of the modules that only read (nvidia_gpu_facts, nvidia_topology, ib_info).
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    support: full
    description: The module only reads; check mode gives the same answer.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to diff.
"""
