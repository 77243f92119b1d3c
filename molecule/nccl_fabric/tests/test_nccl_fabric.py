"""Verify the nccl_fabric lab nodes on their real state (testinfra through Molecule).

The lab has no GPU and no HCA: ib0 is a veth stand-in created by prepare.yml, the GPU/NIC
topology, ibstat and nccl-tests inputs are real captures from tests/fixtures copied onto
the nodes. Everything asserted here is read from the node itself.
"""
import ipaddress
import json

import pytest
import testinfra

NODES = ("nccl_fabric-debian12", "nccl_fabric-ubuntu2204", "nccl_fabric-ubuntu2404a", "nccl_fabric-ubuntu2404b")
RENDERER = {
    "nccl_fabric-debian12": "ifupdown",
    "nccl_fabric-ubuntu2204": "netplan",
    "nccl_fabric-ubuntu2404a": "netplan",
    "nccl_fabric-ubuntu2404b": "networkd",
}
CONFIG_FILE = {
    "ifupdown": "/etc/network/interfaces.d/60-gpucloud-ib0",
    "networkd": "/etc/systemd/network/60-gpucloud-ib0.network",
    "netplan": "/etc/netplan/60-gpucloud-ipoib.yaml",
}
SUBNET = ipaddress.ip_network("10.50.0.0/24")
OFFSET = 10


def ib0_addresses(host):
    """IPv4 addresses on the ib0 stand-in, as ip(8) reports them."""
    data = json.loads(host.check_output("ip -j -4 addr show dev ib0"))
    return ["%s/%s" % (a["local"], a["prefixlen"]) for link in data for a in link["addr_info"]]


@pytest.mark.parametrize("package", ["rdma-core", "ibverbs-providers", "ibverbs-utils", "infiniband-diags", "perftest"])
def test_rdma_stack_installed(host, package):
    assert host.package(package).is_installed


def test_rdma_tools_run(host):
    assert host.exists("ibstat") and host.exists("ib_write_bw") and host.exists("ibv_devinfo")


def test_ib0_stand_in_has_one_address_from_the_subnet(host):
    addrs = ib0_addresses(host)
    assert len(addrs) == 1, addrs
    iface = ipaddress.ip_interface(addrs[0])
    assert iface.network == SUBNET
    # host N of the group gets usable address N + offset: .11, .12, .13
    assert 11 <= int(iface.ip) - int(SUBNET.network_address) <= 10 + OFFSET + len(NODES)


def test_ib0_up_with_configured_mtu(host):
    link = json.loads(host.check_output("ip -j link show dev ib0"))[0]
    assert link["mtu"] == 4092
    assert "UP" in link["flags"]


def test_ib0_addresses_unique_across_the_lab(host):
    seen = {}
    for name in NODES:
        peer = testinfra.get_host("podman://%s" % name)
        seen[name] = ib0_addresses(peer)[0]
    assert len(set(seen.values())) == len(NODES), seen
    assert ib0_addresses(host)[0] == seen[host.backend.get_hostname()]


def test_ipoib_configuration_written_by_the_renderer(host):
    name = host.backend.get_hostname()
    renderer = RENDERER[name]
    address = ib0_addresses(host)[0]
    f = host.file(CONFIG_FILE[renderer])
    assert f.is_file and f.user == "root"
    assert address in f.content_string
    assert f.mode == (0o600 if renderer == "netplan" else 0o644)
    for other, path in CONFIG_FILE.items():
        if other != renderer:
            assert not host.file(path).exists, path


def test_ipoib_applied_by_the_renderer(host):
    renderer = RENDERER[host.backend.get_hostname()]
    if renderer == "ifupdown":
        assert host.check_output("ifquery --state ib0").strip() == "ib0=ib0"
    else:
        assert host.service("systemd-networkd").is_running
        assert host.service("systemd-networkd").is_enabled
        status = host.check_output("networkctl status ib0 --no-pager")
        assert "configured" in status
        # only ib0 is managed: the container's own interface is left alone
        assert "unmanaged" in host.check_output("networkctl list eth0 --no-pager --no-legend")
    if renderer == "netplan":
        generated = host.file("/run/systemd/network/10-netplan-ib0.network")
        assert generated.exists and "Address=%s" % ib0_addresses(host)[0] in generated.content_string


