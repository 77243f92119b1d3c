# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The firewall role's decisions, on the controller: validate its variables, render the rules
# of our chain for each IP family and compare them with the live table. The filters
# firewall_role_plan and firewall_plan (plugins/filter/firewall_rules.py) expose them.
#
# Rules are rendered exactly as iptables-save prints them, so that the live rules of our
# chain (read back with iptables-save) compare line by line with the wanted ones.


import difflib
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.module_utils.packages import DPKG_FORMAT, parse_dpkg_query

try:
    import netaddr
    HAS_NETADDR = True
except ImportError:
    HAS_NETADDR = False

FAMILIES = ("ipv4", "ipv6")
PROTOCOLS = ("tcp", "udp", "all")
# One multiport match takes at most 15 ports; a range counts as two.
MULTIPORT_SLOTS = 15
# Matched with fullmatch: "$" would also accept a trailing newline, which iptables-restore
# reads as the end of the rule.
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
INTERFACE_RE = re.compile(r"[A-Za-z0-9_.:@-]{1,15}\+?")
CHAIN_RE = re.compile(r"[A-Z0-9][A-Z0-9_-]{0,28}")
# Chains other software owns; ours must never be one of them.
FOREIGN_CHAIN_PREFIXES = ("DOCKER", "KUBE-", "CNI-", "CILIUM", "cali-", "FLANNEL", "WEAVE")
BUILTIN_CHAINS = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")

# ICMP that a host needs to work (path MTU, errors, IPv6 neighbour discovery).
ICMP_ESSENTIAL = {
    "ipv4": ["-p icmp -m icmp --icmp-type 3", "-p icmp -m icmp --icmp-type 11",
             "-p icmp -m icmp --icmp-type 12"],
    "ipv6": ["-p ipv6-icmp -m icmp6 --icmpv6-type 1", "-p ipv6-icmp -m icmp6 --icmpv6-type 2",
             "-p ipv6-icmp -m icmp6 --icmpv6-type 3", "-p ipv6-icmp -m icmp6 --icmpv6-type 4",
             "-p ipv6-icmp -m icmp6 --icmpv6-type 133 -m hl --hl-eq 255",
             "-p ipv6-icmp -m icmp6 --icmpv6-type 134 -m hl --hl-eq 255",
             "-p ipv6-icmp -m icmp6 --icmpv6-type 135 -m hl --hl-eq 255",
             "-p ipv6-icmp -m icmp6 --icmpv6-type 136 -m hl --hl-eq 255"],
}
ICMP_ECHO = {"ipv4": "-p icmp -m icmp --icmp-type 8", "ipv6": "-p ipv6-icmp -m icmp6 --icmpv6-type 128"}


def _need_netaddr(name):
    if not HAS_NETADDR:
        raise AnsibleFilterError("%s: the Python library netaddr is required on the controller "
                                 "(pip install netaddr)" % name)


