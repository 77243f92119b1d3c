# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gpu.mig acceptance check judges the MIG layout, not only the mode.

The H200 capture (MIG disabled) with MIG state and the product name injected, and the real
``nvidia-smi mig -lgi`` of an A100 PCIe 40GB in all-1g.5gb from NVIDIA's cloud-native-docs.
"""


from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance
from ansible_collections.gpucloud.fleet.tests.unit.plugins.plugin_utils.test_acceptance import (
    HOST,
    LOCK,
    PROFILE,
    by_name,
    h200_observed,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

A100_LGI = fixture_text("public", "mig", "a100-pcie-40gb-lgi-all-1g.5gb-cloud-native-docs.txt")
A100_PROFILE = dict(PROFILE, name="a100_40_mig", gpu_model="A100", gpu_memory_mib_min=1,
                    mig={"strategy": "single", "layout": "all-1g.5gb"})


def a100_observed(lgi=A100_LGI):
    observed = h200_observed()
    gpu = observed["nvidia"]["gpus"][0]
    gpu.update(name="NVIDIA A100-PCIE-40GB")
    gpu["mig"] = {"current": True, "pending": True}
    if lgi is not None:
        observed["mig_instances"] = {"text": lgi}
    return observed


def mig_check(profile, observed):
    return by_name(acceptance.evaluate(HOST, profile, LOCK, observed))["gpu.mig"]


def test_layout_as_the_profile_says_passes():
    check = mig_check(A100_PROFILE, a100_observed())
    assert check["status"] == "pass", check
    assert check["detail"] == "MIG enabled, layout all-1g.5gb on every GPU as profile a100_40_mig says"


def test_other_layout_fails_with_what_is_there():
    profile = dict(A100_PROFILE, mig={"strategy": "single", "layout": "all-3g.20gb"})
    check = mig_check(profile, a100_observed())
    assert check["status"] == "fail"
    assert check["detail"] == ("GPU0 GPU instances 7 x 1g.5gb, want 2 x 3g.20gb "
                               "(layout all-3g.20gb of profile a100_40_mig)")


def test_instances_missing_after_a_reboot_fail():
    """MIG mode survives a reboot, GPU instances do not: an empty -lgi table is a failure."""
    empty = "\n".join(A100_LGI.splitlines()[:5]) + "\n"
    check = mig_check(A100_PROFILE, a100_observed(empty))
    assert check["status"] == "fail"
    assert "GPU instances none, want 7 x 1g.5gb" in check["detail"]


def test_layout_not_read_is_not_a_pass():
    check = mig_check(A100_PROFILE, a100_observed(lgi=None))
    assert check["status"] == "fail"
    assert "were not read" in check["detail"]
    observed = a100_observed(lgi=None)
    observed["mig_instances"] = {"error": "rc 6: No MIG-enabled devices found."}
    assert "nvidia-smi mig -lgi failed" in mig_check(A100_PROFILE, observed)["detail"]


def test_layout_of_another_gpu_family_fails_clearly():
    profile = dict(A100_PROFILE, mig={"strategy": "single", "layout": "all-1g.18gb"})
    check = mig_check(profile, a100_observed())
    assert check["status"] == "fail"
    assert "A100-40GB has no MIG profile 1g.18gb" in check["detail"]


def test_mode_still_judged_first():
    observed = a100_observed()
    observed["nvidia"]["gpus"][0]["mig"] = {"current": False, "pending": True}
    check = mig_check(A100_PROFILE, observed)
    assert check["detail"] == "GPU0 MIG current=False pending=True, expected MIG enabled"


def test_mig_false_profile_on_the_real_capture_unchanged():
    check = mig_check(PROFILE, h200_observed())
    assert check == {"host": HOST, "check": "gpu.mig", "status": "pass", "ok": True,
                     "detail": "MIG disabled as profile h200_capture says"}
