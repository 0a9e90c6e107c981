# vm-lib.sh — the firmware lab: machines with real UEFI firmware under QEMU
# (TCG, no KVM needed): OVMF with Microsoft's Secure Boot keys, shim,
# Debian's signed grub and kernel, a TPM 2.0 CRB device backed by the
# machine's swtpm (lab.sh's, with EK certificates from a lab CA), and a
# minimal initramfs: busybox-static, the virtio network modules, the
# self-contained agent (script/agent-bundle's fragment, appended as it is
# served) and the appliance CA's part, with the kernel arguments, as
# `rackgatectl pointer --kernel-args --initramfs-ca` emits them. Source it
# after lab.sh and appliance.sh, rg_init and lab_init.
#
#   vm_skip_unless_tools
#   vm_init FRAGMENT [BUNDLE]           # the agent's initramfs fragment
#   vm_media NAME [CMDLINE_EXTRA]       # $LAB_DIR/vm/NAME/esp.img (no root, no loop device)
#   vm_boot M MEDIA [ms|nokeys]         # boot machine M from MEDIA; serial log $(lab_dir M)/serial.log
#
# The boot media are built without root: mkfs.vfat -C and mtools write the
# ESP into a file (shim as EFI/BOOT/BOOTX64.EFI, grub beside it, grub.cfg
# where Debian's signed grub looks, the kernel and the initramfs). dracut
# is not used: it needs the host's root to copy from and its Ignition
# module a systemd initramfs; the busybox /init here does what the lab
# needs (firmware-tests/README.md, "The firmware lab").
#
# Networking: `-netdev user,restrict=on` (the guest reaches nothing) with
# one guestfwd, 10.0.2.100:22623 -> rackgated on 127.0.0.1, a `socat` per
# guest connection (a chardev guestfwd carries one connection for the
# whole run, not one per TLS session).

VM_KERNEL_VERSION="" VM_KERNEL="" VM_FRAGMENT="" VM_DIR="" VM_KERNEL_ARGS=""
VM_SHIM=/usr/lib/shim/shimx64.efi.signed
VM_GRUB=/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed
VM_OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.ms.fd
VM_OVMF_VARS_MS=/usr/share/OVMF/OVMF_VARS_4M.ms.fd   # Microsoft's keys: Secure Boot on
VM_OVMF_VARS_NOKEYS=/usr/share/OVMF/OVMF_VARS_4M.fd  # no keys: Secure Boot off
VM_BUSYBOX=/bin/busybox
# The real Ignition (Debian's `ignition` package ships it in its dracut
# module), with the Debian libraries it links: the vendor initramfs's part
# in the lab, not the agent's (the agent has its bundle).
VM_IGNITION=/usr/lib/dracut/modules.d/30ignition/ignition
# The appliance as the guest sees it (guestfwd), and its cert's SAN.
VM_APPLIANCE_IP=10.0.2.100
# What one boot may take, end to end, before QEMU is stopped: about 30 s
# on an idle 2-core machine with no KVM (lab.sh, "time").
VM_BOOT_SECONDS="${VM_BOOT_SECONDS:-90}"
# The NIC, and the disk the agent applies the attested config to (ext4).
VM_MODULES=(virtio_pci virtio_net virtio_blk ext4)
# The Kubernetes API server the kubeconfig names (nothing listens there).
VM_APISERVER=https://10.0.2.100:6443
VM_NODE_IP=10.0.2.15

vm_skip_unless_tools() {
  local t f
  for t in qemu-system-x86_64 mkfs.vfat mcopy mmd socat cpio zstd modprobe mkfs.ext4 debugfs; do
    command -v "$t" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$t" >/dev/null 2>&1 ||
      lab_skip "$t missing (script/bootstrap installs the firmware lab)"
  done
  for f in "$VM_SHIM" "$VM_GRUB" "$VM_OVMF_CODE" "$VM_OVMF_VARS_MS" "$VM_OVMF_VARS_NOKEYS" "$VM_BUSYBOX" "$VM_IGNITION"; do
    [[ -r "$f" ]] || lab_skip "$f missing (script/bootstrap installs the firmware lab)"
  done
  # Debian's signed kernel: the newest installed.
  VM_KERNEL="$(ls -1 /boot/vmlinuz-*-amd64 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$VM_KERNEL" && -r "$VM_KERNEL" ]] || lab_skip "no /boot/vmlinuz-*-amd64 (linux-image-amd64)"
  VM_KERNEL_VERSION="${VM_KERNEL#/boot/vmlinuz-}"
  [[ -d "/lib/modules/$VM_KERNEL_VERSION" ]] || lab_skip "no /lib/modules/$VM_KERNEL_VERSION"
}

