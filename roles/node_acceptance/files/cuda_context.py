#!/usr/bin/env python3
# Copyright (c) 2026, gpucloud.fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Create and drop a CUDA context on every GPU; print {"error", "devices": [{index, error}]} as JSON.

Standard library only (ctypes over libcuda.so.1, the driver API), so it runs on a node
without any toolkit. On an NVSwitch system whose Fabric Manager is not running, cuInit or
the context fails with CUDA_ERROR_SYSTEM_NOT_READY (802). Judged by
plugins/plugin_utils/acceptance.py (parse_cuda_context); always exits 0 when it printed JSON.
"""

import ctypes
import json


def _error(cuda, code):
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    cuda.cuGetErrorName(code, ctypes.byref(name))
    cuda.cuGetErrorString(code, ctypes.byref(text))
    return "%s (%d): %s" % ((name.value or b"CUDA error").decode(), code, (text.value or b"").decode())


def main():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {"error": "libcuda.so.1 not found: %s" % exc, "devices": []}
    code = cuda.cuInit(0)
    if code:
        return {"error": "cuInit: %s" % _error(cuda, code), "devices": []}
    count = ctypes.c_int()
    code = cuda.cuDeviceGetCount(ctypes.byref(count))
    if code:
        return {"error": "cuDeviceGetCount: %s" % _error(cuda, code), "devices": []}
    devices = []
    for index in range(count.value):
        device, context = ctypes.c_int(), ctypes.c_void_p()
        code = cuda.cuDeviceGet(ctypes.byref(device), index)
        if not code:
            code = cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)
            if not code:
                cuda.cuDevicePrimaryCtxRelease(device)
        devices.append({"index": index, "error": _error(cuda, code) if code else None})
    return {"error": None, "devices": devices}


if __name__ == "__main__":
    print(json.dumps(main()))
