#!/usr/bin/env bash
# Read-only check of the nvidia_driver and cuda_toolkit roles on a real GPU host
# (Ubuntu 24.04, driver 580.159.04, CUDA 13.0 when written). Everything runs in check
# mode over a local connection; the host's package, apt and unit state is snapshotted
# before and after and must not change.
#
#   tests/gpu/check_driver_roles.sh WHEELS_DIR [OUT_DIR]
#
# WHEELS_DIR holds the `ansible` wheel and its dependencies (pip download ansible), as the
# host has no internet: Ansible is installed into a throwaway venv with
# pip --no-index --find-links. Knobs (environment):
#   GPU_CHECK_REAL_DRIVER   the host's driver (default: from nvidia-smi)
#   GPU_CHECK_OTHER_DRIVER  another lock, expected to show as drift (default 580.95.05)
#   GPU_CHECK_CUDA_VERSIONS toolkits, comma-separated (default 13.0)
#   GPU_CHECK_TOO_NEW_CUDA  a toolkit the real driver cannot run (default 13.2, needs 595.45.04)
#   GPU_CHECK_DRIVER_SOURCE cuda_repo | distro (default cuda_repo)
#   GPU_CHECK_FABRIC_MANAGER true on NVSwitch systems (default false)
#   GPU_CHECK_CUDNN         none | 8 | 9 (default none)
set -euo pipefail

WHEELS=${1:?usage: $0 WHEELS_DIR [OUT_DIR]}
OUT=${2:-${OUT:-$PWD/gpu-check-output}}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --no-index --find-links "$WHEELS" ansible
mkdir -p "$WORK/collections/ansible_collections/gpucloud"
ln -s "$ROOT" "$WORK/collections/ansible_collections/gpucloud/fleet"

export ANSIBLE_COLLECTIONS_PATH="$WORK/collections"
export ANSIBLE_CONFIG="$ROOT/ansible.cfg"
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
export GPU_CHECK_CUDA_VERSIONS=${GPU_CHECK_CUDA_VERSIONS:-13.0}
export GPU_CHECK_DRIVER_SOURCE=${GPU_CHECK_DRIVER_SOURCE:-cuda_repo}
export GPU_CHECK_FABRIC_MANAGER=${GPU_CHECK_FABRIC_MANAGER:-false}
export GPU_CHECK_CUDNN=${GPU_CHECK_CUDNN:-none}
REAL=${GPU_CHECK_REAL_DRIVER:-$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)}
OTHER=${GPU_CHECK_OTHER_DRIVER:-580.95.05}
TOO_NEW=${GPU_CHECK_TOO_NEW_CUDA:-13.2}

snapshot() {
  { dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' 2>/dev/null || rpm -qa | sort
    apt-mark showhold 2>/dev/null || true
    ls -la --time-style=full-iso /etc/apt/sources.list.d /etc/apt/preferences.d /etc/apt/keyrings \
      /etc/profile.d /etc/ld.so.conf.d /etc/modprobe.d 2>/dev/null || true
    systemctl is-enabled nvidia-persistenced nvidia-fabricmanager 2>/dev/null || true
    systemctl is-active nvidia-persistenced nvidia-fabricmanager 2>/dev/null || true
    cat /proc/driver/nvidia/version
  } > "$1"
}

run() {  # name driver_lock cuda_versions -> log in $OUT/<name>.log, rc in $OUT/<name>.rc
  local name=$1 rc=0
  GPU_CHECK_DRIVER_VERSION=$2 GPU_CHECK_CUDA_VERSIONS=$3 \
    "$WORK/venv/bin/ansible-playbook" -i localhost, -c local --check --diff \
    "$ROOT/tests/gpu/check_driver_roles.yml" > "$OUT/$name.log" 2>&1 || rc=$?
  echo "$rc" > "$OUT/$name.rc"
  echo "== $name (lock $2, CUDA $3): rc=$rc; $(grep -E '^localhost' "$OUT/$name.log" | tail -1)"
  grep -E '^(changed|TASK)|DRIFT|REBOOT|SKIPPED|Would' "$OUT/$name.log" | grep -B1 -E '^changed|DRIFT|REBOOT|SKIPPED|Would' \
    > "$OUT/$name.changes" || true
}

{ dpkg -l 'nvidia*' 'libnvidia*' 'cuda*' 'libcudnn*' 2>/dev/null | grep -E '^(ii|hi)' || true; } > "$OUT/packages-before.txt"
snapshot "$OUT/state-before.txt"

run real-lock "$REAL" "$GPU_CHECK_CUDA_VERSIONS"
run other-lock "$OTHER" "$GPU_CHECK_CUDA_VERSIONS"
run too-new-cuda "$REAL" "$TOO_NEW"

snapshot "$OUT/state-after.txt"
status=0
if ! diff -u "$OUT/state-before.txt" "$OUT/state-after.txt" > "$OUT/state.diff"; then
  echo "FAIL: the host changed during check mode:"; cat "$OUT/state.diff"; status=1
fi
# Expectations: the real lock reports no drift, the other lock reports drift and
# changes, the too-new toolkit is refused naming both versions.
[[ $(cat "$OUT/real-lock.rc") == 0 ]] || { echo "FAIL: real-lock run failed"; status=1; }
grep -q 'DRIFT' "$OUT/real-lock.log" && { echo "FAIL: drift reported with the host's own version"; status=1; }
grep -qE '^localhost .*changed=0 ' "$OUT/real-lock.log" || echo "NOTE: real-lock run reports changes; see $OUT/real-lock.changes"
grep -q "DRIFT: .* $REAL is" "$OUT/other-lock.log" || { echo "FAIL: other-lock run did not report drift"; status=1; }
grep -qE '^localhost .*changed=[1-9]' "$OUT/other-lock.log" || { echo "FAIL: other-lock run reports no change"; status=1; }
if [[ $(cat "$OUT/too-new-cuda.rc") == 0 ]] || ! grep -q "CUDA $TOO_NEW needs NVIDIA driver" "$OUT/too-new-cuda.log"; then
  echo "FAIL: CUDA $TOO_NEW was not refused"; status=1
fi
echo "outputs in $OUT"; exit "$status"
