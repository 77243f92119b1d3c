# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later


import math
import os

import pytest

from ansible_collections.gpucloud.fleet.plugins.module_utils.nccl_tests import (
    evaluate_nccl_result,
    parse_nccl_tests,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "public", "nccl_tests")


def fixture(name):
    with open(os.path.join(FIXTURES, name + ".txt")) as handle:
        return handle.read()


def row(parsed, size):
    matches = [r for r in parsed["rows"] if r["size"] == size]
    assert len(matches) == 1
    return matches[0]


# ---------------------------------------------------------------------------
# Synthetic samples. They were written with the printf formats of
# NVIDIA/nccl-tests, not captured on a machine:
# * CLASSIC_*: src/common.cu of 2.13 - 2.16 ("%12li  %12li  %8s  %6s  %6s" preamble,
#   "  %7s  %6.2f  %6.2f  %5g" per placement, time "%7.0f/%7.1f/%7.2f",
#   "# Out of bounds values : %d %s", "# Avg bus bandwidth    : %g %s");
# * V218_*: src/util.cu of 2.18 (version line, "unalign: %d", "%6s" #wrong header,
#   getFloatStr() cells, "  %7s  %6s  %6s  %6g", "# %-20s : %g %s" footer, the
#   optional "%21s" timestamp column of -T, hypercube_perf's empty redop);
# * V211_*: src/all_gather.cu and src/common.cu of 2.11 (no redop/root columns,
#   "error" column printed with "%5.0le").
# Trailing blanks of the printed lines are left out here; the fixtures keep theirs.
# ---------------------------------------------------------------------------

CLASSIC_BROADCAST = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on gpu-node-0 device  0 [0x10] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4101 on gpu-node-0 device  1 [0x11] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   4102 on gpu-node-0 device  2 [0x12] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   4103 on gpu-node-0 device  3 [0x13] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float    none       0     9.81    0.00    0.00      0     9.62    0.00    0.00      0
        1024           256     float    none       0    11.50    0.09    0.09      0    11.20    0.09    0.09      0
     1048576        262144     float    none       0    36.41   28.80   28.80      0    35.98   29.14   29.14      0
  1073741824     268435456     float    none       0   4420.7  242.89  242.89      0   4418.2  243.03  243.03      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 68.2813
#
"""


CLASSIC_REDUCE_WRONG = """\
# nThread 1 nGpus 1 minBytes 1024 maxBytes 33554432 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on gpu-node-0 device  0 [0x10] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4101 on gpu-node-0 device  1 [0x11] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   4102 on gpu-node-0 device  2 [0x12] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   4103 on gpu-node-0 device  3 [0x13] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           512      half    prod       3    12.07    0.08    0.08      0    11.93    0.09    0.09      0
     2097152       1048576      half    prod       3    51.20   40.96   40.96      3    50.88   41.22   41.22      0
    33554432      16777216      half    prod       3    210.4  159.48  159.48      0    208.9  160.63  160.63     12
# Out of bounds values : 2 FAILED
# Avg bus bandwidth    : 67.1433
#
"""


CLASSIC_NO_VALIDATION = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 65536 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4100 on gpu-node-0 device  0 [0x10] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4101 on gpu-node-0 device  1 [0x11] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.11    0.00    0.00    N/A     9.91    0.00    0.00    N/A
       65536         16384     float     sum      -1    14.32    4.58    4.58    N/A    14.11    4.64    4.64    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 2.305
#
"""


