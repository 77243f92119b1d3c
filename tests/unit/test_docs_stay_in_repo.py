# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The docs name only files a clone of the repository has: a relative path that climbs out of
the repository (`../shared/STYLE.md`) means nothing to someone who takes the project over."""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = sorted(os.path.join(d, f) for d, _dirs, files in os.walk(os.path.join(ROOT, "docs")) for f in files
              if f.endswith(".md"))
# A path that climbs (../) in a link target or between backticks.
RELATIVE = re.compile(r"(?:\]\(|`)((?:\.\./)+[^)`\s#]+)")


def outside(doc, text):
    """The relative paths in TEXT (a document at DOC) that are not files or folders of the repository."""
    found = []
    for target in RELATIVE.findall(text):
        path = os.path.normpath(os.path.join(os.path.dirname(doc), target))
        if os.path.commonpath([path, ROOT]) != ROOT or not os.path.exists(path) \
                or os.path.relpath(path, ROOT).split(os.sep)[0] in ("shared", ".git"):
            found.append(target)
    return found


def test_the_check_sees_a_path_out_of_the_repository():
    doc = os.path.join(ROOT, "docs", "development.md")
    assert outside(doc, "House style: `../shared/STYLE.md`") == ["../shared/STYLE.md"]
    assert outside(doc, "[x](../../STYLE.md)") == ["../../STYLE.md"]
    assert outside(doc, "[x](../roles/monitoring_server/README.md#alerts)") == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: os.path.relpath(p, ROOT))
def test_docs_point_inside_the_repository(doc):
    with open(doc, encoding="utf-8") as handle:
        text = handle.read()
    assert outside(doc, text) == [], "%s names files outside the repository" % os.path.relpath(doc, ROOT)
