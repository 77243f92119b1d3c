# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.version_outliers import version_outliers


def test_homogeneous_fleet_reports_nothing():
    fleet = {"n1": {"nccl": "2.21.5", "driver": "550.54.15"}, "n2": {"nccl": "2.21.5", "driver": "550.54.15"}}
    assert version_outliers(fleet) == {}
    assert version_outliers({}) == {}


def test_outliers_and_missing_components():
    fleet = {
        "n1": {"nccl": "2.21.5", "driver": "550.54.15"},
        "n2": {"nccl": "2.21.5", "driver": "550.54.15"},
        "n3": {"nccl": "2.19.3", "driver": "550.54.15"},
        "n4": {"driver": "550.54.15"},
    }
    assert version_outliers(fleet) == {
        "nccl": {"majority": "2.21.5", "outliers": {"n3": "2.19.3", "n4": None}},
    }


def test_tie_goes_to_the_highest_natural_version():
    fleet = {"a": {"nccl": "2.9.1"}, "b": {"nccl": "2.21.5"}}
    assert version_outliers(fleet) == {"nccl": {"majority": "2.21.5", "outliers": {"a": "2.9.1"}}}
    reordered = {"b": {"nccl": "2.21.5"}, "a": {"nccl": "2.9.1"}}
    assert version_outliers(reordered) == version_outliers(fleet)


def test_tie_with_a_missing_host():
    fleet = {"a": {"fw": "28.39.1002"}, "b": {}, "c": None}
    assert version_outliers(fleet) == {"fw": {"majority": "28.39.1002", "outliers": {"b": None, "c": None}}}


def test_values_are_compared_as_trimmed_text():
    fleet = {"a": {"cuda": 12.2}, "b": {"cuda": "12.2 "}, "c": {"cuda": "12.4", "extra": None}}
    assert version_outliers(fleet) == {"cuda": {"majority": "12.2", "outliers": {"c": "12.4"}}}


@pytest.mark.parametrize("value,message", [
    (["n1"], "expected a mapping"),
    ({"n1": ["nccl"]}, "must be a mapping"),
    ({"n1": {"nccl": ["2.21.5"]}}, r"n1\.nccl must be a version string"),
    ({"n1": {"nccl": True}}, r"n1\.nccl must be a version string"),
])
def test_invalid_input(value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        version_outliers(value)


def test_non_ascii_digits_compare_as_text():
    # '²'.isdigit() is true, yet int('²') raises ValueError (issue 15, item 18).
    report = version_outliers({"a": {"nccl": "²"}, "b": {"nccl": "²"}, "c": {"nccl": "2"}, "d": {"nccl": "2"}})
    assert report["nccl"]["majority"] in ("²", "2")
