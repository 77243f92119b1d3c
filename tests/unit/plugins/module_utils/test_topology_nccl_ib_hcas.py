# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nccl_ib_hcas of plugins/module_utils/topology.py on captured topologies and ibstat output.

The "before" oracle renders the Jinja loop that roles/nccl_fabric/tasks/nccl_conf.yml used
until this function replaced it, so each case shows where the old choice was wrong.
"""


import copy
import re

import jinja2
import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import parse_ibstat
from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import analyze, nccl_ib_hcas
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

# 8x A100, NIC0..7 = mlx5_0..7: GPU0/1 behind mlx5_0/1 (PXB), GPU2/3 behind mlx5_2/3, and so on.
DGX_A100 = ("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
A100_4 = ("public", "topo", "a100-sxm4-4gpu-nv4-1mlx5-princeton-della-cryoem.txt")
RTX3090 = ("public", "topo", "rtx3090-2gpu-nv4-bridge-ryzen5900x.txt")
# 9x MT4126: mlx5_0 link layer Ethernet, mlx5_1..8 InfiniBand (the .source says all Ethernet;
# the capture itself says otherwise).
A100_VM_MIXED = ("public", "ibstat", "a100-vm-9x-mt4126-roce-200g-gpud.txt")
# 12 HCAs, all link layer Ethernet: 8x MT4129 (CX-7) 400G, 4x MT4125 (CX-6 Dx) 100G (mlx5_1/2/7/8).
H100_ETH = ("public", "ibstat", "h100-node-8x-cx7-ndr-4x-cx6dx-eth-tabs-gpud.txt")
AZURE_IB = ("public", "ibstat", "azure-ndv4-a100-8x-cx6vf-hdr-ibpanic-gpud.txt")

# The loop of roles/nccl_fabric/tasks/nccl_conf.yml before nccl_ib_hcas, verbatim.
OLD_JINJA = """
{%- set ns = namespace(names=[]) -%}
{%- if __nccl_fabric_topology is not skipped -%}
{%- for gpu in __nccl_fabric_topology.topology.gpus -%}
{%- set near = __nccl_fabric_topology.nearest_nics[gpu] -%}
{%- for nic in near if nic.link == near[0].link -%}
{%- if nic.name not in ns.names and not (nccl_fabric_nccl_ib_hca_exclude and nic.name is match(nccl_fabric_nccl_ib_hca_exclude)) -%}
{%- set ns.names = ns.names + [nic.name] -%}
{%- endif -%}
{%- endfor -%}
{%- endfor -%}
{%- endif -%}
{{ ns.names | join(',') }}
"""


def old_jinja_choice(result, exclude="", port=None):
    """What the old role wrote, without the template's '=' prefix."""
    env = jinja2.Environment()
    env.tests["match"] = lambda value, pattern: re.match(pattern, value) is not None
    env.tests["skipped"] = lambda value: bool(value.get("skipped"))
    names = env.from_string(OLD_JINJA).render(
        __nccl_fabric_topology=result, nccl_fabric_nccl_ib_hca_exclude=exclude,
    )
    suffix = "" if port is None else ":%s" % port
    return [name + suffix for name in names.split(",") if name]


def topo(parts):
    return analyze(fixture_text(*parts))


def ibstat(parts):
    return parse_ibstat(fixture_text(*parts))


def with_link_layer(hcas, layer, names):
    """A copy of captured ibstat data with the link layer of `names` changed (fault injection)."""
    hcas = copy.deepcopy(hcas)
    for name in names:
        for port in hcas[name]["ports"].values():
            port["link_layer"] = layer
    return hcas


def h100_cx7_on_infiniband():
    """The H100 capture as the mixed node it stands for: CX-7 (MT4129) on InfiniBand, CX-6 Dx on Ethernet."""
    hcas = ibstat(H100_ETH)
    return with_link_layer(hcas, "InfiniBand", [name for name, ca in hcas.items() if ca["ca_type"] == "MT4129"])


def test_ethernet_nic_nearest_to_a_gpu_is_left_out_of_an_infiniband_list():
    # GPU0/GPU1's nearest NICs (PXB) are mlx5_0 (Ethernet) and mlx5_1 (InfiniBand).
    result = topo(DGX_A100)
    hcas = ibstat(A100_VM_MIXED)
    assert hcas["mlx5_0"]["ports"]["1"]["link_layer"] == "Ethernet"
    assert [nic["name"] for nic in result["nearest_nics"]["GPU0"][:2]] == ["mlx5_0", "mlx5_1"]
    expected = ["mlx5_%d:1" % i for i in range(1, 8)]
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand", port=1) == expected
    assert nccl_ib_hcas(result["topology"], hcas, "infiniband", port="1") == expected
    # Before: the Ethernet mlx5_0 went into NCCL_IB_HCA first.
    assert old_jinja_choice(result, port=1) == ["mlx5_%d:1" % i for i in range(8)]


