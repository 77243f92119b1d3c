# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""module_utils/gpu_diagnostics.py: levels, the busy refusal, the source choice, the DCGM run, the own checks."""

import copy
import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import dcgm_diag
from ansible_collections.gpucloud.fleet.plugins.module_utils import gpu_diagnostics as diag
from ansible_collections.gpucloud.fleet.plugins.module_utils.nvml import facts_from_capture
from ansible_collections.gpucloud.fleet.plugins.plugin_utils import acceptance

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures")
UUID = ["GPU-%08d-1111-2222-3333-444444444444" % i for i in range(4)]
GPU_LIST = "".join("%d, %s\n" % (i, u) for i, u in enumerate(UUID))
PROFILE = {"name": "lab", "gpu_count": 4}


def _read(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding="utf-8") as handle:
        return handle.read()


class Node:
    """A fake node: answers the commands diagnose runs, records them."""

    def __init__(self, apps="", dcgm=None, diag_out=None, diag_rc=0, smi_rc=0):
        self.apps, self.dcgm, self.diag_out, self.diag_rc, self.smi_rc = apps, dcgm, diag_out, diag_rc, smi_rc
        self.calls = []
        self.observed = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        if argv == diag.SMI_GPUS:
            return (self.smi_rc, GPU_LIST if self.smi_rc == 0 else "", "" if self.smi_rc == 0 else "driver gone")
        if argv == diag.SMI_APPS:
            return 0, self.apps, ""
        if argv == diag.DCGM_PROBE:
            if self.dcgm is None:
                return 127, "", "dcgmi: command not found"
            return (0, "4 GPUs found.\n", "") if self.dcgm else (255, "", "Error: unable to establish a connection")
        if argv[:2] == ["dcgmi", "diag"]:
            return self.diag_rc, self.diag_out, ""
        raise AssertionError("unexpected command %r" % (argv,))

    def observe(self, params):
        self.observed.append(params)
        return {"nvidia": {"gpus": []}}, False


def run(node, check_mode=False, **params):
    params.setdefault("level", "quick")
    params.setdefault("profile", PROFILE)
    return diag.diagnose(params, node, node.observe, check_mode)


# ------------------------------------------------------------------ levels

@pytest.mark.parametrize("level, number", [("quick", 1), ("medium", 2), ("long", 3), ("extended", 4)])
def test_level_names_map_to_dcgmi_suites(level, number):
    assert diag.dcgm_command(level) == ["dcgmi", "diag", "-r", str(number), "-j"]


def test_every_level_has_own_checks_and_a_burn_in_time():
    assert set(diag.OWN_CHECKS) == set(dcgm_diag.LEVELS) == set(diag.BURN_IN_SECONDS)
    assert diag.BURN_IN_SECONDS["quick"] == 0
    assert 0 < diag.BURN_IN_SECONDS["medium"] < diag.BURN_IN_SECONDS["long"] < diag.BURN_IN_SECONDS["extended"]
    assert not set(diag.BURN_IN_CHECKS) & set(diag.OWN_CHECKS["quick"])


def test_own_checks_are_acceptance_checks():
    for names in diag.OWN_CHECKS.values():
        assert set(names) <= set(acceptance.CHECKS)


def test_dcgm_command_limits_gpus():
    assert diag.dcgm_command("long", [1, 3]) == ["dcgmi", "diag", "-r", "3", "-j", "-i", "1,3"]


@pytest.mark.parametrize("level", ["short", "xlong", "1", 1, None, "Quick"])
def test_a_level_that_is_no_name_is_refused(level):
    with pytest.raises(diag.DiagnosticsError, match="level"):
        run(Node(dcgm=True), level=level)


# ------------------------------------------------------------------ parsers

def test_compute_apps_are_parsed_with_commas_in_names():
    text = "%s, 4242, /usr/bin/python3\n%s, 77, python train.py --a=1,2\n" % (UUID[1], UUID[3])
    assert diag.parse_compute_apps(text) == [
        {"gpu_uuid": UUID[1], "pid": 4242, "name": "/usr/bin/python3"},
        {"gpu_uuid": UUID[3], "pid": 77, "name": "python train.py --a=1,2"}]


@pytest.mark.parametrize("text", ["", "\n", "No running processes found\n"])
def test_no_compute_apps(text):
    assert diag.parse_compute_apps(text) == []


