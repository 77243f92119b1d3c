# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""dcgmi diag -j: parse and judge, on the real captures in tests/fixtures/dcgm_diag/."""

import copy
import json
import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.dcgm_diag import judge, level_number, parse

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "dcgm_diag")


def _read(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


GB10 = _read("dcgm4_gb10_r1.json")


def issue_215_document():
    """The DCGM issue #215 fragment (one test object ending in "},") put into the smallest
    4.x document; the .source file says why the category is "Hardware"."""
    fragment = _read("dcgm4_r4_8gpu_diagnostic_fragment.txt").rstrip()
    assert fragment.endswith("},")
    return ('{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [\n'
            + fragment[:-1] + "\n]}]}}")


# GB10, DCGM 4.2.3, dcgmi diag -r 1 -j -----------------------------------------------------

def test_gb10_capture_is_read():
    parsed = parse(GB10, level="quick")
    assert parsed["version"] == "4.2.3"
    assert parsed["driver"] == "580.82.09"
    assert parsed["level"] == 1
    assert parsed["gpus"] == [0]
    assert [(t["category"], t["name"], t["status"]) for t in parsed["tests"]] == [("Deployment", "software", "fail")]
    software = parsed["tests"][0]
    assert software["gpus"][0]["status"] == "fail"
    assert software["gpus"][0]["messages"] == [
        'Persistence Mode: Persistence mode for GPU 0 is disabled. Enable persistence mode by running '
        '"nvidia-smi -i <gpuId> -pm 1 " as root.']
    assert software["info"] == [
        "Error getting the SRAM Threshold Count for GPU 0. Status = 0. Value = 9223372036854775794. "
        "SRAM Threshold checking was skipped."]


def test_gb10_capture_fails_on_gpu_0_with_dcgms_own_words():
    verdict = judge(parse(GB10))
    assert verdict["passed"] is False
    assert len(verdict["failures"]) == 1
    failure = verdict["failures"][0]
    assert (failure["gpu"], failure["test"]) == (0, "software")
    assert failure["message"].startswith("Persistence Mode: Persistence mode for GPU 0 is disabled.")
    assert verdict["warnings"] == [] and verdict["skipped"] == []


def test_gb10_capture_other_gpus_only_is_no_pass():
    """Judged for a GPU the run never covered, the capture proves nothing about it."""
    verdict = judge(parse(GB10), gpu_ids=[1])
    assert verdict["passed"] is False
    assert verdict["failures"] == [{"gpu": 1, "test": None, "message": "GPU 1 has no result in any test"}]


def test_dcgmi_notice_before_the_document_is_passed_over():
    parsed = parse("Successfully ran diagnostic for group.\n" + GB10)
    assert parsed["tests"][0]["name"] == "software"


# DCGM issue #215, DCGM 4.x, 8 GPUs, the diagnostic test -------------------------------------

def test_issue_215_eight_gpus_pass():
    parsed = parse(issue_215_document(), level=4)
    assert parsed["version"] is None  # the fragment carries no metadata block
    assert parsed["level"] == 4
    assert parsed["gpus"] == [0, 1, 2, 3, 4, 5, 6, 7]
    diagnostic = parsed["tests"][0]
    assert (diagnostic["name"], diagnostic["status"]) == ("diagnostic", "pass")
    assert diagnostic["gpus"][0]["info"][2] == "GPU 0 calculated at approximately 859.08 gigaflops during this test"
    assert diagnostic["gpus"][2]["info"] == [
        "Allocated space for 138 output matricies from 76077622886 bytes available.",
        "Running with precisions: FP64 1, FP32 1, FP16 1"]
    assert all(diagnostic["gpus"][g] == {"status": "pass", "messages": [], "info": []} for g in range(3, 8))
    verdict = judge(parsed)
    assert verdict == {"passed": True, "failures": [], "warnings": [], "skipped": []}
    assert judge(parsed, gpu_ids=[0, 7])["passed"] is True


def _issue_215_with(gpu, status, warning=None):
    """The #215 document with one GPU's status changed: how a failing run of the same node reads."""
    document = json.loads(issue_215_document())
    result = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][gpu]
    result["status"] = status
    if warning:
        result["warnings"] = [{"warning": warning, "error_id": 1, "error_category": 1, "error_severity": 1}]
    return json.dumps(document)