def _network(value, varname, allow_any=False):
    """One address or CIDR -> netaddr.IPNetwork (host bits cleared), or an error naming varname.

    A prefix of length 0 (0.0.0.0/0, ::/0, or an IPv4-mapped prefix shorter than /96, which
    covers every IPv4 address and more) means anyone, and is refused unless allow_any.
    """
    if not isinstance(value, str) or not value.strip():
        raise AnsibleFilterError("%s: %r is not an IPv4/IPv6 address or CIDR string" % (varname, value))
    text = value.strip()
    try:
        if "/" in text:
            address, prefix = text.split("/", 1)
            if not re.fullmatch(r"[0-9]{1,3}", prefix):
                raise ValueError("prefix length %r is not a number" % prefix)
            ip = netaddr.IPAddress(address, flags=netaddr.INET_PTON)
            full = 32 if ip.version == 4 else 128
            if int(prefix) > full:
                raise ValueError("prefix length /%s is longer than /%d" % (prefix, full))
            net = netaddr.IPNetwork("%s/%s" % (ip, prefix))
        else:
            ip = netaddr.IPAddress(text, flags=netaddr.INET_PTON)
            net = netaddr.IPNetwork("%s/%d" % (ip, 32 if ip.version == 4 else 128))
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("%s: %r is not a valid IPv4/IPv6 address or CIDR (%s)"
                                 % (varname, value, exc)) from exc
    if net.version == 6 and net.ip.is_ipv4_mapped():
        if net.prefixlen < 96:
            if not allow_any:
                raise AnsibleFilterError(
                    "%s: %r is an IPv4-mapped prefix shorter than /96, which would cover every IPv4 "
                    "address; write the IPv4 network itself" % (varname, value))
            net = netaddr.IPNetwork("0.0.0.0/0")
        else:
            net = netaddr.IPNetwork("%s/%d" % (net.ip.ipv4(), net.prefixlen - 96))
    if net.prefixlen == 0 and not allow_any:
        raise AnsibleFilterError(
            "%s: %r means anyone; open such ports with the public port lists, or, if anyone is really "
            "meant, say so with allow_any=true (the firewall role: firewall_allow_any_source: true)"
            % (varname, value))
    return net.cidr


def firewall_cidrs(values, varname="cidrs", allow_any=False):
    """Validate a list of addresses/CIDRs; return {'ipv4': [...], 'ipv6': [...]} in canonical form.

    0.0.0.0/0 and ::/0 (and IPv4-mapped prefixes shorter than /96) only with allow_any=True.
    """
    _need_netaddr("firewall_cidrs")
    if not isinstance(allow_any, bool):
        raise AnsibleFilterError("%s: allow_any must be true or false, got %r" % (varname, allow_any))
    if values is None:
        values = []
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise AnsibleFilterError("%s: must be a list of CIDRs, got %r" % (varname, values))
    result = {"ipv4": [], "ipv6": []}
    for value in values:
        net = _network(value, varname, allow_any)
        family = "ipv4" if net.version == 4 else "ipv6"
        text = str(net)
        if text not in result[family]:
            result[family].append(text)
    return result


def _port(value, varname):
    if isinstance(value, bool):
        raise AnsibleFilterError("%s: %r is not a port" % (varname, value))
    # [0-9], not isdigit(): '²'.isdigit() is true, yet int('²') raises.
    if isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"\s*[0-9]+\s*", value)):
        number = int(value)
        if not 1 <= number <= 65535:
            raise AnsibleFilterError("%s: port %r is outside 1-65535" % (varname, value))
        return str(number), 1
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]+)\s*[:-]\s*([0-9]+)\s*", value)
        if match:
            low, high = int(match.group(1)), int(match.group(2))
            if not (1 <= low < high <= 65535):
                raise AnsibleFilterError("%s: port range %r must be LOW:HIGH with 1 <= LOW < HIGH <= 65535"
                                         % (varname, value))
            return "%d:%d" % (low, high), 2
    raise AnsibleFilterError("%s: %r is not a port (1-65535) or a range LOW:HIGH" % (varname, value))


def _port_chunks(ports, varname):
    """Ports -> comma-joined groups that each fit one multiport match."""
    if isinstance(ports, (str, int)) or not isinstance(ports, (list, tuple)):
        raise AnsibleFilterError("%s: ports must be a list, got %r" % (varname, ports))
    seen, chunks, current, used = set(), [], [], 0
    for value in ports:
        text, slots = _port(value, varname)
        if text in seen:
            continue
        seen.add(text)
        if used + slots > MULTIPORT_SLOTS:
            chunks.append(",".join(current))
            current, used = [], 0
        current.append(text)
        used += slots
    if current:
        chunks.append(",".join(current))
    return chunks


def _comment(name):
    return "-m comment --comment %s" % name