# vm_init FRAGMENT [BUNDLE]: the agent bundle every initramfs carries
# (FRAGMENT: the bytes the appliance served), and the parts of the
# initramfs all machines share. What an operator gets from rackgatectl is
# used as it comes: the kernel arguments (VM_KERNEL_ARGS) and the CA's
# initramfs part ($VM_DIR/ca.cpio.gz), from `pointer --kernel-args
# --initramfs-ca` given BUNDLE (the file the appliance's `agent_bundle`
# names; default FRAGMENT), as an operator runs it on the appliance; the
# digest it printed is checked against the served bytes (vm-boot.sh).
vm_init() {
  vm_pointer "$@"
  vm_base_initramfs "$VM_DIR/base.cpio.gz"
}
# vm_pointer FRAGMENT [BUNDLE]: vm_init's rackgatectl part alone
# (VM_FRAGMENT, VM_KERNEL_ARGS, $VM_DIR/ca.cpio.gz), for a lab that brings
# its own initramfs (vm-systemd.sh).
vm_pointer() {
  VM_FRAGMENT="$(realpath "$1")"
  local bundle
  bundle="$(realpath "${2:-$1}")"
  VM_DIR="$LAB_DIR/vm"
  mkdir -p "$VM_DIR"
  "$RG_CTL" pointer --kernel-args --url "https://$VM_APPLIANCE_IP:22623" --state-dir "$RG_DIR/state" \
    --bundle "$bundle" --initramfs-ca "$VM_DIR/ca.cpio.gz" --json > "$VM_DIR/kernel-args.json"
  VM_KERNEL_ARGS="$(lab_python -c 'import json, sys; print(json.load(open(sys.argv[1]))["kernel_args"])' \
    "$VM_DIR/kernel-args.json")"
}