V218_ALL_GATHER = """\
# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703
# Collective test starting: all_gather_perf
# nThread 1 nGpus 1 minBytes 16384 maxBytes 17179869184 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2200 on    h200-00 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid   2201 on    h200-00 device  1 [0000:19:00] NVIDIA H200
#  Rank  2 Group  0 Pid   2202 on    h200-00 device  2 [0000:1a:00] NVIDIA H200
#  Rank  3 Group  0 Pid   2203 on    h200-00 device  3 [0000:1b:00] NVIDIA H200
#  Rank  4 Group  0 Pid   2204 on    h200-00 device  4 [0000:1c:00] NVIDIA H200
#  Rank  5 Group  0 Pid   2205 on    h200-00 device  5 [0000:1d:00] NVIDIA H200
#  Rank  6 Group  0 Pid   2206 on    h200-00 device  6 [0000:1e:00] NVIDIA H200
#  Rank  7 Group  0 Pid   2207 on    h200-00 device  7 [0000:1f:00] NVIDIA H200
#  Rank  8 Group  0 Pid   2208 on    h200-01 device  0 [0000:20:00] NVIDIA H200
#  Rank  9 Group  0 Pid   2209 on    h200-01 device  1 [0000:21:00] NVIDIA H200
#  Rank 10 Group  0 Pid   2210 on    h200-01 device  2 [0000:22:00] NVIDIA H200
#  Rank 11 Group  0 Pid   2211 on    h200-01 device  3 [0000:23:00] NVIDIA H200
#  Rank 12 Group  0 Pid   2212 on    h200-01 device  4 [0000:24:00] NVIDIA H200
#  Rank 13 Group  0 Pid   2213 on    h200-01 device  5 [0000:25:00] NVIDIA H200
#  Rank 14 Group  0 Pid   2214 on    h200-01 device  6 [0000:26:00] NVIDIA H200
#  Rank 15 Group  0 Pid   2215 on    h200-01 device  7 [0000:27:00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
       16384           256     float    none      -1    28.43    0.58    0.54       0    27.90    0.59    0.55       0
     1048576         16384     float    none      -1    61.87   16.95   15.89       0    60.45   17.35   16.26       0
  1073741824      16777216     float    none      -1  2751.30  390.26  365.87       0  2747.00  390.88  366.45       0
 17179869184     268435456     float    none      -1  43712.5  393.02  368.45       0  43698.1  393.15  368.57       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 187.793
#
# Collective test concluded: all_gather_perf

"""


V218_ALLTOALL_TIMESTAMPS = """\
# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703
# Collective test starting: alltoall_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1073741824 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2200 on    h200-00 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid   2201 on    h200-00 device  1 [0000:19:00] NVIDIA H200
#  Rank  2 Group  0 Pid   2202 on    h200-00 device  2 [0000:1a:00] NVIDIA H200
#  Rank  3 Group  0 Pid   2203 on    h200-00 device  3 [0000:1b:00] NVIDIA H200
#  Rank  4 Group  0 Pid   2204 on    h200-00 device  4 [0000:1c:00] NVIDIA H200
#  Rank  5 Group  0 Pid   2205 on    h200-00 device  5 [0000:1d:00] NVIDIA H200
#  Rank  6 Group  0 Pid   2206 on    h200-00 device  6 [0000:1e:00] NVIDIA H200
#  Rank  7 Group  0 Pid   2207 on    h200-00 device  7 [0000:1f:00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
     1048576         65536  bfloat16    none      -1    55.12   19.02   16.65       0    54.01   19.41   16.99       0  2025-11-03 14:05:09
  1073741824      67108864  bfloat16    none      -1  1468.20  731.32  639.91       0  1466.90  731.97  640.47       0  2025-11-03 14:05:09
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 328.505
#
# Collective test concluded: alltoall_perf

"""


V211_ALL_GATHER = """\
# nThread 1 nGpus 8 minBytes 1024 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  31337 on       dgx1 device  0 [0x06] Tesla V100-SXM2-32GB
#   Rank  1 Pid  31337 on       dgx1 device  1 [0x07] Tesla V100-SXM2-32GB
#   Rank  2 Pid  31337 on       dgx1 device  2 [0x08] Tesla V100-SXM2-32GB
#   Rank  3 Pid  31337 on       dgx1 device  3 [0x09] Tesla V100-SXM2-32GB
#   Rank  4 Pid  31337 on       dgx1 device  4 [0x0a] Tesla V100-SXM2-32GB
#   Rank  5 Pid  31337 on       dgx1 device  5 [0x0b] Tesla V100-SXM2-32GB
#   Rank  6 Pid  31337 on       dgx1 device  6 [0x0c] Tesla V100-SXM2-32GB
#   Rank  7 Pid  31337 on       dgx1 device  7 [0x0d] Tesla V100-SXM2-32GB
#
#                                               out-of-place                       in-place
#       size         count      type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024            32     float    14.43    0.07    0.06  0e+00    13.85    0.07    0.06  0e+00
   134217728       4194304     float   1398.6   95.97   83.97  0e+00   1391.3   96.47   84.41  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 42.1375
#
"""


