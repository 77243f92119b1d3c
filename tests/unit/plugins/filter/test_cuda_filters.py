# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.cuda import (
    FilterModule,
    cuda_driver_compatible,
    cuda_min_driver,
)


def test_filters_are_registered():
    assert FilterModule().filters() == {
        "cuda_min_driver": cuda_min_driver,
        "cuda_driver_compatible": cuda_driver_compatible,
    }


@pytest.mark.parametrize("version,driver", [
    ("12.2", "535.54.03"),
    ("12.2.0", "535.54.03"),
    ("12.2.2", "535.104.05"),
    ("12.0", "525.60.13"),
    ("13.0", "580.65.06"),
    ("11.8", "520.61.05"),
])
def test_cuda_min_driver(version, driver):
    assert cuda_min_driver(version) == driver


@pytest.mark.parametrize("version", ["12.7", "9.2", "latest", "12.2.140"])
def test_cuda_min_driver_unknown_version(version):
    with pytest.raises(AnsibleFilterError, match="cuda_min_driver: "):
        cuda_min_driver(version)


def test_cuda_driver_compatible():
    assert cuda_driver_compatible("535.261.03", "12.2") is True
    assert cuda_driver_compatible("535.54.03", "12.4") is False
    assert cuda_driver_compatible("535.54.03", "12.4", minor_compat=True) is True
    assert cuda_driver_compatible("450.80.02", "11.8", True) is True
    assert cuda_driver_compatible("575.57.08", "13.0", minor_compat=True) is False


def test_cuda_driver_compatible_names_a_malformed_driver():
    with pytest.raises(AnsibleFilterError, match="driver version '535.x' is malformed"):
        cuda_driver_compatible("535.x", "12.2")


def test_cuda_driver_compatible_rejects_unknown_cuda_and_bad_flag():
    with pytest.raises(AnsibleFilterError, match="CUDA 12.7 is not in NVIDIA's driver table"):
        cuda_driver_compatible("580.65.06", "12.7")
    with pytest.raises(AnsibleFilterError, match="minor_compat must be a boolean"):
        cuda_driver_compatible("580.65.06", "12.2", minor_compat="yes")
