# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The line loop the command-output parsers share."""


def stripped_lines(text, what):
    """Yield (line number, stripped line) for every non-blank line of TEXT.

    ``ValueError`` naming WHAT when TEXT is not a string, so a parser refuses bytes or
    None before it starts. Line numbers count from 1 and include the blank lines, so
    an error message points at the line as the operator sees it.
    """
    if not isinstance(text, str):
        raise ValueError("%s output must be text, got %s" % (what, type(text).__name__))
    for index, raw in enumerate(text.splitlines()):
        line = raw.strip()
        if line:
            yield index + 1, line