def _service(service, index, allow_any=False):
    varname = "firewall_services[%d]" % index
    if not isinstance(service, dict):
        raise AnsibleFilterError("%s: must be a dict with name, proto, ports, sources, got %r" % (varname, service))
    name = service.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise AnsibleFilterError("%s: name %r must be 1-64 letters, digits, '_', '.', '-'" % (varname, name))
    varname = "firewall_services[%d] '%s'" % (index, name)
    proto = service.get("proto", "tcp")
    if proto not in PROTOCOLS:
        raise AnsibleFilterError("%s: proto %r is not one of %s" % (varname, proto, ", ".join(PROTOCOLS)))
    ports = service.get("ports") or []
    if proto == "all":
        if ports:
            raise AnsibleFilterError("%s: proto 'all' opens every port; leave ports empty" % varname)
        chunks = [None]
    else:
        chunks = _port_chunks(ports, varname + " ports")
        if not chunks:
            raise AnsibleFilterError("%s: proto %s needs at least one port" % (varname, proto))
    sources = firewall_cidrs(service.get("sources") or [], varname + " sources", allow_any)
    return name, proto, chunks, sources


def firewall_ruleset(config, family="ipv4", chain="GPUCLOUD-INPUT"):
    """The rules of our input chain for one family, as iptables-save prints them."""
    _need_netaddr("firewall_ruleset")
    if family not in FAMILIES:
        raise AnsibleFilterError("firewall_ruleset: family must be ipv4 or ipv6, got %r" % (family,))
    _check_chain(chain)
    if not isinstance(config, dict):
        raise AnsibleFilterError("firewall_ruleset: config must be a dict, got %r" % (config,))
    allow_any = config.get("allow_any_source", False)
    if not isinstance(allow_any, bool):
        raise AnsibleFilterError("firewall_allow_any_source: must be true or false, got %r" % (allow_any,))
    head = "-A %s " % chain
    rules = [head + "-i lo -j ACCEPT",
             head + "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
             head + "-m conntrack --ctstate INVALID -j DROP"]
    icmp = list(ICMP_ESSENTIAL[family])
    if config.get("allow_ping", True):
        icmp.append(ICMP_ECHO[family])
    rules += [head + match + " -j ACCEPT" for match in icmp]
    for source in firewall_cidrs(config.get("controller") or [], "firewall_controller_cidrs",
                                 allow_any)[family]:
        rules.append(head + "-s %s %s -j ACCEPT" % (source, _comment("gpucloud-controller")))
    interfaces = config.get("trusted_interfaces") or []
    if not isinstance(interfaces, (list, tuple)):
        raise AnsibleFilterError("firewall_trusted_interfaces: must be a list of interface names, got %r"
                                 % (interfaces,))
    for interface in interfaces:
        if not isinstance(interface, str) or not INTERFACE_RE.fullmatch(interface):
            raise AnsibleFilterError("firewall_trusted_interfaces: %r is not an interface name "
                                     "(at most 15 characters, '+' as a trailing wildcard)" % (interface,))
        rules.append(head + "-i %s %s -j ACCEPT" % (interface, _comment("gpucloud-trusted-interface")))
    for proto in ("tcp", "udp"):
        key = "public_%s_ports" % proto
        for chunk in _port_chunks(config.get(key) or [], "firewall_" + key):
            rules.append(head + "-p %s -m multiport --dports %s %s -j ACCEPT" % (proto, chunk, _comment("gpucloud-public")))
    services = config.get("services") or []
    if not isinstance(services, (list, tuple)):
        raise AnsibleFilterError("firewall_services: must be a list, got %r" % (services,))
    names = set()
    for index, service in enumerate(services):
        name, proto, chunks, sources = _service(service, index, allow_any)
        if name in names:
            raise AnsibleFilterError("firewall_services: the name '%s' is used twice" % name)
        names.add(name)
        for source in sources[family]:
            for chunk in chunks:
                if chunk is None:
                    rules.append(head + "-s %s %s -j ACCEPT" % (source, _comment(name)))
                else:
                    rules.append(head + "-s %s -p %s -m multiport --dports %s %s -j ACCEPT"
                                 % (source, proto, chunk, _comment(name)))
    return rules


