# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils import redact
from ansible_collections.gpucloud.fleet.plugins.module_utils.redact import (
    compile_patterns, redact_file, redact_text, redact_tree)


@pytest.mark.parametrize("text,expected", [
    # Redfish PATCH /redfish/v1/AccountService/Accounts/2 payload
    ('{"UserName": "admin", "Password": "Sup3r S3cret!", "RoleId": "Administrator"}',
     '{"UserName": "admin", "Password": "<redacted>", "RoleId": "Administrator"}'),
    ('{"Password":"a\\"b"}', '{"Password":"<redacted>"}'),
    ('{"access_token": "abc.def"}', '{"access_token": "<redacted>"}'),
    ("fetching https://admin:hunter2@bmc-17.mgmt/redfish/v1", "fetching https://admin:<redacted>@bmc-17.mgmt/redfish/v1"),
    ("curl -sk -u root:calvin https://10.0.0.5/redfish/v1", "curl -sk -u root:<redacted> https://10.0.0.5/redfish/v1"),
    ("curl --user=root:calvin x", "curl --user=root:<redacted> x"),
    ("curl --user 'root:calvin' x", "curl --user 'root:<redacted>' x"),
    ("ipmitool -I lanplus -H 10.0.0.5 -U admin -P calvin chassis status",
     "ipmitool -I lanplus -H 10.0.0.5 -U admin -P <redacted> chassis status"),
    ("ipmitool -I lanplus -U admin -P 'two words' power on", "ipmitool -I lanplus -U admin -P <redacted> power on"),
    ("sent Bearer eyJhbGciOi.x-y_z", "sent Bearer <redacted>"),
    ("Authorization: Bearer abc123", "Authorization: Bearer <redacted>"),
    ('password="correct horse battery"', "password=<redacted>"),
    ("password = 'correct horse battery' # comment", "password = <redacted> # comment"),
    ("passphrase: correct horse battery staple", "passphrase: <redacted>"),
    ("IPMI_PASSWORD=calvin", "IPMI_PASSWORD=<redacted>"),
    ("token=abc def", "token=<redacted> def"),
    ("AKIAABCDEFGHIJKLMNOP", "<redacted-aws-key-id>"),
])
def test_secret_shapes_are_redacted_once(text, expected):
    redacted, count = redact_text(text)
    assert redacted == expected
    assert count == 1


@pytest.mark.parametrize("text", [
    "journalctl -u nvidia-fabricmanager --no-pager",
    "http://mirror.example:8080/debian/ trixie main",
    "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.",
    "passwordless sudo for ansible",
])
def test_ordinary_lines_are_kept(text):
    assert redact_text(text) == (text, 0)


def test_custom_patterns_replace_the_defaults():
    assert redact_text("password=x serial=123", [{"regexp": r"serial=\d+", "replace": "serial=<s>"}]) == (
        "password=x serial=<s>", 1)
    assert redact_text("a", []) == ("a", 0)


@pytest.mark.parametrize("bad", [[{"regexp": "("}], [{"regexp": 5}], ["x"]])
def test_bad_patterns_are_refused_by_position(bad):
    with pytest.raises(ValueError, match="pattern 0"):
        compile_patterns(bad)


def test_file_with_nul_bytes_and_invalid_utf8_is_redacted(tmp_path):
    # kern.log after an unclean shutdown: a run of NUL bytes where the last blocks were lost.
    data = (b"Dec  1 10:00:01 gpu1 kernel: \x00\x00\x00\x00\xff\xfe garbage\n"
            b"Dec  1 10:00:02 gpu1 sudo: ipmitool -U admin -P calvin sel list\n")
    path = tmp_path / "kern.log"
    path.write_bytes(data)
    assert redact_file(str(path)) == 1
    assert path.read_bytes() == data.replace(b"-P calvin", b"-P <redacted>")


def test_tree_reports_counts_and_what_it_could_not_process(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    (tmp_path / "clean.txt").write_text("nothing here\n")
    (tmp_path / "sub" / "redfish.json").write_text('{"Password": "x"}\n{"Password": "y"}\n')
    (tmp_path / "kern.log").write_bytes(b"\x00\x00token=abc\n")
    (tmp_path / "locked.log").write_text("password=x\n")
    os.symlink("/etc/shadow", str(tmp_path / "shadow"))
    real = redact.redact_file

    def refuse_locked(path, patterns=None, write=True):
        if path.endswith("locked.log"):
            raise PermissionError(13, "Permission denied")
        return real(path, patterns, write)

    monkeypatch.setattr(redact, "redact_file", refuse_locked)
    report = redact_tree(str(tmp_path), [{"regexp": "nothing", "replace": "something"}])
    assert report["redactions"] == {"sub/redfish.json": 2, "kern.log": 1, "clean.txt": 1}
    assert report["files"] == 3
    assert report["unprocessed"] == {
        "shadow": "not a regular file; left as it is",
        "locked.log": "could not be redacted ([Errno 13] Permission denied); removed from the bundle"}
    assert not (tmp_path / "locked.log").exists()
    assert (tmp_path / "kern.log").read_bytes() == b"\x00\x00token=<redacted>\n"


def test_tree_in_check_mode_writes_nothing(tmp_path):
    (tmp_path / "a.log").write_text("password=x\n")
    assert redact_tree(str(tmp_path), write=False)["redactions"] == {"a.log": 1}
    assert (tmp_path / "a.log").read_text() == "password=x\n"
