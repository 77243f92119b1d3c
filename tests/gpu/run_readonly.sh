#!/usr/bin/env bash
# Run gpucloud.fleet's NVIDIA modules (nvidia_gpu_facts, nvidia_topology,
# nvidia_persistence) on a real GPU host, read-only, and print what they return.
#
# Nothing on the GPUs changes: the playbook (tests/gpu/readonly.yml) runs with --check,
# and the persistence tasks also carry check_mode: true themselves. The only things
# written are a virtualenv, a collection symlink and a log, all under $WORKDIR.
#
# The GPU host needs no internet and no Ansible. On a machine with internet, for the
# GPU host's Python (here 3.12, as on Ubuntu 24.04), gather the wheels:
#
#   pip download --dest wheels --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
#       "ansible-core==2.19.*" "nvidia-ml-py"
#
# copy this repository (the collection) and the wheels folder to the GPU host, then:
#
#   tests/gpu/run_readonly.sh /path/to/wheels            # log in /tmp/gpucloud-readonly
#   WORKDIR=/var/tmp/ro tests/gpu/run_readonly.sh wheels # elsewhere
#
# nvidia-ml-py is optional: without its wheel the NVML source is reported as missing
# and the modules fall back to nvidia-smi. Run as root to see what
# nvidia_persistence would do with systemd; as another user it reports the same plan.
# Exit status: 0 when the playbook ran, non-zero when setup or a read failed.
set -euo pipefail

usage() {
  echo "usage: $0 WHEELS_DIR   (environment: WORKDIR, default /tmp/gpucloud-readonly; PYTHON, default python3)" >&2
  exit 2
}

(($# == 1)) || usage
WHEELS=$(cd "$1" && pwd) || usage
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORKDIR=${WORKDIR:-/tmp/gpucloud-readonly}
PYTHON=${PYTHON:-python3}
VENV="$WORKDIR/venv"
LOG="$WORKDIR/readonly-$(date +%Y%m%dT%H%M%S).log"

mkdir -p "$WORKDIR"
say() { printf '== %s\n' "$*" | tee -a "$LOG"; }

say "GPU host $(hostname), repository $REPO, wheels $WHEELS"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi -L 2>&1 | tee -a "$LOG" || true
else
  say "nvidia-smi not found"
fi

if [[ ! -x "$VENV/bin/ansible-playbook" ]]; then
  say "creating $VENV from $WHEELS (no index)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" ansible-core
fi
if ! "$VENV/bin/python" -c "import pynvml" 2>/dev/null; then
  "$VENV/bin/python" -m pip install --quiet --no-index --find-links "$WHEELS" nvidia-ml-py ||
    say "no nvidia-ml-py wheel in $WHEELS: the NVML source will report the library missing"
fi
"$VENV/bin/ansible" --version | head -1 | tee -a "$LOG"

# The collection is this repository, found as ansible_collections/gpucloud/fleet.
collections="$WORKDIR/collections"
mkdir -p "$collections/ansible_collections/gpucloud"
ln -sfn "$REPO" "$collections/ansible_collections/gpucloud/fleet"

cat >"$WORKDIR/ansible.cfg" <<EOF
[defaults]
collections_path = $collections
interpreter_python = $VENV/bin/python
result_format = yaml
host_key_checking = False
retry_files_enabled = False
EOF

say "running tests/gpu/readonly.yml in check mode"
rc=0
ANSIBLE_CONFIG="$WORKDIR/ansible.cfg" "$VENV/bin/ansible-playbook" \
  -i localhost, -c local --check --diff "$REPO/tests/gpu/readonly.yml" 2>&1 | tee -a "$LOG" || rc=$?
say "done (rc=$rc); full output in $LOG"
exit "$rc"