def _check_chain(chain):
    if not isinstance(chain, str) or not CHAIN_RE.fullmatch(chain) or chain in BUILTIN_CHAINS \
            or chain.upper().startswith(tuple(p.upper() for p in FOREIGN_CHAIN_PREFIXES)):
        raise AnsibleFilterError("firewall: %r cannot be our chain (a built-in or another tool's chain)" % (chain,))


def _live_view(save_text, chain):
    """Parse iptables-save output of the filter table: policy, our jumps, our rules."""
    policy, exists, input_rules, rules, in_filter = None, False, [], [], False
    for line in (save_text or "").splitlines():
        line = line.strip()
        if line.startswith("*"):
            in_filter = line == "*filter"
            continue
        if not in_filter or not line or line.startswith("#"):
            continue
        if line.startswith(":INPUT "):
            policy = line.split()[1]
        elif line.startswith(":%s " % chain):
            exists = True
        elif line.startswith("-A INPUT "):
            input_rules.append(line)
        elif line.startswith("-A %s " % chain):
            rules.append(line)
    jump = "-A INPUT -j %s" % chain
    positions = [index + 1 for index, rule in enumerate(input_rules) if rule == jump]
    return {"policy": policy, "chain_exists": exists, "jump_positions": positions, "rules": rules}


def _view_lines(policy, positions, exists, rules, chain):
    lines = ["-P INPUT %s" % policy]
    lines += ["-I INPUT %d -j %s" % (position, chain) for position in positions]
    if exists:
        lines.append("-N %s" % chain)
    return lines + list(rules)


def firewall_plan(save_text, rules, policy="DROP", chain="GPUCLOUD-INPUT", family="ipv4"):
    """Compare the live filter table with the wanted rules of our chain.

    Returns differs, diff (unified, live -> wanted), live (parsed), apply (an
    iptables-restore --noflush input that touches only INPUT's policy, our jump and
    our chain) and persist (a file for netfilter-persistent / iptables-services).
    """
    _check_chain(chain)
    if save_text is not None and not isinstance(save_text, str):
        raise AnsibleFilterError("firewall_plan: expected iptables-save's output (a string), got %s"
                                 % type(save_text).__name__)
    if policy not in ("DROP", "ACCEPT"):
        raise AnsibleFilterError("firewall_input_policy: %r is not DROP or ACCEPT" % (policy,))
    if not isinstance(rules, (list, tuple)) or not all(isinstance(r, str) and r.startswith("-A %s " % chain)
                                                       for r in rules):
        raise AnsibleFilterError("firewall_plan: rules must be the list firewall_ruleset returns")
    live = _live_view(save_text, chain)
    before = _view_lines(live["policy"] or "ACCEPT", live["jump_positions"], live["chain_exists"],
                         live["rules"], chain)
    after = _view_lines(policy, [1], True, rules, chain)
    tool = "iptables" if family == "ipv4" else "ip6tables"
    diff = "".join(difflib.unified_diff([line + "\n" for line in before], [line + "\n" for line in after],
                                        fromfile="%s (live)" % tool, tofile="%s (wanted)" % tool))
    apply_lines = ["*filter", ":INPUT %s [0:0]" % policy, ":%s - [0:0]" % chain]
    apply_lines += ["-D INPUT -j %s" % chain] * len(live["jump_positions"])
    apply_lines += ["-I INPUT 1 -j %s" % chain] + list(rules) + ["COMMIT"]
    persist_lines = ["# Managed by the gpucloud.fleet firewall role: only INPUT's policy and our chain.",
                     "# Loaded at boot before Docker/Kubernetes add their own chains.",
                     "*filter", ":INPUT %s [0:0]" % policy, ":%s - [0:0]" % chain,
                     "-A INPUT -j %s" % chain] + list(rules) + ["COMMIT"]
    return {
        "differs": before != after,
        "diff": diff,
        "live": live,
        "apply": "\n".join(apply_lines) + "\n",
        "persist": "\n".join(persist_lines) + "\n",
    }


