#!/bin/bash
# Build the nvsim stand-in NVIDIA driver packages (550.163.01 and 580.95.05) and a signed
# flat apt repository in OUTDIR (gpucloud lab stand-in, not NVIDIA software). See README.md.
set -euo pipefail
if [ "$#" -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
exec python3 "$(dirname "$0")/build_repo.py" "$1"
