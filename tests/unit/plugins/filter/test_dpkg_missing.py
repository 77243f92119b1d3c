# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.dpkg_missing import dpkg_missing

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "dpkg")
# The packages asked for in both captures (see their .source files).
ASKED = ["cryptsetup-bin", "clevis", "clevis-luks", "clevis-systemd", "util-linux", "e2fsprogs",
         "xfsprogs", "iptables", "netfilter-persistent", "iptables-persistent"]


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_fresh_lab_node_misses_all_but_the_base_system():
    # "un" (known to dpkg, not installed) and packages dpkg never heard of (no line) are missing.
    missing = dpkg_missing(fixture("dpkg-query-debian12-before.txt"), ASKED)
    assert missing == [p for p in ASKED if p not in ("util-linux", "e2fsprogs")]


def test_converged_lab_node_misses_nothing():
    assert dpkg_missing(fixture("dpkg-query-debian12-after.txt"), ASKED) == []


def test_unknown_package_is_missing():
    # dpkg-query prints nothing on stdout for a package it has never heard of.
    assert dpkg_missing(fixture("dpkg-query-debian12-after.txt"),
                        ["cryptsetup-bin", "no-such-package"]) == ["no-such-package"]


def test_config_files_only_and_half_installed_count_as_missing():
    out = "rc |xfsprogs|6.1.0-1\niU |tang|14-1\nii |jose|11-3\n"
    assert dpkg_missing(out, ["xfsprogs", "tang", "jose"]) == ["xfsprogs", "tang"]


def test_held_package_counts_as_installed():
    out = "hi |nvidia-driver|535.261.03-1~deb12u1\n"
    assert dpkg_missing(out, ["nvidia-driver"]) == []


def test_version_pin_compares_the_installed_version():
    out = "ii |nvidia-driver|535.261.03-1~deb12u1\n"
    assert dpkg_missing(out, ["nvidia-driver=535.261.03-1~deb12u1"]) == []
    assert dpkg_missing(out, ["nvidia-driver=535.247.01-1~deb12u1"]) == ["nvidia-driver=535.247.01-1~deb12u1"]
    assert dpkg_missing(out, ["nvidia-driver=535.261.03*"]) == []
    assert dpkg_missing(out, ["nvidia-driver=550*"]) == ["nvidia-driver=550*"]


def test_architecture_suffix_is_ignored():
    out = "ii |libc6:amd64|2.36-9\n"
    assert dpkg_missing(out, ["libc6"]) == []
    assert dpkg_missing("ii |libc6|2.36-9\n", ["libc6:amd64"]) == []


def test_empty_output_means_everything_is_missing():
    assert dpkg_missing("", ["a", "b"]) == ["a", "b"]
    assert dpkg_missing(None, ["a"]) == ["a"]


@pytest.mark.parametrize("wanted", ["cryptsetup", None, {"a": 1}])
def test_wanted_must_be_a_list(wanted):
    with pytest.raises(AnsibleFilterError, match="must be a list"):
        dpkg_missing("", wanted)


def test_bad_entries_are_refused():
    with pytest.raises(AnsibleFilterError, match="not a package name"):
        dpkg_missing("", ["ok", ""])
    with pytest.raises(AnsibleFilterError, match="stdout"):
        dpkg_missing(["ii |a|1"], ["a"])
