#!/usr/bin/env bash
# Build the lab's base images locally (no registry is reachable): debootstrap a minimal
# Debian or Ubuntu with python3 + systemd + iproute2 + sshd, then `podman import` it.
# An image is rebuilt only when it is missing or its recipe (this file and the mirror)
# changed: the recipe's hash is stored in the image label gpucloud.recipe.
# Ubuntu comes from Ubuntu's own archive (GPUCLOUD_UBUNTU_MIRROR). Debian 12 does not
# package Ubuntu's keyring: it is taken from the archive's pool and only the key whose
# fingerprint is written below is kept, so debootstrap and apt trust that key alone.
# An archive that cannot be reached fails the build in one line; GPUCLOUD_UBUNTU=0 leaves
# the Ubuntu images out on purpose (scripts/test.sh then says "Ubuntu: not run").
# Usage: scripts/build-images.sh [debian12] [debian13] [ubuntu2404] [ubuntu2204]
#        (default: all four; the Ubuntu two only unless GPUCLOUD_UBUNTU=0)
set -euo pipefail
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

MIRROR="${GPUCLOUD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
UBUNTU_MIRROR="${GPUCLOUD_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
# "Ubuntu Archive Automatic Signing Key (2018) <ftpmaster@ubuntu.com>": signs the
# InRelease files of jammy and noble (checked with gpgv, 2026-12-03).
UBUNTU_KEY_FPR=F6ECB3762474EDA9D21B7022871920D1991BC93C
UBUNTU_KEYRING_DEB=pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb
PACKAGES="python3,python3-apt,systemd,systemd-sysv,iproute2,ca-certificates,procps,kmod,openssh-server"
SNAPSHOT_TOOL="$GPUCLOUD_ROOT/scripts/ubuntu_snapshot.py"
SNAPSHOT_LOCK="$GPUCLOUD_ROOT/scripts/ubuntu-nvidia-snapshot.lock"
RECIPE=$( { cat "${BASH_SOURCE[0]}" "$SNAPSHOT_TOOL" "$SNAPSHOT_LOCK"; echo "$MIRROR $UBUNTU_MIRROR"; } | sha256sum | cut -c1-16)

suite_of() {
  case "$1" in
    debian12) echo bookworm ;;
    debian13) echo trixie ;;
    ubuntu2404) echo noble ;;
    ubuntu2204) echo jammy ;;
    *) echo "build-images.sh: unknown image '$1' (allowed: debian12, debian13, ubuntu2404, ubuntu2204)" >&2; return 2 ;;
  esac
}

# The keyring debootstrap and apt use for Ubuntu: the one key above, exported from the
# ubuntu-keyring package of the archive's pool after its fingerprint matched.
ubuntu_keyring() {
  local out="$GPUCLOUD_CACHE/ubuntu-keyring/ubuntu-archive-$UBUNTU_KEY_FPR.gpg" tmp
  if [[ -s "$out" ]]; then echo "$out"; return 0; fi
  tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucloud-keyring.XXXXXX")
  if ! curl -fsS --retry 2 --max-time 120 -o "$tmp/keyring.deb" "$UBUNTU_MIRROR/$UBUNTU_KEYRING_DEB" 2>"$tmp/err"; then
    echo "images: Ubuntu's archive $UBUNTU_MIRROR cannot be reached ($(tr '\n' ' ' <"$tmp/err")); set GPUCLOUD_UBUNTU_MIRROR, or GPUCLOUD_UBUNTU=0 to leave Ubuntu out" >&2
    rm -rf "$tmp"; return 1
  fi
  dpkg-deb -x "$tmp/keyring.deb" "$tmp/x"
  mkdir -m 0700 "$tmp/gnupg"
  GNUPGHOME="$tmp/gnupg" gpg --batch --quiet --import "$tmp/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" 2>/dev/null
  if ! GNUPGHOME="$tmp/gnupg" gpg --batch --with-colons --list-keys "$UBUNTU_KEY_FPR" 2>/dev/null |
       awk -F: '$1 == "fpr" {print $10}' | grep -qx "$UBUNTU_KEY_FPR"; then
    echo "images: $UBUNTU_MIRROR/$UBUNTU_KEYRING_DEB does not hold key $UBUNTU_KEY_FPR: refusing to trust it" >&2
    rm -rf "$tmp"; return 1
  fi
  mkdir -p "$(dirname "$out")"
  GNUPGHOME="$tmp/gnupg" gpg --batch --export "$UBUNTU_KEY_FPR" >"$out.tmp"
  mv "$out.tmp" "$out"
  rm -rf "$tmp"
  echo "$out"
}

