# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Parse the stdout of NVIDIA nccl-tests (``all_reduce_perf`` and friends).

Pure functions: text in, plain data out, ``ValueError`` for text that is not
nccl-tests output. The layouts handled were read from the printf formats in
NVIDIA/nccl-tests ``src/common.cu`` (2.0 - 2.17) and ``src/util.cu`` (2.18+):

* classic (2.13 - 2.16): ``# nThread ...``, ``# Using devices``, one table,
  ``# Out of bounds values``, ``# Avg bus bandwidth``;
* 2.17: the same wrapped in ``# Collective test starting/concluded: <name>``;
* 2.18+: a ``# nccl-tests version ...`` line, ``unalign:`` in the nThread line,
  wider ``#wrong`` columns, bandwidths that switch to ``%.1f``/``%.0f``/``%e``
  when large, optional per-iteration (``i_min`` ...) and ``timestamp`` columns;
* before 2.13: no ``root`` column (and no ``redop`` for all_gather, none of
  either for broadcast's redop), and an ``error`` column holding the largest
  deviation instead of a ``#wrong`` count.

The table header names the columns, so the parser maps cells by header name
rather than by position. Launcher and log-collector prefixes (Open MPI
``--tag-output``, Intel MPI ``-prepend-rank``, Slurm ``--label``, container log
timestamps) are removed, and NCCL debug lines (``host:pid:tid [dev] NCCL INFO``)
are dropped even when NCCL wrote them into the middle of a result row, which
happens because nccl-tests prints a row in pieces on the same stdout.
"""


import math
import re

# Prefixes that launchers and log collectors put in front of every line:
# "2025-11-03T14:05:09.123456789Z " (kubectl/docker --timestamps),
# "[1,0]<stdout>:" (Open MPI --tag-output), "[0] " (Intel MPI -prepend-rank),
# "0: " (srun --label).
_LINE_PREFIX_RES = (
    re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"),
    re.compile(r"^\[\d+,\d+\]<(?:stdout|stderr)>:\s?"),
    re.compile(r"^\[\d+\]\s"),
    re.compile(r"^\s*\d+:\s"),
)
# NCCL's debug prefix: optional "[timestamp] ", then "host:pid:tid [cudaDev] ".
# The host must start with a letter so that a row cell printed just before an
# interleaved debug line ("      -1node1:12:34 [0] NCCL INFO") stays in the row.
_NCCL_LOG_RE = re.compile(r"(?:\[[^\]]*\]\s*)?[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] ")
_NCCL_MARKER_RE = re.compile(r"\bNCCL (?:INFO|WARN|TRACE|CALL|ABORT)\b")

_RANK_RE = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group|Pid|on)\b")
_VERSION_RE = re.compile(r"^#?\s*nccl-tests version\s+(\S+)")
_COLLECTIVE_RE = re.compile(r"^#?\s*Collective test starting:\s*(\S+)")
_OOB_RE = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)")
_AVG_RE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")

_NUMBER_RE = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_BODY_TOKEN_RE = re.compile(
    r"^(?:[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A|[-+]?nan|[-+]?inf"
    r"|\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d)$",
    re.IGNORECASE,
)
_INT_RE = re.compile(r"^[-+]?\d+$")

_PREAMBLE = ("size", "count", "type", "redop", "root")
_TIME_NAMES = ("time", "cputime")
# The layout of every nccl-tests release since 2.13, used when a log lost its
# header lines.
_DEFAULT_HEADER = ["size", "count", "type", "redop", "root",
                   "time", "algbw", "busbw", "#wrong",
                   "time", "algbw", "busbw", "#wrong"]


class _Layout(object):
    """Column layout of one result table, derived from its header line."""

    def __init__(self, names):
        names = list(names)
        self.timestamp = "timestamp" in names
        if self.timestamp:
            names = names[:names.index("timestamp")]
        starts = [i for i, name in enumerate(names) if name in _TIME_NAMES]
        if len(starts) != 2:
            raise ValueError("unrecognised nccl-tests table header: %s" % " ".join(names))
        self.preamble = names[:starts[0]]
        if self.preamble[:3] != ["size", "count", "type"] or any(n not in _PREAMBLE for n in self.preamble):
            raise ValueError("unrecognised nccl-tests table header: %s" % " ".join(names))
        self.oop = names[starts[0]:starts[1]]
        self.ip = names[starts[1]:]
        for group in (self.oop, self.ip):
            if len(group) < 4 or group[1:3] != ["algbw", "busbw"] or group[3] not in ("#wrong", "error"):
                raise ValueError("unrecognised nccl-tests table header: %s" % " ".join(names))
        self.width = len(self.preamble) + len(self.oop) + len(self.ip) + (2 if self.timestamp else 0)

    def split(self, tokens):
        """Return (preamble, oop, ip) cells, or None while the row is incomplete."""
        tokens = list(tokens)
        npre = len(self.preamble)
        if (len(tokens) == self.width - 1 and "redop" in self.preamble and "root" in self.preamble
                and _INT_RE.match(tokens[self.preamble.index("redop")])):
            # hypercube_perf prints an empty redop cell.
            tokens.insert(self.preamble.index("redop"), "none")
        if len(tokens) != self.width:
            return None
        pre = tokens[:npre]
        oop = tokens[npre:npre + len(self.oop)]
        ip = tokens[npre + len(self.oop):npre + len(self.oop) + len(self.ip)]
        return pre, oop, ip


def _clean_line(raw):
    """Strip launcher prefixes and interleaved NCCL debug output from one line."""
    line = raw.rstrip("\r\n")
    for regex in _LINE_PREFIX_RES:
        line = regex.sub("", line, count=1)
    match = _NCCL_LOG_RE.search(line)
    if match:
        return line[:match.start()]
    match = _NCCL_MARKER_RE.search(line)
    if match:
        return ""
    return line


def _header_names(line):
    tokens = line.lstrip("#").split()
    if tokens and tokens[0] == "size" and "busbw" in tokens:
        return tokens
    return None


def _to_float(cell, what, lineno):
    try:
        return float(cell)
    except ValueError:
        raise ValueError("line %d: %s %r is not a number" % (lineno, what, cell))


def _to_int(cell, what, lineno):
    if not _INT_RE.match(cell):
        raise ValueError("line %d: %s %r is not an integer" % (lineno, what, cell))
    return int(cell)


def _wrong(cell, lineno):
    if cell.upper() == "N/A":
        return None
    value = _to_float(cell, "#wrong", lineno)
    if math.isnan(value) or math.isinf(value):
        raise ValueError("line %d: #wrong %r is not a count" % (lineno, cell))
    return int(value)


def _build_row(layout, cells, lineno):
    pre, oop, ip = cells
    pre_map = dict(zip(layout.preamble, pre))
    row = {
        "size": _to_int(pre_map["size"], "size", lineno),
        "count": _to_int(pre_map["count"], "count", lineno),
        "type": pre_map["type"],
        "redop": pre_map.get("redop", "none"),
        "root": None,
    }
    if "root" in pre_map:
        root = _to_int(pre_map["root"], "root", lineno)
        row["root"] = None if root < 0 else root
    for prefix, names, values in (("oop", layout.oop, oop), ("ip", layout.ip, ip)):
        row[prefix + "_time_us"] = _to_float(values[0], "time", lineno)
        row[prefix + "_algbw"] = _to_float(values[1], "algbw", lineno)
        row[prefix + "_busbw"] = _to_float(values[2], "busbw", lineno)
        if names[3] == "#wrong":
            row[prefix + "_wrong"] = _wrong(values[3], lineno)
        else:
            # Before 2.13 the column held the largest deviation, not a count.
            row[prefix + "_wrong"] = None
            row[prefix + "_error"] = None if values[3].upper() == "N/A" else _to_float(values[3], "error", lineno)
    return row


def _looks_like_row_start(tokens):
    return (len(tokens) >= 3 and _INT_RE.match(tokens[0]) is not None
            and _INT_RE.match(tokens[1]) is not None and _NUMBER_RE.match(tokens[2]) is None)


def parse_nccl_tests(text):
    """Parse one nccl-tests run.

    Returns a dict with ``avg_busbw`` (from the ``# Avg bus bandwidth`` line),
    ``max_busbw`` (the largest busbw of any row, in-place or out-of-place),
    ``ranks`` (distinct ``# Rank N`` lines: the device list is printed once,
    gathered from every process), ``wrong`` (sum of the #wrong cells, ``N/A``
    counting 0), ``rows`` and the extras ``out_of_bounds``, ``collective``,
    ``version`` and ``warnings``. In a row, ``root`` is ``None`` when the column
    is absent or ``-1`` (collectives without a root), ``redop`` is ``"none"``
    when the column is absent or empty, and ``oop_wrong``/``ip_wrong`` are
    ``None`` for ``N/A`` (validation disabled with ``-c 0``) or pre-2.13 logs.

    Raises ValueError when the text is not the output of one complete
    nccl-tests run (no result table, no summary, several runs in one text).
    """
    if not isinstance(text, str):
        raise ValueError("nccl-tests output must be text, got %s" % type(text).__name__)

    lines = [_clean_line(raw) for raw in text.splitlines()]

    header_lines = [i for i, line in enumerate(lines) if _header_names(line)]
    avg_lines = [i for i, line in enumerate(lines) if _AVG_RE.match(line.strip())]
    if len(header_lines) > 1 or len(avg_lines) > 1:
        raise ValueError(
            "found %d result tables and %d '# Avg bus bandwidth' lines: the text holds several "
            "nccl-tests runs (or a binary built without MPI=1 run once per rank); pass one run"
            % (len(header_lines), len(avg_lines)))

    if header_lines:
        layout = _Layout(_header_names(lines[header_lines[0]]))
        table_start = header_lines[0] + 1
    else:
        layout = _Layout(_DEFAULT_HEADER)
        table_start = 0

    ranks = set()
    result = {
        "avg_busbw": None,
        "max_busbw": None,
        "ranks": 0,
        "wrong": 0,
        "rows": [],
        "out_of_bounds": None,
        "collective": None,
        "version": None,
        "warnings": [],
    }
    pending = None
    pending_line = 0

    for index, line in enumerate(lines):
        lineno = index + 1
        stripped = line.strip()
        if not stripped:
            continue
        match = _RANK_RE.match(stripped)
        if match:
            ranks.add(int(match.group(1)))
            continue
        for regex, key in ((_VERSION_RE, "version"), (_COLLECTIVE_RE, "collective")):
            match = regex.match(stripped)
            if match and result[key] is None:
                result[key] = match.group(1)
        oob = _OOB_RE.match(stripped)
        if oob:
            result["out_of_bounds"] = int(oob.group(1))
        avg = _AVG_RE.match(stripped)
        if avg:
            result["avg_busbw"] = _to_float(avg.group(1), "average bus bandwidth", lineno)
        if (oob or avg) and pending is not None:
            result["warnings"].append("line %d: incomplete result row dropped" % pending_line)
            pending = None
        if stripped.startswith("#") or index < table_start:
            continue

        tokens = stripped.split()
        if pending is not None and _looks_like_row_start(tokens):
            result["warnings"].append("line %d: incomplete result row dropped" % pending_line)
            pending = None
        if pending is None:
            if not _looks_like_row_start(tokens):
                continue
            pending, pending_line = tokens, lineno
        elif all(_BODY_TOKEN_RE.match(token) for token in tokens):
            pending.extend(tokens)
        else:
            continue

        cells = layout.split(pending)
        if cells is not None:
            result["rows"].append(_build_row(layout, cells, pending_line))
            pending = None
        elif len(pending) > layout.width:
            result["warnings"].append(
                "line %d: result row has %d cells, the header names %d; row dropped"
                % (pending_line, len(pending), layout.width))
            pending = None

    if pending is not None:
        result["warnings"].append("line %d: incomplete result row dropped" % pending_line)

    if not result["rows"]:
        raise ValueError("no nccl-tests result rows found")
    if result["avg_busbw"] is None:
        raise ValueError("no '# Avg bus bandwidth' line: the nccl-tests run did not finish")

    busbws = [row[key] for row in result["rows"] for key in ("oop_busbw", "ip_busbw")
              if math.isfinite(row[key])]
    result["max_busbw"] = max(busbws) if busbws else float("nan")
    result["ranks"] = len(ranks)
    result["wrong"] = sum(row[key] or 0 for row in result["rows"] for key in ("oop_wrong", "ip_wrong"))
    return result


def evaluate_nccl_result(parsed, min_avg_busbw=None, min_max_busbw=None):
    """Return the list of reasons why a parsed run fails; empty when it passes.

    Any wrong element or out-of-bounds value is a failure whatever the
    thresholds; bandwidths are in GB/s as nccl-tests prints them. A threshold
    that is not a finite number raises ValueError (NaN would switch the check
    off: nothing compares below it); a measured inf or NaN fails the check.
    """
    for name, limit in (("min_avg_busbw", min_avg_busbw), ("min_max_busbw", min_max_busbw)):
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                                  or not math.isfinite(limit)):
            raise ValueError("%s must be a finite number of GB/s, got %r" % (name, limit))
    failures = []
    if parsed.get("wrong"):
        sizes = sorted(set(row["size"] for row in parsed.get("rows", [])
                           if row.get("oop_wrong") or row.get("ip_wrong")))
        failures.append("%d wrong elements reported (#wrong) at sizes %s"
                        % (parsed["wrong"], ", ".join(str(s) for s in sizes)))
    if parsed.get("out_of_bounds"):
        failures.append("%d out of bounds values reported" % parsed["out_of_bounds"])
    for value_key, limit, label in (("avg_busbw", min_avg_busbw, "average bus bandwidth"),
                                    ("max_busbw", min_max_busbw, "peak bus bandwidth")):
        if limit is None:
            continue
        value = parsed.get(value_key)
        if value is None or math.isnan(value):
            failures.append("%s is not available, required >= %g GB/s" % (label, limit))
        elif not math.isfinite(value):
            failures.append("%s %g GB/s is not a measurement, required >= %g GB/s" % (label, value, limit))
        elif value < limit:
            failures.append("%s %g GB/s is below the required %g GB/s" % (label, value, limit))
    return failures
