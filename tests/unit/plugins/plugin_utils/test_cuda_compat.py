# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.cuda_compat import (
    TOOLKIT_DRIVERS,
    compare_driver_versions,
    cuda_min_driver,
    driver_supports_cuda,
    known_cuda_versions,
    parse_cuda_version,
    parse_driver_version,
)


# GA rows of NVIDIA's Table 3 (Linux x86_64), CUDA 13.2 Update 2 release notes.
@pytest.mark.parametrize("version,driver", [
    ("11.0", "450.51.05"), ("11.1", "455.23"), ("11.2", "460.27.03"), ("11.3", "465.19.01"),
    ("11.4", "470.42.01"), ("11.5", "495.29.05"), ("11.6", "510.39.01"), ("11.7", "515.43.04"),
    ("11.8", "520.61.05"),
    ("12.0", "525.60.13"), ("12.1", "530.30.02"), ("12.2", "535.54.03"), ("12.3", "545.23.06"),
    ("12.4", "550.54.14"), ("12.5", "555.42.02"), ("12.6", "560.28.03"), ("12.8", "570.26"),
    ("12.9", "575.51.03"),
    ("13.0", "580.65.06"), ("13.1", "590.44.01"), ("13.2", "595.45.04"),
])
def test_ga_minimum_driver(version, driver):
    assert cuda_min_driver(version) == driver
    assert cuda_min_driver(version + ".0") == driver


@pytest.mark.parametrize("version,driver", [
    ("12.2.1", "535.86.09"),
    ("12.2.2", "535.104.05"),
    ("12.0.1", "525.85.12"),
    ("12.6.3", "560.35.05"),
    ("12.8.1", "570.124.06"),
    ("13.0.2", "580.95.05"),
    ("11.4.4", "470.82.01"),
    # 11.0's rows are 11.0.1 RC, 11.0.2 GA and 11.0.3 Update 1
    ("11.0.1", "450.36.06"),
    ("11.0.2", "450.51.05"),
    ("11.0.3", "450.51.06"),
    ("11.0.0", "450.51.05"),
    # not listed: the newest listed release of that minor before it
    ("12.3.2", "545.23.08"),
    ("11.8.1", "520.61.05"),
])
def test_update_minimum_driver(version, driver):
    assert cuda_min_driver(version) == driver


def test_table_covers_every_minor_from_11_0():
    assert known_cuda_versions() == [
        "11.0", "11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7", "11.8",
        "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9",
        "13.0", "13.1", "13.2"]
    for driver in TOOLKIT_DRIVERS.values():
        parse_driver_version(driver)


def test_numeric_input_is_accepted():
    assert cuda_min_driver(12.2) == "535.54.03"
    assert cuda_min_driver(" 13.0 ") == "580.65.06"


@pytest.mark.parametrize("version,message", [
    ("12.7", "not in NVIDIA's driver table"),
    ("10.2", "not in NVIDIA's driver table"),
    ("14.0", "not in NVIDIA's driver table"),
    ("12", "malformed"),
    ("12.x", "malformed"),
    ("", "malformed"),
    ("12.2.140", "not a toolkit update number"),
    (None, "must be a version string"),
    (True, "must be a version string"),
])
def test_unknown_or_malformed_cuda_version(version, message):
    with pytest.raises(ValueError, match=message):
        cuda_min_driver(version)


def test_parse_versions():
    assert parse_cuda_version("12.2") == (12, 2, None)
    assert parse_cuda_version("12.2.2") == (12, 2, 2)
    assert parse_driver_version("535.54.03") == (535, 54, 3)
    assert parse_driver_version("570.26") == (570, 26)


@pytest.mark.parametrize("driver", ["535", "535.54.03.1", "r535", "535.54-03", "", "535.54.03-1ubuntu1", None])
def test_malformed_driver_names_the_value(driver):
    with pytest.raises(ValueError) as exc:
        parse_driver_version(driver)
    assert repr(driver) in str(exc.value)


@pytest.mark.parametrize("left,right,expected", [
    ("535.54.03", "535.104.05", -1),
    ("535.104.05", "535.54.03", 1),
    ("570.26", "570.26.0", 0),
    ("570.26", "570.124.06", -1),
    ("580.65.06", "580.65.06", 0),
    ("1000.1", "999.99.99", 1),
])
def test_compare_driver_versions(left, right, expected):
    assert compare_driver_versions(left, right) == expected


@pytest.mark.parametrize("driver,cuda,minor_compat,expected", [
    ("535.261.03", "12.2", False, True),
    ("535.54.03", "12.2", False, True),
    ("535.54.02", "12.2", False, False),
    ("535.54.03", "12.2.2", False, False),
    ("535.104.05", "12.2.2", False, True),
    ("535.54.03", "12.4", False, False),
    ("535.54.03", "12.4", True, True),
    ("525.60.13", "12.9", True, True),
    ("525.60.12", "12.9", True, False),
    ("520.61.05", "12.0", True, False),
    ("450.80.02", "11.8", True, True),
    ("450.51.06", "11.8", True, False),
    ("450.51.06", "11.0", False, True),
    ("580.65.06", "13.2", True, True),
    ("575.57.08", "13.0", True, False),
    ("595.71.05", "12.0", False, True),
])
def test_driver_supports_cuda(driver, cuda, minor_compat, expected):
    assert driver_supports_cuda(driver, cuda, minor_compat=minor_compat) is expected
