# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""mig_parted_config / mig_layout_name filters on the example inventory's profiles."""


import glob
import json
import os

import jsonschema
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.gpucloud.fleet.plugins.filter.mig_layout import mig_layout_name, mig_parted_config
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import ROOT

SCHEMA = os.path.join(ROOT, "roles", "gpu_sharing", "files", "schemas", "mig-parted-config-v1.schema.json")


def example_profiles():
    profiles = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "example", "group_vars", "*.yml"))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        if "gpucloud_profile" in data:
            profiles[data["gpucloud_profile"]["name"]] = data["gpucloud_profile"]
    return profiles


def test_every_example_profile_gives_a_strict_config():
    with open(SCHEMA) as handle:
        validator = jsonschema.Draft202012Validator(json.load(handle))
    profiles = example_profiles()
    assert "a100_80g_pcie" in profiles
    for name, profile in profiles.items():
        config = yaml.safe_load(mig_parted_config(profile))
        validator.validate(config)
        assert list(config["mig-configs"]) == [mig_layout_name(profile)], name


def test_an_a100_80gb_all_1g10gb_profile_is_seven_slices():
    profile = dict(example_profiles()["a100_80g_pcie"], mig={"strategy": "single", "layout": "all-1g.10gb"})
    config = yaml.safe_load(mig_parted_config(profile))
    assert config["mig-configs"] == {"all-1g.10gb": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}


def test_a_layout_name_with_a_trailing_newline_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="mig_parted_config: profile p: MIG layout"):
        mig_parted_config({"name": "p", "gpu_model": "A100 80GB PCIe",
                           "mig": {"strategy": "single", "layout": "all-1g.10gb\n"}})


def test_refusals_are_filter_errors_naming_the_profile():
    with pytest.raises(AnsibleFilterError, match="profile h200_sxm: .*H200-141GB has no MIG profile 1g.10gb"):
        mig_parted_config({"name": "h200_sxm", "gpu_model": "H200", "mig": {"strategy": "single", "layout": "all-1g.10gb"}})
    with pytest.raises(AnsibleFilterError, match="not a MIG GPU"):
        mig_parted_config({"name": "l4", "gpu_model": "L4", "mig": {"strategy": "single", "layout": "all-1g.10gb"}})
    assert mig_layout_name({"mig": False}) == "all-disabled"
