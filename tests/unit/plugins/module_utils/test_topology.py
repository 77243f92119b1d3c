# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import re
import sys

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.topology import (
    analyze,
    check_expect,
    nearest_nics,
    nic_distance_rank,
    nvlink_count,
    nvlink_pairs,
    parse_topo_matrix,
)
from ansible_collections.gpucloud.fleet.tests.unit.plugins.modules.conftest import fixture_text

A100_4 = ("public", "topo", "a100-sxm4-4gpu-nv4-1mlx5-princeton-della-cryoem.txt")
DGX_A100 = ("public", "topo", "dgx-a100-8gpu-8nic-roce-deepep13.txt")
DGX1_V100 = ("public", "topo", "dgx1-class-v100-8gpu-1nic-ansi-hdr-llamacpp-machine03.txt")
H800 = ("public", "topo", "h800-4of8-gpu-nv8-17nic-container-empty-affinity-verl.txt")
K80 = ("public", "topo", "k80-2board-4gpu-mlx4-soc-legend-microway.txt")
RTX3090 = ("public", "topo", "rtx3090-2gpu-nv4-bridge-ryzen5900x.txt")
H200 = ("h200-ubuntu2404-driver580", "nvidia-smi_topo_-m.txt")
ALL_FIXTURES = [A100_4, DGX_A100, DGX1_V100, H800, K80, RTX3090, H200]
# Rows GPU0..GPU4 of an 8-GPU, 10-NIC matrix, no legend: what a cut-off paste looks like.
H100_EXCERPT = ("public", "topo", "h100-8gpu-nv18-10nic-vllm29944-excerpt.txt")

GPUS8 = ["GPU%d" % index for index in range(8)]


def parse(fixture):
    return parse_topo_matrix(fixture_text(*fixture))


def aff(cpus, numa, gpu_numa_id):
    return {"cpus": cpus, "numa": numa, "gpu_numa_id": gpu_numa_id}


def legend_of(fixture):
    """The Legend (and NIC Legend) block of a real capture, to end synthetic matrices with."""
    text = fixture_text(*fixture)
    return text[text.index("Legend:"):]


def test_a100_4gpu_old_nic_column_and_numa_affinity():
    topo = parse(A100_4)
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["nics"] == ["mlx5_0"]
    assert topo["nic_names"] == {"mlx5_0": "mlx5_0"}
    assert topo["links"]["GPU0"] == {"GPU1": "NV4", "GPU2": "NV4", "GPU3": "NV4", "mlx5_0": "NODE"}
    assert topo["links"]["GPU2"]["mlx5_0"] == "SYS"
    assert topo["links"]["mlx5_0"] == {"GPU0": "NODE", "GPU1": "NODE", "GPU2": "SYS", "GPU3": "SYS"}
    assert topo["affinity"] == {
        "GPU0": aff("0-23", "0", None),
        "GPU1": aff("0-23", "0", None),
        "GPU2": aff("24-47", "1", None),
        "GPU3": aff("24-47", "1", None),
    }


def test_dgx_a100_nic_legend_and_affinity():
    topo = parse(DGX_A100)
    assert topo["gpus"] == GPUS8
    assert topo["nics"] == ["NIC%d" % index for index in range(8)]
    assert topo["nic_names"] == dict(("NIC%d" % index, "mlx5_%d" % index) for index in range(8))
    assert topo["links"]["GPU0"] == {
        "GPU1": "NV12", "GPU2": "NV12", "GPU3": "NV12", "GPU4": "NV12", "GPU5": "NV12", "GPU6": "NV12",
        "GPU7": "NV12", "NIC0": "PXB", "NIC1": "PXB", "NIC2": "NODE", "NIC3": "NODE", "NIC4": "SYS",
        "NIC5": "SYS", "NIC6": "SYS", "NIC7": "SYS",
    }
    assert topo["links"]["GPU7"]["NIC6"] == "PXB"
    assert topo["links"]["GPU5"]["NIC6"] == "NODE"
    assert topo["links"]["NIC0"]["NIC1"] == "PIX"
    assert topo["links"]["NIC5"]["NIC4"] == "PIX"
    assert topo["links"]["NIC3"]["GPU2"] == "PXB"
    assert topo["affinity"]["GPU0"] == aff("0-31,64-95", "0", None)
    assert topo["affinity"]["GPU3"] == aff("0-31,64-95", "0", None)
    assert topo["affinity"]["GPU4"] == aff("32-63,96-127", "1", None)
    assert topo["affinity"]["GPU7"] == aff("32-63,96-127", "1", None)
    assert sorted(topo["affinity"]) == GPUS8