# The CIDR lists the role validates one by one, so that an error names its variable.
CIDR_SETTINGS = ("firewall_controller_cidrs", "firewall_cluster_cidrs", "firewall_monitoring_cidrs",
                 "firewall_kubernetes_cidrs", "firewall_fleet_cidrs")
# What the probe task runs: name -> the return codes that are an answer, not a failure.
PROBE_RCS = {"ssh_connection": (0, 1), "if_inet6": (0, 1), "dpkg": (0, 1)}


def probe_commands(host):
    """The read-only commands that answer the role plan's questions about a host.

    One task runs them as the login user (SSH_CONNECTION survives only there; dpkg-query and
    /proc/net/if_inet6 need no root): the controller's address, IPv6 in the kernel and, on
    the Debian family, which firewall managers the loader's packages replace and whether
    iptables-persistent is still to be installed.
    """
    probes = [{"name": "ssh_connection", "argv": ["printenv", "SSH_CONNECTION"]},
              {"name": "if_inet6", "argv": ["test", "-e", "/proc/net/if_inet6"]}]
    queried = _dpkg_queried(host)
    if queried:
        probes.append({"name": "dpkg", "argv": ["dpkg-query", "--show", "--showformat", DPKG_FORMAT] + queried})
    for probe in probes:
        probe["rcs"] = list(PROBE_RCS[probe["name"]])
    return probes


def _dpkg_queried(host):
    if host.get("os_family") != "Debian":
        return []
    queried = list(host.get("conflicting_packages") or [])
    if "iptables-persistent" in (host.get("packages") or []):
        queried.append("iptables-persistent")
    return queried


def _probe_answers(probe):
    """{probe name: {'rc': int, 'stdout': str}} from the probe task's register (its results)."""
    if isinstance(probe, dict):
        probe = probe.get("results")
    if not isinstance(probe, (list, tuple)):
        raise AnsibleFilterError("firewall_role_plan: expected the probe task's results (a list), got %r" % (probe,))
    answers = {}
    for result in probe:
        item = result.get("item") if isinstance(result, dict) else None
        if not isinstance(item, dict) or item.get("name") not in PROBE_RCS:
            raise AnsibleFilterError("firewall_role_plan: %r is not a result of the probe task" % (result,))
        answers[item["name"]] = {"rc": result.get("rc"), "stdout": result.get("stdout") or ""}
    return answers


def _rollback_timeout(value):
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, bool) or not (isinstance(text, int) or (isinstance(text, str) and re.fullmatch(r"[0-9]+", text))):
        raise AnsibleFilterError("firewall_rollback_timeout: %r must be a whole number of seconds between 5 and 600"
                                 % (value,))
    if not 5 <= int(text) <= 600:
        raise AnsibleFilterError("firewall_rollback_timeout: %s must be between 5 and 600 seconds" % (value,))
    return int(text)


def _bool(settings, name):
    value = settings.get(name)
    if not isinstance(value, bool):
        raise AnsibleFilterError("%s: must be true or false, got %r" % (name, value))
    return value


def _list(settings, name):
    value = settings.get(name)
    if value is None:
        return []
    if isinstance(value, (str, dict)) or not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("%s: must be a list, got %r" % (name, value))
    return list(value)


