# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Short GPU burn-in for the node_acceptance role (verify.yml): bf16 GEMM throughput and device memory copy bandwidth.

Runs on every visible GPU in turn (PyTorch), prints one JSON object:
{"gpus": [{index, name, bf16_gemm_tflops, d2d_copy_GBps_rw}], "bf16_gemm_tflops": <min>,
 "d2d_copy_GBps_rw": <min>}. The fleet minimum is what acceptance compares, so one slow
GPU fails the node. Copy bandwidth counts bytes read plus bytes written, as the H200
capture in tests/fixtures does (4239 GB/s on a healthy H200).
Exit 2 with a message on stderr when torch or a GPU is missing.
"""

import argparse
import json
import sys
import time


def timed(torch, fn, seconds, minimum=5):
    """Seconds per call of fn, averaged over about SECONDS of calls after a warm-up."""
    for _warmup in range(3):
        fn()
    torch.cuda.synchronize()
    calls, start = 0, time.perf_counter()
    while calls < minimum or time.perf_counter() - start < seconds:
        fn()
        calls += 1
        if calls % 10 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls


def measure(torch, index, seconds, size, copy_bytes):
    device = torch.device("cuda", index)
    with torch.cuda.device(device):
        a = torch.randn(size, size, dtype=torch.bfloat16, device=device)
        b = torch.randn(size, size, dtype=torch.bfloat16, device=device)
        gemm = timed(torch, lambda: torch.matmul(a, b), seconds / 2)
        del a, b
        n = copy_bytes // 4
        src = torch.empty(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        copy = timed(torch, lambda: dst.copy_(src), seconds / 2)
        del src, dst
        torch.cuda.empty_cache()
    return {
        "index": index,
        "name": torch.cuda.get_device_name(index),
        "bf16_gemm_tflops": round(2.0 * size ** 3 / gemm / 1e12, 1),
        "d2d_copy_GBps_rw": round(2.0 * n * 4 / copy / 1e9, 1),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="time per GPU, split between the two tests")
    parser.add_argument("--size", type=int, default=8192, help="GEMM size (N for N x N x N)")
    parser.add_argument("--copy-gib", type=float, default=4.0, help="bytes copied per call, GiB")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        sys.stderr.write("burn-in needs PyTorch (python3 -c 'import torch' fails on this host)\n")
        return 2
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        sys.stderr.write("burn-in: torch sees no CUDA GPU\n")
        return 2
    gpus = [measure(torch, i, args.seconds, args.size, int(args.copy_gib * 2 ** 30))
            for i in range(torch.cuda.device_count())]
    print(json.dumps({
        "gpus": gpus,
        "bf16_gemm_tflops": min(g["bf16_gemm_tflops"] for g in gpus),
        "d2d_copy_GBps_rw": min(g["d2d_copy_GBps_rw"] for g in gpus),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
