#!/usr/bin/env bash
# vm-systemd-image.sh — the firmware lab's "vendor" node image (issue 42):
# a dracut-built systemd initramfs with Ignition's own dracut module, and
# the node's root disk, both made from the same Debian 12 root. Used by
# vm-systemd.sh; run it alone to build (or find) the image:
#
#   vm-systemd-image.sh KERNEL_VERSION      # prints the image's directory
#
# The directory holds
#   vendor.img   the initramfs, as a node's vendor ships it (Fedora CoreOS
#                and RHCOS boot the same shape): dracut --no-hostonly with
#                systemd, systemd-networkd and Debian's `ignition` dracut
#                module (/usr/lib/dracut/modules.d/30ignition, Ignition
#                2.14: ignition-fetch-offline ... ignition-files, set up by
#                ignition-generator on `ignition.firstboot`), the virtio
#                and ext4 modules of the guest kernel, and a setfiles that
#                relabels nothing (Ignition's mount stage calls it; no
#                SELinux here);
#   root.img     the node's root disk: ext4 labelled rgroot, made without
#                a loop device (mkfs.ext4 -d), holding the same root plus
#                udev, tpm-udev (a tss group; /dev/tpmrm0 tagged for systemd), systemd-networkd with a DHCP .network,
#                a persistent journal, /etc/selinux/config (disabled: the
#                files stage reads it), and one LAB-ONLY unit,
#                rackgate-lab-poweroff.service, that powers the machine off
#                once rackgate-agent.service has run (or was never there),
#                so that a boot into the real root ends by itself.
#
# Built once per machine and kept outside any tree, like the Debian root
# (systemd/nspawn-lib.sh) and the k8s lab's binaries:
# $RACKGATE_VM_SYSTEMD_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/rackgate-vm-systemd,
# in a directory named by the guest kernel and VS_RECIPE below: change the
# recipe, bump VS_RECIPE. Needs root (chroot, mounts in a private mount
# namespace: nothing is mounted on the host once it ends) and the network
# to the machine's own apt mirror (taken from its apt entry, never named
# here). dracut runs only inside the copy of the root: never on the host,
# whose initramfs-tools it would replace. 20 s on a quiet 2-core machine,
# 100 s under load (apt, dracut, mkfs); progress lines on stderr.
set -euo pipefail

# The recipe's version: part of the cache key.
VS_RECIPE=4
# udev and tpm-udev (the tss group, and the rule that tags /dev/tpmrm0 for
# systemd: without it dev-tpmrm0.device never appears and
# rackgate-agent.service's Wants=/After= on it waits out the device's 90 s
# job timeout), as Fedora CoreOS has them.
VS_PACKAGES=(dracut dracut-network ignition systemd-resolved curl iproute2 kmod udev tpm-udev zstd)
# The virtio disk and NIC and the root's file system (TPM CRB/TIS are built
# into Debian's kernel). dracut's network module adds every NIC driver
# without --hostonly (40 MB of the image's 130): all but virtio's are left
# out, which halves what grub loads and the kernel unpacks on every boot.
VS_DRIVERS="virtio_pci virtio_blk virtio_net ext4"
VS_KEEP_NET="virtio_net|net_failover|failover"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KV="${1:?usage: vm-systemd-image.sh KERNEL_VERSION}"
# shellcheck source=../systemd/nspawn-lib.sh
source "$HERE/../systemd/nspawn-lib.sh"

say() { echo "# vm-systemd image: $*" >&2; }

cache_base="${RACKGATE_VM_SYSTEMD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rackgate-vm-systemd}"
out="$cache_base/$KV-r$VS_RECIPE"
if [[ -s "$out/vendor.img" && -s "$out/root.img" ]]; then echo "$out"; exit 0; fi

[[ "$(id -u)" == 0 ]] || { echo "vm-systemd-image.sh: needs root (chroot, mounts)" >&2; exit 1; }
[[ -d "/lib/modules/$KV" ]] || { echo "vm-systemd-image.sh: no /lib/modules/$KV (linux-image-amd64)" >&2; exit 1; }
mkdir -p "$cache_base"
exec {lock}>"$cache_base/.lock"
flock "$lock"
if [[ -s "$out/vendor.img" && -s "$out/root.img" ]]; then echo "$out"; exit 0; fi

t0=$(date +%s)
debian="$(nspawn_cache_dir)"
if ! why="$(nspawn_debian_root "$debian")"; then echo "vm-systemd-image.sh: $why" >&2; exit 1; fi
mirror="$(nspawn_mirror)"
[[ -n "$mirror" ]] || { echo "vm-systemd-image.sh: no apt entry to take the mirror from" >&2; exit 1; }
tmp="$out.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
R="$tmp/root"
say "building once for kernel $KV (recipe $VS_RECIPE) in $out: copying the Debian root"
cp -a "$debian/root" "$R"
echo "deb $mirror bookworm main" > "$R/etc/apt/sources.list"
cp -L /etc/resolv.conf "$R/etc/resolv.conf"
# A node image ships no machine id (its first boot makes one); dracut would
# copy the Debian root's into the initramfs.
: > "$R/etc/machine-id"
mkdir -p "$R/tmp/lab" "$R/lib/modules/$KV"
printf '#!/bin/sh\n# LAB: no SELinux here; Ignition calls setfiles to relabel.\ncat >/dev/null\nexit 0\n' \
  > "$R/tmp/lab/setfiles"
