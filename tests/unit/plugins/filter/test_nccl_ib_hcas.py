# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.nccl_ib_hcas import nccl_ib_hcas
from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import parse_ibstat
from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import parse_topo_matrix
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text


@pytest.fixture
def dgx_a100():
    return parse_topo_matrix(fixture_text("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt"))


@pytest.fixture
def mixed_hcas():
    # mlx5_0 Ethernet, mlx5_1..8 InfiniBand.
    return parse_ibstat(fixture_text("public", "ibstat", "a100-vm-9x-mt4126-roce-200g-gpud.txt"))


def test_role_arguments(dgx_a100, mixed_hcas):
    # What nccl_conf.yml passes: the role's link layer word, an empty exclude, the port.
    assert nccl_ib_hcas(dgx_a100, mixed_hcas, "infiniband", exclude="", port=1) == [
        "mlx5_%d:1" % i for i in range(1, 8)]
    assert nccl_ib_hcas(dgx_a100, mixed_hcas, "roce", exclude="", port=1) == ["mlx5_0:1"]
    assert nccl_ib_hcas(dgx_a100, {}, "roce", exclude=None, port=None) == ["mlx5_%d" % i for i in range(8)]


@pytest.mark.parametrize("topology,hcas,layer,message", [
    ("GPU0 X", {}, "InfiniBand", "the input must be the topology that gpucloud.fleet.nvidia_topology returns"),
    ({"gpus": []}, {}, "InfiniBand", "the input must be the topology"),
    (None, ["mlx5_0"], "InfiniBand", "the input must be the topology"),
])
def test_bad_input(topology, hcas, layer, message):
    with pytest.raises(AnsibleFilterError, match=message):
        nccl_ib_hcas(topology, hcas, layer)


def test_bad_hcas_and_errors_of_the_decision(dgx_a100, mixed_hcas):
    with pytest.raises(AnsibleFilterError, match="hcas must be the hcas dict"):
        nccl_ib_hcas(dgx_a100, ["mlx5_0"], "InfiniBand")
    with pytest.raises(AnsibleFilterError, match="^nccl_ib_hcas: link layer must be InfiniBand or Ethernet"):
        nccl_ib_hcas(dgx_a100, mixed_hcas, "none")
    with pytest.raises(AnsibleFilterError, match="^nccl_ib_hcas: no NIC of the topology is on the InfiniBand"):
        nccl_ib_hcas(dgx_a100, dict((n, mixed_hcas["mlx5_0"]) for n in mixed_hcas), "InfiniBand")