@pytest.mark.parametrize("text", ["GPU-1, notapid, x\n", "GPU-1, 12\n", "[Insufficient Permissions]\n"])
def test_compute_apps_garbage_is_refused(text):
    with pytest.raises(ValueError, match="query-compute-apps"):
        diag.parse_compute_apps(text)


def test_gpu_uuids_from_the_h200_capture():
    text = _read("h200-ubuntu2404-driver580", "nvidia-smi_-L.txt")
    listed = "".join("%s, %s\n" % (line.split(":")[0].split()[1], line.split("UUID: ")[1].rstrip(")"))
                     for line in text.splitlines() if line.startswith("GPU "))
    uuids = diag.parse_gpu_uuids(listed)
    assert sorted(uuids.values()) == list(range(len(uuids))) and len(uuids) >= 1


@pytest.mark.parametrize("text", ["0\n", "x, GPU-1\n", "0, \n"])
def test_gpu_uuids_garbage_is_refused(text):
    with pytest.raises(ValueError, match="index,uuid"):
        diag.parse_gpu_uuids(text)


# ------------------------------------------------------------------ busy refusal

def test_busy_gpu_is_refused_naming_gpu_and_pid():
    node = Node(apps="%s, 4242, python3\n%s, 4243, python3\n" % (UUID[2], UUID[2]), dcgm=True)
    with pytest.raises(diag.DiagnosticsError) as caught:
        run(node)
    assert "GPU 2: PID 4242 (python3), 4243 (python3)" in str(caught.value)
    assert caught.value.result["refused"] is True
    assert not any(call[:2] == ["dcgmi", "diag"] for call in node.calls)


def test_busy_refusal_holds_in_check_mode():
    node = Node(apps="%s, 9, x\n" % UUID[0], dcgm=None)
    with pytest.raises(diag.DiagnosticsError, match="GPU 0: PID 9"):
        run(node, check_mode=True)
    assert node.observed == []


def test_force_runs_on_a_busy_gpu_and_says_so():
    out = _read("dcgm_diag", "dcgm4_gb10_r1.json")
    node = Node(apps="%s, 9, x\n" % UUID[0], dcgm=True, diag_out=out, diag_rc=226)
    result = run(node, force=True, gpus=[0])
    assert (result["forced"], result["refused"], result["ran"]) == (True, False, True)
    assert result["busy"] == [{"gpu": 0, "pid": 9, "name": "x"}]


def test_a_process_on_another_gpu_does_not_refuse():
    node = Node(apps="%s, 9, x\n" % UUID[3], dcgm=None)
    result = run(node, gpus=[0, 1])
    assert (result["refused"], result["busy"], result["ran"]) == (False, [], True)


def test_a_process_on_an_unlisted_gpu_refuses():
    node = Node(apps="GPU-unknown, 9, x\n", dcgm=None)
    with pytest.raises(diag.DiagnosticsError, match="GPU GPU-unknown: PID 9"):
        run(node, gpus=[0])


def test_busy_cannot_be_told_without_nvidia_smi_unless_forced():
    with pytest.raises(diag.DiagnosticsError, match="cannot tell whether the GPUs hold compute processes"):
        run(Node(smi_rc=9, dcgm=None))
    assert run(Node(smi_rc=9, dcgm=None), force=True)["ran"] is True


def test_a_gpu_that_is_not_there_is_refused():
    with pytest.raises(diag.DiagnosticsError, match=r"gpus: 7 not on this node \(its GPUs: 0, 1, 2, 3\)"):
        run(Node(dcgm=True), gpus=[0, 7])


@pytest.mark.parametrize("gpus", [[-1], ["0"], [True]])
def test_bad_gpu_indexes_are_refused(gpus):
    with pytest.raises(diag.DiagnosticsError, match="gpus must be GPU indexes"):
        run(Node(dcgm=True), gpus=gpus)


# ------------------------------------------------------------------ source

def test_dcgmi_missing_runs_the_own_checks():
    node = Node(dcgm=None)
    result = run(node, level="medium")
    assert (result["source"], result["command"]) == ("own", None)
    assert "dcgmi is not installed" in result["source_reason"]
    assert result["checks"] == list(diag.OWN_CHECKS["medium"]) and result["burn_in_seconds"] == 10
    assert node.observed == [{"profile": {"name": "lab", "gpu_count": 4, "xid": False, "firewall": False,
                                          "tang_bound": False, "pcie_acs": False}}]


def test_host_engine_down_runs_the_own_checks_and_says_why():
    result = run(Node(dcgm=False))
    assert result["source"] == "own" and "nv-hostengine" in result["source_reason"]