def test_dgx1_v100_ansi_header_hybrid_cube_mesh():
    topo = parse(DGX1_V100)
    assert topo["gpus"] == GPUS8
    assert topo["nics"] == ["NIC0"]
    assert topo["nic_names"] == {"NIC0": "mlx5_2"}
    assert topo["links"]["GPU0"] == {
        "GPU1": "NV1", "GPU2": "NV1", "GPU3": "NV2", "GPU4": "NV2", "GPU5": "SYS", "GPU6": "SYS",
        "GPU7": "SYS", "NIC0": "NODE",
    }
    assert topo["links"]["GPU5"]["GPU1"] == "NV2"
    assert topo["links"]["GPU7"]["GPU6"] == "NV2"
    assert topo["links"]["GPU4"]["NIC0"] == "SYS"
    assert topo["links"]["NIC0"]["GPU3"] == "NODE"
    assert topo["affinity"]["GPU0"] == aff("0-19,40-59", "0", "N/A")
    assert topo["affinity"]["GPU7"] == aff("20-39,60-79", "1", "N/A")
    pairs = nvlink_pairs(topo)
    assert len(pairs) == 16
    # Six NVLinks per V100, each shared by two GPUs.
    assert sum(pair["links"] for pair in pairs) == 8 * 6 // 2
    assert pairs[:4] == [
        {"gpus": ["GPU0", "GPU1"], "links": 1},
        {"gpus": ["GPU0", "GPU2"], "links": 1},
        {"gpus": ["GPU0", "GPU3"], "links": 2},
        {"gpus": ["GPU0", "GPU4"], "links": 2},
    ]


def test_h800_container_empty_affinity_17_nics():
    topo = parse(H800)
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["nics"] == ["NIC%d" % index for index in range(17)]
    assert topo["nic_names"]["NIC16"] == "mlx5_16"
    assert topo["nic_names"]["NIC10"] == "mlx5_10"
    pix = dict(
        (gpu, [nic for nic in topo["nics"] if topo["links"][gpu][nic] == "PIX"]) for gpu in topo["gpus"]
    )
    assert pix == {
        "GPU0": ["NIC4", "NIC13"],
        "GPU1": ["NIC6", "NIC14"],
        "GPU2": ["NIC7", "NIC15"],
        "GPU3": ["NIC8", "NIC16"],
    }
    assert topo["links"]["NIC0"]["NIC9"] == "PIX"
    assert topo["links"]["NIC5"]["GPU0"] == "SYS"
    assert all(topo["links"]["GPU1"][gpu] == "NV8" for gpu in ("GPU0", "GPU2", "GPU3"))
    assert topo["affinity"] == dict((gpu, aff(None, None, "N/A")) for gpu in topo["gpus"])


def test_k80_oldest_layout_cpu_affinity_only():
    topo = parse(K80)
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["nics"] == ["mlx4_0"]
    assert topo["nic_names"] == {"mlx4_0": "mlx4_0"}
    assert topo["links"]["GPU0"] == {"GPU1": "PIX", "GPU2": "PHB", "GPU3": "PHB", "mlx4_0": "PHB"}
    assert topo["links"]["GPU2"]["GPU3"] == "PIX"
    assert topo["links"]["mlx4_0"] == {"GPU0": "PHB", "GPU1": "PHB", "GPU2": "PHB", "GPU3": "PHB"}
    assert topo["affinity"] == dict((gpu, aff("0-11", None, None)) for gpu in topo["gpus"])
    assert nvlink_pairs(topo) == []


def test_rtx3090_bridge_without_nics():
    topo = parse(RTX3090)
    assert topo == {
        "gpus": ["GPU0", "GPU1"],
        "nics": [],
        "nic_names": {},
        "links": {"GPU0": {"GPU1": "NV4"}, "GPU1": {"GPU0": "NV4"}},
        "affinity": {"GPU0": aff("0-23", "0", "N/A"), "GPU1": aff("0-23", "0", "N/A")},
    }


def test_h200_real_capture_single_gpu():
    topo = parse(H200)
    assert topo == {
        "gpus": ["GPU0"],
        "nics": [],
        "nic_names": {},
        "links": {"GPU0": {}},
        "affinity": {"GPU0": aff("0-15", "0", "N/A")},
    }


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture[-1])
def test_links_are_complete_and_symmetric(fixture):
    topo = parse(fixture)
    devices = topo["gpus"] + topo["nics"]
    for first in devices:
        assert sorted(topo["links"][first]) == sorted(device for device in devices if device != first)
        for second in topo["links"][first]:
            assert topo["links"][first][second] == topo["links"][second][first]
            assert topo["links"][first][second] != "X"


