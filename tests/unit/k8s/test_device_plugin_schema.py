# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The device plugin config JSON Schema (k8s-device-plugin v0.20.0 api/config/v1, strict) against
the configs the collection writes, upstream's README examples, and typos upstream would ignore."""


import copy
import os
import re

import jsonschema
import pytest
import yaml

from ansible_collections.gpucloud.fleet.plugins.plugin_utils import device_plugin_config as dpc
from ansible_collections.gpucloud.fleet.tests.unit.k8s.k8s_cases import ROOT, example_profiles, load_schema, variant_profiles


def _ecma_pattern(validator, pattern, instance, _schema):
    """JSON Schema patterns are ECMA-262 regular expressions, whose final '$' ends the string; Python's
    '$' also matches before a final newline, so jsonschema's own check lets 'nvidia.com/gpu\\n' through."""
    if not validator.is_type(instance, "string"):
        return
    python = pattern[:-1] + r"\Z" if pattern.endswith("$") and not pattern.endswith("\\$") else pattern
    if not re.search(python, instance):
        yield jsonschema.ValidationError("%r does not match %r" % (instance, pattern))


ECMA_DRAFT_2020_12 = jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _ecma_pattern})
VALIDATOR = ECMA_DRAFT_2020_12(load_schema())
FLAGS = {"nvidia_driver_root": "/", "fail_on_init_error": True, "mps_root": "/run/nvidia/mps",
         "device_list_strategy": ["envvar", "cdi-cri"], "device_id_strategy": "uuid"}
PROFILES = dict(example_profiles(), **variant_profiles())


def errors(config):
    return sorted(error.message for error in VALIDATOR.iter_errors(config))


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_every_example_profile_is_there():
    assert sorted(example_profiles()) == ["a100_40g_sxm", "a100_80g_pcie", "h100_sxm", "h200_sxm"]


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("flags", [None, FLAGS], ids=["no-flags", "flags"])
def test_filter_output_of_every_profile_validates(name, flags):
    # The text the filter writes, read back as the plugin would read it (YAML).
    config = yaml.safe_load(dpc.device_plugin_config(PROFILES[name], flags))
    assert errors(config) == []


@pytest.mark.parametrize("name", ["config-file", "dp-example-config0", "dp-example-config1", "time-slicing",
                                  "time-slicing-rename", "mps", "mps-rename"])
def test_upstream_readme_examples_validate(name):
    path = os.path.join(ROOT, "tests", "fixtures", "public", "k8s-device-plugin", name)
    text = open(path + (".txt" if name.endswith("-rename") else ".yaml")).read()
    # Two README examples end with an indented '...' line, the README's own "and more" mark.
    assert errors(yaml.safe_load(re.sub(r"(?m)^\s+\.\.\.\n", "", text))) == []