def test_roce_list_takes_each_gpus_nearest_ethernet_nic_when_its_nearest_are_infiniband():
    # Only mlx5_0 is Ethernet: GPU2..GPU7's nearest NICs are all InfiniBand, their nearest
    # Ethernet NIC is mlx5_0 (NODE or SYS); it is listed once.
    result = topo(DGX_A100)
    hcas = ibstat(A100_VM_MIXED)
    assert nccl_ib_hcas(result["topology"], hcas, "roce", port=1) == ["mlx5_0:1"]
    assert nccl_ib_hcas(result["topology"], hcas, "Ethernet") == ["mlx5_0"]
    assert old_jinja_choice(result) == ["mlx5_%d" % i for i in range(8)]


def test_gpu_whose_nearest_nics_are_all_ethernet_gets_its_nearest_infiniband_nic():
    # Fault injection on the capture: mlx5_1 on Ethernet too, so both of GPU0/GPU1's PXB NICs
    # are Ethernet; their nearest InfiniBand NICs are mlx5_2 and mlx5_3 (NODE).
    result = topo(DGX_A100)
    hcas = with_link_layer(ibstat(A100_VM_MIXED), "Ethernet", ["mlx5_1"])
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand") == ["mlx5_%d" % i for i in range(2, 8)]
    assert old_jinja_choice(result)[:2] == ["mlx5_0", "mlx5_1"]


def test_h100_node_with_infiniband_cx7_and_ethernet_cx6dx():
    # DGX A100 topology over the H100 capture's names: mlx5_1, mlx5_2, mlx5_7 are CX-6 Dx.
    result = topo(DGX_A100)
    hcas = h100_cx7_on_infiniband()
    assert sorted(name for name, ca in hcas.items() if ca["ports"]["1"]["link_layer"] == "Ethernet") == [
        "mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
    # GPU0: mlx5_0 of {0, 1}; GPU2: mlx5_3 of {2, 3}; GPU4: both of {4, 5}; GPU6: mlx5_6 of {6, 7}.
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand", port=1) == [
        "mlx5_0:1", "mlx5_3:1", "mlx5_4:1", "mlx5_5:1", "mlx5_6:1"]
    # RoCE: GPU0 mlx5_1, GPU2 mlx5_2; GPU4/5's nearest (mlx5_4/5) are InfiniBand, their nearest
    # Ethernet NIC is mlx5_7 (NODE), which GPU6/7 choose too.
    assert nccl_ib_hcas(result["topology"], hcas, "Ethernet", port=1) == ["mlx5_1:1", "mlx5_2:1", "mlx5_7:1"]
    old = old_jinja_choice(result, port=1)
    assert "mlx5_1:1" in old and "mlx5_2:1" in old and "mlx5_7:1" in old


@pytest.mark.parametrize("parts,layer", [(H100_ETH, "Ethernet"), (AZURE_IB, "InfiniBand")])
def test_single_fabric_node_keeps_the_affinity_order(parts, layer):
    result = topo(DGX_A100)
    assert nccl_ib_hcas(result["topology"], ibstat(parts), layer, port=1) == old_jinja_choice(result, port=1)


@pytest.mark.parametrize("hcas", [{}, None])
def test_without_ibstat_data_the_choice_is_by_affinity_alone(hcas):
    result = topo(DGX_A100)
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand") == old_jinja_choice(result)


def test_excluded_nearest_nic_gives_way_to_the_next_nearest():
    result = topo(DGX_A100)
    hcas = ibstat(AZURE_IB)
    # mlx5_0/mlx5_1 excluded: GPU0/1 take their NODE NICs mlx5_2/3.
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand", exclude_pattern="mlx5_[01]$") == [
        "mlx5_%d" % i for i in range(2, 8)]
    # Excluded NICs need no link layer: mlx5_0 absent from ibstat is no error when excluded.
    partial = dict((name, ca) for name, ca in hcas.items() if name != "mlx5_0")
    assert nccl_ib_hcas(result["topology"], partial, "InfiniBand", exclude_pattern="mlx5_0$")[0] == "mlx5_1"