V218_HYPERCUBE = """\
# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703
# Collective test starting: hypercube_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 67108864 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2200 on    h200-00 device  0 [0000:18:00] NVIDIA H200
#  Rank  1 Group  0 Pid   2201 on    h200-00 device  1 [0000:19:00] NVIDIA H200
#  Rank  2 Group  0 Pid   2202 on    h200-00 device  2 [0000:1a:00] NVIDIA H200
#  Rank  3 Group  0 Pid   2203 on    h200-00 device  3 [0000:1b:00] NVIDIA H200
#  Rank  4 Group  0 Pid   2204 on    h200-00 device  4 [0000:1c:00] NVIDIA H200
#  Rank  5 Group  0 Pid   2205 on    h200-00 device  5 [0000:1d:00] NVIDIA H200
#  Rank  6 Group  0 Pid   2206 on    h200-00 device  6 [0000:1e:00] NVIDIA H200
#  Rank  7 Group  0 Pid   2207 on    h200-00 device  7 [0000:1f:00] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
     1048576        262144     float              -1    48.22   21.75   19.03       0    47.91   21.89   19.15       0
    67108864      16777216     float              -1   451.80  148.54  129.97       0   450.20  149.07  130.43       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 74.645
#
# Collective test concluded: hypercube_perf

"""


# V218_ALL_GATHER as "mpirun --tag-output" prints it with NCCL_DEBUG=INFO: NCCL's
# lines share stdout with nccl-tests, which prints a row in three pieces, so
# an INFO line can follow a row's preamble or its out-of-place cells on the same
# line, and a WARN (which NCCL starts with a newline) splits a row in two.
V218_ALL_GATHER_INTERLEAVED = (
    '[1,0]<stdout>:NCCL version 2.27.3+cuda12.9\n'
    '[1,0]<stdout>:# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703\n'
    '[1,0]<stdout>:# Collective test starting: all_gather_perf\n'
    '[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 16384 maxBytes 17179869184 step: 2(factor) '
    'warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n'
    '[1,0]<stdout>:#\n'
    '[1,0]<stdout>:# Using devices\n'
    '[1,0]<stdout>:#  Rank  0 Group  0 Pid   2200 on    h200-00 device  0 [0000:18:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  1 Group  0 Pid   2201 on    h200-00 device  1 [0000:19:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  2 Group  0 Pid   2202 on    h200-00 device  2 [0000:1a:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  3 Group  0 Pid   2203 on    h200-00 device  3 [0000:1b:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  4 Group  0 Pid   2204 on    h200-00 device  4 [0000:1c:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  5 Group  0 Pid   2205 on    h200-00 device  5 [0000:1d:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  6 Group  0 Pid   2206 on    h200-00 device  6 [0000:1e:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  7 Group  0 Pid   2207 on    h200-00 device  7 [0000:1f:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  8 Group  0 Pid   2208 on    h200-01 device  0 [0000:20:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank  9 Group  0 Pid   2209 on    h200-01 device  1 [0000:21:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 10 Group  0 Pid   2210 on    h200-01 device  2 [0000:22:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 11 Group  0 Pid   2211 on    h200-01 device  3 [0000:23:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 12 Group  0 Pid   2212 on    h200-01 device  4 [0000:24:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 13 Group  0 Pid   2213 on    h200-01 device  5 [0000:25:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 14 Group  0 Pid   2214 on    h200-01 device  6 [0000:26:00] NVIDIA H200\n'
    '[1,0]<stdout>:#  Rank 15 Group  0 Pid   2215 on    h200-01 device  7 [0000:27:00] NVIDIA H200\n'
    '[1,0]<stdout>:h200-00:2200:2200 [0] NCCL INFO Bootstrap: Using bond0:10.0.0.1<0>\n'
    '[1,0]<stdout>:h200-00:2200:2200 [0] NCCL INFO cudaDriverVersion 12090\n'
    '[1,0]<stdout>:#\n'
    '[1,0]<stdout>:#                                                              out-of-place                       in-place\n'
    '[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n'
    '[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)\n'
    '[1,0]<stdout>:       16384           256     float    none      -1    28.43    0.58    0.54       0    27.90    0.59    0.55       0\n'
    '[1,0]<stdout>:     1048576         16384     float    none      -1h200-00:2200:2290 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n'
    '[1,0]<stdout>:h200-00:2200:2290 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n'
    '[1,0]<stdout>:    61.87   16.95   15.89       0    60.45   17.35   16.26       0\n'
    '[1,0]<stdout>:  1073741824      16777216     float    none      -1\n'
    '[1,0]<stdout>:h200-01:2208:2301 [0] transport/net_ib.cc:2183 NCCL WARN NET/IB : port error\n'
    "[1,0]<stdout>:  2751.30  390.26  365.87       0[2025-11-03 14:05:09] h200-01:2208:2301 [0] NCCL INFO NET/IB : GDR 1\n"
    '[1,0]<stdout>:  2747.00  390.88  366.45       0\n'
    '[1,0]<stdout>: 17179869184     268435456     float    none      -1  43712.5  393.02  368.45       0  43698.1  393.15  368.57       0\n'
    '[1,0]<stdout>:# Out of bounds values : 0 OK\n'
    '[1,0]<stdout>:# Avg bus bandwidth    : 187.793\n'
    '[1,0]<stdout>:#\n'
    '[1,0]<stdout>:# Collective test concluded: all_gather_perf\n'
    '\n'
)


