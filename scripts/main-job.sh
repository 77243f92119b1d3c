#!/usr/bin/env bash
# The main job (README's first command): bring the container lab up from nothing and
# provision it with playbooks/site.yml, then prove it with playbooks/verify.yml.
# Usage: scripts/main-job.sh up | down
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$GPUCLOUD_ROOT"

FLEET=main
case "${1:-up}" in
  up)
    scripts/setup.sh
    scripts/lab.py create "$FLEET" --spec inventories/lab/fleet.json \
      --inventory inventories/lab/hosts.generated.yml
    if [[ ! -f playbooks/site.yml ]]; then
      echo "main job: the lab fleet is up (scripts/lab.py list);"
      echo "main job: playbooks/site.yml does not exist yet, so nothing was provisioned."
      exit 0
    fi
    ansible-playbook -i inventories/lab playbooks/site.yml
    ansible-playbook -i inventories/lab playbooks/verify.yml
    ;;
  down)
    scripts/lab.py destroy "$FLEET"
    ;;
  *)
    echo "main-job.sh: unknown action '$1' (allowed: up, down)" >&2
    exit 2
    ;;
esac