def role_plan(settings, host, probe, saved=None):
    """Every decision of the firewall role for one host, in the order the role used to take them.

    SETTINGS holds the role's variables by name (firewall_*); HOST the host's name, connection,
    OS facts, service facts and the role's per-OS variables (packages, conflicting_packages,
    chain, network_connections); PROBE the results of the task that ran probe_commands(HOST).
    Bad input raises AnsibleFilterError naming the variable, before the role changes anything.

    Returns config (the policy firewall_ruleset renders), families (the IP families to manage),
    rules (family -> our chain's rules), remove_ufw, debconf_first (iptables-persistent is still
    to be installed: set its answers first) and notes (what the role leaves alone, and why).
    With SAVED (the results of the task that read each family's filter table, item = family),
    also live (family -> firewall_plan), changed_families and rules_changed.
    """
    if not isinstance(settings, dict) or not isinstance(host, dict):
        raise AnsibleFilterError("firewall_role_plan: settings and host must be dicts")
    _need_netaddr("firewall_role_plan")
    name = host.get("name", "this host")
    chain = host.get("chain", "GPUCLOUD-INPUT")
    _check_chain(chain)
    answers = _probe_answers(probe)
    notes = []

    if not host.get("packages"):
        raise AnsibleFilterError(
            "firewall: %s %s (%s family) is not supported; supported are the Debian family (Debian, Ubuntu) "
            "with netfilter-persistent and the RedHat family 9 with iptables-services."
            % (host.get("distribution"), host.get("distribution_major_version"), host.get("os_family")))
    _rollback_timeout(settings.get("firewall_rollback_timeout"))
    policy = settings.get("firewall_input_policy")
    if policy not in ("DROP", "ACCEPT"):
        raise AnsibleFilterError("firewall_input_policy: %r is not DROP or ACCEPT" % (policy,))
    allow_any = _bool(settings, "firewall_allow_any_source")
    for setting in CIDR_SETTINGS:
        firewall_cidrs(settings.get(setting), setting, allow_any)

    services = [
        {"name": "cluster", "proto": "all", "ports": [], "sources": settings.get("firewall_cluster_cidrs")},
        {"name": "monitoring", "proto": "tcp", "ports": settings.get("firewall_monitoring_tcp_ports"),
         "sources": settings.get("firewall_monitoring_cidrs")},
        {"name": "kubernetes", "proto": "tcp", "ports": settings.get("firewall_kubernetes_tcp_ports"),
         "sources": settings.get("firewall_kubernetes_cidrs")},
        {"name": "kubernetes-udp", "proto": "udp", "ports": settings.get("firewall_kubernetes_udp_ports"),
         "sources": settings.get("firewall_kubernetes_cidrs")},
        {"name": "fleet", "proto": "tcp", "ports": settings.get("firewall_fleet_tcp_ports"),
         "sources": settings.get("firewall_fleet_cidrs")},
    ]
    services = [service for service in services if service["sources"]] + _list(settings, "firewall_services")
    controller_cidrs = _list(settings, "firewall_controller_cidrs")
    config = {
        "controller": controller_cidrs,
        "trusted_interfaces": settings.get("firewall_trusted_interfaces"),
        "public_tcp_ports": settings.get("firewall_public_tcp_ports"),
        "public_udp_ports": settings.get("firewall_public_udp_ports"),
        "allow_ping": _bool(settings, "firewall_allow_ping"),
        "allow_any_source": allow_any,
        "services": services,
    }
    # Rendered once with only the explicit controller CIDRs, so that bad ports, names and
    # interfaces fail before any package is installed.
    for family in FAMILIES:
        firewall_ruleset(config, family, chain)

    stop_firewalld = _bool(settings, "firewall_stop_firewalld")
    if host.get("os_family") == "RedHat" and not stop_firewalld:
        firewalld = (host.get("services") or {}).get("firewalld.service") or {}
        if firewalld.get("state") == "running":
            raise AnsibleFilterError(
                "firewall: firewalld is running on %s and would replace these rules; "
                "set firewall_stop_firewalld: true to stop and mask it." % name)

    remove_ufw = _bool(settings, "firewall_remove_ufw")
    queried = _dpkg_queried(host)
    installed = {}
    if queried:
        dpkg = answers.get("dpkg")
        if dpkg is None:
            raise AnsibleFilterError("firewall_role_plan: the probe results lack dpkg-query's answer")
        installed = parse_dpkg_query(dpkg["stdout"])
    conflicts_installed = [package for package in host.get("conflicting_packages") or [] if package in installed]
    if "ufw" in conflicts_installed and not remove_ufw:
        raise AnsibleFilterError(
            "firewall: ufw is installed on %s; it Breaks netfilter-persistent and iptables-persistent, which "
            "load these rules at boot, so installing them would remove it. Set firewall_remove_ufw: true to "
            "disable and remove ufw, or leave this host to ufw." % name)

    connection = host.get("connection") or "ssh"
    allow_controller = _bool(settings, "firewall_allow_controller")
    ssh = answers.get("ssh_connection", {"stdout": ""})["stdout"].split()
    detected = ssh[0] if ssh else ""
    over_network = connection in (host.get("network_connections") or [])
    if allow_controller and not detected and not controller_cidrs and over_network:
        raise AnsibleFilterError(
            "firewall: cannot detect the controller's address on %s (no SSH_CONNECTION for the login user "
            "over connection %s). Set firewall_controller_cidrs to the controller's address, or set "
            "firewall_allow_controller: false to rely on firewall_public_tcp_ports and the automatic "
            "rollback alone." % (name, connection))
    if not allow_controller:
        notes.append("firewall: firewall_allow_controller is false: the controller gets no rule of its own")
    elif not detected:
        notes.append("firewall: connection %s does not go over the network, so no firewall can cut it; "
                     "no controller address detected" % connection)
    config["controller"] = ([detected] if allow_controller and detected else []) + controller_cidrs

    ipv6 = settings.get("firewall_ipv6")
    if ipv6 not in ("auto", "required", "disabled"):
        raise AnsibleFilterError("firewall_ipv6: %r is not auto, required or disabled" % (ipv6,))
    has_ipv6 = answers.get("if_inet6", {"rc": 1})["rc"] == 0
    if ipv6 == "required" and not has_ipv6:
        raise AnsibleFilterError("firewall_ipv6: required, but %s has no IPv6 in its kernel (no /proc/net/if_inet6)"
                                 % name)
    families = ["ipv4"] + (["ipv6"] if ipv6 != "disabled" and has_ipv6 else [])
    if "ipv6" not in families:
        notes.append("firewall: ip6tables is left alone on %s (%s)."
                     % (name, "firewall_ipv6 is disabled" if ipv6 == "disabled" else "the kernel has no IPv6"))

    plan = {
        "config": config,
        "families": families,
        "rules": dict((family, firewall_ruleset(config, family, chain)) for family in families),
        "remove_ufw": remove_ufw and "ufw" in conflicts_installed,
        "debconf_first": "iptables-persistent" in queried and "iptables-persistent" not in installed,
        "notes": notes,
    }
    if saved is not None:
        plan.update(_compare(saved, plan, policy, chain))
    return plan


def _compare(saved, plan, policy, chain):
    if isinstance(saved, dict):
        saved = saved.get("results")
    if not isinstance(saved, (list, tuple)):
        raise AnsibleFilterError("firewall_role_plan: expected the results of the task that read the filter tables, "
                                 "got %r" % (saved,))
    texts = {}
    for result in saved:
        family = result.get("item") if isinstance(result, dict) else None
        if family not in FAMILIES:
            raise AnsibleFilterError("firewall_role_plan: %r is not a result of reading a filter table" % (result,))
        texts[family] = result.get("stdout") or ""
    missing = [family for family in plan["families"] if family not in texts]
    if missing:
        raise AnsibleFilterError("firewall_role_plan: no filter table was read for %s" % ", ".join(missing))
    live = dict((family, firewall_plan(texts[family], plan["rules"][family], policy, chain, family))
                for family in plan["families"])
    changed = [family for family in plan["families"] if live[family]["differs"]]
    return {"live": live, "changed_families": changed, "rules_changed": bool(changed)}
