#!/bin/bash
# The stock Debian 12 image that `make test-host` boots (tests/host/run.sh):
# bookworm with systemd as PID 1, Debian's kernel and initrd, AppArmor, and
# every package the .deb depends on already installed (dpkg under emulation
# is far too slow to install them at test time). Built with Debian's
# mmdebstrap from the host's mirrors, without root mounts or loop devices
# (mkfs.ext4 -d). The guest has no network: nothing it runs needs one.
#
#   tests/host/image.sh OUT_DIR PACKAGE...   builds OUT_DIR/{disk.img,vmlinuz,initrd.img}
#   tests/host/image.sh --customize ROOTFS   (mmdebstrap's hook, below)
#
# In the image: /mnt/host is the 9p share `hostshare` (fstab), and
# warden-host-test.service runs /mnt/host/run (written by run.sh) once the
# system is up, then powers the machine off.
set -euo pipefail

# The stock system: systemd as PID 1 with udev, dbus and logind, Debian's
# kernel, AppArmor (on by default in Debian 12), and the tools an operator
# uses. The .deb's own Depends are added by the caller.
BASE_PACKAGES="systemd systemd-sysv udev dbus libpam-systemd linux-image-amd64 apparmor kmod procps
  iproute2 psmisc"

if [ "${1:-}" = --customize ]; then
  root=$2
  echo warden-vm > "$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 warden-vm\n' > "$root/etc/hosts"
  printf '%s\n' '/dev/vda / ext4 rw,errors=remount-ro 0 0' \
    'hostshare /mnt/host 9p trans=virtio,version=9p2000.L,msize=262144,nofail 0 0' > "$root/etc/fstab"
  mkdir -p "$root/mnt/host"
  chroot "$root" passwd -d root >/dev/null
  cat > "$root/etc/systemd/system/warden-host-test.service" <<'UNIT'
[Unit]
Description=Warden's host test (tests/host/run.sh)
RequiresMountsFor=/mnt/host
After=multi-user.target
[Service]
# exec, not oneshot: the script waits for the boot to finish, which waits
# for a oneshot's start.
Type=exec
ExecStart=/bin/sh -c '/mnt/host/run >/mnt/host/out/guest.log 2>&1; echo $? >/mnt/host/out/rc; sync; systemctl poweroff --no-block'
StandardOutput=journal+console
[Install]
WantedBy=multi-user.target
UNIT
  ln -sf /etc/systemd/system/warden-host-test.service \
    "$root/etc/systemd/system/multi-user.target.wants/warden-host-test.service"
  # A clean console: no login prompt competing with the kernel's messages.
  ln -sf /dev/null "$root/etc/systemd/system/serial-getty@ttyS0.service"
  exit 0
fi

out=${1:?usage: image.sh OUT_DIR PACKAGE...}
shift
packages=$(printf '%s\n' $BASE_PACKAGES "$@" | sort -u | paste -sd,)
mirrors=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
work=$(mktemp -d "$(dirname "$out")/image-build.XXXXXX")
# mmdebstrap mounts /proc, /sys and /dev in the tree while it works and
# unmounts them itself; should it be killed first, they are unmounted here,
# and rm never crosses into another filesystem.
cleanup() {
  awk -v w="$work/" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mmdebstrap --quiet --variant=minbase --skip=essential/unlink --include="$packages" \
  --customize-hook="\"$(realpath "$0")\" --customize \"\$1\"" \
  --customize-hook="copy-out /boot \"$work\"" \
  bookworm "$work/rootfs" "${mirrors[@]}"
cp "$work"/boot/vmlinuz-* "$work/vmlinuz"
cp "$work"/boot/initrd.img-* "$work/initrd.img"
truncate -s 10G "$work/disk.img"
mkfs.ext4 -q -F -L warden-vm -d "$work/rootfs" "$work/disk.img"
rm -rf "$work/rootfs" "$work/boot"
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
