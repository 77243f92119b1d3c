# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


from unittest import mock

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter import ipoib_address as plugin
from ansible_collections.gpucloud.fleet.plugins.filter.ipoib_address import ipoib_address


@pytest.mark.parametrize("subnet,index,offset,expected", [
    ("10.10.0.0/16", 0, 0, "10.10.0.1/16"),
    ("10.10.0.0/16", 0, 10, "10.10.0.11/16"),
    ("10.10.0.0/16", 254, 0, "10.10.0.255/16"),
    ("10.10.0.0/16", 255, 0, "10.10.1.0/16"),
    ("10.10.0.0/16", 65533, 0, "10.10.255.254/16"),
    ("10.10.0.0/24", "7", "3", "10.10.0.11/24"),
    ("10.10.3.7/16", 0, 0, "10.10.0.1/16"),
    ("192.168.0.0/30", 1, 0, "192.168.0.2/30"),
    ("192.168.0.0/31", 0, 0, "192.168.0.0/31"),
    ("192.168.0.0/31", 1, 0, "192.168.0.1/31"),
    ("192.168.0.9/32", 0, 0, "192.168.0.9/32"),
    ("fd00:10::/64", 0, 0, "fd00:10::1/64"),
    ("fd00:10::/64", 4, 10, "fd00:10::f/64"),
    ("fd00:10::/126", 2, 0, "fd00:10::3/126"),
    ("fd00:10::/127", 0, 0, "fd00:10::/127"),
    ("fd00:10::/128", 0, 0, "fd00:10::/128"),
])
def test_address(subnet, index, offset, expected):
    assert ipoib_address(subnet, index, offset) == expected


def test_offset_defaults_to_zero():
    assert ipoib_address("10.10.0.0/16", 3) == "10.10.0.4/16"


@pytest.mark.parametrize("subnet,index,offset", [
    ("10.10.0.0/24", 254, 0),
    ("10.10.0.0/24", 250, 4),
    ("10.10.0.0/30", 2, 0),
    ("192.168.0.0/31", 2, 0),
    ("192.168.0.9/32", 1, 0),
    ("fd00:10::/126", 3, 0),
])
def test_past_the_end(subnet, index, offset):
    with pytest.raises(AnsibleFilterError, match="past the end"):
        ipoib_address(subnet, index, offset)


def test_last_ipv4_host_is_never_broadcast():
    assert ipoib_address("10.10.0.0/24", 253) == "10.10.0.254/24"


@pytest.mark.parametrize("subnet,index,offset,message", [
    ("10.10.0.0/16", -1, 0, "index must not be negative"),
    ("10.10.0.0/16", 0, -5, "offset must not be negative"),
    ("10.10.0.0/16", 1.5, 0, "index must be an integer"),
    ("10.10.0.0/16", True, 0, "index must be an integer"),
    ("10.10.0.0/16", "one", 0, "index must be an integer"),
    ("10.10.0.0", 0, 0, "has no prefix length"),
    ("10.10.0.0/33", 0, 0, "is not a valid CIDR"),
    ("10.300.0.0/16", 0, 0, "is not a valid CIDR"),
    ("fd00::zz/64", 0, 0, "is not a valid CIDR"),
    ("ten/8", 0, 0, "is not a valid CIDR"),
    (None, 0, 0, "must be a CIDR string"),
])
def test_invalid_input(subnet, index, offset, message):
    with pytest.raises(AnsibleFilterError, match=message):
        ipoib_address(subnet, index, offset)


def test_missing_netaddr():
    with mock.patch.object(plugin, "HAS_NETADDR", False):
        with pytest.raises(AnsibleFilterError, match="netaddr is required"):
            ipoib_address("10.10.0.0/16", 0)


# '²'.isdigit() is true, yet int('²') raises ValueError (issue 15, item 18).
@pytest.mark.parametrize("bad", ["²", "1²", "+-5", "٣"])
def test_non_ascii_digits_are_a_filter_error(bad):
    with pytest.raises(AnsibleFilterError, match="index must be an integer"):
        ipoib_address("10.10.0.0/16", bad)
    with pytest.raises(AnsibleFilterError, match="offset must be an integer"):
        ipoib_address("10.10.0.0/16", 1, bad)