# --- fixtures: real published logs --------------------------------------------

def test_gh200_2_17_fixture():
    parsed = parse_nccl_tests(fixture("gh200-2node-8gpu-slingshot-cxi-2.17.1-cscs"))
    assert parsed["collective"] == "all_reduce_perf"
    assert parsed["version"] is None
    assert parsed["ranks"] == 8
    assert parsed["avg_busbw"] == 19.7866
    assert parsed["max_busbw"] == 123.11
    assert parsed["wrong"] == 0
    assert parsed["out_of_bounds"] == 0
    assert parsed["warnings"] == []
    assert len(parsed["rows"]) == 25
    assert [r["size"] for r in parsed["rows"]][:3] == [8, 16, 32]
    assert parsed["rows"][-1]["size"] == 134217728
    assert row(parsed, 1048576) == {
        "size": 1048576, "count": 262144, "type": "float", "redop": "sum", "root": None,
        "oop_time_us": 164.3, "oop_algbw": 6.38, "oop_busbw": 11.17, "oop_wrong": 0,
        "ip_time_us": 187.7, "ip_algbw": 5.59, "ip_busbw": 9.77, "ip_wrong": 0,
    }
    assert row(parsed, 524288)["ip_time_us"] == 349.6
    assert row(parsed, 524288)["ip_busbw"] == 2.62
    assert row(parsed, 134217728)["oop_time_us"] == 1916.4
    assert row(parsed, 134217728)["ip_busbw"] == 123.11


def test_h100_a3mega_classic_fixture():
    parsed = parse_nccl_tests(fixture("h100-a3mega-2node-16gpu-gcp-ztan"))
    assert parsed["collective"] is None
    assert parsed["ranks"] == 16
    assert parsed["avg_busbw"] == 70.742
    assert parsed["max_busbw"] == 338.82
    assert parsed["wrong"] == 0
    assert len(parsed["rows"]) == 31
    assert parsed["rows"][0]["size"] == 8
    assert parsed["rows"][-1]["size"] == 8589934592
    assert parsed["rows"][-1]["count"] == 2147483648
    big = row(parsed, 2147483648)
    assert (big["oop_time_us"], big["oop_busbw"], big["ip_time_us"], big["ip_busbw"]) == (12646.0, 318.40, 12641.0, 318.52)
    assert row(parsed, 1024)["oop_time_us"] == 147.1
    assert all(r["root"] is None and r["redop"] == "sum" and r["type"] == "float" for r in parsed["rows"])


def test_fixture_with_crlf_and_blank_lines():
    text = fixture("gh200-2node-8gpu-slingshot-cxi-2.17.1-cscs").replace("\n", "\r\n\r\n")
    parsed = parse_nccl_tests(text)
    assert len(parsed["rows"]) == 25
    assert parsed["avg_busbw"] == 19.7866