def _strip_ansi(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _hard_wrap(text, width, strip=False):
    """What a narrow terminal or a paste does to long lines (TABs already expanded)."""
    lines = []
    for line in _strip_ansi(text).expandtabs(8).split("\n"):
        while len(line) > width:
            lines.append(line[:width])
            line = line[width:]
        lines.append(line)
    if strip:
        lines = [line.rstrip() for line in lines]
    return "\n".join(lines)


VARIANTS = {
    "tabs-expanded": lambda text: text.expandtabs(8),
    "tabs-expanded-stripped": lambda text: "\n".join(
        line.rstrip() for line in _strip_ansi(text).expandtabs(8).split("\n")),
    "windows-line-endings": lambda text: text.replace("\n", "\r\n"),
    "extra-blank-lines": lambda text: "\n\n" + text.replace("\n", "\n\n") + "\n\n",
    "trailing-whitespace-stripped": lambda text: "\n".join(line.rstrip() for line in text.split("\n")),
    "leading-whitespace-stripped": lambda text: "\n".join(line.lstrip() for line in text.split("\n")),
    "shell-prompt-around": lambda text: "$ nvidia-smi topo -m\n" + text + "\n$ exit\n",
    "ansi-everywhere": lambda text: "\n".join("\x1b[1m" + line + "\x1b[0m" for line in text.split("\n")),
    "wrapped-at-60": lambda text: _hard_wrap(text, 60),
    "wrapped-at-80": lambda text: _hard_wrap(text, 80),
    "wrapped-at-120": lambda text: _hard_wrap(text, 120),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture[-1])
def test_reformatted_output_parses_the_same(fixture, variant):
    original = fixture_text(*fixture)
    assert parse_topo_matrix(VARIANTS[variant](original)) == parse_topo_matrix(original)


@pytest.mark.parametrize("width", [60, 80, 100])
@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture[-1])
def test_wrapped_and_stripped_keeps_the_matrix(fixture, width):
    """A wrap that also lost the spaces at the cut still yields the same labels and links."""
    original = parse(fixture)
    wrapped = parse_topo_matrix(_hard_wrap(fixture_text(*fixture), width, strip=True))
    for key in ("gpus", "nics", "nic_names", "links"):
        assert wrapped[key] == original[key]


def test_header_wrapped_over_two_lines():
    lines = fixture_text(*DGX_A100).split("\n")
    cut = lines[0].index("NIC4")
    text = "\n".join([lines[0][:cut].rstrip(), lines[0][cut:]] + lines[1:])
    assert parse_topo_matrix(text) == parse(DGX_A100)


def test_soc_code_of_old_drivers_is_kept_and_ranked_as_sys():
    text = fixture_text(*K80)
    rows = text.split("\n")
    # A two-socket K80 host: the second board sits behind the other CPU.
    rows[1] = "GPU0     X      PIX     SOC     SOC     PHB     0-11"
    rows[3] = "GPU2    SOC     SOC      X      PIX     SOC     12-23"
    rows[5] = "mlx4_0  PHB     PHB     SOC     SOC      X "
    rows[2] = "GPU1    PIX      X      SOC     SOC     PHB     0-11"
    rows[4] = "GPU3    SOC     SOC     PIX      X      SOC     12-23"
    topo = parse_topo_matrix("\n".join(rows))
    assert topo["links"]["GPU0"]["GPU2"] == "SOC"
    assert topo["links"]["GPU3"]["mlx4_0"] == "SOC"
    assert topo["affinity"]["GPU2"] == aff("12-23", None, None)
    assert nic_distance_rank("SOC") == nic_distance_rank("SYS")
    assert check_expect(topo, {"max_nic_distance": "NODE"}) == [
        "GPU2: nearest NIC mlx4_0 (mlx4_0) is SOC away, expected at most NODE",
        "GPU3: nearest NIC mlx4_0 (mlx4_0) is SOC away, expected at most NODE",
    ]


def test_missing_nic_rows_are_inferred_from_the_gpu_rows():
    text = "\n".join(line for line in fixture_text(*DGX_A100).split("\n") if not line.startswith("NIC0 "))
    topo = parse_topo_matrix(text)
    assert topo["links"]["NIC0"]["GPU0"] == "PXB"
    assert topo["links"]["NIC0"]["NIC1"] == "PIX"
    assert topo == parse(DGX_A100)