# The initramfs's own part: busybox, /init, the network modules (and what
# they need, as modprobe resolves it).
vm_base_initramfs() {
  local out="$1" r="$VM_DIR/initramfs" mod
  rm -rf "$r"
  mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys" "$r/run" "$r/tmp" "$r/etc" "$r/lib/modules"
  cp "$VM_BUSYBOX" "$r/bin/busybox"
  : > "$r/etc/modules"
  while read -r _ mod; do
    [[ -n "$mod" ]] || continue
    cp "$mod" "$r/lib/modules/"
    basename "$mod" >> "$r/etc/modules"
  done < <(for mod in "${VM_MODULES[@]}"; do  # modprobe takes one module (the rest are its parameters)
             PATH=$PATH:/usr/sbin:/sbin modprobe -S "$VM_KERNEL_VERSION" --show-depends "$mod"
           done | awk '$1 == "insmod" { print $1, $2 }' | awk '!seen[$2]++')
  # Ignition and what it loads, where its PT_INTERP and the loader's
  # default path find them; a setfiles that relabels nothing (no SELinux).
  mkdir -p "$r/usr/bin" "$r/usr/lib/ignition" "$r/lib64" "$r/lib/x86_64-linux-gnu"
  cp "$VM_IGNITION" "$r/usr/bin/ignition"
  cp -L /lib64/ld-linux-x86-64.so.2 "$r/lib64/"
  cp -L /lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libblkid.so.1 "$r/lib/x86_64-linux-gnu/"
  printf '#!/bin/sh\ncat >/dev/null\n' > "$r/bin/setfiles"
  chmod 0755 "$r/bin/setfiles"
  cat > "$r/init" <<'INIT'
#!/bin/busybox sh
# The firmware lab's /init: mounts, the network, the agent, power off.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t securityfs securityfs /sys/kernel/security
for m in $(cat /etc/modules); do insmod "/lib/modules/$m" || echo "RACKGATE-LAB: insmod $m failed"; done
arg() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" /proc/cmdline; }
ip link set lo up
# The NIC's driver binds asynchronously after insmod: wait for it (10 s).
i=0
while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
echo "RACKGATE-LAB: eventlog $(wc -c < /sys/kernel/security/tpm0/binary_bios_measurements) bytes"
# The firmware's log on the console too, for the host (vm_eventlog).
echo "RACKGATE-LAB: eventlog base64 begin"
base64 < /sys/kernel/security/tpm0/binary_bios_measurements
echo "RACKGATE-LAB: eventlog base64 end"
echo "RACKGATE-LAB: agent start"
# The machine's disk (ext4, label rgroot, the second virtio disk), if it
# has one: the agent applies the attested config and writes kubelet's
# files there, as it would into a first boot's /sysroot.
mkdir -p /sysroot
i=0
while [ ! -e /dev/vdb ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
agent() {
  # --max-wait is not on the command line: a pool's policy pins that (PCR 8).
  /usr/bin/rackgate-agent --url "$(arg rackgate.url)" --ca /etc/rackgate/ca.pem --max-wait 10 "$@"
  rc=$?
  echo "RACKGATE-LAB: agent exit=$rc"
  return $rc
}
kubelet="--kubelet-dir /sysroot/var/lib/kubelet/pki --kubeconfig /sysroot/var/lib/kubelet/kubeconfig"
kubelet="$kubelet --apiserver @APISERVER@ --node-ip @NODE_IP@"
ign="--root /sysroot --platform metal --log-to-stdout --config-cache /run/ignition.json"
ign="$ign --state-file /run/ignition.state --neednet /run/ignition.neednet"
# disk_agent: a later boot runs the agent the first boot installed on the
# disk (--install-root): the installed unit's ExecStart with its
# EnvironmentFile, in the real root (chroot: nothing of the initramfs, its
# own agent included, is visible there), as systemd would run it. Only the
# mounts are the initramfs's, and --max-wait.
disk_agent() {
  unit=/sysroot/etc/systemd/system/rackgate-agent.service
  if [ ! -f "$unit" ] || [ ! -f /sysroot/etc/rackgate/agent.env ]; then
    echo "RACKGATE-LAB: no agent installed on the disk"
    return 1
  fi
  while IFS='=' read -r k v; do
    case "$k" in RACKGATE_*) export "$k=$v" ;; esac
  done < /sysroot/etc/rackgate/agent.env
  mkdir -p /sysroot/dev /sysroot/proc /sysroot/sys
  mount -o bind /dev /sysroot/dev
  mount -t proc proc /sysroot/proc
  mount -t sysfs sysfs /sysroot/sys
  mount -t securityfs securityfs /sysroot/sys/kernel/security
  cmd="$(sed -n 's/^ExecStart=//p' "$unit")"
  echo "RACKGATE-LAB: agent from the disk: $cmd"
  eval "chroot /sysroot $cmd --max-wait 10"
  rc=$?
  echo "RACKGATE-LAB: agent exit=$rc"
  umount /sysroot/sys/kernel/security /sysroot/sys /sysroot/proc /sysroot/dev
  return $rc
}
if ! mount -t ext4 /dev/vdb /sysroot; then
  agent
elif [ -e /sysroot/etc/.ignition-result.json ]; then
  # A later boot: attest again, keep (or renew) kubelet's certificates,
  # with the agent installed in the real root.
  echo "RACKGATE-LAB: disk mounted, provisioned"
  disk_agent
else
  # The first boot: the agent attests and writes the attested config where
  # Ignition looks for the user config in an initramfs
  # (/usr/lib/ignition/user.ign); then the real Ignition fetches and applies
  # it. Ignition runs only after the agent succeeded: nothing of the
  # attested config exists before the machine proved itself. Once it has,
  # the agent installs itself into the real root for later boots.
  echo "RACKGATE-LAB: disk mounted, first boot"
  if agent --steps attest,config,csr --config-out /usr/lib/ignition/user.ign $kubelet --install-root /sysroot; then
    ignition $ign --stage fetch && ignition $ign --stage files
    echo "RACKGATE-LAB: ignition exit=$?"
    rm -f /usr/lib/ignition/user.ign /run/ignition.json
  fi
fi
sync
umount /sysroot 2>/dev/null
poweroff -f
INIT
  sed -i "s|@APISERVER@|$VM_APISERVER|; s|@NODE_IP@|$VM_NODE_IP|" "$r/init"
  chmod 0755 "$r/init"
  (cd "$r" && find . -print | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 > "$out"
}

# vm_media NAME [CMDLINE_EXTRA] [INITRD]: an ESP image with the Secure Boot
# chain, the kernel, grub.cfg (console on the serial port, rackgatectl's
# kernel arguments) and the initramfs: the base part, the agent fragment
# and the CA's part, concatenated as a boot loader appends a served
# fragment (or INITRD, a file made otherwise). Prints nothing; the image is
# $VM_DIR/NAME/esp.img. VM_CMDLINE, when set, replaces the kernel
# arguments before rackgatectl's (the busybox /init's: "console=ttyS0
# quiet panic=-1"). The agent waits at most 10 s for an appliance
# that does not answer or answers 503 (an observing pool).
vm_media() {
  local name="$1" extra="${2:-}" initrd="${3:-}" d="$VM_DIR/$1"
  mkdir -p "$d"
  if [[ -z "$initrd" ]]; then
    initrd="$d/initrd.img"
    cat "$VM_DIR/base.cpio.gz" "$VM_FRAGMENT" "$VM_DIR/ca.cpio.gz" > "$initrd"
  fi
  cat > "$d/grub.cfg" <<CFG
set timeout=0
set default=0
menuentry "rackgate lab" {
  linux /vmlinuz ${VM_CMDLINE:-console=ttyS0 quiet panic=-1} $VM_KERNEL_ARGS${extra:+ $extra}
  initrd /initrd.img
}
CFG
  rm -f "$d/esp.img"
  PATH=$PATH:/usr/sbin:/sbin mkfs.vfat -C "$d/esp.img" $(( 32768 + $(stat -c %s "$initrd") / 1024 )) >/dev/null
  mmd -i "$d/esp.img" ::/EFI ::/EFI/BOOT ::/EFI/debian
  mcopy -i "$d/esp.img" "$VM_SHIM" ::/EFI/BOOT/BOOTX64.EFI
  mcopy -i "$d/esp.img" "$VM_GRUB" ::/EFI/BOOT/grubx64.efi
  # Debian's signed grub reads \$prefix/grub.cfg, prefix /EFI/debian.
  mcopy -i "$d/esp.img" "$d/grub.cfg" ::/EFI/debian/grub.cfg
  mcopy -i "$d/esp.img" "$d/grub.cfg" ::/EFI/BOOT/grub.cfg
  mcopy -i "$d/esp.img" "$VM_KERNEL" ::/vmlinuz
  mcopy -i "$d/esp.img" "$initrd" ::/initrd.img
}

# vm_boot M MEDIA [ms|nokeys]: boots machine M (its swtpm state from
# lab_machine_create) from MEDIA's ESP, with Secure Boot on (ms, Microsoft's
# keys) or off (nokeys), to the end of its /init (it powers off) or for at
# most VM_BOOT_SECONDS times the lab's factor. Fresh UEFI variables per
# boot. The serial console goes to $(lab_dir M)/serial.log (appended with
# a header per boot); the wall time in ms to $(lab_dir M)/boot.ms. Every
# process is stopped by its pid when the boot ends, also on failure (swtpm
# exits with QEMU; the lab's cleanup stops both otherwise). Returns QEMU's
# exit code (124: the hard timeout). VM_STOP_ERE, when set: QEMU is stopped
# as soon as the console matches it (a machine that waits forever, e.g. in
# emergency mode), and vm_boot returns 125. VM_GUESTFWD_PORT, when set: the
# guest's appliance address leads to that port of 127.0.0.1 instead of
# rackgated's.
vm_boot() {
  local name="$1" media="$2" keys="${3:-ms}" m d rc=0 t0 vars pid limit
  m="$(lab_dir "$name")"; d="$VM_DIR/$media"
  vars="$m/vars.fd"
  local disk=()
  [[ -f "$m/disk.img" ]] && disk=(-drive "if=none,id=disk,format=raw,file=$m/disk.img" -device virtio-blk-pci,drive=disk)
  if [[ "$keys" == ms ]]; then cp "$VM_OVMF_VARS_MS" "$vars"; else cp "$VM_OVMF_VARS_NOKEYS" "$vars"; fi
  rm -f "$m/swtpm.sock" "$m/swtpm.pid"
  swtpm socket --tpm2 --tpmstate "dir=$m/state" --ctrl "type=unixio,path=$m/swtpm.sock" \
    --flags startup-clear --pid "file=$m/swtpm.pid" --log "file=$m/swtpm.log" --daemon \
    </dev/null >/dev/null 2>>"$m/swtpm.err" {LAB_STDOUT}>&- {LAB_STDERR}>&- || return 1
  lab_wait 5 test -s "$m/swtpm.pid" || return 1
  echo "$(cat "$m/swtpm.pid")" >> "$LAB_DIR/pids"
  lab_wait 5 test -S "$m/swtpm.sock" || return 1
  echo "=== boot $(date -u +%FT%TZ) media=$media secure_boot=$keys" >> "$m/serial.log"
  : > "$m/serial.boot"
  limit="$(lab_seconds "$VM_BOOT_SECONDS")"
  t0=$(date +%s%N)
  nice -n 15 qemu-system-x86_64 -machine q35,smm=on -accel tcg -m 1024 -smp 1 \
    -display none -monitor none -serial "file:$m/serial.boot" -no-reboot \
    -global driver=cfi.pflash01,property=secure,value=on \
    -drive "if=pflash,format=raw,unit=0,file=$VM_OVMF_CODE,readonly=on" \
    -drive "if=pflash,format=raw,unit=1,file=$vars" \
    -chardev "socket,id=chrtpm,path=$m/swtpm.sock" -tpmdev emulator,id=tpm0,chardev=chrtpm \
    -device tpm-crb,tpmdev=tpm0 \
    -drive "if=none,id=esp,format=raw,readonly=on,file=$d/esp.img" -device virtio-blk-pci,drive=esp \
    "${disk[@]}" \
    -netdev "user,id=n0,restrict=on,guestfwd=tcp:$VM_APPLIANCE_IP:22623-cmd:socat STDIO TCP:127.0.0.1:${VM_GUESTFWD_PORT:-$RG_PORT}" \
    -device virtio-net-pci,netdev=n0 \
    </dev/null >"$m/qemu.log" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
  pid=$!
  echo "$pid" >> "$LAB_DIR/pids"
  # The hard timeout, by pid: the boot ends, or QEMU is stopped.
  local deadline=$(( $(date +%s) + limit ))
  while kill -0 "$pid" 2>/dev/null && ! lab_pid_gone "$pid"; do
    if (( $(date +%s) >= deadline )); then
      echo "# $name: boot still running after ${limit}s: stopped" >&2
      lab_kill_pid "$pid"
      rc=124
      break
    fi
    if [[ -n "${VM_STOP_ERE:-}" ]] && grep -aEq -- "$VM_STOP_ERE" "$m/serial.boot"; then
      echo "# $name: the console says /$VM_STOP_ERE/: stopped" >&2
      lab_kill_pid "$pid"
      rc=125
      break
    fi
    sleep 0.2
  done
  if (( rc == 0 )); then wait "$pid" || rc=$?; else wait "$pid" 2>/dev/null || true; fi
  echo $(( ($(date +%s%N) - t0) / 1000000 )) > "$m/boot.ms"
  tr -d '\r' < "$m/serial.boot" >> "$m/serial.log"
  # swtpm exits when QEMU disconnects; if it did not, stop it by its pid.
  if [[ -s "$m/swtpm.pid" ]]; then
    lab_wait 5 lab_pid_gone "$(cat "$m/swtpm.pid")" || lab_kill_pid "$(cat "$m/swtpm.pid")"
  fi
  return "$rc"
}

# vm_disk M: gives machine M a blank disk (ext4, 64 MB, made without root;
# /etc/selinux/config only),
# $(lab_dir M)/disk.img, the second virtio disk of its boots.
vm_disk() {
  local src; src="$(lab_dir "$1")/disk.src"
  # Ignition's files stage reads the root's SELinux config.
  mkdir -p "$src/etc/selinux"
  printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' > "$src/etc/selinux/config"
  # mke2fs says "Creating regular file" even with -q: to stderr, so that
  # the test's stdout stays TAP.
  PATH=$PATH:/usr/sbin:/sbin mkfs.ext4 -q -F -L rgroot -d "$src" "$(lab_dir "$1")/disk.img" 64M >&2
}
# vm_disk_cat M PATH: a file of M's disk, read from the host (debugfs),
# through one relative symlink (kubelet's *-current.pem).
vm_disk_cat() {
  local img path="$2" target
  img="$(lab_dir "$1")/disk.img"
  target="$(PATH=$PATH:/usr/sbin:/sbin debugfs -R "stat $path" "$img" 2>/dev/null |
            sed -n 's/^Fast link dest: "\(.*\)"$/\1/p')"
  if [[ -n "$target" ]]; then
    [[ "$target" == /* ]] && path="$target" || path="$(dirname "$path")/$target"
  fi
  PATH=$PATH:/usr/sbin:/sbin debugfs -R "cat $path" "$img" 2>/dev/null
}
# vm_disk_has M PATH: M's disk has PATH.
vm_disk_has() {
  PATH=$PATH:/usr/sbin:/sbin debugfs -R "stat $2" "$(lab_dir "$1")/disk.img" 2>&1 | grep '^Inode:' >/dev/null
}

# vm_serial M: the serial console of M's last boot, carriage returns removed.
vm_serial() { tr -d '\r' < "$(lab_dir "$1")/serial.boot"; }
# vm_eventlog M FILE: the firmware event log M's initramfs read from
# securityfs in its last boot, as the console carried it; fails when none.
vm_eventlog() {
  vm_serial "$1" | sed -n '/^RACKGATE-LAB: eventlog base64 begin$/,/^RACKGATE-LAB: eventlog base64 end$/p' |
    sed '1d;$d' | base64 -d > "$2" && [[ -s "$2" ]]
}
# vm_agent_exit M: the agent's exit status in M's last boot ("" if it never ended).
vm_agent_exit() { vm_serial "$1" | sed -n 's/^RACKGATE-LAB: agent exit=\([0-9]*\)$/\1/p' | tail -n 1; }

# vm_py FILE CODE ARGS...: python CODE with `d`, FILE's JSON; exits as CODE says.
vm_py() {
  local file="$1" code="$2"; shift 2
  lab_python -c "import json, sys
d = json.load(open(sys.argv[1]))
$code" "$file" "$@"
}

# vm_served_digest CODE FILE: the fragment rackgated served (HTTP status
# CODE, bytes in FILE) has the SHA-256 `pointer --kernel-args` printed
# ($VM_DIR/kernel-args.json); the reason on stdout otherwise.
vm_served_digest() {
  local code="$1" file="$2" want
  want="$(vm_py "$VM_DIR/kernel-args.json" 'print(d["agent_initramfs"]["sha256"])')"
  [[ "$code" == 200 ]] || { echo "GET /v1/agent/initramfs: $code"; return 1; }
  [[ "$(sha256sum < "$file" | cut -d' ' -f1)" == "$want" ]] || { echo "served bytes are not $want"; return 1; }
}

# vm_pool_templates: the firmware labs' pool templates in $LAB_DIR: the
# public part (public.ign) names the appliance; the attested part
# (attested.ign) holds a pull secret (a file marked secret) and per-machine
# values.
vm_pool_templates() {
  cat > "$LAB_DIR/public.ign" <<'IGN'
{"ignition": {"version": "3.3.0"},
 "storage": {"files": [{"path": "/etc/rackgate/appliance", "mode": 420, "contents": {"source": "data:,{{appliance.url}}"}}]}}
IGN
  # The pull secret: {"auths":{"registry.lab":{"auth":"bGFiOnNlY3JldA=="}}}
  cat > "$LAB_DIR/attested.ign" <<'IGN'
{"ignition": {"version": "3.3.0"},
 "storage": {"files": [
   {"path": "/var/lib/kubelet/config.json", "mode": 384, "rackgate": {"secret": true},
    "contents": {"source": "data:;base64,eyJhdXRocyI6eyJyZWdpc3RyeS5sYWIiOnsiYXV0aCI6ImJHRmlPbk5sWTNKbGRBPT0ifX19Cg=="}},
   {"path": "/etc/rackgate/identity", "mode": 420, "contents": {"source": "data:,{{hostname}} {{address.InternalIP}}"}}]}}
IGN
}
