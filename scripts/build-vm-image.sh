#!/usr/bin/env bash
# Build the base disk of the lab's QEMU VM nodes (scripts/lab.py, node kind "vm").
# Not part of scripts/setup.sh: lab.py runs it when a VM node is asked for.
#
# Starting from the debian12 lab image's root file system (podman create + export), it
# installs a kernel (linux-image-amd64: it has nouveau, md, device-mapper, NVMe), udev,
# GRUB, headers and a compiler for DKMS, then writes a GPT disk without loop devices or
# mounts: a FAT ESP (mtools) holding a standalone GRUB that finds the root file system and
# runs the guest's own /boot/grub/grub.cfg (so `update-grub` in the guest decides the next
# boot), and an ext4 root written at its partition offset (mkfs.ext4 -E offset= -d).
# The disk is cached as $GPUCLOUD_VM_DIR/base-<recipe>.raw (sparse, read-only, the backing
# file of every VM's qcow2 overlay); the recipe hash covers this file, the disk layout,
# the mirror and the source image's recipe. Progress goes to stderr; the base disk's path
# is the only line on stdout.
# Usage: scripts/build-vm-image.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

VM_DIR="${GPUCLOUD_VM_DIR:-/var/tmp/gpucloud-lab/vm}"
VMS_DIR="${GPUCLOUD_VMS_DIR:-/var/tmp/gpucloud-lab/vms}"
SOURCE_IMAGE="$GPUCLOUD_IMAGE_PREFIX/debian12:latest"
MIRROR="${GPUCLOUD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DISK_MIB=6144
# dbus: a real server has it, and `shutdown -r +0` (ansible.builtin.reboot) needs logind.
PACKAGES=(linux-image-amd64 initramfs-tools udev dbus grub-efi-amd64-bin grub2-common
  linux-headers-amd64 dkms gcc make)
# What the roles would install in the guest (host_prep, disk_encryption, firewall,
# nccl_fabric), preinstalled natively here: under TCG each apt run and each initramfs
# trigger costs minutes. The install paths themselves are proven in the container
# scenarios.
PACKAGES+=(mokutil kmod mdadm cryptsetup-bin clevis clevis-luks
  clevis-systemd e2fsprogs iptables netfilter-persistent iptables-persistent
  rdma-core ibverbs-providers ibverbs-utils infiniband-diags perftest)
# Units the container image masks that a VM needs (udev: cryptsetup waits for it).
UNMASK=(systemd-udevd.service systemd-udev-trigger.service systemd-modules-load.service
  systemd-remount-fs.service getty.target sys-kernel-config.mount sys-kernel-debug.mount
  sys-kernel-tracing.mount)
CMDLINE_LINUX="console=ttyS0,115200n8"
# quiet kernel, but systemd's status lines on the serial console: lab.py's KVM probe
# and the boot log in the VM's state directory read them.
CMDLINE_DEFAULT="quiet systemd.show_status=1"