def test_na_affinity_cells_are_kept_verbatim():
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tNV18\tN/A\tN/A\t\tN/A\nGPU1\tNV18\t X \tN/A\tN/A\t\tN/A\n"
    text += "\n" + legend_of(H200)
    topo = parse_topo_matrix(text)
    assert topo["affinity"]["GPU1"] == aff("N/A", "N/A", "N/A")
    assert check_expect(topo, {"require_affinity": True}) == [
        "GPU0: no CPU or NUMA affinity reported",
        "GPU1: no CPU or NUMA affinity reported",
    ]


def test_grace_hopper_style_gpu_numa_id():
    text = "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tSYS\t0-71\t0\t\t1\nNIC0\tSYS\t X \t\t\t\t\n"
    text += "\n" + legend_of(H200) + "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
    topo = parse_topo_matrix(text)
    assert topo["affinity"]["GPU0"] == aff("0-71", "0", "1")
    assert topo["nic_names"] == {"NIC0": "mlx5_0"}


@pytest.mark.parametrize("text, message", [
    ("", "no GPU column header"),
    ("No devices were found\n", "no GPU column header"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "no GPU column header"),
    ("\tGPU0\tGPU1\tCPU Affinity\n\nLegend:\n", "no matrix rows"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\n", "lacks the rows of GPU1"),
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\n", "row GPU1 has 1 matrix cells"),
    ("\tGPU0\tGPU0\tCPU Affinity\nGPU0\t X \tX\t0-7\n", "repeats a column label"),
])
def test_not_a_topology_matrix(text, message):
    with pytest.raises(ValueError, match=message):
        parse_topo_matrix(text)


@pytest.mark.parametrize("name", [
    "nvidia-smi.txt",
    "nvidia-smi_-L.txt",
    "nvidia-smi_-q.txt",
    "nvidia-smi_-q_-x.xml",
    "nvidia-smi_nvlink_-s.txt",
    "nvidia-smi_mig_-lgip.txt",
])
def test_other_captures_of_the_h200_host_are_rejected(name):
    with pytest.raises(ValueError):
        parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", name))


def test_p2p_status_matrix_is_rejected():
    with pytest.raises(ValueError, match="topo -p2p"):
        parse_topo_matrix(fixture_text("h200-ubuntu2404-driver580", "nvidia-smi_topo_-p2p_r.txt"))


def _lines_before(text, start):
    lines = text.split("\n")
    return lines[:next(number for number, line in enumerate(lines) if line.startswith(start))]


def _matrix_cuts(fixture):
    """Every way to cut a capture after its header and before its Legend."""
    lines = _lines_before(fixture_text(*fixture), "Legend:")
    return ["\n".join(lines[:end]) + "\n" for end in range(2, len(lines) + 1)]


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture[-1])
def test_matrix_without_its_legend_is_refused(fixture):
    """Cut after any row, even after the last GPU row, the matrix is refused: no smaller topology."""
    for text in _matrix_cuts(fixture):
        with pytest.raises(ValueError, match="truncated"):
            parse_topo_matrix(text)
        with pytest.raises(ValueError, match="truncated"):
            parse_topo_matrix(_hard_wrap(text, 80))


def test_cut_after_the_gpu_rows_names_the_missing_legend():
    """The NIC row could be inferred from the GPU rows; without the Legend nothing says the text is whole."""
    text = "\n".join(_lines_before(fixture_text(*A100_4), "mlx5_0\t")) + "\n"
    with pytest.raises(ValueError, match="followed by the end of the text, not by its Legend"):
        parse_topo_matrix(text)


def test_matrix_followed_by_other_text_is_refused():
    lines = _lines_before(fixture_text(*DGX_A100), "NIC7 ")
    text = "\n".join(lines + ["Connection to gpu-node-07 closed.", "", legend_of(DGX_A100)])
    with pytest.raises(ValueError, match="followed by 'Connection to gpu-node-07 closed.', not by its Legend"):
        parse_topo_matrix(text)


def test_public_h100_excerpt_is_refused():
    """The stored text of vllm-project/vllm#29944 stops after GPU4's row: not a topology."""
    with pytest.raises(ValueError, match="lacks the rows of GPU5, GPU6, GPU7"):
        parse(H100_EXCERPT)
    with pytest.raises(ValueError, match="lacks the rows of GPU5, GPU6, GPU7"):
        parse_topo_matrix(fixture_text(*H100_EXCERPT) + "\n" + legend_of(DGX_A100))