def test_source_dcgm_without_dcgm_fails():
    with pytest.raises(diag.DiagnosticsError, match="source: dcgm asked for, but dcgmi is not installed"):
        run(Node(dcgm=None), source="dcgm")


def test_source_own_skips_dcgm():
    node = Node(dcgm=True)
    assert run(node, source="own")["source"] == "own"
    assert diag.DCGM_PROBE not in node.calls


def test_own_checks_need_the_profile_gpu_count():
    with pytest.raises(diag.DiagnosticsError, match="gpu_count"):
        run(Node(dcgm=None), profile={})


# ------------------------------------------------------------------ DCGM run

def test_dcgm_failure_is_parsed_and_judged():
    node = Node(dcgm=True, diag_out=_read("dcgm_diag", "dcgm4_gb10_r1.json"), diag_rc=226)
    result = run(node, gpus=[0])
    assert ["dcgmi", "diag", "-r", "1", "-j", "-i", "0"] in node.calls
    assert result["passed"] is False and result["rc"] == 226
    assert [(f["gpu"], f["test"]) for f in result["failures"]] == [(0, "software")]
    assert result["dcgm"]["version"] == "4.2.3"


def test_dcgm_pass_on_eight_gpus():
    fragment = _read("dcgm_diag", "dcgm4_r4_8gpu_diagnostic_fragment.txt").rstrip().rstrip(",")
    out = '{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [%s]}]}}' % fragment
    result = run(Node(dcgm=True, diag_out=out), level="extended")
    assert result["passed"] is True and result["dcgm_level"] == 4


def test_dcgm_that_could_not_run_fails_with_its_words():
    out = '{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "GPUs are in use"}}'
    with pytest.raises(diag.DiagnosticsError, match=r"dcgmi diag -r 1 -j \(rc 1\): dcgmi diag did not run: GPUs are in use"):
        run(Node(dcgm=True, diag_out=out, diag_rc=1))


def test_dcgm_that_printed_nothing_fails():
    with pytest.raises(diag.DiagnosticsError, match="printed nothing"):
        run(Node(dcgm=True, diag_out="", diag_rc=255))


def test_check_mode_runs_nothing_and_says_what_would_run():
    node = Node(dcgm=True)
    result = run(node, check_mode=True, level="long")
    assert (result["ran"], result["command"]) == (False, ["dcgmi", "diag", "-r", "3", "-j"])
    assert not any(call[:2] == ["dcgmi", "diag"] for call in node.calls)
    own = Node(dcgm=None)
    assert run(own, check_mode=True)["ran"] is False and own.observed == []


# ------------------------------------------------------------------ own checks judged

def _own_verdict(facts, level="quick", profile=None):
    checks = acceptance.evaluate("node", profile or {"name": "h200", "gpu_count": facts["gpu_count"],
                                                     "pcie_link": True}, observed={"nvidia": facts})
    return dict((c["check"], c) for c in checks if c["check"] in diag.OWN_CHECKS[level])


def test_own_checks_pass_on_the_healthy_h200_capture():
    facts = facts_from_capture(_read("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"))
    verdict = _own_verdict(facts)
    assert set(verdict) == set(diag.QUICK_CHECKS)
    assert all(c["ok"] for c in verdict.values()), verdict


def test_own_checks_fail_on_an_uncorrectable_ecc_error_naming_the_gpu():
    facts = facts_from_capture(_read("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"))
    broken = copy.deepcopy(facts)
    broken["gpus"][0]["ecc"]["uncorrected_volatile"] = 1
    broken["gpus"][0]["remapped_rows"] = dict(broken["gpus"][0].get("remapped_rows") or {}, pending=True)
    verdict = _own_verdict(broken)
    assert not verdict["gpu.ecc_errors"]["ok"] and "GPU0" in verdict["gpu.ecc_errors"]["detail"]
    assert not verdict["gpu.row_remap"]["ok"] and "GPU0" in verdict["gpu.row_remap"]["detail"]


def test_own_checks_fail_on_a_narrow_pcie_link():
    facts = facts_from_capture(_read("h200-ubuntu2404-driver580", "nvidia-smi_-q_-x.xml"))
    facts["gpus"][0]["pcie"]["width"] = 8
    verdict = _own_verdict(facts)
    assert not verdict["gpu.pcie_link"]["ok"] and "GPU0 runs at x8" in verdict["gpu.pcie_link"]["detail"]