def test_fixture_that_lost_its_comment_marks():
    # Pasted into markdown, header lines can lose their leading "# ".
    text = "\n".join(line[2:] if line.startswith("# ") else line
                     for line in fixture("h100-a3mega-2node-16gpu-gcp-ztan").splitlines())
    parsed = parse_nccl_tests(text)
    assert len(parsed["rows"]) == 31
    assert parsed["ranks"] == 16
    assert parsed["avg_busbw"] == 70.742


def test_fixture_with_srun_labels():
    text = "\n".join("0: " + line for line in fixture("gh200-2node-8gpu-slingshot-cxi-2.17.1-cscs").splitlines())
    parsed = parse_nccl_tests(text)
    assert len(parsed["rows"]) == 25
    assert parsed["ranks"] == 8


@pytest.mark.parametrize("prefix", [
    "2025-04-02T17:21:09.513702113Z ",  # kubectl logs --timestamps
    "[3] ",                             # Intel MPI -prepend-rank
    "[1,0]<stderr>:",                   # Open MPI --tag-output (2>&1)
])
def test_fixture_with_line_prefixes(prefix):
    text = "\n".join(prefix + line for line in fixture("h100-a3mega-2node-16gpu-gcp-ztan").splitlines())
    parsed = parse_nccl_tests(text)
    assert len(parsed["rows"]) == 31
    assert parsed["ranks"] == 16
    assert parsed["avg_busbw"] == 70.742


# --- synthetic samples ---------------------------------------------------------

def test_classic_broadcast_root_column():
    parsed = parse_nccl_tests(CLASSIC_BROADCAST)
    assert parsed["ranks"] == 4
    assert [r["size"] for r in parsed["rows"]] == [8, 1024, 1048576, 1073741824]
    assert all(r["root"] == 0 and r["redop"] == "none" for r in parsed["rows"])
    assert row(parsed, 1073741824)["oop_time_us"] == 4420.7
    assert parsed["max_busbw"] == 243.03
    assert parsed["avg_busbw"] == 68.2813
    assert evaluate_nccl_result(parsed, min_avg_busbw=60, min_max_busbw=240) == []


def test_classic_reduce_with_wrong_elements():
    parsed = parse_nccl_tests(CLASSIC_REDUCE_WRONG)
    assert row(parsed, 2097152)["oop_wrong"] == 3
    assert row(parsed, 2097152)["ip_wrong"] == 0
    assert row(parsed, 33554432)["ip_wrong"] == 12
    assert row(parsed, 33554432)["root"] == 3
    assert row(parsed, 33554432)["type"] == "half"
    assert row(parsed, 33554432)["redop"] == "prod"
    assert parsed["wrong"] == 15
    assert parsed["out_of_bounds"] == 2
    failures = evaluate_nccl_result(parsed)
    assert failures == [
        "15 wrong elements reported (#wrong) at sizes 2097152, 33554432",
        "2 out of bounds values reported",
    ]


def test_classic_without_validation():
    parsed = parse_nccl_tests(CLASSIC_NO_VALIDATION)
    assert [(r["oop_wrong"], r["ip_wrong"]) for r in parsed["rows"]] == [(None, None), (None, None)]
    assert parsed["wrong"] == 0
    assert parsed["ranks"] == 2
    assert evaluate_nccl_result(parsed) == []


def test_2_18_all_gather():
    parsed = parse_nccl_tests(V218_ALL_GATHER)
    assert parsed["version"] == "2.18.3"
    assert parsed["collective"] == "all_gather_perf"
    assert parsed["ranks"] == 16
    assert len(parsed["rows"]) == 4
    assert all(r["redop"] == "none" and r["root"] is None for r in parsed["rows"])
    last = row(parsed, 17179869184)
    assert (last["count"], last["oop_time_us"], last["oop_busbw"], last["ip_busbw"]) == (268435456, 43712.5, 368.45, 368.57)
    assert row(parsed, 1073741824)["oop_time_us"] == 2751.3
    assert parsed["max_busbw"] == 368.57
    assert parsed["avg_busbw"] == 187.793


