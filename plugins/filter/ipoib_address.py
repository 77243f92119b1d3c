# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Documentation: ipoib_address.yml beside this file.


import re

from ansible.errors import AnsibleFilterError

try:
    import netaddr
    HAS_NETADDR = True
except ImportError:
    HAS_NETADDR = False


# [0-9], not isdigit(): '²'.isdigit() is true, yet int('²') raises.
_WHOLE_RE = re.compile(r"\s*[+-]?[0-9]+\s*")


def _whole(value, name):
    if isinstance(value, bool):
        raise AnsibleFilterError("ipoib_address: %s must be an integer, got %r" % (name, value))
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _WHOLE_RE.fullmatch(value):
        number = int(value.strip())
    else:
        raise AnsibleFilterError("ipoib_address: %s must be an integer, got %r" % (name, value))
    if number < 0:
        raise AnsibleFilterError("ipoib_address: %s must not be negative, got %d" % (name, number))
    return number


def _usable_range(network):
    """First and last address a host may take, as integers."""
    first, last = int(network.network), int(network.network) + network.size - 1
    full = 32 if network.version == 4 else 128
    if network.prefixlen >= full - 1:
        # /31 and /127 point-to-point links (RFC 3021, RFC 6164) and single addresses.
        return first, last
    if network.version == 4:
        return first + 1, last - 1
    # IPv6 has no broadcast; the all-zeros address is the Subnet-Router anycast.
    return first + 1, last


def ipoib_address(subnet, index, offset=0):
    if not HAS_NETADDR:
        raise AnsibleFilterError("ipoib_address: the Python library netaddr is required on the controller "
                                 "(pip install netaddr)")
    if not isinstance(subnet, str):
        raise AnsibleFilterError("ipoib_address: subnet must be a CIDR string such as 10.10.0.0/16, got %r"
                                 % (subnet,))
    index = _whole(index, "index")
    offset = _whole(offset, "offset")
    if "/" not in subnet:
        raise AnsibleFilterError("ipoib_address: subnet %r has no prefix length; write it as CIDR, e.g. 10.10.0.0/16"
                                 % subnet)
    try:
        network = netaddr.IPNetwork(subnet.strip()).cidr
    except (netaddr.AddrFormatError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("ipoib_address: subnet %r is not a valid CIDR: %s" % (subnet, exc)) from exc
    first, last = _usable_range(network)
    address = first + index + offset
    if address > last:
        raise AnsibleFilterError(
            "ipoib_address: index %d + offset %d is past the end of %s, which has %d usable addresses "
            "(index + offset must be below %d)" % (index, offset, network, last - first + 1, last - first + 1))
    return "%s/%d" % (netaddr.IPAddress(address, network.version), network.prefixlen)


class FilterModule(object):
    def filters(self):
        return {"ipoib_address": ipoib_address}