def test_one_failed_gpu_fails_the_run_and_is_named():
    verdict = judge(parse(_issue_215_with(5, "Fail", "GPU 5 failed the compute check")))
    assert verdict["passed"] is False
    assert verdict["failures"] == [{"gpu": 5, "test": "diagnostic", "message": "GPU 5 failed the compute check"}]
    assert judge(parse(_issue_215_with(5, "Fail")), gpu_ids=[0, 1])["passed"] is True


def test_a_warning_does_not_fail_the_run():
    verdict = judge(parse(_issue_215_with(3, "Warn", "clocks throttled")))
    assert verdict["passed"] is True
    assert verdict["warnings"] == [{"gpu": 3, "test": "diagnostic", "message": "clocks throttled"}]


def test_warnings_alone_pass():
    document = json.loads(issue_215_document())
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    for result in test["results"]:
        result["status"] = "Warn"
    test["test_summary"]["status"] = "Warn"
    verdict = judge(parse(json.dumps(document)))
    assert verdict["passed"] is True
    assert [w["gpu"] for w in verdict["warnings"]] == list(range(8))


def test_a_warning_tied_to_no_gpu_is_listed():
    document = json.loads(issue_215_document())
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["test_summary"] = {
        "status": "Warn", "warnings": [{"warning": "node-wide notice", "error_id": 1, "error_category": 1,
                                        "error_severity": 1}]}
    verdict = judge(parse(json.dumps(document)))
    assert verdict["passed"] is True
    assert verdict["warnings"] == [{"gpu": None, "test": "diagnostic", "message": "node-wide notice"}]


def test_a_test_without_entities_counts_by_its_summary():
    document = {"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "software", "test_summary": {"status": "Warn", "warnings": [
            {"warning": "node-wide notice", "error_id": 1, "error_category": 1, "error_severity": 1}]}}]}]}}
    verdict = judge(parse(json.dumps(document)))
    assert verdict["passed"] is True
    assert verdict["warnings"] == [{"gpu": None, "test": "software", "message": "node-wide notice"}]


def test_gpus_are_reported_in_number_order():
    document = json.loads(issue_215_document())
    results = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    for gpu in (10, 9):
        results.append({"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": "Warn"})
    results[1]["status"] = "Warn"
    verdict = judge(parse(json.dumps(document)))
    assert [w["gpu"] for w in verdict["warnings"]] == [1, 9, 10]


def test_a_skipped_gpu_is_listed():
    verdict = judge(parse(_issue_215_with(6, "Skip")))
    assert verdict["passed"] is True
    assert verdict["skipped"] == [{"gpu": 6, "test": "diagnostic", "message": "skipped"}]


def test_everything_skipped_is_no_pass():
    document = json.loads(issue_215_document())
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    for result in test["results"]:
        result["status"] = "Skip"
    test["test_summary"]["status"] = "Skip"
    verdict = judge(parse(json.dumps(document)))
    assert verdict["passed"] is False
    assert verdict["failures"][-1]["message"] == "nothing ran: every test was skipped"
    assert len(verdict["skipped"]) == 8


def test_a_failure_tied_to_no_gpu_fails_the_run():
    document = json.loads(GB10)
    test = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]
    test["results"][0]["status"] = "Pass"
    del test["results"][0]["warnings"]
    verdict = judge(parse(json.dumps(document)))
    assert verdict["passed"] is False
    assert verdict["failures"] == [{"gpu": None, "test": "software", "message": test["test_summary"]["info"][0]}]


def test_a_test_that_did_not_run_is_listed_as_skipped():
    """dcgmi leaves out results and test_summary for a test nothing ran (Diag.cpp)."""
    document = json.loads(issue_215_document())
    document["DCGM Diagnostic"]["test_categories"][0]["tests"].append({"name": "pcie"})
    parsed = parse(json.dumps(document))
    assert parsed["tests"][1]["status"] == "skip"
    verdict = judge(parsed)
    assert verdict["passed"] is True
    assert verdict["skipped"] == [{"gpu": None, "test": "pcie", "message": "did not run"}]


