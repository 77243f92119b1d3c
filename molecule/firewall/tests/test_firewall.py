"""Verify the firewall role on the lab nodes' real state (after converge and side_effect).

Nodes are read through podman exec; reachability is tested from the prober container
over the lab network and from the controller over SSH, the paths a firewall can cut.
"""
import json
import os
import subprocess

import pytest
import testinfra

NODES = ("firewall-debian12", "firewall-ubuntu2404")
PROBER = "firewall-prober"
CHAIN = "GPUCLOUD-INPUT"
# Open to the prober: public ports, its monitoring ports, the lab-dashboard service.
ALLOWED = (22, 80, 443, 9100, 9400, 3000)
# A bounded sample of ports with a listener behind each that the prober must not reach:
# Kubernetes ports (open to another network only), then ports no rule opens.
BLOCKED = (6443, 10250, 30080, 8080, 3306, 5432, 2375, 9090, 5000, 11211)

PROBE = r"""
import socket, sys, json
from concurrent.futures import ThreadPoolExecutor
host, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
def probe(port):
    try:
        socket.create_connection((host, port), timeout=1.5).close()
        return port, True
    except OSError:
        return port, False
with ThreadPoolExecutor(len(ports)) as pool:
    print(json.dumps(dict(pool.map(probe, ports))))
"""


@pytest.fixture(name="node")
def fixture_node(host):
    name = host.backend.get_hostname()
    if name not in NODES:
        pytest.skip("%s is not a firewall node" % name)
    return host


@pytest.fixture(name="prober", scope="module")
def fixture_prober():
    return testinfra.get_host("podman://%s" % PROBER)


def lab_ip(node):
    return node.check_output("ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1")


def gateway(node):
    return node.check_output("ip -4 route show default | awk '{print $3}'")


def test_input_policy_is_drop_and_our_jump_comes_first(node):
    lines = node.check_output("iptables -S INPUT").splitlines()
    assert lines[0] == "-P INPUT DROP"
    assert lines[1] == "-A INPUT -j %s" % CHAIN
    assert lines.count("-A INPUT -j %s" % CHAIN) == 1
    # kube-proxy's jump, made before converge, is still there, after ours.
    assert "-A INPUT -j KUBE-FIREWALL" in lines[2:]


def test_chain_holds_the_policy(node, prober):
    rules = node.check_output("iptables -S %s" % CHAIN).splitlines()
    prober_ip = prober.check_output("ip -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1")
    expected = [
        "-A %s -i lo -j ACCEPT" % CHAIN,
        "-A %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT" % CHAIN,
        "-A %s -p icmp -m icmp --icmp-type 8 -j ACCEPT" % CHAIN,
        # The controller's address as the node sees it over SSH: the lab bridge's gateway.
        "-A %s -s %s/32 -m comment --comment gpucloud-controller -j ACCEPT" % (CHAIN, gateway(node)),
        "-A %s -p tcp -m multiport --dports 22,80,443 -m comment --comment gpucloud-public -j ACCEPT" % CHAIN,
        "-A %s -s %s/32 -p tcp -m multiport --dports 9100,9400 -m comment --comment monitoring -j ACCEPT" % (CHAIN, prober_ip),
        "-A %s -s 192.0.2.0/24 -p tcp -m multiport --dports 6443,2379:2380,10250,10257,10259,30000:32767 "
        "-m comment --comment kubernetes -j ACCEPT" % CHAIN,
        "-A %s -s 192.0.2.0/24 -p udp -m multiport --dports 8472 -m comment --comment kubernetes-udp -j ACCEPT" % CHAIN,
        "-A %s -s 198.51.100.0/24 -p tcp -m multiport --dports 22,1024:65535 -m comment --comment fleet -j ACCEPT" % CHAIN,
        "-A %s -s %s/32 -p tcp -m multiport --dports 3000 -m comment --comment lab-dashboard -j ACCEPT" % (CHAIN, prober_ip),
    ]
    for rule in expected:
        assert rule in rules, rule
    # The rolled-back policy (no SSH, no controller rule) left nothing behind.
    assert not [r for r in rules if "--dports 80,443 " in r]


