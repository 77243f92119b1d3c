# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.device_plugin_config import device_plugin_config


def test_returns_the_config_text():
    text = device_plugin_config({"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": 4}},
                                {"nvidia_driver_root": "/"})
    assert yaml.safe_load(text) == {
        "version": "v1",
        "flags": {"migStrategy": "none", "nvidiaDriverRoot": "/"},
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}},
    }


def test_flags_default_to_none():
    assert device_plugin_config({"name": "x"}) == "version: v1\nflags:\n  migStrategy: none\n"


@pytest.mark.parametrize("profile,flags,message", [
    ({"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": 1}}, None,
     "device_plugin_config: profile h100_sxm: sharing.replicas must be at least 2"),
    ({"name": "a100_80g_pcie", "mig": {"strategy": "mixed"}, "sharing": {"mode": "mps", "replicas": 2}}, None,
     "device_plugin_config: profile a100_80g_pcie: sharing.mode mps with mig.strategy mixed"),
    ("h100_sxm", None, "device_plugin_config: the hardware profile must be a mapping"),
    ({"name": "x"}, {"device_id_strategy": "serial"}, "device_plugin_config: flags.device_id_strategy"),
])
def test_errors_name_the_profile_and_key(profile, flags, message):
    with pytest.raises(AnsibleFilterError, match=message) as caught:
        device_plugin_config(profile, flags)
    assert isinstance(caught.value.__cause__, ValueError)
