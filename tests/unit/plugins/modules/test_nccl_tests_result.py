# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import json
import os
import re
import shutil
import stat

import pytest

from ansible_collections.gpucloud.fleet.plugins.modules import nccl_tests_result
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_path, run_module

H100 = fixture_path("public", "nccl_tests", "h100-a3mega-2node-16gpu-gcp-ztan.txt")
GH200 = fixture_path("public", "nccl_tests", "gh200-2node-8gpu-slingshot-cxi-2.17.1-cscs.txt")


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "all_reduce.log"
    shutil.copy(H100, str(path))
    return str(path)


def test_pass(log):
    result = run_module(nccl_tests_result, {"path": log, "min_avg_busbw": 70, "min_max_busbw": 330})
    assert "failed" not in result
    assert (result["changed"], result["passed"], result["failures"]) == (False, True, [])
    assert result["result"]["avg_busbw"] == 70.742
    assert result["result"]["max_busbw"] == 338.82
    assert result["result"]["ranks"] == 16
    assert len(result["result"]["rows"]) == 31
    assert "dest" not in result


def test_below_thresholds_fails_with_every_reason():
    result = run_module(nccl_tests_result, {"path": GH200, "min_avg_busbw": 20, "min_peak_busbw": 150})
    assert result["failed"] is True
    assert result["passed"] is False
    assert result["failures"] == [
        "average bus bandwidth 19.7866 GB/s is below the required 20 GB/s",
        "peak bus bandwidth 123.11 GB/s is below the required 150 GB/s",
    ]
    assert result["msg"] == "nccl-tests run did not pass: " + "; ".join(result["failures"])


def test_report_only():
    result = run_module(nccl_tests_result, {"path": GH200, "min_avg_busbw": 20, "fail_on_failure": False})
    assert "failed" not in result
    assert result["passed"] is False
    assert result["failures"] == ["average bus bandwidth 19.7866 GB/s is below the required 20 GB/s"]


def test_wrong_elements_always_fail(tmp_path):
    text = open(GH200).read().replace("344.5   24.35   42.61      0", "344.5   24.35   42.61      5")
    path = tmp_path / "bad.log"
    path.write_text(text)
    result = run_module(nccl_tests_result, {"path": str(path)})
    assert result["failed"] is True
    assert result["failures"] == ["5 wrong elements reported (#wrong) at sizes 8388608"]
    assert result["result"]["wrong"] == 5


def test_dest_written_once_then_unchanged(log, tmp_path):
    dest = str(tmp_path / "out" / "result.json")
    os.mkdir(str(tmp_path / "out"))
    args = {"path": log, "min_avg_busbw": 60, "dest": dest, "mode": "0640"}
    result = run_module(nccl_tests_result, args)
    assert ("failed" in result, result["changed"], result["dest"]) == (False, True, dest)
    with open(dest) as handle:
        written = json.load(handle)
    assert written["passed"] is True
    assert written["thresholds"] == {"min_avg_busbw": 60.0, "min_max_busbw": None}
    assert written["result"]["avg_busbw"] == 70.742
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o640

    result = run_module(nccl_tests_result, args)
    assert ("failed" in result, result["changed"]) == (False, False)

    result = run_module(nccl_tests_result, dict(args, mode="0600"))
    assert ("failed" in result, result["changed"]) == (False, True)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600


def test_dest_check_mode_and_diff(log, tmp_path):
    dest = tmp_path / "result.json"
    args = {"path": log, "dest": str(dest), "_ansible_check_mode": True, "_ansible_diff": True}
    result = run_module(nccl_tests_result, args)
    assert ("failed" in result, result["changed"]) == (False, True)
    assert not dest.exists()
    assert result["diff"]["before"] == ""
    assert json.loads(result["diff"]["after"])["result"]["ranks"] == 16

    run_module(nccl_tests_result, {"path": log, "dest": str(dest)})
    result = run_module(nccl_tests_result, args)
    assert ("failed" in result, result["changed"]) == (False, False)
    assert result["diff"]["before"] == result["diff"]["after"]


def test_dest_written_even_when_the_run_fails(tmp_path):
    dest = tmp_path / "result.json"
    result = run_module(nccl_tests_result, {"path": GH200, "min_avg_busbw": 100, "dest": str(dest)})
    assert ("failed" in result, result["changed"]) == (True, True)
    assert json.loads(dest.read_text())["passed"] is False


def test_dest_directory_missing(log, tmp_path):
    result = run_module(nccl_tests_result, {"path": log, "dest": str(tmp_path / "no" / "r.json")})
    assert result["failed"] is True
    assert result["msg"].startswith("the directory of dest does not exist")


def test_nan_is_returned_as_null(tmp_path):
    path = tmp_path / "nan.log"
    path.write_text(open(H100).read().replace("Avg bus bandwidth    : 70.742", "Avg bus bandwidth    : -nan"))
    result = run_module(nccl_tests_result, {"path": str(path), "dest": str(tmp_path / "r.json")})
    assert "failed" not in result
    assert result["result"]["avg_busbw"] is None
    assert json.loads((tmp_path / "r.json").read_text())["result"]["avg_busbw"] is None


def test_validation_disabled_warns(tmp_path):
    # what "-c 0" prints: "%5s" of "N/A" in both #wrong cells
    text = re.sub(r"(\d\.\d\d) +0(?= |$)", r"\1    N/A", open(GH200).read(), flags=re.M)
    path = tmp_path / "novalidation.log"
    path.write_text(text)
    result = run_module(nccl_tests_result, {"path": str(path)})
    assert "failed" not in result
    assert all(r["oop_wrong"] is None and r["ip_wrong"] is None for r in result["result"]["rows"])
    assert any("not validated" in warning for warning in result["warnings"])


def test_not_a_log(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><body>Bad Gateway</body></html>")
    result = run_module(nccl_tests_result, {"path": str(path)})
    assert result["failed"] is True
    assert result["msg"].startswith("%s is not a usable nccl-tests log: " % path)


def test_missing_log(tmp_path):
    result = run_module(nccl_tests_result, {"path": str(tmp_path / "missing.log")})
    assert result["failed"] is True
    assert result["msg"].startswith("could not read ")


def test_directory_as_dest_fails_cleanly(log, tmp_path):
    result = run_module(nccl_tests_result, {"path": log, "dest": str(tmp_path)})
    assert result["failed"] is True
    assert "is a directory" in result["msg"]


@pytest.mark.parametrize("limit", ["nan", "inf"])
def test_non_finite_threshold_fails_cleanly(log, limit):
    result = run_module(nccl_tests_result, {"path": log, "min_avg_busbw": limit})
    assert result["failed"] is True
    assert result["msg"].startswith("min_avg_busbw must be a finite number")
