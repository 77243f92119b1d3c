# shellcheck shell=bash
# Environment shared by every entry point (Makefile, .ci/run, bench/, the lab).
# Source it; it only exports variables and never changes the machine.
GPUCLOUD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GPUCLOUD_ROOT
export GPUCLOUD_VENV="${GPUCLOUD_VENV:-$GPUCLOUD_ROOT/.venv}"
export GPUCLOUD_CACHE="$GPUCLOUD_ROOT/.cache"
# The repository is the collection: it is found by Ansible through a symlink
# $GPUCLOUD_CACHE/collections/ansible_collections/gpucloud/fleet -> repository root.
export ANSIBLE_COLLECTIONS_PATH="$GPUCLOUD_CACHE/collections"
export CONTAINERS_CONF="$GPUCLOUD_ROOT/scripts/containers.conf"
export GPUCLOUD_APT_CACHE="${GPUCLOUD_APT_CACHE:-/var/tmp/gpucloud-apt-cache}"
export GPUCLOUD_IMAGE_PREFIX="${GPUCLOUD_IMAGE_PREFIX:-localhost/gpucloud}"
export ANSIBLE_CONFIG="$GPUCLOUD_ROOT/ansible.cfg"
export ANSIBLE_FORCE_COLOR="${ANSIBLE_FORCE_COLOR:-0}"
export PY_COLORS="${PY_COLORS:-0}"
case ":$PATH:" in
  *":$GPUCLOUD_VENV/bin:"*) ;;
  *) export PATH="$GPUCLOUD_VENV/bin:$PATH" ;;
esac