BASE = {"version": "v1", "flags": {"migStrategy": "none", "plugin": {"passDeviceSpecs": False}},
        "sharing": {"timeSlicing": {"renameByDefault": True,
                                    "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}


def with_change(path, value=None, delete=None):
    config = copy.deepcopy(BASE)
    node = config
    for key in path[:-1]:
        node = node[key]
    if delete:
        node[delete] = node.pop(path[-1])
    else:
        node[path[-1]] = value
    return config


REFUSED = [
    # Typos sigs.k8s.io/yaml would drop without a word (the plugin then runs with its defaults).
    (with_change(["flags", "migStrategy"], delete="migStratgy"), "'migStratgy' was unexpected"),
    (with_change(["sharing", "timeSlicing"], delete="timeslicing"), "'timeslicing' was unexpected"),
    (with_change(["sharing", "timeSlicing", "renameByDefault"], delete="renameByDefualt"),
     "'renameByDefualt' was unexpected"),
    (with_change(["flags", "plugin", "passDeviceSpecs"], delete="passDeviceSpec"), "'passDeviceSpec' was unexpected"),
    (dict(BASE, shareing={}), "'shareing' was unexpected"),
    (with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/gpu", "replica": 4}]),
     "'replicas' is a required property"),
    # Values the plugin refuses.
    (with_change(["flags", "migStrategy"], "mix"), "'mix' is not one of"),
    (with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/gpu", "replicas": 1}]),
     "1 is less than the minimum of 2"),
    (with_change(["sharing", "timeSlicing", "resources"], []), "should be non-empty"),
    (with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/GPU", "replicas": 2}]),
     "does not match"),
    (dict(BASE, version="v2"), "'v2' is not one of"),
    (dict(BASE, imex={"channelIDs": [1]}), "0 was expected"),
]


@pytest.mark.parametrize("config,message", REFUSED)
def test_typos_and_bad_values_are_refused(config, message):
    found = errors(config)
    assert found, "the schema accepted %r" % config
    assert any(message in error for error in found), found


def test_the_base_of_the_refusals_is_valid():
    assert errors(BASE) == []


# Issue 28 item 19: the filter checks what it writes against this schema without jsonschema (the
# controller need not have it). Its verdict must be jsonschema's on every config here.
MORE = [
    with_change(["flags", "plugin", "deviceListStrategy"], ["envvar", "envvar"]),
    with_change(["flags", "plugin", "deviceListStrategy"], ["envvar", "cdi-cri"]),
    with_change(["flags", "plugin", "deviceListStrategy"], "volume-mounts"),
    with_change(["flags", "plugin", "deviceListStrategy"], []),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/gpu\n", "replicas": 2}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/gpu", "replicas": True}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "nvidia.com/gpu", "replicas": 2.0}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "gpu", "replicas": 2, "devices": [0, "1:0"]}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "gpu", "replicas": 2, "devices": "all"}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "gpu", "replicas": 2, "devices": 0}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "gpu", "replicas": 2, "devices": ["x"]}]),
    with_change(["sharing", "timeSlicing", "resources"], [{"name": "n" * 64, "replicas": 2}]),
    with_change(["flags", "migStrategy"], "none\n"),
    with_change(["flags", "migStrategy"], True),
    dict(BASE, flags={"gfd": {"sleepInterval": "60s"}}),
    dict(BASE, flags={"gfd": {"sleepInterval": "60s\n"}}),
    dict(BASE, flags={"gfd": {"sleepInterval": 5}}),
    dict(BASE, imex={"channelIDs": [0, 0]}),
    dict(BASE, imex={"channelIDs": [False]}),
    {"flags": {}},
    [],
    {"version": ""},
]
EVERY_CONFIG = [BASE] + [config for config, _message in REFUSED] + MORE + [
    yaml.safe_load(dpc.device_plugin_config(PROFILES[name], flags)) for name in sorted(PROFILES) for flags in (None, FLAGS)]


@pytest.mark.parametrize("index", range(len(EVERY_CONFIG)))
def test_the_filters_schema_check_agrees_with_jsonschema(index):
    config = EVERY_CONFIG[index]
    assert bool(dpc.schema_errors(config)) == bool(errors(config)), (config, dpc.schema_errors(config), errors(config))


def test_the_filter_refuses_a_config_the_schema_refuses(monkeypatch):
    """Should the builder let something through that the schema refuses, nothing is written."""
    real = dpc.build_device_plugin_config

    def build(profile, flags=None):
        config = real(profile, flags)
        config["flags"]["plugin"] = {"deviceListStrategy": ["envvar", "envvar"]}
        return config

    monkeypatch.setattr(dpc, "build_device_plugin_config", build)
    with pytest.raises(ValueError, match=r"profile h200_sxm: the rendered config breaks the device plugin config "
                                         r"schema \(device-plugin-config-v1.schema.json\): config.flags.plugin"):
        dpc.device_plugin_config(PROFILES["h200_sxm"])


def test_the_schema_check_refuses_keywords_it_does_not_know():
    with pytest.raises(ValueError, match="uses patternProperties"):
        dpc.schema_errors({}, {"type": "object", "patternProperties": {}})
