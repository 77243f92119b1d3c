# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""roles/nccl_fabric/templates/nccl.conf.j2, rendered as ansible.builtin.template does (trim_blocks)."""


import os

import jinja2
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEMPLATES = os.path.join(ROOT, "roles", "nccl_fabric", "templates")


def render(**overrides):
    variables = {
        "ansible_managed": "managed", "inventory_hostname": "gpu1", "nccl_fabric_nccl_debug": "WARN",
        "__nccl_fabric_socket_ifname": "=ib0", "nccl_fabric_link_layer": "infiniband",
        "__nccl_fabric_ib_hca": ["mlx5_%d:1" % i for i in range(12)], "nccl_fabric_nccl_ib_hca": [],
        "__nccl_fabric_topology": {"source": "nvidia-smi topo -m"}, "nccl_fabric_nccl_ib_gid_index": None,
        "nccl_fabric_nccl_topo_file": "", "nccl_fabric_nccl_extra_env": {},
    }
    variables.update(overrides)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True,
                             undefined=jinja2.StrictUndefined)
    text = env.get_template("nccl.conf.j2").render(**variables)
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_ib_hca_is_an_exact_match_list():
    # Without the leading '=', NCCL reads mlx5_1 as a prefix that also selects mlx5_10 and mlx5_11.
    assert render()["NCCL_IB_HCA"] == "=" + ",".join("mlx5_%d:1" % i for i in range(12))


@pytest.mark.parametrize("given", [["=mlx5_0:1", "mlx5_1:1"], ["^mlx5_9"]])
def test_operator_list_with_its_own_prefix_is_kept(given):
    assert render(__nccl_fabric_ib_hca=given, nccl_fabric_nccl_ib_hca=given)["NCCL_IB_HCA"] == ",".join(given)


def test_no_hca_line_without_hcas():
    assert "NCCL_IB_HCA" not in render(__nccl_fabric_ib_hca=[])
