#!/usr/bin/env bash
# Build the lab's base images locally (no registry is reachable): debootstrap a minimal
# Debian with python3 + systemd + iproute2 + sshd, then `podman import` it.
# An image is rebuilt only when it is missing or its recipe (this file) changed: the
# recipe's hash is stored in the image label gpucloud.recipe.
# Usage: scripts/build-images.sh [debian12] [debian13]   (default: both)
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MIRROR="${GPUCLOUD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="python3,python3-apt,systemd,systemd-sysv,iproute2,ca-certificates,procps,kmod,openssh-server"
RECIPE=$( { cat "${BASH_SOURCE[0]}"; echo "$MIRROR"; } | sha256sum | cut -c1-16)

suite_of() {
  case "$1" in
    debian12) echo bookworm ;;
    debian13) echo trixie ;;
    *) echo "build-images.sh: unknown image '$1' (allowed: debian12, debian13)" >&2; return 2 ;;
  esac
}

build() {
  local name=$1 suite image dir
  suite=$(suite_of "$name")
  image="$GPUCLOUD_IMAGE_PREFIX/$name:latest"
  if podman image exists "$image" &&
     [[ $(podman image inspect --format '{{ index .Labels "gpucloud.recipe" }}' "$image") == "$RECIPE" ]]; then
    echo "images: $image present"
    return 0
  fi
  echo "images: building $image from Debian $suite (debootstrap, about a minute)"
  dir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucloud-rootfs.XXXXXX")
  trap 'rm -rf "$dir"' RETURN
  debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$dir" "$MIRROR" >"$dir.log" 2>&1 || {
    tail -20 "$dir.log" >&2; echo "images: debootstrap $suite failed (log: $dir.log)" >&2; return 1; }
  rm -f "$dir.log"
  # Every component: the NVIDIA driver packages live in non-free.
  rm -f "$dir/etc/apt/sources.list"
  cat >"$dir/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $MIRROR
Suites: $suite $suite-updates
Components: main contrib non-free non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  # Containers get a machine-id at first boot; units that cannot work in a container
  # are masked so that `systemctl is-system-running` reports `running`, not `degraded`.
  : >"$dir/etc/machine-id"
  for unit in systemd-remount-fs.service systemd-firstboot.service getty.target \
              console-getty.service systemd-udevd.service systemd-udev-trigger.service \
              systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount \
              sys-kernel-tracing.mount; do
    ln -sf /dev/null "$dir/etc/systemd/system/$unit"
  done
  # sshd (scripts/lab.py --transport ssh): no host keys in the image, so that every node
  # makes its own at first boot, before sshd's config test.
  rm -f "$dir"/etc/ssh/ssh_host_*
  mkdir -p "$dir/etc/systemd/system/ssh.service.d"
  cat >"$dir/etc/systemd/system/ssh.service.d/lab-host-keys.conf" <<'UNIT'
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
UNIT
  rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
  tar -C "$dir" -c . | podman import --quiet \
    --change 'CMD ["/sbin/init"]' \
    --change "LABEL gpucloud.recipe=$RECIPE" \
    --change "LABEL gpucloud.suite=$suite" \
    - "$image" >/dev/null
  echo "images: built $image"
}

command -v podman >/dev/null || { echo "build-images.sh: podman is not installed (run scripts/setup.sh as root)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build-images.sh: debootstrap is not installed (run scripts/setup.sh as root)" >&2; exit 1; }
targets=("$@")
((${#targets[@]})) || targets=(debian12 debian13)
for t in "${targets[@]}"; do build "$t"; done
