# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


from ansible_collections.gpucloud.fleet.plugins.modules import redact_files
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import run_module


def test_redacts_in_place_with_extra_patterns(tmp_path):
    (tmp_path / "kern.log").write_bytes(b"\x00\x00 curl -u root:calvin x serial=42\n")
    result = run_module(redact_files, {
        "path": str(tmp_path), "patterns": [{"regexp": r"serial=\d+", "replace": "serial=<s>"}]})
    assert "failed" not in result
    assert (result["changed"], result["files"], result["redactions"], result["unprocessed"]) == (
        True, 1, {"kern.log": 2}, {})
    assert (tmp_path / "kern.log").read_bytes() == b"\x00\x00 curl -u root:<redacted> x serial=<s>\n"


def test_check_mode_changes_nothing(tmp_path):
    (tmp_path / "a.log").write_text("password=x\n")
    result = run_module(redact_files, {"path": str(tmp_path)}, check_mode=True)
    assert ("failed" in result, result["changed"], result["redactions"]) == (False, True, {"a.log": 1})
    assert (tmp_path / "a.log").read_text() == "password=x\n"


def test_bad_pattern_and_missing_folder_fail_cleanly(tmp_path):
    result = run_module(redact_files, {"path": str(tmp_path), "patterns": [{"regexp": "("}]})
    assert result["failed"] is True and result["msg"].startswith("patterns: pattern 0:")
    result = run_module(redact_files, {"path": str(tmp_path / "nope")})
    assert result["failed"] is True and "is not a folder" in result["msg"]


def test_compressed_file_is_decompressed_and_a_hard_link_outside_is_kept(tmp_path):
    import gzip
    import os
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "nvidia-bug-report.log.gz").write_bytes(gzip.compress(b"ok\n"))
    (tmp_path / "outside.conf").write_text("password=outside\n")
    os.link(str(tmp_path / "outside.conf"), str(bundle / "app.conf"))
    result = run_module(redact_files, {"path": str(bundle)})
    assert (result["changed"], result["redactions"], result["unprocessed"], result["decompressed"]) == (
        True, {"app.conf": 1}, {}, {"nvidia-bug-report.log.gz": "decompressed to nvidia-bug-report.log"})
    assert sorted(os.listdir(str(bundle))) == ["app.conf", "nvidia-bug-report.log"]
    assert (tmp_path / "outside.conf").read_text() == "password=outside\n"
    # only decompressed, nothing matched: still a change
    (bundle / "more.gz").write_bytes(gzip.compress(b"ok\n"))
    result = run_module(redact_files, {"path": str(bundle)})
    assert (result["changed"], result["redactions"]) == (True, {})