def test_2_18_interleaved_nccl_debug_and_mpi_tags():
    clean = parse_nccl_tests(V218_ALL_GATHER)
    parsed = parse_nccl_tests(V218_ALL_GATHER_INTERLEAVED)
    assert parsed["rows"] == clean["rows"]
    assert parsed["ranks"] == 16
    assert parsed["avg_busbw"] == 187.793
    assert parsed["warnings"] == []


def test_2_18_timestamp_column():
    parsed = parse_nccl_tests(V218_ALLTOALL_TIMESTAMPS)
    assert [r["size"] for r in parsed["rows"]] == [1048576, 1073741824]
    assert row(parsed, 1073741824)["ip_busbw"] == 640.47
    assert row(parsed, 1073741824)["type"] == "bfloat16"
    assert parsed["max_busbw"] == 640.47


def test_2_18_hypercube_empty_redop():
    parsed = parse_nccl_tests(V218_HYPERCUBE)
    assert [(r["redop"], r["root"]) for r in parsed["rows"]] == [("none", None), ("none", None)]
    assert row(parsed, 67108864)["oop_time_us"] == 451.8


def test_2_11_layout_without_redop_and_root():
    parsed = parse_nccl_tests(V211_ALL_GATHER)
    assert parsed["ranks"] == 8
    first = row(parsed, 1024)
    assert (first["type"], first["redop"], first["root"]) == ("float", "none", None)
    assert (first["oop_wrong"], first["oop_error"], first["ip_error"]) == (None, 0.0, 0.0)
    assert parsed["max_busbw"] == 84.41
    assert parsed["avg_busbw"] == 42.1375


