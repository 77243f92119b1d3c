#!/usr/bin/env bash
# The main job (README's first command): bring the container lab up from nothing,
# provision it with playbooks/site.yml, prove it with playbooks/verify.yml, and print the
# fleet summary. The lab nodes have no GPU, and the summary says so.
# Usage: scripts/main-job.sh up | down
#   up    lab fleet "main" from inventories/lab-fleet.json (3 GPU-less nodes: Ubuntu 24.04 and
#         22.04 with Ubuntu's real server driver packages, Debian 12; and a Tang server), reached
#         over SSH, inventory inventories/lab, reports in lab-artifacts/
#   down  detach the lab's loop devices, remove its containers and network
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUCLOUD_ROOT"

FLEET=main
INVENTORY=inventories/lab
export GPUCLOUD_REPORT_DIR="$GPUCLOUD_ROOT/lab-artifacts"

step() {
  local t0=$SECONDS
  echo
  echo "== main job: $1"
  shift
  "$@"
  timings+=("$(printf '%-40s %4d s' "$current" $((SECONDS - t0)))")
}
declare -a timings=()

up() {
  local start=$SECONDS
  current="setup (packages, venv, images)"; step "$current" scripts/setup.sh
  # Over SSH (pipelining, ControlPersist), as on real hosts: about twice as fast as the
  # podman connection, and the firewall role's controller rule is exercised for real.
  current="lab fleet up"; step "$current" scripts/lab.py create "$FLEET" --spec inventories/lab-fleet.json \
    --transport ssh --inventory "$INVENTORY/hosts.generated.yml"
  current="lab data disks (loop devices)"; step "$current" ansible-playbook -i "$INVENTORY" playbooks/lab/prepare.yml
  rm -rf "$GPUCLOUD_REPORT_DIR"
  mkdir -p "$GPUCLOUD_REPORT_DIR"
  current="site.yml"; step "$current" ansible-playbook -i "$INVENTORY" playbooks/site.yml
  current="verify.yml"; step "$current" ansible-playbook -i "$INVENTORY" playbooks/verify.yml
  echo
  echo "== main job: fleet summary (also in $GPUCLOUD_REPORT_DIR/)"
  cat "$GPUCLOUD_REPORT_DIR/site-summary.md"
  echo
  cat "$GPUCLOUD_REPORT_DIR/fleet.md"
  echo
  echo "The lab nodes have no GPU: their profile (lab_gpu) expects gpu_count 0, so the GPU,"
  echo "driver-load, topology and burn-in checks are not applicable there and prove nothing"
  echo "about GPUs. What the lab does prove: the rollout order, batches, preflight, the roles'"
  echo "changes on Ubuntu 24.04 and 22.04 (Ubuntu's real server driver packages, whose nvidia-smi"
  echo "cannot reach a driver in a container) and Debian 12, the Tang-bound data disks and the firewall."
  echo
  echo "== main job: timings"
  for t in "${timings[@]}"; do echo "  $t"; done
  echo "  total: $((SECONDS - start)) s"
  echo "Tear the lab down with: make lab-down"
}

down() {
  if [[ -n "$(scripts/lab.py list "$FLEET")" ]]; then
    { echo "---"; scripts/lab.py inventory "$FLEET"; } > "$INVENTORY/hosts.generated.yml"
    ansible-playbook -i "$INVENTORY" playbooks/lab/cleanup.yml || echo "main job: loop cleanup inside the nodes failed; trying from the host"
  fi
  # Loop devices a crashed run left behind (they belong to the host's kernel). Only this
  # fleet's nodes' files: molecule/site uses the same prepare step with its own node names.
  local dev node
  for node in $(python3 -c 'import json,sys; print(" ".join(n["name"] for n in json.load(open(sys.argv[1]))))' inventories/lab-fleet.json); do
    for dev in $(losetup --noheadings --output NAME,BACK-FILE 2>/dev/null |
      awk -v f="/var/tmp/gpucloud-lab-$node-data.img" '$2 == f {print $1}'); do
      losetup --detach "$dev" && echo "main job: detached $dev ($node)"
    done
  done
  scripts/lab.py destroy "$FLEET"
  rm -f "$INVENTORY/hosts.generated.yml"
}

case "${1:-up}" in
  up) up ;;
  down) down ;;
  *)
    echo "main-job.sh: unknown action '$1' (allowed: up, down)" >&2
    exit 2
    ;;
esac
