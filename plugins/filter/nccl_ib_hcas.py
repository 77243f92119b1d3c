# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: nccl_ib_hcas.yml beside this file.


from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import nccl_ib_hcas as _nccl_ib_hcas


def nccl_ib_hcas(topology, hcas, link_layer, exclude=None, port=None):
    if not isinstance(topology, Mapping) or not all(key in topology for key in ("gpus", "nics", "nic_names", "links")):
        raise AnsibleFilterError("nccl_ib_hcas: the input must be the topology that gpucloud.fleet.nvidia_topology "
                                 "returns (gpus, nics, nic_names, links), got %r" % (type(topology).__name__,))
    if hcas is not None and not isinstance(hcas, Mapping):
        raise AnsibleFilterError("nccl_ib_hcas: hcas must be the hcas dict that gpucloud.fleet.ib_info returns, got %r"
                                 % (type(hcas).__name__,))
    try:
        return _nccl_ib_hcas(topology, hcas, link_layer, exclude_pattern=exclude or None, port=port)
    except ValueError as exc:
        raise AnsibleFilterError("nccl_ib_hcas: %s" % exc) from exc


class FilterModule(object):
    def filters(self):
        return {"nccl_ib_hcas": nccl_ib_hcas}