def test_nccl_conf_rendered_from_the_captured_topology(host):
    f = host.file("/etc/nccl.conf")
    assert f.is_file and f.mode == 0o644 and f.user == "root"
    settings = dict(
        line.split("=", 1) for line in f.content_string.splitlines() if line and not line.startswith("#")
    )
    # DGX A100 capture: GPU0/1 sit behind mlx5_0/1 (PXB), GPU2/3 behind mlx5_2/3, and so on.
    # The lab is RoCE, so only NICs whose captured ibstat link layer is Ethernet qualify:
    # ubuntu2404a's are all Ethernet; ubuntu2404b's only mlx5_0, which every GPU then takes as its
    # nearest Ethernet NIC; debian12 and ubuntu2204 list no HCA, so their choice is by affinity alone.
    hcas = ["mlx5_0"] if host.backend.get_hostname() == "nccl_fabric-ubuntu2404b" else ["mlx5_%d" % i for i in range(8)]
    assert settings == {
        "NCCL_DEBUG": "WARN",
        "NCCL_SOCKET_IFNAME": "=ib0",
        "NCCL_IB_HCA": "=" + ",".join(name + ":1" for name in hcas),
        "NCCL_IB_GID_INDEX": "3",
    }


def test_homogeneity_report_flags_the_real_and_the_injected_outlier(host):
    report = json.loads(host.file("/var/lib/gpucloud/nccl_fabric/homogeneity.json").content_string)
    assert report["hosts"] == list(NODES)
    # real state: both Ubuntu 24.04 nodes ship rdma-core 50.0, Debian 12 44.0, Ubuntu 22.04 39.0
    assert report["outliers"]["rdma_core"]["majority"].startswith("50.0")
    outliers = report["outliers"]["rdma_core"]["outliers"]
    assert sorted(outliers) == ["nccl_fabric-debian12", "nccl_fabric-ubuntu2204"]
    assert outliers["nccl_fabric-debian12"].startswith("44.0") and outliers["nccl_fabric-ubuntu2204"].startswith("39.0")
    # injected through the nccl_fabric_version_overrides test seam on one node
    assert report["outliers"]["ofed"] == {
        "majority": "not installed",
        "outliers": {"nccl_fabric-ubuntu2404b": "OFED-internal-24.10-1.1.4"},
    }
    assert "driver" not in report["outliers"] and "nccl" not in report["outliers"]
    installed = host.package("rdma-core").version
    assert report["versions"][host.backend.get_hostname()]["rdma_core"] == installed


def test_homogeneity_fail_on_rdma_core_run_left_its_report(host):
    report = json.loads(host.file("/var/lib/gpucloud-lab/homogeneity-fail-on-rdma-core.json").content_string)
    assert report["fail_on"] == ["rdma_core"]
    assert sorted(report["outliers"]["rdma_core"]["outliers"]) == ["nccl_fabric-debian12", "nccl_fabric-ubuntu2204"]


def test_nccl_tests_result_judged_from_the_captured_log(host):
    result = json.loads(host.file("/var/log/gpucloud/nccl-tests/all_reduce_perf.json").content_string)
    assert result["passed"] is True and result["failures"] == []
    assert result["result"]["ranks"] == 16
    assert result["result"]["avg_busbw"] == pytest.approx(70.742)
    assert result["result"]["max_busbw"] == pytest.approx(338.82)
    assert result["result"]["wrong"] == 0


def test_nvidia_peermem_persistent_but_not_loaded_without_a_driver(host):
    f = host.file("/etc/modules-load.d/nvidia-peermem.conf")
    assert f.is_file and "nvidia-peermem" in f.content_string.splitlines()
    assert not host.file("/proc/driver/nvidia/version").exists
    assert not host.file("/sys/module/nvidia_peermem").exists


def test_ipoib_mode_rule_for_networkd(host):
    if RENDERER[host.backend.get_hostname()] != "networkd":
        pytest.skip("the udev mode rule belongs to the networkd renderer")
    rule = host.file("/etc/udev/rules.d/70-gpucloud-ipoib-mode.rules").content_string
    assert 'KERNEL=="ib0", ATTR{mode}="datagram"' in rule