def test_2_19_per_iteration_columns():
    # writeResultHeader() with per_iter_timing, and writeBenchmarkLineBody() followed by
    # writePerIterReport() ("  %7s  %7s  %7s  %7s") for each placement, as of 2.19.
    header = ("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s"
              "  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s \n") % (
        "size", "count", "type", "redop", "root",
        "time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
        "time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
    rows = ""
    for size, count in ((1048576, 262144), (2097152, 524288)):
        rows += "%12li  %12li  %8s  %6s  %6s" % (size, count, "float", "sum", "%6i" % -1)
        rows += "  %7s  %6s  %6s  %6g  %7s  %7s  %7s  %7s" % ("61.87", "16.95", "29.66", 0, "60.12", "70.03", "69.80", "3.41")
        rows += "  %7s  %6s  %6s  %6g  %7s  %7s  %7s  %7s\n" % ("60.45", "17.35", "30.36", 0, "59.80", "66.10", "65.95", "2.88")
    text = ("# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903\n#\n" + header + rows
            + "# %-20s : %d %s\n# %-20s : %g %s\n" % ("Out of bounds values", 0, "OK", "Avg bus bandwidth", 30.01, ""))
    parsed = parse_nccl_tests(text)
    assert parsed["version"] == "2.19.6"
    assert [r["size"] for r in parsed["rows"]] == [1048576, 2097152]
    assert (parsed["rows"][0]["oop_busbw"], parsed["rows"][0]["ip_busbw"], parsed["rows"][0]["ip_time_us"]) == (29.66, 30.36, 60.45)
    assert parsed["max_busbw"] == 30.36
    assert parsed["ranks"] == 0


def test_stray_rank_words_are_not_ranks():
    text = "Rank 3 finished warmup\n" + CLASSIC_BROADCAST
    assert parse_nccl_tests(text)["ranks"] == 4


def test_2_18_large_values_in_exponent_form():
    # getFloatStr() switches to "%7.1e" when a time no longer fits in 7 characters,
    # and "%6g" prints large #wrong counts with an exponent.
    text = V218_HYPERCUBE.replace("   451.80  148.54  129.97       0",
                                  "  1.2e+07  148.54  129.97   2e+06")
    parsed = parse_nccl_tests(text)
    assert row(parsed, 67108864)["oop_time_us"] == 1.2e7
    assert row(parsed, 67108864)["oop_wrong"] == 2000000
    assert parsed["wrong"] == 2000000


def test_row_without_header_uses_modern_layout():
    text = "\n".join(line for line in CLASSIC_BROADCAST.splitlines() if not line.startswith("#   ")
                     and "size" not in line and "(B)" not in line)
    parsed = parse_nccl_tests(text)
    assert len(parsed["rows"]) == 4


def test_incomplete_row_is_dropped_with_a_warning():
    lines = CLASSIC_BROADCAST.splitlines()
    index = next(i for i, line in enumerate(lines) if line.strip().startswith("1024 "))
    lines[index] = lines[index][:60]
    parsed = parse_nccl_tests("\n".join(lines))
    assert [r["size"] for r in parsed["rows"]] == [8, 1048576, 1073741824]
    assert parsed["warnings"] == ["line %d: incomplete result row dropped" % (index + 1)]


# --- evaluate_nccl_result ----------------------------------------------------

def test_evaluate_thresholds():
    parsed = parse_nccl_tests(fixture("h100-a3mega-2node-16gpu-gcp-ztan"))
    assert evaluate_nccl_result(parsed, min_avg_busbw=70, min_max_busbw=338) == []
    assert evaluate_nccl_result(parsed, min_avg_busbw=80, min_max_busbw=400) == [
        "average bus bandwidth 70.742 GB/s is below the required 80 GB/s",
        "peak bus bandwidth 338.82 GB/s is below the required 400 GB/s",
    ]


def test_evaluate_nan_average_fails_a_threshold():
    parsed = parse_nccl_tests(CLASSIC_BROADCAST.replace("68.2813", "-nan"))
    assert math.isnan(parsed["avg_busbw"])
    assert evaluate_nccl_result(parsed) == []
    assert evaluate_nccl_result(parsed, min_avg_busbw=1) == [
        "average bus bandwidth is not available, required >= 1 GB/s"]


# --- not nccl-tests output --------------------------------------------------------

@pytest.mark.parametrize("text", [
    "",
    "\n\n   \n",
    "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>\n",
    "total 8\ndrwxr-xr-x 2 root root 4096 Jan  1 00:00 .\n",
    "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n",
    "# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20\n#\n# Using devices\n",
])
def test_garbage_raises(text):
    with pytest.raises(ValueError):
        parse_nccl_tests(text)


def test_truncated_run_raises():
    text = CLASSIC_BROADCAST.split("# Out of bounds", maxsplit=1)[0]
    with pytest.raises(ValueError, match="did not finish"):
        parse_nccl_tests(text)


def test_two_runs_in_one_text_raise():
    with pytest.raises(ValueError, match="several nccl-tests runs"):
        parse_nccl_tests(CLASSIC_BROADCAST + CLASSIC_REDUCE_WRONG)


def test_bytes_raise():
    with pytest.raises(ValueError, match="must be text"):
        parse_nccl_tests(b"# Avg bus bandwidth : 1\n")


def test_malformed_cell_raises():
    with pytest.raises(ValueError, match="not an integer"):
        parse_nccl_tests(CLASSIC_BROADCAST.replace("     float    none       0     9.81",
                                                   "     float    none      xx     9.81"))


# Thresholds and values must be finite (issue 15, item 17).
@pytest.mark.parametrize("limit", [float("nan"), float("inf"), float("-inf"), "70", True])
def test_non_finite_or_non_number_threshold_is_refused(limit):
    parsed = {"avg_busbw": 70.0, "max_busbw": 300.0, "rows": [], "wrong": 0}
    with pytest.raises(ValueError, match="min_avg_busbw must be a finite number"):
        evaluate_nccl_result(parsed, min_avg_busbw=limit)
    with pytest.raises(ValueError, match="min_max_busbw must be a finite number"):
        evaluate_nccl_result(parsed, min_max_busbw=limit)


def test_infinite_measurement_fails():
    parsed = {"avg_busbw": float("inf"), "max_busbw": float("inf"), "rows": [], "wrong": 0}
    failures = evaluate_nccl_result(parsed, min_avg_busbw=60, min_max_busbw=300)
    assert failures == ["average bus bandwidth inf GB/s is not a measurement, required >= 60 GB/s",
                        "peak bus bandwidth inf GB/s is not a measurement, required >= 300 GB/s"]


def test_infinite_row_busbw_is_not_the_peak():
    parsed = parse_nccl_tests(fixture("h100-a3mega-2node-16gpu-gcp-ztan").replace("338.82", "inf", 1))
    assert math.isfinite(parsed["max_busbw"])