def test_exclude_is_matched_at_the_start_like_jinja_match():
    result = topo(DGX_A100)
    assert nccl_ib_hcas(result["topology"], {}, "InfiniBand", exclude_pattern="mlx5_7") == [
        "mlx5_%d" % i for i in range(7)]
    assert nccl_ib_hcas(result["topology"], {}, "InfiniBand", exclude_pattern="5_7") == [
        "mlx5_%d" % i for i in range(8)]


def test_topology_without_nics_gives_an_empty_list():
    result = topo(RTX3090)
    assert result["topology"]["nics"] == []
    assert nccl_ib_hcas(result["topology"], ibstat(AZURE_IB), "InfiniBand") == []


def test_single_nic_node():
    result = topo(A100_4)
    name = result["topology"]["nic_names"][result["topology"]["nics"][0]]
    hcas = {name: {"ports": {"1": {"link_layer": "InfiniBand"}}}}
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand", port=1) == [name + ":1"]


def test_no_nic_on_the_wanted_link_layer_is_an_error():
    result = topo(DGX_A100)
    with pytest.raises(ValueError, match=r"no NIC of the topology is on the InfiniBand link layer \(mlx5_0: Ethernet"):
        nccl_ib_hcas(result["topology"], ibstat(H100_ETH), "InfiniBand")


def test_topology_nic_missing_from_ibstat_is_an_error():
    result = topo(DGX_A100)
    hcas = dict((name, ca) for name, ca in ibstat(AZURE_IB).items() if name != "mlx5_5")
    with pytest.raises(ValueError, match="mlx5_5 is in the GPU/NIC topology but ibstat does not list it"):
        nccl_ib_hcas(result["topology"], hcas, "InfiniBand")


def test_missing_port_and_missing_link_layer_are_errors():
    result = topo(DGX_A100)
    with pytest.raises(ValueError, match="ibstat lists no port 2 on mlx5_0"):
        nccl_ib_hcas(result["topology"], ibstat(AZURE_IB), "InfiniBand", port=2)
    hcas = ibstat(AZURE_IB)
    hcas["mlx5_3"]["ports"]["1"]["link_layer"] = None
    with pytest.raises(ValueError, match="ibstat prints no link layer for mlx5_3 port 1"):
        nccl_ib_hcas(result["topology"], hcas, "InfiniBand")


def test_hca_with_ports_on_both_fabrics_is_chosen_only_by_port():
    result = topo(DGX_A100)
    hcas = ibstat(AZURE_IB)
    hcas["mlx5_0"]["ports"]["2"] = dict(hcas["mlx5_0"]["ports"]["1"], link_layer="Ethernet")
    # A bare mlx5_0 would put NCCL on both fabrics.
    assert "mlx5_0" not in nccl_ib_hcas(result["topology"], hcas, "InfiniBand")
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand", port=1)[0] == "mlx5_0:1"
    # Only mlx5_0 has a port 2; the others are excluded, or their missing port 2 is an error.
    assert nccl_ib_hcas(result["topology"], hcas, "Ethernet", exclude_pattern="mlx5_[1-7]$", port=2) == ["mlx5_0:2"]


def test_ibv_devinfo_link_layer_words_are_understood():
    result = topo(DGX_A100)
    hcas = with_link_layer(ibstat(AZURE_IB), "IB", ["mlx5_%d" % i for i in range(8)])
    assert nccl_ib_hcas(result["topology"], hcas, "InfiniBand") == ["mlx5_%d" % i for i in range(8)]


@pytest.mark.parametrize("kwargs,message", [
    ({"link_layer": "omnipath"}, "link layer must be InfiniBand or Ethernet"),
    ({"link_layer": "none"}, "link layer must be InfiniBand or Ethernet"),
    ({"link_layer": "InfiniBand", "exclude_pattern": "mlx5_("}, "is not a valid regular expression"),
    ({"link_layer": "InfiniBand", "port": 0}, "port must be a positive integer"),
    ({"link_layer": "InfiniBand", "port": "1a"}, "port must be a positive integer"),
    ({"link_layer": "InfiniBand", "port": True}, "port must be a positive integer"),
    # Issue 28 item 13: the port lands in NCCL_IB_HCA (mlx5_0:1); a trailing newline would end nccl.conf's line.
    ({"link_layer": "InfiniBand", "port": "1\n"}, "port must be a positive integer"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        nccl_ib_hcas(topo(DGX_A100)["topology"], ibstat(AZURE_IB), **kwargs)
