# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The hardware profiles the k8s tests render: every example profile, and variants for MIG and sharing."""


import glob
import json
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA = os.path.join(ROOT, "roles", "k8s_gpu_node", "files", "schemas", "device-plugin-config-v1.schema.json")
# The Kubernetes version the manifests are validated for (kubernetes-validate 1.37.0 bundles 1.32-1.37 and older).
KUBERNETES_VERSION = "1.33.0"


def example_profiles():
    """{profile name: gpucloud_profile} of inventories/example/group_vars/<profile>.yml."""
    profiles = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "inventories", "example", "group_vars", "*.yml"))):
        with open(path) as handle:
            data = yaml.safe_load(handle) or {}
        if isinstance(data.get("gpucloud_profile"), dict):
            profiles[data["gpucloud_profile"]["name"]] = data["gpucloud_profile"]
    return profiles


def variant_profiles():
    """Profiles for the device plugin's other modes, built from the example ones."""
    examples = example_profiles()
    a100, h200 = examples["a100_80g_pcie"], examples["h200_sxm"]
    return {
        "a100_mig_mixed_ts": dict(a100, name="a100_mig_mixed_ts",
                                  mig={"strategy": "mixed", "layout": "all-1g.10gb"},
                                  sharing={"mode": "time-slicing", "replicas": 7, "rename_by_default": True}),
        "h200_mig_single": dict(h200, name="h200_mig_single", mig={"strategy": "single", "layout": "all-3g.71gb"}),
        "h200_ts": dict(h200, name="h200_ts", sharing={"mode": "time-slicing", "replicas": 4,
                                                       "fail_requests_greater_than_one": True}),
        "h100_mps": dict(examples["h100_sxm"], name="h100_mps", sharing={"mode": "mps", "replicas": 8}),
    }


def load_schema():
    with open(SCHEMA) as handle:
        return json.load(handle)