def test_ip6tables_parity(node):
    lines = node.check_output("ip6tables -S").splitlines()
    assert "-P INPUT DROP" in lines
    assert "-A INPUT -j %s" % CHAIN in lines
    for rule in (
        "-A %s -p ipv6-icmp -m icmp6 --icmpv6-type 135 -m hl --hl-eq 255 -j ACCEPT" % CHAIN,
        "-A %s -p tcp -m multiport --dports 22,80,443 -m comment --comment gpucloud-public -j ACCEPT" % CHAIN,
        "-A %s -s fd00:10::/64 -p tcp -m multiport --dports 9100,9400 -m comment --comment monitoring -j ACCEPT" % CHAIN,
        "-A %s -s 2001:db8:51::/48 -p tcp -m multiport --dports 22,1024:65535 -m comment --comment fleet -j ACCEPT" % CHAIN,
    ):
        assert rule in lines, rule
    # IPv4 sources never reach ip6tables.
    assert not [r for r in lines if "192.0.2." in r or "198.51.100." in r]


def test_foreign_chains_untouched(node):
    before = node.file("/root/foreign-chains.before").content_string.splitlines()
    now = node.check_output(
        "{ iptables-save -t filter | grep -E '^(:|-A )(DOCKER|KUBE)' | sed 's/ \\[[0-9]*:[0-9]*\\]$//';"
        " iptables-save -t nat | grep -E '^(:|-A )DOCKER' | sed 's/ \\[[0-9]*:[0-9]*\\]$//'; }").splitlines()
    assert now == before
    assert "-A DOCKER-USER -s 203.0.113.0/24 -j RETURN" in now
    assert "-A DOCKER -i docker0 -j RETURN" in now


def test_rules_persist_for_boot(node):
    for path, tool in (("/etc/iptables/rules.v4", "iptables"), ("/etc/iptables/rules.v6", "ip6tables")):
        f = node.file(path)
        assert f.is_file and f.user == "root" and f.mode == 0o600
        text = f.content_string
        assert ":INPUT DROP [0:0]" in text and "-A INPUT -j %s" % CHAIN in text
        assert "--dports 22,80,443 " in text
        assert "DOCKER" not in text and "KUBE" not in text
        node.run_expect([0], "%s-restore --test < %s" % (tool, path))
    assert node.package("iptables-persistent").is_installed
    assert node.service("netfilter-persistent").is_enabled


def test_rollback_happened(node):
    log = node.file("/root/firewall-rollback.log").content_string
    assert "rolled back" in log


def test_listeners_answer_on_the_node_itself(node):
    # Loopback is accepted: every probed port has a listener, so a closed port seen from
    # the prober is the firewall's doing.
    out = node.check_output("python3 -c %s 127.0.0.1 %s" % (_quote(PROBE), " ".join(map(str, ALLOWED + BLOCKED))))
    assert all(json.loads(out).values()), out


def test_prober_reaches_exactly_the_allowed_ports(node, prober):
    ports = ALLOWED + BLOCKED
    out = prober.check_output("python3 -c %s %s %s" % (_quote(PROBE), lab_ip(node), " ".join(map(str, ports))))
    answered = {int(port) for port, ok in json.loads(out).items() if ok}
    assert answered == set(ALLOWED), out


def test_controller_reaches_the_node_over_ssh(node):
    key = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "firewall_ssh_key")
    proc = subprocess.run(
        ["ssh", "-i", key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "ConnectTimeout=5", "-o", "ControlMaster=no", "root@%s" % lab_ip(node), "hostname"],
        capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == node.backend.get_hostname()


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def test_ufw_was_disabled_and_removed_where_it_was(node):
    # prepare.yml installed and enabled ufw on the Ubuntu node (SSH allowed, INPUT dropped);
    # the role (firewall_remove_ufw: true) disabled it and removed the package, which Breaks
    # netfilter-persistent. `ufw disable` leaves its chains empty (and the jumps to them) until
    # the next boot; none of them holds a rule, and the boot-time file names none.
    assert not node.package("ufw").is_installed
    assert node.package("netfilter-persistent").is_installed and node.package("iptables-persistent").is_installed
    assert [line for line in node.check_output("iptables-save -t filter").splitlines() if line.startswith("-A ufw")] == []
    assert "ufw" not in node.file("/etc/iptables/rules.v4").content_string