# A subshell: its EXIT trap removes the root directory whichever way it ends.
build() (
  local name=$1 suite image dir
  suite=$(suite_of "$name")
  image="$GPUCLOUD_IMAGE_PREFIX/$name:latest"
  if podman image exists "$image" &&
     [[ $(podman image inspect --format '{{ index .Labels "gpucloud.recipe" }}' "$image") == "$RECIPE" ]]; then
    echo "images: $image present"
    return 0
  fi
  dir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucloud-rootfs.XXXXXX")
  trap 'rm -rf "$dir"' EXIT
  if [[ $name == ubuntu* ]]; then
    local keyring script=$suite
    keyring=$(ubuntu_keyring) || return 1
    # Debian 12's debootstrap knows jammy but not noble: noble uses the gutsy script, as
    # Debian's own noble symlink does.
    [[ -e /usr/share/debootstrap/scripts/$suite ]] || script=/usr/share/debootstrap/scripts/gutsy
    echo "images: building $image from Ubuntu $suite (debootstrap, about a minute)"
    debootstrap --variant=minbase --keyring="$keyring" --components=main,universe \
      --include="$PACKAGES" "$suite" "$dir" "$UBUNTU_MIRROR" "$script" >"$dir.log" 2>&1 || {
      tail -20 "$dir.log" >&2; echo "images: debootstrap $suite from $UBUNTU_MIRROR failed (log: $dir.log)" >&2; return 1; }
    rm -f "$dir.log" "$dir/etc/apt/sources.list"
    # Every component and pocket a GPU node uses: the -server driver packages are in
    # restricted (noble-updates), Fabric Manager and NSCQ in multiverse.
    cat >"$dir/etc/apt/sources.list.d/ubuntu.sources" <<SOURCES
Types: deb
URIs: $UBUNTU_MIRROR
Suites: $suite $suite-updates $suite-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
SOURCES
    # The lab's frozen snapshot of Ubuntu's NVIDIA server driver builds (scripts/ubuntu_snapshot.py):
    # the archive lists only a branch's newest build, and this testbed's mirror has listed one
    # build while serving another. Each .deb is checked against the lock's SHA-256 before its
    # index is written, so the entry is trusted without a signing key.
    python3 "$SNAPSHOT_TOOL" build "$suite" "$dir/var/lib/gpucloud-lab/ubuntu-snapshot" || {
      echo "images: the Ubuntu NVIDIA snapshot for $suite could not be built ($SNAPSHOT_LOCK)" >&2; return 1; }
    cat >"$dir/etc/apt/sources.list.d/gpucloud-lab-snapshot.sources" <<SOURCES
Types: deb
URIs: file:/var/lib/gpucloud-lab/ubuntu-snapshot
Suites: ./
Trusted: yes
SOURCES
  else
    echo "images: building $image from Debian $suite (debootstrap, about a minute)"
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
  fi
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
)

command -v podman >/dev/null || { echo "build-images.sh: podman is not installed (run scripts/setup.sh as root)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build-images.sh: debootstrap is not installed (run scripts/setup.sh as root)" >&2; exit 1; }
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(debian12 debian13)
  if [[ ${GPUCLOUD_UBUNTU:-1} != 0 ]]; then
    targets+=(ubuntu2404 ubuntu2204)
  else
    echo "images: GPUCLOUD_UBUNTU=0: the Ubuntu images are left out"
  fi
fi
for t in "${targets[@]}"; do build "$t"; done
