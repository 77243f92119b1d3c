# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


from ansible_collections.gpucloud.fleet.plugins.module_utils import xid
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

# Xid lines as the driver prints them (formats from public bug reports).
LOG = """\
[ 1936.51] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.
May 18 19:02:39 n1 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.
[  269.51] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff
[ 1937.00] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.
[ 1938.00] NVRM: Xid (PCI:0000:18:00): 63, pid=1900, Row Remapper: New row marked for remapping, reset gpu to activate.
[ 1939.00] NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014
"""


def test_parse_events():
    events = xid.parse_xid_events(LOG)
    assert [(e["code"], e["pci"]) for e in events] == [
        (63, "0000:10:1c"), (79, "0000:2b:00"), (3, "0000:01:00"), (63, "0000:10:1c"), (63, "0000:18:00")]
    assert events[1]["message"] == "GPU has fallen off the bus."


def test_summary_counts_codes_most_frequent_first_with_meaning():
    summary = xid.summarize(LOG)
    assert [(e["code"], e["count"]) for e in summary] == [(63, 3), (3, 1), (79, 1)]
    assert summary[0]["pci"] == ["0000:10:1c", "0000:18:00"]
    assert summary[0]["meaning"] == "ECC page retirement or row remapping recorded"
    assert summary[1]["kind"] == "unknown" and xid.CATALOG_URL in summary[1]["meaning"]
    assert summary[2]["kind"] == "hw"
    text = xid.summary_text(summary)
    assert "Xid 79 x1 on 0000:2b:00: GPU has fallen off the bus [hw]" in text


def test_healthy_h200_dmesg_has_no_xid():
    text = fixture_text("h200-ubuntu2404-driver580", "dmesg_nvrm.txt")
    assert xid.summarize(text) == []
    assert xid.summary_text([]) == "No Xid events in the kernel log.\n"


def test_every_known_code_has_meaning_kind_and_action():
    for code in xid.XID_CODES:
        entry = xid.meaning(code)
        assert entry["meaning"] and entry["action"] and entry["kind"] in ("app", "hw")


def test_judge_splits_hardware_and_unknown_from_application_codes():
    judged = xid.judge(LOG + "NVRM: Xid (PCI:0000:10:1c): 13, pid=7, Graphics Exception\n")
    assert [e["code"] for e in judged["actionable"]] == [63, 3, 79]
    assert [e["code"] for e in judged["informational"]] == [13]
    accepted = xid.judge(LOG, ignore=["3"])
    assert [e["code"] for e in accepted["informational"]] == [3]
    assert xid.judge("") == {"actionable": [], "informational": []}