say() { printf 'vm-image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

for tool in podman sfdisk mkfs.ext4 mformat mcopy mmd flock sha256sum; do
  command -v "$tool" >/dev/null ||
    die "$tool is missing: install requirements/vm.deb (scripts/setup.sh as root installs it)"
done
[[ $(id -u) -eq 0 ]] || die "must run as root (chroot, file ownership in the image)"

mkdir -p "$VM_DIR"
exec 9>"$VM_DIR/.build.lock"
flock 9
src_recipe=$(podman image inspect --format '{{ index .Labels "gpucloud.recipe" }}' "$SOURCE_IMAGE" 2>/dev/null) ||
  die "image $SOURCE_IMAGE is missing: run scripts/build-images.sh debian12"
layout=$(python3 "$here/lab_vm.py" layout "$DISK_MIB")
RECIPE=$( { cat "${BASH_SOURCE[0]}"; echo "$layout $MIRROR $src_recipe"; } | sha256sum | cut -c1-16)
base="$VM_DIR/base-$RECIPE.raw"
if [[ -f "$base" ]]; then
  say "base disk present: $base"
  echo "$base"
  exit 0
fi
eval "$layout"
start=$SECONDS
say "building $base from $SOURCE_IMAGE (kernel, GRUB, headers: a few minutes)"

work=$(mktemp -d "$VM_DIR/build.XXXXXX")
cid=""
cleanup() {
  [[ -z "$cid" ]] || podman rm --force "$cid" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
root="$work/root"
mkdir "$root"
cid=$(podman create "$SOURCE_IMAGE" /sbin/init)
podman export "$cid" | tar -C "$root" -x --numeric-owner
podman rm "$cid" >/dev/null
cid=""

# ---- packages, in a chroot (no services started; downloads shared with the lab's pool)
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 0755 "$root/usr/sbin/policy-rc.d"
pool="$GPUCLOUD_APT_CACHE/${SOURCE_IMAGE//[\/:]/_}"
archives="$root/var/cache/apt/archives"
mkdir -p "$pool" "$archives/partial"
cp -l -n "$pool"/*.deb "$archives"/ 2>/dev/null || true
if ! { chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
          --no-install-recommends "${PACKAGES[@]}"; } >"$work/apt.log" 2>&1; then
  tail -30 "$work/apt.log" >&2
  die "apt-get install in the image chroot failed"
fi
cp -l -n "$archives"/*.deb "$pool"/ 2>/dev/null || true
rm -rf "$archives"/*.deb "$root"/var/lib/apt/lists/* "$root/usr/sbin/policy-rc.d"
# Later rebuilds happen in the booted guest (nouveau blacklist, mdadm.conf): there
# MODULES=dep takes what this VM's hardware needs, 38 s under TCG against 476 s for
# MODULES=most (measured 2026-12-01). The chroot has no hardware to look at, so the
# image's own first initramfs keeps `most`.
sed -i 's/^MODULES=.*/MODULES=dep/' "$root/etc/initramfs-tools/initramfs.conf"
kver=$(basename "$(find "$root/boot" -name 'vmlinuz-*' | sort -V | tail -1)")
kver=${kver#vmlinuz-}
[[ -n "$kver" && -f "$root/boot/initrd.img-$kver" ]] || die "no kernel/initrd in the image"

# ---- a VM, not a container: udev, getty on ttyS0, fstab, network, identity
for unit in "${UNMASK[@]}"; do rm -f "$root/etc/systemd/system/$unit"; done
# podman export leaves its run-time stubs (or nothing) for these three.
echo localhost >"$root/etc/hostname"
chmod 0644 "$root/etc/hostname"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
uuid=$(cat /proc/sys/kernel/random/uuid)
echo "UUID=$uuid / ext4 errors=remount-ro 0 1" >"$root/etc/fstab"
touch "$root/boot/gpucloud-lab-root"
cat >"$root/etc/systemd/network/20-lab.network" <<'NET'
[Match]
Type=ether

[Network]
DHCP=ipv4
NET
chroot "$root" systemctl enable --quiet systemd-networkd.service
rm -f "$root/etc/resolv.conf"
echo "nameserver 10.0.2.3" >"$root/etc/resolv.conf"  # QEMU user networking's DNS
echo qemu_fw_cfg >"$root/etc/modules-load.d/gpucloud-lab.conf"
cat >"$root/usr/local/sbin/gpucloud-vm-identity" <<'SH'
#!/bin/sh
# Per-VM identity that scripts/lab.py hands over through QEMU fw_cfg (opt/gpucloud/*):
# the host name and the lab's SSH key. Runs at every boot; changes only what differs.
set -eu
modprobe qemu_fw_cfg 2>/dev/null || true
d=/sys/firmware/qemu_fw_cfg/by_name/opt/gpucloud
[ -d "$d" ] || { echo "gpucloud-vm-identity: no opt/gpucloud entries in fw_cfg"; exit 0; }
touch /etc/hosts
if [ -r "$d/hostname/raw" ]; then
  name=$(cat "$d/hostname/raw")
  [ "$(cat /etc/hostname 2>/dev/null)" = "$name" ] || echo "$name" >/etc/hostname
  hostname "$name"
  grep -qx "127.0.1.1 $name" /etc/hosts || {
    sed -i '/^127\.0\.1\.1[[:space:]]/d' /etc/hosts
    echo "127.0.1.1 $name" >>/etc/hosts
  }
fi
if [ -r "$d/authorized_keys/raw" ]; then
  key=$(cat "$d/authorized_keys/raw")
  install -d -m 0700 /root/.ssh
  touch /root/.ssh/authorized_keys
  chmod 0600 /root/.ssh/authorized_keys
  grep -qxF "$key" /root/.ssh/authorized_keys || echo "$key" >>/root/.ssh/authorized_keys
fi
SH
chmod 0755 "$root/usr/local/sbin/gpucloud-vm-identity"
cat >"$root/etc/systemd/system/gpucloud-vm-identity.service" <<'UNIT'
[Unit]
Description=gpucloud lab: host name and SSH key from QEMU fw_cfg
DefaultDependencies=no
After=local-fs.target systemd-remount-fs.service
Before=sysinit.target network-pre.target ssh.service
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/gpucloud-vm-identity
StandardOutput=journal+console

[Install]
WantedBy=sysinit.target
UNIT
chroot "$root" systemctl enable --quiet gpucloud-vm-identity.service

# ---- GRUB: the guest's own update-grub writes the grub.cfg the ESP's GRUB runs
[[ -f "$root/usr/share/grub/default/grub" ]] || die "grub2-common did not ship /usr/share/grub/default/grub"
sed -e 's/^GRUB_TIMEOUT=.*/GRUB_TIMEOUT=0/' \
    -e "s/^GRUB_CMDLINE_LINUX_DEFAULT=.*/GRUB_CMDLINE_LINUX_DEFAULT=\"$CMDLINE_DEFAULT\"/" \
    -e "s/^GRUB_CMDLINE_LINUX=.*/GRUB_CMDLINE_LINUX=\"$CMDLINE_LINUX\"/" \
    "$root/usr/share/grub/default/grub" >"$root/etc/default/grub"
cat >>"$root/etc/default/grub" <<'GRUB'
GRUB_TERMINAL=serial
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_RECOVERY=true
GRUB_DISABLE_OS_PROBER=true
GRUB
mkdir -p "$root/boot/grub"
# What update-grub would write; grub-probe cannot see the VM's disk from this chroot.
cat >"$root/boot/grub/grub.cfg" <<CFG
set timeout=0
menuentry 'Debian GNU/Linux' {
  insmod part_gpt
  insmod ext2
  search --no-floppy --fs-uuid --set=root $uuid
  linux /boot/vmlinuz-$kver root=UUID=$uuid ro $CMDLINE_LINUX $CMDLINE_DEFAULT
  initrd /boot/initrd.img-$kver
}
CFG
cat >"$root/tmp/embedded.cfg" <<'CFG'
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
search --no-floppy --file --set=root /boot/gpucloud-lab-root
configfile /boot/grub/grub.cfg
CFG
chroot "$root" grub-mkstandalone -O x86_64-efi -o /tmp/BOOTX64.EFI \
  --modules="part_gpt ext2 search configfile linux normal serial" \
  --locales= --fonts= --themes= "boot/grub/grub.cfg=/tmp/embedded.cfg"
mv "$root/tmp/BOOTX64.EFI" "$work/BOOTX64.EFI"
rm -f "$root/tmp/embedded.cfg"

# ---- the disk: ext4 root at its offset, GPT around it, ESP written with mtools
disk="$work/disk.raw"
truncate -s "$DISK_BYTES" "$disk"
mkfs.ext4 -q -F -U "$uuid" -L lab-root -E offset="$ROOT_OFFSET" -d "$root" "$disk" "${ROOT_KIB}k"
sfdisk --quiet --wipe-partitions never "$disk" <<SFDISK
label: gpt
start=$ESP_START, size=$ESP_SECTORS, type=U, name=ESP
start=$ROOT_START, size=$ROOT_SECTORS, type=L, name=root
SFDISK
esp="$work/esp.img"
truncate -s $((ESP_SECTORS * 512)) "$esp"
mformat -i "$esp" -F -v ESP ::
mmd -i "$esp" ::/EFI ::/EFI/BOOT
mcopy -i "$esp" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
dd if="$esp" of="$disk" bs=1M seek=$((ESP_OFFSET / 1048576)) conv=notrunc,sparse status=none
chmod 0444 "$disk"
mv "$disk" "$base"
# Older bases back nobody's overlay once no VM exists.
if [[ -z "$(find "$VMS_DIR" -mindepth 2 -maxdepth 2 -type d 2>/dev/null)" ]]; then
  find "$VM_DIR" -maxdepth 1 -name 'base-*.raw' ! -name "base-$RECIPE.raw" -delete
fi
say "built $base in $((SECONDS - start)) s (kernel $kver, $(du -m "$base" | cut -f1) MiB used)"
echo "$base"