@pytest.mark.parametrize("fixture, cut_before, message", [
    (DGX_A100, "  NODE =", "Legend does not define NODE, NV#, PHB, PIX, PXB"),
    (K80, "  PIX =", "Legend does not define PIX"),
    (RTX3090, "  NV#  =", "Legend does not define NV#"),
    (DGX_A100, "  X    =", "Legend lacks \"X = Self\""),
    (DGX_A100, "NIC Legend:", "has NIC columns \\(NIC0, NIC1, NIC2, NIC3, NIC4, NIC5, NIC6, NIC7\\) but no NIC Legend"),
    (DGX1_V100, "NIC Legend:", "has NIC columns \\(NIC0\\) but no NIC Legend"),
    (DGX_A100, "  NIC4: mlx5_4", "NIC Legend lacks NIC4, NIC5, NIC6, NIC7"),
    (H800, "  NIC16: mlx5_16", "NIC Legend lacks NIC16"),
])
def test_legend_cut_short_is_refused(fixture, cut_before, message):
    text = "\n".join(_lines_before(fixture_text(*fixture), cut_before)) + "\n"
    with pytest.raises(ValueError, match=message):
        parse_topo_matrix(text)


def test_nic_legend_of_another_machine_is_refused():
    with pytest.raises(ValueError, match="NIC Legend names NIC0, which the matrix has no column for"):
        parse_topo_matrix(fixture_text(*H200) + "\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    with pytest.raises(ValueError, match="NIC Legend names NIC3 twice"):
        parse_topo_matrix(fixture_text(*DGX_A100) + "  NIC3: mlx5_9\n")


def test_legend_entries_the_matrix_does_not_use_may_be_absent():
    """Drivers before NVLink print no NV# line: only the codes of the matrix are required."""
    text = "\n".join(line for line in fixture_text(*H200).split("\n") if not line.startswith("  NV#"))
    assert parse_topo_matrix(text) == parse(H200)


def _synthetic_matrix(count):
    """`count` GPUs in two NVLink islands (NV18 within each half, SYS across), TAB-separated, with a Legend."""
    half = count // 2
    names = ["GPU%d" % index for index in range(count)]
    lines = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for index, name in enumerate(names):
        cells = [" X " if other == index else "NV18" if (other < half) == (index < half) else "SYS"
                 for other in range(count)]
        cpus, numa = ("0-63", "0") if index < half else ("64-127", "1")
        lines.append("%s\t%s\t%s\t%s\t\tN/A" % (name, "\t".join(cells), cpus, numa))
    return "\n".join(lines) + "\n\n" + legend_of(H200)


def _characters_split(text):
    """Parse `text`; return the result and how many characters str.split() was handed.

    Counts work, not time: a quadratic joiner re-splits the growing line for every
    wrapped piece, a linear one splits each piece a bounded number of times.
    """
    work = [0]

    def profile(_frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", None) == "split" and isinstance(
                getattr(arg, "__self__", None), str):
            work[0] += len(arg.__self__)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = parse_topo_matrix(text)
    finally:
        sys.setprofile(previous)
    return result, work[0]


def test_joining_wrapped_lines_is_linear():
    """Header and rows of 32 and 128 GPUs wrapped at 28 columns: 4x the pieces per line, same work per character."""
    per_character = []
    for count in (32, 128):
        text = _synthetic_matrix(count)
        wrapped = _hard_wrap(text, 28, strip=True)
        # Every matrix line (8 columns a cell) is cut into count * 8 // 28 pieces or more.
        assert len(wrapped.split("\n")) > count * (count * 8 // 28)
        result, work = _characters_split(wrapped)
        original = parse_topo_matrix(text)
        # A cut inside "64-127" is ambiguous ("64-1" and "27" are values too): compare the matrix.
        for key in ("gpus", "nics", "nic_names", "links"):
            assert result[key] == original[key]
        assert result["links"]["GPU0"]["GPU%d" % (count - 1)] == "SYS"
        per_character.append(float(work) / len(wrapped))
    assert per_character[1] < 4, per_character
    assert per_character[1] < 1.2 * per_character[0], per_character


def test_non_text_is_rejected():
    with pytest.raises(ValueError, match="must be a string"):
        parse_topo_matrix(None)


def test_nvlink_count_and_distance_rank():
    assert nvlink_count("NV18") == 18
    assert nvlink_count("NV1") == 1
    assert nvlink_count("SYS") == 0
    assert nvlink_count(None) == 0
    assert [nic_distance_rank(code) for code in ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")] == [0, 1, 2, 3, 4, 4]
    assert nic_distance_rank("NV4") > nic_distance_rank("SYS")


def test_dgx_a100_nearest_nics_for_nccl():
    nearest = nearest_nics(parse(DGX_A100))
    assert [entry["name"] for entry in nearest["GPU0"]] == [
        "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"]
    assert nearest["GPU0"][0] == {"nic": "NIC0", "name": "mlx5_0", "link": "PXB"}
    assert [(entry["nic"], entry["link"]) for entry in nearest["GPU6"][:4]] == [
        ("NIC6", "PXB"), ("NIC7", "PXB"), ("NIC4", "NODE"), ("NIC5", "NODE")]
    assert [(entry["nic"], entry["link"]) for entry in nearest["GPU2"][:2]] == [("NIC2", "PXB"), ("NIC3", "PXB")]


def test_h800_nearest_nics_put_both_pix_nics_first():
    nearest = nearest_nics(parse(H800))
    assert [(entry["name"], entry["link"]) for entry in nearest["GPU3"][:3]] == [
        ("mlx5_8", "PIX"), ("mlx5_16", "PIX"), ("mlx5_0", "SYS")]
    assert len(nearest["GPU3"]) == 17


def test_dgx_a100_matches_its_profile():
    topo = parse(DGX_A100)
    assert check_expect(topo, {
        "gpu_count": 8,
        "nic_count": 8,
        "min_nvlinks": 12,
        "max_nic_distance": "PXB",
        "require_affinity": True,
    }) == []


def test_every_mismatch_is_listed():
    topo = parse(DGX_A100)
    mismatches = check_expect(topo, {
        "gpu_count": 4,
        "nic_count": 4,
        "min_nvlinks": 18,
        "max_nic_distance": "PIX",
    })
    assert mismatches[:3] == [
        "expected 4 GPUs, found 8",
        "expected 4 NICs, found 8",
        "GPU0-GPU1: NV12, expected at least NV18",
    ]
    assert len([line for line in mismatches if "expected at least NV18" in line]) == 28
    assert mismatches[-1] == "GPU7: nearest NIC NIC6 (mlx5_6) is PXB away, expected at most PIX"
    assert len(mismatches) == 2 + 28 + 8


def test_dgx1_pairs_without_nvlink():
    mismatches = check_expect(parse(DGX1_V100), {"min_nvlinks": 1})
    assert len(mismatches) == 28 - 16
    assert mismatches[0] == "GPU0-GPU5: SYS, expected at least NV1"


def test_a100_4gpu_nic_too_far_and_h200_without_nic():
    assert check_expect(parse(A100_4), {"max_nic_distance": "PXB", "min_nvlinks": 4}) == [
        "GPU0: nearest NIC mlx5_0 (mlx5_0) is NODE away, expected at most PXB",
        "GPU1: nearest NIC mlx5_0 (mlx5_0) is NODE away, expected at most PXB",
        "GPU2: nearest NIC mlx5_0 (mlx5_0) is SYS away, expected at most PXB",
        "GPU3: nearest NIC mlx5_0 (mlx5_0) is SYS away, expected at most PXB",
    ]
    assert check_expect(parse(H200), {"gpu_count": 1, "max_nic_distance": "SYS"}) == [
        "GPU0: no NIC in the topology, expected one at most SYS away",
    ]


def test_h800_container_fails_the_affinity_requirement():
    assert check_expect(parse(H800), {"require_affinity": True, "min_nvlinks": 8}) == [
        "GPU%d: no CPU or NUMA affinity reported" % index for index in range(4)
    ]


def test_unknown_distance_is_rejected():
    with pytest.raises(ValueError, match="max_nic_distance must be one of"):
        check_expect(parse(H200), {"max_nic_distance": "FAR"})


def test_nothing_expected_nothing_mismatches():
    assert check_expect(parse(K80), None) == []
    assert check_expect(parse(K80), {"gpu_count": None, "require_affinity": False}) == []


def test_analyze_h200():
    result = analyze(fixture_text(*H200), {"gpu_count": 1})
    assert result == {
        "topology": parse(H200),
        "gpu_count": 1,
        "nic_count": 0,
        "nvlink_pairs": [],
        "nearest_nics": {"GPU0": []},
        "affinity": {"GPU0": aff("0-15", "0", "N/A")},
        "mismatches": [],
    }
