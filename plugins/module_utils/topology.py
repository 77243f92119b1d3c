# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure parser and analysis of ``nvidia-smi topo -m`` output.

Nothing here touches an AnsibleModule: text goes in, plain data comes out,
and malformed input raises ``ValueError``.
"""


import re

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
GPU_LABEL = re.compile(r"^GPU\d+$")
NVLINK = re.compile(r"^NV(\d+)$")
# The codes nvidia-smi prints in the matrix itself; SOC is the pre-2017 name of SYS.
PATH_CODES = frozenset(("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"))
# Cells of `nvidia-smi topo -p2p r|w|n|a|p`, which looks similar but is no topology matrix.
P2P_CODES = frozenset(("OK", "CNS", "GNS", "TNS", "NS", "U"))
AFFINITY_VALUE = re.compile(r"^(N/A|[0-9][0-9,\-]*)$")
# Header names of the trailing columns, oldest driver first, and their keys in `affinity`.
AFFINITY_COLUMNS = (
    ("CPU Affinity", "cpus"),
    ("NUMA Affinity", "numa"),
    ("GPU NUMA ID", "gpu_numa_id"),
)
# A wrapped header may have any whitespace between the words of a column name.
AFFINITY_HEADER = re.compile("|".join(r"\s+".join(name.split()) for name, _key in AFFINITY_COLUMNS))
AFFINITY_WORDS = frozenset(word for name, _key in AFFINITY_COLUMNS for word in name.split())
NIC_LEGEND_ENTRY = re.compile(r"^\s*(\S+)\s*:\s*(\S+)\s*$")
NIC_COLUMN = re.compile(r"^NIC\d+$")
LEGEND_ENTRY = re.compile(r"^\s*(X|NV#|[A-Z]+)\s*=\s*(\S.*)$")
# Codes every generation's legend defines (K80-era drivers name SYS "SOC" and have no NODE, NV#).
LEGEND_BASE_CODES = ("PHB", "PXB", "PIX")

# Distance of a GPU to a NIC, nearest first, as NCCL ranks them.
NIC_DISTANCE_ORDER = ("PIX", "PXB", "PHB", "NODE", "SYS")
_DISTANCE_RANK = dict((code, rank) for rank, code in enumerate(NIC_DISTANCE_ORDER))
_DISTANCE_RANK["SOC"] = _DISTANCE_RANK["SYS"]
_UNKNOWN_RANK = len(NIC_DISTANCE_ORDER)

TAB_WIDTH = 8


def _is_link_code(token):
    return token in PATH_CODES or NVLINK.match(token) is not None


def _looks_like_link_cell(token):
    """True for anything nvidia-smi could print inside the matrix, known or not."""
    return token == "N/A" or re.match(r"^[A-Z][A-Z0-9#]*$", token) is not None


def _clean_lines(text):
    text = ANSI_ESCAPE.sub("", text)
    return re.split(r"\r\n|\r|\n", text)


def _is_header_start(tokens):
    return (
        bool(tokens)
        and GPU_LABEL.match(tokens[0]) is not None
        and (len(tokens) == 1 or not _is_link_code(tokens[1]))
    )


def _is_row_start(tokens, labels):
    return len(tokens) >= 2 and tokens[0] in labels and _looks_like_link_cell(tokens[1])


def _heading(line):
    return line.strip().rstrip(":").strip().lower()


def _is_legend(line):
    return _heading(line) in ("legend", "nic legend")


def _parse_header(header):
    """Split the header into device labels and the names of the trailing columns."""
    match = AFFINITY_HEADER.search(header)
    if match is None:
        return header.split(), []
    labels = header[:match.start()].split()
    columns = [" ".join(m.group(0).split()) for m in AFFINITY_HEADER.finditer(header[match.start():])]
    return labels, columns


class _WrappedLine:
    """Joins the pieces of a line wrapped by a terminal or a paste, in one pass.

    A wrap may cut a token in two ("NV1" / "2") or fall on the gap between
    two tokens whose whitespace got lost ("SYS" / "SYS").  The pieces are
    glued when only the glued token is valid, else a TAB goes between them.
    Each piece is split once and the tokens so far are kept, so joining n
    pieces costs their total length, not n times it.
    """

    def __init__(self):
        self._pieces = []
        self.tokens = []
        self._settled = set()
        self._ends_in_space = True

    def add(self, piece, valid):
        new = piece.split()
        if not self.tokens:
            # Leading whitespace-only pieces carry nothing.
            self._pieces = [piece]
        elif self._ends_in_space or not piece or piece[0].isspace():
            self._pieces.append(piece)
        else:
            head, tail = self.tokens[-1], new[0]
            if valid(head + tail) and not (valid(head) and valid(tail)):
                self.tokens[-1] = head + tail
                new = new[1:]
                self._pieces.append(piece)
            else:
                self._pieces.extend(("\t", piece))
        for token in new:
            if self.tokens:
                self._settled.add(self.tokens[-1])
            self.tokens.append(token)
        if piece:
            self._ends_in_space = piece[-1].isspace()

    def has_token(self, token):
        return token in self._settled or (bool(self.tokens) and self.tokens[-1] == token)

    def text(self):
        return "".join(self._pieces)


def _header_token_valid(token):
    return re.match(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|CPU|NUMA|GPU|Affinity|ID)$", token) is not None


def _tokens_with_columns(line):
    """Whitespace-separated tokens of a TAB-free line and the column each starts at."""
    return [(m.group(0), m.start()) for m in re.finditer(r"\S+", line)]


def _spaces_to_cells(line):
    """Rebuild the TAB-separated cells of a line whose TABs were expanded to spaces.

    Only possible when every token after the first starts on a tab stop;
    otherwise returns None and the caller falls back to plain tokens.
    """
    tokens = _tokens_with_columns(line)
    if not tokens:
        return None
    cells = [tokens[0][0]]
    end = tokens[0][1] + len(tokens[0][0])
    for token, column in tokens[1:]:
        if token == "X" and column % TAB_WIDTH == 1:
            # The diagonal cell is printed as " X ".
            column -= 1
        if column % TAB_WIDTH:
            return None
        tabs = column // TAB_WIDTH - end // TAB_WIDTH
        if tabs < 1:
            return None
        cells.extend([""] * (tabs - 1))
        cells.append(token)
        end = column + len(token)
    return cells


def _affinity_from_cells(cells, columns):
    """Map the cells after the matrix to the trailing columns.

    nvidia-smi writes each value followed by one TAB, except the NUMA
    Affinity value, which it pads with two so that "GPU NUMA ID" lines up.
    Cells beyond the known columns are that padding or trailing TABs.
    """
    cells = [cell.strip() for cell in cells]
    if "GPU NUMA ID" in columns and "NUMA Affinity" in columns:
        pad = columns.index("NUMA Affinity") + 1
        if len(cells) > len(columns) and pad < len(cells) and cells[pad] == "":
            del cells[pad]
    if any(cells[len(columns):]):
        # Unexpected extra values (a pasted table that lost its empty cells):
        # keep the non-empty ones in order.
        cells = [cell for cell in cells if cell]
    cells = (cells + [""] * len(columns))[:len(columns)]
    return dict(zip(columns, cells))


def _row_cells(line, width, columns):
    """Return (label, link cells, trailing cells) for one physical row line.

    The trailing cells keep their positions (empty cells included) so that
    empty affinity cells are told apart from missing ones; when positions
    cannot be recovered the non-empty tokens are returned in order.
    """
    tokens = line.split()
    label, links, rest = tokens[0], tokens[1:width + 1], tokens[width + 1:]
    if "\t" in line:
        cells = line.split("\t")
        tab_links = [cell.strip() for cell in cells[1:width + 1]]
        if len(tab_links) == width and all(tab_links):
            return cells[0].strip(), tab_links, cells[width + 1:]
        return label, links, rest
    if len(rest) == len(columns):
        return label, links, rest
    cells = _spaces_to_cells(line)
    if cells is None:
        return label, links, rest
    seen = 0
    for position, cell in enumerate(cells[1:], start=1):
        if cell:
            seen += 1
        if seen == width:
            return label, links, cells[position + 1:]
    return label, links, rest


def _collect_rows(lines, start, labels, columns):
    """Group physical lines into logical rows, following wrapped rows.

    Each line is split once; a row carries the count of its tokens so far.
    """
    rows = []
    seen = 0
    label_set = frozenset(labels)
    end = len(lines)
    for number in range(start, len(lines)):
        line = lines[number]
        tokens = line.split()
        if not tokens:
            continue
        if _is_legend(line):
            end = number
            break
        if _is_row_start(tokens, label_set):
            rows.append([line])
            seen = len(tokens) - 1
            continue
        if rows and _row_needs_more(seen, len(labels), len(columns), tokens):
            rows[-1].append(line)
            seen += len(tokens)
            continue
        end = number
        break
    return rows, end


def _row_needs_more(seen, width, trailing, next_tokens):
    """Whether a row holding `seen` cells after its label continues on a line of `next_tokens`."""
    if seen < width:
        return True
    return seen < width + trailing and all(AFFINITY_VALUE.match(token) for token in next_tokens)


def _link_token_valid(token):
    return _is_link_code(token) or token == "N/A"


def _parse_row(row_lines, width, columns):
    glued = "".join(row_lines)
    glued_links = glued.split()[1:width + 1]
    if len(row_lines) == 1 or (
        len(glued_links) == width and all(_link_token_valid(token) for token in glued_links)
    ):
        # A hard wrap that kept every character: the glued line is the original.
        label, links, trailing = _row_cells(glued, width, columns)
    else:
        joined = _WrappedLine()
        for piece in row_lines:
            inside_matrix = len(joined.tokens) - 1 < width
            joined.add(piece, _link_token_valid if inside_matrix else AFFINITY_VALUE.match)
        tokens = joined.tokens
        label, links, trailing = tokens[0], tokens[1:width + 1], tokens[width + 1:]
    if len(links) != width:
        raise ValueError(
            "row %s has %d matrix cells, the header names %d columns" % (label, len(links), width)
        )
    return label, links, _affinity_from_cells(trailing, columns)


def _legend_codes(lines, matrix_end):
    """Read the Legend that nvidia-smi prints right after the matrix.

    Returns (code -> description, the lines after the Legend).  A matrix cut
    short, or text that only looks like one, has no Legend there.
    """
    at = next((number for number in range(matrix_end, len(lines)) if lines[number].strip()), None)
    if at is None or _heading(lines[at]) != "legend":
        found = "the end of the text" if at is None else repr(lines[at].strip()[:60])
        raise ValueError(
            "the topology matrix is followed by %s, not by its Legend: truncated or altered output "
            "(nvidia-smi topo -m always prints the Legend)" % found
        )
    codes = {}
    for number in range(at + 1, len(lines)):
        if _is_legend(lines[number]):
            return codes, lines[number:]
        # Lines without "CODE =" are the rest of a wrapped description.
        match = LEGEND_ENTRY.match(lines[number])
        if match is not None:
            codes[match.group(1)] = match.group(2)
    return codes, []


def _check_legend(codes, links):
    if not codes.get("X", "").startswith("Self"):
        raise ValueError("the topology Legend lacks \"X = Self\" (truncated output?)")
    used = set(
        "NV#" if NVLINK.match(code) else code
        for row in links.values() for code in row.values() if code != "N/A"
    )
    wanted = set(LEGEND_BASE_CODES) | used
    if "SOC" not in codes:
        wanted.add("SYS")
    missing = sorted(code for code in wanted if code not in codes)
    if missing:
        raise ValueError(
            "the topology Legend does not define %s (truncated output?)" % ", ".join(missing)
        )


def _nic_legend(lines, nics):
    """NIC label -> device name from the "NIC Legend", which must name every NICn column."""
    legend = {}
    has_heading = bool(lines) and _heading(lines[0]) == "nic legend"
    for line in lines[1:] if has_heading else []:
        if not line.strip():
            continue
        match = NIC_LEGEND_ENTRY.match(line)
        if match is None:
            break
        if match.group(1) in legend:
            raise ValueError("the NIC Legend names %s twice" % match.group(1))
        legend[match.group(1)] = match.group(2)
    numbered = [nic for nic in nics if NIC_COLUMN.match(nic)]
    if numbered and not has_heading:
        raise ValueError(
            "the topology matrix has NIC columns (%s) but no NIC Legend: truncated output?" % ", ".join(numbered)
        )
    missing = [nic for nic in numbered if nic not in legend]
    if missing:
        raise ValueError("the NIC Legend lacks %s (truncated output?)" % ", ".join(missing))
    unknown = [nic for nic in legend if nic not in nics]
    if unknown:
        raise ValueError("the NIC Legend names %s, which the matrix has no column for" % ", ".join(unknown))
    return legend


def _reject_p2p(lines, links):
    legend_says_p2p = any(re.match(r"^\s*OK\s*=\s*Status Ok", line) for line in lines)
    cells_say_p2p = any(code in P2P_CODES for row in links.values() for code in row.values())
    if legend_says_p2p or cells_say_p2p:
        raise ValueError(
            "this is a `nvidia-smi topo -p2p` status matrix, not the `nvidia-smi topo -m` topology matrix"
        )


def parse_topo_matrix(text):
    """Parse the output of ``nvidia-smi topo -m`` (also ``--matrix``).

    Returns a dict with:

    - ``gpus``: GPU column labels in order (``["GPU0", ...]``)
    - ``nics``: the other column labels in order (``NIC0``... or ``mlx5_0``...)
    - ``nic_names``: NIC label -> device name from the "NIC Legend"; old drivers' columns
      are named after the device (``mlx5_0``) and have no legend: label -> itself
    - ``links``: ``links[a][b]`` is the connection code between two different devices,
      verbatim (``NV12``, ``PIX``, ``SYS``, ``SOC``...)
    - ``affinity``: GPU label -> ``{"cpus", "numa", "gpu_numa_id"}``, None when the column
      is absent or the cell empty (containers often print empty cells)

    Handles the three header generations, TABs or spaces, ANSI escapes,
    Windows line endings, blank lines and rows wrapped over several lines.
    Raises ValueError on text that is not a topology matrix, and on a matrix
    that is not followed by its complete Legend (every code it uses, ``X =
    Self``) and, with ``NICn`` columns, a "NIC Legend" naming each of them:
    truncated output must not pass for a smaller topology.
    """
    if not isinstance(text, str):
        raise ValueError("topology text must be a string, got %s" % type(text).__name__)
    lines = _clean_lines(text)

    header_at = None
    for number, line in enumerate(lines):
        if _is_header_start(line.split()):
            header_at = number
            break
    if header_at is None:
        raise ValueError("no GPU column header (GPU0 ...) found: not `nvidia-smi topo -m` output")

    header = _WrappedLine()
    header.add(lines[header_at], _header_token_valid)
    row_at = None
    for number in range(header_at + 1, len(lines)):
        line = lines[number]
        tokens = line.split()
        if not tokens:
            continue
        if _is_legend(line) or (
            len(tokens) >= 2
            and tokens[0] not in AFFINITY_WORDS
            and header.has_token(tokens[0])
            and _looks_like_link_cell(tokens[1])
        ):
            row_at = number
            break
        header.add(line, _header_token_valid)
    labels, columns = _parse_header(header.text())
    if row_at is None or _is_legend(lines[row_at]):
        raise ValueError("topology header has no matrix rows below it")
    if len(set(labels)) != len(labels):
        raise ValueError("topology header repeats a column label: %s" % " ".join(labels))

    gpus = [label for label in labels if GPU_LABEL.match(label)]
    nics = [label for label in labels if not GPU_LABEL.match(label)]
    width = len(labels)

    row_groups, matrix_end = _collect_rows(lines, row_at, labels, columns)
    links = {}
    affinity = {}
    for row_lines in row_groups:
        label, cells, trailing = _parse_row(row_lines, width, columns)
        if label in links:
            raise ValueError("topology matrix has two rows for %s" % label)
        links[label] = dict((column, code) for column, code in zip(labels, cells) if column != label)
        if label in gpus:
            affinity[label] = dict(
                (key, trailing.get(name) or None) for name, key in AFFINITY_COLUMNS
            )

    _reject_p2p(lines, links)
    missing = [gpu for gpu in gpus if gpu not in links]
    if missing:
        raise ValueError("topology matrix lacks the rows of %s (truncated output?)" % ", ".join(missing))
    codes, after_legend = _legend_codes(lines, matrix_end)
    _check_legend(codes, links)
    nic_names = _nic_legend(after_legend, nics)
    for nic in nics:
        # Old drivers and some pastes omit NIC rows; the matrix is symmetric.
        row = links.setdefault(nic, {})
        for other in labels:
            if other != nic and other not in row:
                row[other] = links.get(other, {}).get(nic)
        if any(code is None for code in row.values()):
            raise ValueError("topology matrix has no row for %s and cannot infer it" % nic)

    return {
        "gpus": gpus,
        "nics": nics,
        "nic_names": dict((nic, nic_names.get(nic, nic)) for nic in nics),
        "links": links,
        "affinity": affinity,
    }


def nvlink_count(code):
    """Number of bonded NVLinks a connection code stands for (``NV18`` -> 18, ``SYS`` -> 0)."""
    match = NVLINK.match(code or "")
    return int(match.group(1)) if match else 0


def nic_distance_rank(code):
    """Rank of a GPU-to-NIC path, 0 for PIX up to 4 for SYS/SOC; unknown codes rank last."""
    return _DISTANCE_RANK.get(code, _UNKNOWN_RANK)


def nvlink_pairs(topology):
    """GPU pairs joined by NVLink, in GPU order: ``[{"gpus": [a, b], "links": n}, ...]``."""
    gpus = topology["gpus"]
    pairs = []
    for position, first in enumerate(gpus):
        for second in gpus[position + 1:]:
            count = nvlink_count(topology["links"][first][second])
            if count:
                pairs.append({"gpus": [first, second], "links": count})
    return pairs


def nearest_nics(topology):
    """Every GPU's NICs, nearest first (PIX < PXB < PHB < NODE < SYS), ties in column order.

    The list order is the one to hand to NCCL (``NCCL_IB_HCA``) for that GPU;
    entries sharing the first entry's ``link`` are equally near.
    """
    result = {}
    for gpu in topology["gpus"]:
        ranked = sorted(
            enumerate(topology["nics"]),
            key=lambda item: (nic_distance_rank(topology["links"][gpu][item[1]]), item[0]),
        )
        result[gpu] = [
            {
                "nic": nic,
                "name": topology["nic_names"][nic],
                "link": topology["links"][gpu][nic],
            }
            for _position, nic in ranked
        ]
    return result


def _known(value):
    return value not in (None, "N/A")


def check_expect(topology, expect):
    """Compare a parsed topology with an expected hardware profile.

    ``expect`` keys (all optional, None means "do not check"):
    ``gpu_count``, ``nic_count``, ``min_nvlinks`` (every GPU pair),
    ``max_nic_distance`` (every GPU has a NIC at most this far: PIX, PXB,
    PHB, NODE or SYS) and ``require_affinity`` (every GPU reports its CPU
    and NUMA affinity).  Returns the list of every mismatch, empty when the
    topology matches.
    """
    expect = expect or {}
    mismatches = []
    gpus = topology["gpus"]

    gpu_count = expect.get("gpu_count")
    if gpu_count is not None and len(gpus) != gpu_count:
        mismatches.append("expected %d GPUs, found %d" % (gpu_count, len(gpus)))

    nic_count = expect.get("nic_count")
    if nic_count is not None and len(topology["nics"]) != nic_count:
        mismatches.append("expected %d NICs, found %d" % (nic_count, len(topology["nics"])))

    min_nvlinks = expect.get("min_nvlinks")
    if min_nvlinks:
        for position, first in enumerate(gpus):
            for second in gpus[position + 1:]:
                code = topology["links"][first][second]
                if nvlink_count(code) < min_nvlinks:
                    mismatches.append(
                        "%s-%s: %s, expected at least NV%d" % (first, second, code, min_nvlinks)
                    )

    max_distance = expect.get("max_nic_distance")
    if max_distance is not None:
        if max_distance not in _DISTANCE_RANK:
            raise ValueError(
                "max_nic_distance must be one of %s, got %r" % (", ".join(NIC_DISTANCE_ORDER), max_distance)
            )
        limit = nic_distance_rank(max_distance)
        for gpu, nics in nearest_nics(topology).items():
            if not nics:
                mismatches.append("%s: no NIC in the topology, expected one at most %s away" % (gpu, max_distance))
            elif nic_distance_rank(nics[0]["link"]) > limit:
                mismatches.append(
                    "%s: nearest NIC %s (%s) is %s away, expected at most %s"
                    % (gpu, nics[0]["nic"], nics[0]["name"], nics[0]["link"], max_distance)
                )

    if expect.get("require_affinity"):
        for gpu in gpus:
            cell = topology["affinity"][gpu]
            absent = [key for key in ("cpus", "numa") if not _known(cell[key])]
            if absent:
                mismatches.append("%s: no %s affinity reported" % (gpu, " or ".join(
                    "CPU" if key == "cpus" else "NUMA" for key in absent)))
    return mismatches


def analyze(text, expect=None):
    """Parse ``nvidia-smi topo -m`` text and derive what playbooks need from it."""
    topology = parse_topo_matrix(text)
    return {
        "topology": topology,
        "gpu_count": len(topology["gpus"]),
        "nic_count": len(topology["nics"]),
        "nvlink_pairs": nvlink_pairs(topology),
        "nearest_nics": nearest_nics(topology),
        "affinity": topology["affinity"],
        "mismatches": check_expect(topology, expect),
    }


# The words a link layer goes by: ibstat's and ib_info's, and the role's nccl_fabric_link_layer.
_LINK_LAYER_NAMES = {
    "infiniband": "InfiniBand",
    "ib": "InfiniBand",
    "ethernet": "Ethernet",
    "roce": "Ethernet",
}


def _hca_link_layer(hcas, name, port):
    """Link layer of one HCA as ib_info reports it; raises ValueError when it cannot be told.

    Without a port every port of the HCA must agree: NCCL given a bare HCA name uses all
    its ports, so a VPI card with one InfiniBand and one Ethernet port is on both fabrics.
    """
    if name not in hcas:
        raise ValueError(
            "%s is in the GPU/NIC topology but ibstat does not list it (it lists %s): "
            "are the topology and the ibstat output from the same host?" % (name, ", ".join(sorted(hcas)))
        )
    ports = hcas[name].get("ports") or {}
    if port is not None:
        if str(port) not in ports:
            raise ValueError("ibstat lists no port %s on %s (ports: %s)" % (port, name, ", ".join(sorted(ports)) or "none"))
        ports = {str(port): ports[str(port)]}
    layers = set()
    for number, data in sorted(ports.items()):
        layer = (data or {}).get("link_layer")
        if not layer:
            raise ValueError("ibstat prints no link layer for %s port %s" % (name, number))
        layers.add(_LINK_LAYER_NAMES.get(str(layer).lower(), str(layer)))
    if not layers:
        raise ValueError("ibstat lists no port on %s" % name)
    return layers.pop() if len(layers) == 1 else "mixed (%s)" % ", ".join(sorted(layers))


def nccl_ib_hcas(topology, hcas, link_layer, exclude_pattern=None, port=None):
    """The HCA list for ``NCCL_IB_HCA``: every GPU's nearest NICs of the fabric, in GPU order.

    - ``topology``: what ``parse_topo_matrix`` returns.  Its NIC Legend names
      (``mlx5_0``; old drivers' column labels) are the RDMA device names ibstat prints.
    - ``hcas``: ib_info's ``hcas`` (ibstat or ibv_devinfo): name -> ``{"ports": {"1":
      {"link_layer": ...}}}``.  Empty or None when the host lists no HCA (or no capture was
      given): the link layer is then unknown and the NICs are chosen by affinity alone.
    - ``link_layer``: the fabric NCCL is to use: ``InfiniBand`` or ``Ethernet`` (RoCE);
      the role's ``infiniband`` and ``roce`` are accepted too.
    - ``exclude_pattern``: regular expression (matched at the start, like Jinja's ``match``)
      of HCA names NCCL must never use.
    - ``port``: port whose link layer is checked and appended (``mlx5_0:1``); None for
      every port and no suffix.

    For each GPU the candidates are the NICs not excluded and on the wanted link layer;
    the GPU contributes every candidate that shares the nearest candidate's distance
    (PIX < PXB < PHB < NODE < SYS).  So a GPU whose nearest NIC is on the other fabric
    (a storage or management NIC) gets its nearest NIC of this one instead.  Each HCA
    appears once, in the order of the first GPU that chose it.

    Raises ValueError for an unknown link layer or pattern, for a topology NIC that the
    (non-empty) ibstat does not list, and when the topology has NICs of known link layers
    but none on the wanted one.
    """
    wanted = _LINK_LAYER_NAMES.get(str(link_layer).lower())
    if wanted is None:
        raise ValueError(
            "link layer must be InfiniBand or Ethernet (the role's infiniband or roce), got %r" % (link_layer,)
        )
    if port is not None and (isinstance(port, bool) or not re.fullmatch(r"[1-9][0-9]*", str(port))):
        raise ValueError("port must be a positive integer, got %r" % (port,))
    try:
        exclude = re.compile(exclude_pattern) if exclude_pattern else None
    except re.error as exc:
        raise ValueError("exclude pattern %r is not a valid regular expression: %s" % (exclude_pattern, exc))

    layers = {}
    for nic in topology["nics"]:
        name = topology["nic_names"][nic]
        if exclude is not None and exclude.match(name):
            continue
        layers[name] = _hca_link_layer(hcas, name, port) if hcas else wanted

    nearest_by_gpu = nearest_nics(topology)
    chosen = []
    for gpu in topology["gpus"]:
        candidates = [nic for nic in nearest_by_gpu[gpu] if layers.get(nic["name"]) == wanted]
        if not candidates:
            continue
        nearest = nic_distance_rank(candidates[0]["link"])
        for nic in candidates:
            if nic_distance_rank(nic["link"]) == nearest and nic["name"] not in chosen:
                chosen.append(nic["name"])

    if layers and not chosen:
        raise ValueError(
            "no NIC of the topology is on the %s link layer (%s): wrong link layer for this host?"
            % (wanted, ", ".join("%s: %s" % item for item in sorted(layers.items())))
        )
    suffix = "" if port is None else ":%s" % port
    return [name + suffix for name in chosen]
