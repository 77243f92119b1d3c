# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The device plugin config against NVIDIA/k8s-device-plugin v0.20.0.

Upstream: github.com/NVIDIA/k8s-device-plugin, commit 1b826acc6af3079d8923bac395c3124b8861a9a6
(tag v0.20.0). The README examples are fixtures under tests/fixtures/public/k8s-device-plugin/,
each with a .source naming its lines; the rules are cited per test with file and lines.
"""


import glob
import os
import re

import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils.device_plugin_config import (
    build_device_plugin_config,
    device_plugin_config,
    mig_resource_name,
    render_yaml,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT, fixture_text

README_FLAGS = {  # the flags of README "As a configuration file" and dp-example-config0/1
    "fail_on_init_error": True,
    "nvidia_driver_root": "/",
    "pass_device_specs": False,
    "device_list_strategy": "envvar",
    "device_id_strategy": "uuid",
}


def readme_example(name):
    """A README example as data. Two of them end with an indented '...' line, the README's
    own 'and more' mark, which is no YAML (so they are .txt); it is dropped here, never in
    the fixture."""
    elided = name.endswith("-rename")
    text = fixture_text("public", "k8s-device-plugin", name + (".txt" if elided else ".yaml"))
    return yaml.safe_load(re.sub(r"(?m)^\s+\.\.\.\n", "", text))


README_EXAMPLES = ["config-file", "dp-example-config0", "dp-example-config1", "time-slicing",
                   "time-slicing-rename", "mps", "mps-rename"]


@pytest.mark.parametrize("name", README_EXAMPLES)
def test_yaml_writer_round_trips_every_readme_example(name):
    example = readme_example(name)
    text = render_yaml(example)
    assert yaml.safe_load(text) == example
    assert render_yaml(yaml.safe_load(text)) == text


# profile, flags, README example; extra is what we write that the README example leaves out.
README_CASES = [
    ({"name": "plain", "mig": False}, README_FLAGS, "config-file", {}),
    ({"name": "plain", "mig": False}, README_FLAGS, "dp-example-config0", {}),
    ({"name": "mixed", "mig": {"strategy": "mixed"}}, README_FLAGS, "dp-example-config1", {}),
    # The sharing examples leave flags out; migStrategy none is the plugin's default
    # (cmd/nvidia-device-plugin/main.go lines 62-67) and we always write it.
    ({"name": "h100_sxm", "gpu_count": 8, "sharing": {"mode": "time-slicing", "replicas": 10}}, None,
     "time-slicing", {"flags": {"migStrategy": "none"}}),
    ({"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": 10, "rename_by_default": True}}, None,
     "time-slicing-rename", {"flags": {"migStrategy": "none"}}),
    ({"name": "h200_sxm", "sharing": {"mode": "mps", "replicas": 10}}, None,
     "mps", {"flags": {"migStrategy": "none"}}),
    ({"name": "h200_sxm", "sharing": {"mode": "mps", "replicas": 10, "rename_by_default": True}}, None,
     "mps-rename", {"flags": {"migStrategy": "none"}}),
]


@pytest.mark.parametrize("profile,flags,name,extra", README_CASES, ids=[case[2] for case in README_CASES])
def test_profile_gives_the_readme_example(profile, flags, name, extra):
    expected = dict(readme_example(name), **extra)
    text = device_plugin_config(profile, flags)
    assert yaml.safe_load(text) == expected
    assert build_device_plugin_config(profile, flags) == expected


def test_readme_config_file_text():
    """The exact text for the README's config file example (quotes aside: both parse the same)."""
    assert device_plugin_config({"name": "plain"}, README_FLAGS) == (
        "version: v1\n"
        "flags:\n"
        "  migStrategy: none\n"
        "  failOnInitError: true\n"
        "  nvidiaDriverRoot: /\n"
        "  plugin:\n"
        "    passDeviceSpecs: false\n"
        "    deviceListStrategy: envvar\n"
        "    deviceIDStrategy: uuid\n")