chmod 0755 "$R/tmp/lab/setfiles"

# apt and dracut in the root, in a private mount namespace: proc, sys, dev
# and the guest kernel's modules (read-only) are mounted there only.
say "apt-get install ${VS_PACKAGES[*]} (in the root)"
unshare --mount --propagation private -- bash -euo pipefail -c '
  R="$1" KV="$2" drivers="$3" keep="$4"; shift 4
  mount -t proc proc "$R/proc"
  mount -t sysfs sysfs "$R/sys"
  mount --bind /dev "$R/dev"
  mount --bind /lib/modules/"$KV" "$R/lib/modules/$KV"
  mount -o remount,bind,ro "$R/lib/modules/$KV"
  export DEBIAN_FRONTEND=noninteractive LC_ALL=C
  chroot "$R" apt-get update -q >"$R/tmp/lab/apt.log" 2>&1 ||
    { tail -n 5 "$R/tmp/lab/apt.log" >&2; exit 1; }
  chroot "$R" apt-get install -y -q --no-install-recommends "$@" >>"$R/tmp/lab/apt.log" 2>&1 ||
    { tail -n 10 "$R/tmp/lab/apt.log" >&2; exit 1; }
  echo "# vm-systemd image: dracut (under a minute to two on 2 cores)" >&2
  omit=$(find "$R/lib/modules/$KV/kernel/drivers/net" -name "*.ko*" -printf "%f\n" |
         sed "s/\.ko.*//" | grep -vxE "$keep" | tr "\n" " ")
  chroot "$R" dracut --force --quiet --no-hostonly --kver "$KV" --zstd \
    --add "systemd systemd-networkd ignition" --drivers "$drivers" --omit-drivers "$omit" \
    --omit "plymouth" --include /tmp/lab/setfiles /usr/sbin/setfiles \
    /tmp/lab/vendor.img >"$R/tmp/lab/dracut.log" 2>&1 ||
    { tail -n 15 "$R/tmp/lab/dracut.log" >&2; exit 1; }
' vs-build "$R" "$KV" "$VS_DRIVERS" "$VS_KEEP_NET" "${VS_PACKAGES[@]}"
mv "$R/tmp/lab/vendor.img" "$tmp/vendor.img"
[[ -d "$R/usr/lib/dracut/modules.d/30ignition" ]] || { echo "vm-systemd-image.sh: no Ignition dracut module" >&2; exit 1; }

# The node's root.
say "the root disk"
rm -rf "$R/tmp/lab" "$R/var/cache/apt/archives/"*.deb "$R/var/lib/apt/lists/"*_Packages
rmdir "$R/lib/modules/$KV" 2>/dev/null || true
rm -f "$R/etc/resolv.conf"
chroot "$R" groupadd -f -r tss
mkdir -p "$R/etc/selinux" "$R/etc/systemd/network" "$R/var/log/journal" "$R/etc/systemd/journald.conf.d"
printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' > "$R/etc/selinux/config"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=ipv4\n' > "$R/etc/systemd/network/20-lab-dhcp.network"
printf '[Journal]\nStorage=persistent\n' > "$R/etc/systemd/journald.conf.d/10-lab.conf"
echo rgnode > "$R/etc/hostname"
cat > "$R/etc/systemd/system/rackgate-lab-poweroff.service" <<'UNIT'
# LAB ONLY (firmware-tests/vm-systemd-image.sh): powers the virtual machine
# off once rackgate-agent.service has run, so that the firmware lab's boot
# into this root ends by itself. Never part of a node.
[Unit]
Description=LAB ONLY: power off once rackgate-agent.service has run
After=rackgate-agent.service systemd-networkd-wait-online.service

[Service]
Type=oneshot
ExecStart=/bin/sh -c 'echo "RACKGATE-LAB: rackgate-agent.service: $(systemctl show -p Result --value rackgate-agent.service) $(systemctl show -p ExecMainStatus --value rackgate-agent.service)" > /dev/console; systemctl --no-block poweroff'

[Install]
WantedBy=multi-user.target
UNIT
chroot "$R" systemctl enable systemd-networkd.service systemd-networkd-wait-online.service \
  rackgate-lab-poweroff.service >/dev/null 2>&1
say "mkfs.ext4 -d"
PATH=$PATH:/usr/sbin:/sbin mkfs.ext4 -q -F -L rgroot -d "$R" "$tmp/root.img" 1536M >&2
rm -rf "$R"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
say "built in $(( $(date +%s) - t0 )) s: $(du -h --apparent-size "$out/vendor.img" | cut -f1) initramfs, $(du -h "$out/root.img" | cut -f1) root disk"
echo "$out"
