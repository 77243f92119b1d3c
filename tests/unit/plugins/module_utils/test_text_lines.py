# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.text_lines import stripped_lines
from ansible_collections.gpucloud.fleet.plugins.module_utils.ibstat import parse_ibstat
from ansible_collections.gpucloud.fleet.plugins.module_utils.ibv_devinfo import parse_ibv_devinfo


def test_blank_lines_are_skipped_but_counted():
    assert list(stripped_lines("a\n\n  \n\tb  \r\nc", "x")) == [(1, "a"), (4, "b"), (5, "c")]


def test_empty_text_has_no_lines():
    assert list(stripped_lines("", "x")) == []


@pytest.mark.parametrize("parser, what", [(parse_ibstat, "ibstat"), (parse_ibv_devinfo, "ibv_devinfo")])
@pytest.mark.parametrize("bad", [None, b"CA 'mlx5_0'", 42])
def test_parsers_refuse_what_is_not_text(parser, what, bad):
    with pytest.raises(ValueError, match="%s output must be text" % what):
        parser(bad)