def _ts(resources, replicas, **extra):
    block = dict(extra)
    block["resources"] = [{"name": name, "replicas": replicas} for name in resources]
    return {"timeSlicing": block}


VALID = [
    ("no sharing, no MIG", {"name": "h100_sxm", "gpu_count": 8, "mig": False},
     None, {"version": "v1", "flags": {"migStrategy": "none"}}),
    ("sharing mode none", {"name": "x", "sharing": {"mode": "none"}},
     None, {"version": "v1", "flags": {"migStrategy": "none"}}),
    ("brief example: time-slicing 4", {"name": "h100_sxm", "gpu_count": 8,
                                       "sharing": {"mode": "time-slicing", "replicas": 4}},
     None, {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": _ts(["nvidia.com/gpu"], 4)}),
    ("time-slicing, strict requests",
     {"name": "x", "sharing": {"mode": "time-slicing", "replicas": 2, "fail_requests_greater_than_one": True}},
     None, {"version": "v1", "flags": {"migStrategy": "none"},
            "sharing": _ts(["nvidia.com/gpu"], 2, failRequestsGreaterThanOne=True)}),
    # renameByDefault is omitempty (replicas.go line 31): false is written as nothing.
    ("rename false left out",
     {"name": "x", "sharing": {"mode": "time-slicing", "replicas": 3, "rename_by_default": False}},
     None, {"version": "v1", "flags": {"migStrategy": "none"}, "sharing": _ts(["nvidia.com/gpu"], 3)}),
    # With single, MIG devices are nvidia.com/gpu (internal/rm/rm.go lines 116-117).
    ("single MIG, time-sliced", {"name": "a100_80g_pcie", "mig": {"strategy": "single", "layout": "all-1g.10gb"},
                                 "sharing": {"mode": "time-slicing", "replicas": 2}},
     None, {"version": "v1", "flags": {"migStrategy": "single"}, "sharing": _ts(["nvidia.com/gpu"], 2)}),
    # README: the time-sliceable resources of an A100 80GB under mixed.
    ("mixed MIG, A100 80GB profiles", {"name": "a100_80g_pcie",
                                       "mig": {"strategy": "mixed",
                                               "profiles": ["1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"]},
                                       "sharing": {"mode": "time-slicing", "replicas": 3}},
     None, {"version": "v1", "flags": {"migStrategy": "mixed"},
            "sharing": _ts(["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb",
                            "nvidia.com/mig-7g.80gb"], 3)}),
    ("mixed MIG, profile from an all-<profile> layout", {"name": "h200_sxm",
                                                         "mig": {"strategy": "mixed", "layout": "all-3g.71gb"},
                                                         "sharing": {"mode": "time-slicing", "replicas": 2}},
     None, {"version": "v1", "flags": {"migStrategy": "mixed"}, "sharing": _ts(["nvidia.com/mig-3g.71gb"], 2)}),
    ("mixed MIG without sharing needs no profiles",
     {"name": "x", "mig": {"strategy": "mixed", "layout": "all-balanced"}},
     None, {"version": "v1", "flags": {"migStrategy": "mixed"}}),
    # MPS: failRequestsGreaterThanOne left out means true (config.go lines 72-76); 48 is the cap.
    ("MPS 48 replicas", {"name": "h200_sxm", "sharing": {"mode": "mps", "replicas": 48}},
     {"mps_root": "/run/nvidia/mps"},
     {"version": "v1", "flags": {"migStrategy": "none", "mpsRoot": "/run/nvidia/mps"},
      "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 48}]}}}),
    ("MPS relaxed requests",
     {"name": "x", "sharing": {"mode": "mps", "replicas": 4, "fail_requests_greater_than_one": False}},
     None, {"version": "v1", "flags": {"migStrategy": "none"},
            "sharing": {"mps": {"failRequestsGreaterThanOne": False,
                                "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}),
    # MIG on, strategy none: the plugin allows MPS (only mixed is refused, main.go lines 227-230).
    ("MPS with MIG strategy none", {"name": "x", "mig": {"strategy": "none"},
                                    "sharing": {"mode": "mps", "replicas": 2}},
     None, {"version": "v1", "flags": {"migStrategy": "none"},
            "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}),
    ("every flag", {"name": "x"},
     {"fail_on_init_error": False, "nvidia_driver_root": "/run/nvidia/driver", "nvidia_dev_root": "/",
      "mps_root": "/run/nvidia/mps", "gdrcopy_enabled": True, "gds_enabled": False, "mofed_enabled": True,
      "device_discovery_strategy": "nvml", "pass_device_specs": True,
      "device_list_strategy": ["cdi-cri", "envvar"], "device_id_strategy": "index",
      "shared_devices_allocation_policy": "packed"},
     {"version": "v1", "flags": {
         "migStrategy": "none", "failOnInitError": False, "nvidiaDriverRoot": "/run/nvidia/driver",
         "nvidiaDevRoot": "/", "mpsRoot": "/run/nvidia/mps", "gdrcopyEnabled": True, "gdsEnabled": False,
         "mofedEnabled": True, "deviceDiscoveryStrategy": "nvml",
         "plugin": {"passDeviceSpecs": True, "deviceListStrategy": ["cdi-cri", "envvar"],
                    "deviceIDStrategy": "index", "sharedDevicesAllocationPolicy": "packed"}}}),
    ("flags left as None are not written", {"name": "x"}, {"mps_root": None, "device_id_strategy": None},
     {"version": "v1", "flags": {"migStrategy": "none"}}),
]


@pytest.mark.parametrize("what,profile,flags,expected", VALID, ids=[case[0] for case in VALID])
def test_valid_profiles(what, profile, flags, expected):
    config = build_device_plugin_config(profile, flags)
    assert config == expected
    # Time-slicing and MPS are exclusive (README "Shared Access to GPUs"); upstream lets MPS win
    # silently when both are given (sharing.go lines 36-45), so we must never write both.
    assert len(config.get("sharing", {})) <= 1
    assert yaml.safe_load(device_plugin_config(profile, flags)) == expected


INVALID = [
    ("not a mapping", ["h100"], None, r"hardware profile must be a mapping"),
    # replicas.go lines 251-253: "number of replicas must be >= 2".
    ("one replica", {"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": 1}}, None,
     r"profile h100_sxm: sharing.replicas must be at least 2"),
    ("zero replicas", {"name": "h100_sxm", "sharing": {"mode": "mps", "replicas": 0}}, None,
     r"profile h100_sxm: sharing.replicas must be at least 2"),
    ("replicas missing", {"name": "h100_sxm", "sharing": {"mode": "time-slicing"}}, None,
     r"profile h100_sxm: sharing.replicas must be an integer, got None"),
    ("replicas as text", {"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": "4"}}, None,
     r"profile h100_sxm: sharing.replicas must be an integer, got '4'"),
    ("replicas as bool", {"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replicas": True}}, None,
     r"sharing.replicas must be an integer, got True"),
    # cmd/mps-control-daemon/mps/device.go lines 35-49: 48 clients at most.
    ("49 MPS clients", {"name": "h200_sxm", "sharing": {"mode": "mps", "replicas": 49}}, None,
     r"profile h200_sxm: sharing.replicas 49 is more than the 48 MPS clients"),
    ("typo in mode", {"name": "h100_sxm", "sharing": {"mode": "timeslicing", "replicas": 4}}, None,
     r"profile h100_sxm: sharing.mode must be one of none, time-slicing, mps, got 'timeslicing'"),
    ("typo in a sharing key", {"name": "h100_sxm", "sharing": {"mode": "time-slicing", "replica": 4}}, None,
     r"profile h100_sxm: sharing has unknown key\(s\) replica"),
    ("mode none with replicas", {"name": "x", "sharing": {"mode": "none", "replicas": 4}}, None,
     r"profile x: sharing.mode none takes no replicas"),
    ("rename as text", {"name": "x", "sharing": {"mode": "mps", "replicas": 2, "rename_by_default": "yes"}},
     None, r"profile x: sharing.rename_by_default must be true or false"),
    ("sharing not a mapping", {"name": "x", "sharing": "time-slicing"}, None,
     r"profile x: sharing must be a mapping"),
    ("mig true", {"name": "a100_80g_pcie", "mig": True}, None,
     r"profile a100_80g_pcie: mig: true says MIG mode is on but not how"),
    # main.go lines 244-250: "unknown MIG strategy".
    ("unknown MIG strategy", {"name": "a100_80g_pcie", "mig": {"strategy": "auto"}}, None,
     r"profile a100_80g_pcie: mig.strategy must be one of none, single, mixed, got 'auto'"),
    ("typo in a mig key", {"name": "a100_80g_pcie", "mig": {"strategy": "single", "layuot": "all-1g.10gb"}},
     None, r"profile a100_80g_pcie: mig has unknown key\(s\) layuot"),
    # main.go lines 227-230.
    ("MPS with mixed", {"name": "a100_80g_pcie", "mig": {"strategy": "mixed", "profiles": ["1g.10gb"]},
                        "sharing": {"mode": "mps", "replicas": 2}}, None,
     r"profile a100_80g_pcie: sharing.mode mps with mig.strategy mixed: the device plugin refuses it"),
    # internal/plugin/mps.go lines 45-49.
    ("MPS with single", {"name": "a100_80g_pcie", "mig": {"strategy": "single"},
                         "sharing": {"mode": "mps", "replicas": 2}}, None,
     r"profile a100_80g_pcie: sharing.mode mps with mig.strategy single"),
    ("mixed time-slicing without profiles", {"name": "a100_80g_pcie",
                                             "mig": {"strategy": "mixed", "layout": "all-balanced"},
                                             "sharing": {"mode": "time-slicing", "replicas": 2}}, None,
     r"profile a100_80g_pcie: time-slicing with mig.strategy mixed needs the MIG profiles"),
    ("compute-instance profile", {"name": "a100_80g_pcie",
                                  "mig": {"strategy": "mixed", "profiles": ["1c.3g.40gb"]},
                                  "sharing": {"mode": "time-slicing", "replicas": 2}}, None,
     r"profile a100_80g_pcie: mig.profiles: MIG profile '1c.3g.40gb' is a compute-instance profile"),
    ("malformed MIG profile", {"name": "a100_80g_pcie", "mig": {"strategy": "mixed", "profiles": ["1g10gb"]},
                               "sharing": {"mode": "time-slicing", "replicas": 2}}, None,
     r"profile a100_80g_pcie: mig.profiles: MIG profile '1g10gb' is not of the form"),
    ("profile twice", {"name": "a100_80g_pcie",
                       "mig": {"strategy": "mixed", "profiles": ["1g.10gb", "1c.1g.10gb"]},
                       "sharing": {"mode": "time-slicing", "replicas": 2}}, None,
     r"profile a100_80g_pcie: mig.profiles names a profile twice"),
    ("empty profiles", {"name": "x", "mig": {"strategy": "mixed", "profiles": []}}, None,
     r"profile x: mig.profiles must be a non-empty list"),
    ("layout not text", {"name": "x", "mig": {"strategy": "single", "layout": 7}}, None,
     r"profile x: mig.layout must be a mig-parted config name"),
    ("unknown flag", {"name": "x"}, {"mig_strategy": "mixed"}, r"flags has unknown key\(s\) mig_strategy"),
    # main.go lines 204-207, 214-216, 218-225, 236-242.
    ("device list strategy", {"name": "x"}, {"device_list_strategy": ["envvar", "cdi"]},
     r"flags.device_list_strategy: cdi not one of envvar, volume-mounts, cdi-annotations, cdi-cri"),
    ("device ID strategy", {"name": "x"}, {"device_id_strategy": "serial"},
     r"flags.device_id_strategy must be one of uuid, index, got 'serial'"),
    ("allocation policy", {"name": "x"}, {"shared_devices_allocation_policy": "spread"},
     r"flags.shared_devices_allocation_policy must be one of distributed, packed"),
    ("discovery strategy", {"name": "x"}, {"device_discovery_strategy": "pci"},
     r"flags.device_discovery_strategy must be one of auto, nvml, tegra"),
    ("flag of the wrong type", {"name": "x"}, {"fail_on_init_error": "yes"},
     r"flags.fail_on_init_error must be a boolean, got 'yes'"),
    ("flags not a mapping", {"name": "x"}, ["envvar"], r"flags must be a mapping"),
    ("profile without a name", {"sharing": {"mode": "mps", "replicas": 1}}, None,
     r"^profile: sharing.replicas must be at least 2"),
]


@pytest.mark.parametrize("what,profile,flags,message", INVALID, ids=[case[0] for case in INVALID])
def test_invalid_profiles(what, profile, flags, message):
    with pytest.raises(ValueError, match=message):
        build_device_plugin_config(profile, flags)


@pytest.mark.parametrize("profile,resource", [
    ("1g.10gb", "nvidia.com/mig-1g.10gb"),
    ("3g.71gb", "nvidia.com/mig-3g.71gb"),
    ("7c.7g.80gb", "nvidia.com/mig-7g.80gb"),        # C == G: written without the C part
    ("1g.10gb+me", "nvidia.com/mig-1g.10gb.me"),     # '+' -> '.' (rm.go line 145)
    ("1g.24gb+me.all", "nvidia.com/mig-1g.24gb.me.all"),
    ("1g.24gb-me", "nvidia.com/mig-1g.24gb-me"),
    ("2g.48gb+gfx", "nvidia.com/mig-2g.48gb.gfx"),
])
def test_mig_resource_name(profile, resource):
    assert mig_resource_name(profile) == resource


@pytest.mark.parametrize("value", ["1c.2g.20gb", "g.10gb", "1g.10GB", "1g.10gb+xx", 7, "all-1g.10gb"])
def test_mig_resource_name_refuses(value):
    with pytest.raises(ValueError, match="MIG profile"):
        mig_resource_name(value)


def test_yaml_writer_quotes_what_yaml_would_misread():
    """go-yaml v2 (under sigs.k8s.io/yaml) is YAML 1.1, like PyYAML: yes/on/no are booleans there."""
    config = {"a": "yes", "b": "on", "c": "0", "d": "1.5", "e": "x: y", "f": "", "g": "#x", "h": "null",
              "i": "/run/nvidia/driver", "j": [], "k": {}, "l": [1, "two"]}
    text = render_yaml(config)
    assert yaml.safe_load(text) == config
    assert "i: /run/nvidia/driver\n" in text


def test_yaml_writer_refuses_other_types():
    with pytest.raises(ValueError, match="YAML scalar"):
        render_yaml({"a": 1.5})
    with pytest.raises(ValueError, match="config must be a mapping"):
        render_yaml(["a"])


def test_example_inventory_profiles_give_their_config():
    """Every profile of inventories/example builds: whole GPUs everywhere (the A100 80GB PCIe
    profile's floors are whole-GPU numbers, issue 28 item 10); none shares by time or MPS."""
    expected_strategy = {}
    found = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "example", "group_vars", "*.yml"))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        if "gpucloud_profile" not in data:
            continue
        found += 1
        strategy = expected_strategy.get(data["gpucloud_profile"]["name"], "none")
        assert build_device_plugin_config(data["gpucloud_profile"]) == {
            "version": "v1", "flags": {"migStrategy": strategy}}, path
    assert found == 4


# Issue 28 item 19: what the builder accepted but the plugin (or the project's own schema) refuses.
ITEM_19 = [
    # The schema's deviceListStrategy list is uniqueItems (flags.go lines 86-106 keep each once).
    ("device list strategy twice", {"name": "x"}, {"device_list_strategy": ["envvar", "envvar"]},
     r"flags.device_list_strategy names envvar twice"),
    ("device list strategy twice among others", {"name": "x"},
     {"device_list_strategy": ["cdi-cri", "envvar", "cdi-cri"]}, r"flags.device_list_strategy names cdi-cri twice"),
    # The layout partitions the GPUs while the plugin advertises whole ones it cannot hand out.
    ("strategy none with a layout", {"name": "a100", "mig": {"strategy": "none", "layout": "all-1g.10gb"}}, None,
     r"profile a100: mig.strategy none with mig.layout all-1g.10gb"),
    ("strategy none with profiles", {"name": "a100", "mig": {"strategy": "none", "profiles": ["1g.10gb"]}}, None,
     r"profile a100: mig.strategy none with mig.profiles"),
    ("10**12 time-slicing replicas", {"name": "h200", "sharing": {"mode": "time-slicing", "replicas": 10 ** 12}},
     None, r"profile h200: sharing.replicas 1000000000000 is more than the 256"),
    ("257 time-slicing replicas", {"name": "h200", "sharing": {"mode": "time-slicing", "replicas": 257}},
     None, r"profile h200: sharing.replicas 257 is more than the 256"),
    # Item 13: paths and names end where the string ends.
    ("driver root with a newline", {"name": "x"}, {"nvidia_driver_root": "/\n"},
     r"flags.nvidia_driver_root must be an absolute path"),
    ("driver root relative", {"name": "x"}, {"nvidia_driver_root": "run/nvidia/driver"},
     r"flags.nvidia_driver_root must be an absolute path"),
    ("driver root with ..", {"name": "x"}, {"nvidia_driver_root": "/run/../etc"},
     r"flags.nvidia_driver_root must be an absolute path"),
    ("dev root with a newline", {"name": "x"}, {"nvidia_dev_root": "/dev\n"},
     r"flags.nvidia_dev_root must be an absolute path"),
    ("mps root with a newline", {"name": "x"}, {"mps_root": "/run/nvidia/mps\n"},
     r"flags.mps_root must be an absolute path"),
    ("MIG profile with a newline", {"name": "a100", "mig": {"strategy": "mixed", "profiles": ["1g.10gb\n"]},
                                    "sharing": {"mode": "time-slicing", "replicas": 2}}, None,
     r"MIG profile '1g.10gb\\n' is not of the form"),
]


@pytest.mark.parametrize("what,profile,flags,message", ITEM_19, ids=[case[0] for case in ITEM_19])
def test_item_19_refusals(what, profile, flags, message):
    with pytest.raises(ValueError, match=message):
        build_device_plugin_config(profile, flags)


def test_time_slicing_replicas_up_to_the_bound():
    config = build_device_plugin_config({"name": "h200", "sharing": {"mode": "time-slicing", "replicas": 256}})
    assert config["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 256}]
    assert build_device_plugin_config({"name": "a", "mig": {"strategy": "none"}})["flags"] == {"migStrategy": "none"}


def test_a_layout_named_all_x_with_a_newline_gives_no_profile():
    """all-1g.10gb\\n is not a mig-parted name: its profile is not taken as 1g.10gb."""
    with pytest.raises(ValueError, match="needs the MIG profiles"):
        build_device_plugin_config({"name": "a", "mig": {"strategy": "mixed", "layout": "all-1g.10gb\n"},
                                    "sharing": {"mode": "time-slicing", "replicas": 2}})