# Hostile input ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, words", [
    ("", "printed nothing"),
    ("  \n", "printed nothing"),
    ("Error: unable to connect to host engine", "no JSON document"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "is a list, not an object"),
    ('[{"DCGM Diagnostic": {}}]', "is a list, not an object"),
    ("notice\n{\"DCGM Diagnostic\": {}} trailing", "not valid JSON after its first line"),
    ("{}", "no 'DCGM Diagnostic' object"),
    ('{"DCGM Diagnostic": []}', "no 'DCGM Diagnostic' object"),
    ('{"DCGM GPU Diagnostic": {"test_categories": []}}', "DCGM 3.x document"),
    ('{"DCGM Diagnostic": {"version": "4.2.3", "runtime_error": "Unable to run diagnostic on unsupported GPU 0."}}',
     "did not run: Unable to run diagnostic on unsupported GPU 0."),
    ('{"DCGM Diagnostic": {"version": "4.2.3"}}', "no 'test_categories'"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "Deployment"}]}}', "'tests' list"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{}]}]}}', "needs a 'name'"),
])
def test_refused_with_a_clear_error(text, words):
    with pytest.raises(ValueError) as error:
        parse(text)
    assert words in str(error.value)


def test_bytes_are_refused():
    with pytest.raises(ValueError, match="must be text"):
        parse(GB10.encode())


def _gb10_result(**changes):
    document = json.loads(GB10)
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"][0].update(changes)
    return json.dumps(document)


@pytest.mark.parametrize("status", ["PASS", "pass", "Passed", "Inconclusive", "", None, 0])
def test_a_status_dcgmi_does_not_print_is_refused(status):
    with pytest.raises(ValueError, match="is not one dcgmi prints") as error:
        parse(_gb10_result(status=status))
    assert "'software'" in str(error.value)


@pytest.mark.parametrize("changes, words", [
    ({"entity_id": "0"}, "'entity_id'"),
    ({"entity_id": True}, "'entity_id'"),
    ({"entity_id": -1}, "'entity_id'"),
    ({"entity_group": None}, "'entity_group'"),
    ({"warnings": "disabled"}, "'warnings' must be a list"),
    ({"warnings": [{"error_id": 29}]}, "'warning' text"),
    ({"info": [1]}, "'info' must be a list of strings"),
])
def test_a_malformed_result_is_refused(changes, words):
    with pytest.raises(ValueError) as error:
        parse(_gb10_result(**changes))
    assert words in str(error.value)


def test_two_results_for_one_gpu_are_refused():
    document = json.loads(GB10)
    results = document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"]
    results.append(copy.deepcopy(results[0]))
    with pytest.raises(ValueError, match="two results for 0"):
        parse(json.dumps(document))


def test_a_result_of_another_entity_group_is_judged_too():
    document = json.loads(issue_215_document())
    document["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"].append(
        {"entity_group": "CPU", "entity_group_id": 7, "entity_id": 0, "status": "Fail",
         "warnings": [{"warning": "CPU 0 failed", "error_id": 1, "error_category": 1, "error_severity": 1}]})
    parsed = parse(json.dumps(document))
    assert parsed["gpus"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert judge(parsed, gpu_ids=[0])["failures"] == [{"gpu": "CPU0", "test": "diagnostic", "message": "CPU 0 failed"}]


@pytest.mark.parametrize("gpu_ids", ["0", [True], [-1], ["0"], 0])
def test_judge_refuses_bad_gpu_ids(gpu_ids):
    with pytest.raises(ValueError, match="gpu_ids must be a list of GPU numbers"):
        judge(parse(GB10), gpu_ids=gpu_ids)


# Levels -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, number", [
    ("quick", 1), ("medium", 2), ("long", 3), ("extended", 4),
    ("short", 1), ("xlong", 4), (1, 1), (4, 4), ("2", 2), ("3", 3),
])
def test_level_number(name, number):
    assert level_number(name) == number


@pytest.mark.parametrize("name", ["Quick", " quick", "quick\n", "xl", "", "5", "0", 0, 5, True, None, 2.0, "1.0"])
def test_level_number_refuses(name):
    with pytest.raises(ValueError, match="is not one of quick, medium, long, extended"):
        level_number(name)


def test_parse_refuses_a_bad_level_before_reading():
    with pytest.raises(ValueError, match="diagnostic level 'fast'"):
        parse(GB10, level="fast")
