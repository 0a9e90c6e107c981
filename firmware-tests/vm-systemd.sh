#!/usr/bin/env bash
# vm-systemd.sh — nodes boot as Fedora CoreOS and RHCOS boot (issue 42;
# vm-lib.sh): real UEFI firmware (OVMF, Secure Boot on, Microsoft's keys),
# shim, Debian's signed grub and kernel, a swtpm TPM, and a dracut-built
# systemd initramfs with Ignition's own dracut module (the "vendor"
# initramfs, vm-systemd-image.sh, built once per machine), to which the
# agent's fragment is appended exactly as rackgated serves it, with the CA
# part `rackgatectl pointer --initramfs-ca` writes and the kernel arguments
# `pointer --kernel-args` prints. The fragment's initrd units run the agent
# (rackgate-initrd-attest.service before ignition-fetch-offline.service,
# rackgate-initrd-install.service after ignition-files.service); Ignition's
# own units apply the attested config; the node's root disk (the same
# Debian root, vm-systemd-image.sh) boots into systemd, which runs the
# installed rackgate-agent.service. Results are read from the console
# (journald forwards the journal there), from the disk (debugfs, from the
# host) and from the disk's persistent journal (journalctl --directory on
# the files debugfs copied out). Parts, each reported as "(x) ...":
#   (a) first boots, at once: vm-1 joins (the attested files written by
#       Ignition's units, kubelet's certificates, the agent installed, and
#       systemd in the real root running it); the unit order on the
#       console; vm-2 boots with another kernel command line: refused by
#       its boot policy, Ignition never fetches, nothing on its disk;
#       vm-3's appliance is unreachable: the agent waits (a lab part sets
#       RACKGATE_MAX_WAIT=20s), then fails clearly into emergency mode;
#   (b) vm-1's second boot (no ignition.firstboot): no Ignition stage, the
#       real root's systemd runs the installed rackgate-agent.service and
#       its timer: Result success in the disk's journal, re-attested in
#       the appliance's audit, kubelet's certificates kept.
# Boots that end in emergency mode wait forever: the console is watched
# (vm_boot's VM_STOP_ERE) and QEMU stopped. The root disk holds one
# LAB-ONLY unit that powers the machine off once rackgate-agent.service
# has run (vm-systemd-image.sh).
# Usage: vm-systemd.sh FRAGMENT RACKGATED RACKGATECTL
set -euo pipefail

POOL=rack
# The node's vendor arguments, as Fedora CoreOS's first boot has them
# (ignition.firstboot only on the first), before pointer's.
VENDOR_ARGS="root=LABEL=rgroot rw console=ttyS0 ignition.platform.id=metal ip=dhcp systemd.journald.forward_to_console=1 panic=-1"
FIRSTBOOT_ARGS="$VENDOR_ARGS ignition.firstboot"
# What the refused machine's command line adds (the policy forbids it).
ODD_ARG="systemd.debug-shell=1"
# A machine that waits forever: systemd's emergency mode (the real root's
# or dracut's in the initramfs).
EMERGENCY_ERE='Press Enter for maintenance|Entering emergency mode|Cannot open access to console'
# One systemd boot to the real root and back off: 40-65 s alone on 2
# cores with no KVM, 100-140 s three at once (README.md); the lab's time
# factor on top. A boot that hangs short of emergency mode is stopped then.
VM_BOOT_SECONDS="${VM_BOOT_SECONDS:-200}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: vm-systemd.sh FRAGMENT RACKGATED RACKGATECTL"
FRAGMENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=vm-lib.sh
source "$HERE/vm-lib.sh"

lab_skip_unless_tools
vm_skip_unless_tools
command -v journalctl >/dev/null || lab_skip "journalctl missing"
[[ "$(id -u)" == 0 ]] || lab_skip "the vendor image is built in a chroot: needs root"
T_ALL=$(date +%s%N)
echo "# the vendor initramfs and the root disk (vm-systemd-image.sh; built once per machine: 20 s to 2 min)"
t=$(date +%s%N)
IMAGE="$("$HERE/vm-systemd-image.sh" "$VM_KERNEL_VERSION")" || { echo "Bail out! vm-systemd-image.sh failed"; exit 1; }
echo "# image: $IMAGE ($(lab_ms_since "$t") ms)"
lab_init vm-systemd
rg_init "$RACKGATED" "$RACKGATECTL"
"$RACKGATECTL" init --state-dir "$RG_DIR/state" --renew-serving-cert --name localhost \
  --address 127.0.0.1 --address "$VM_APPLIANCE_IP" >/dev/null
rg_config retry_after_seconds 1
rg_config agent_bundle "\"$FRAGMENT\""
lab_ca lab
for m in vm1 vm2 vm3; do lab_machine_create "$m" lab & done
wait
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
vm_pool_templates
# The boot policy: Secure Boot, and a command line without what would hand
# the boot to someone at the console (docs/policy.md's example).
cat > "$LAB_DIR/policy.json" <<JSON
{"version": 1, "require_secure_boot": true,
 "kernel_cmdline": {"forbidden": ["rd.break", "systemd.debug-shell", "init="]}}
JSON
# The API server the kubeconfig names (nothing listens there): the pool's
# setting, which the appliance sends the initramfs's agent (it has no
# --apiserver to pass; docs/agent.md).
echo "{\"apiserver\": \"$VM_APISERVER\"}" > "$LAB_DIR/settings.json"
rg_ctl pool put "$POOL" --public-template "$LAB_DIR/public.ign" --attested-template "$LAB_DIR/attested.ign" \
  --settings "$LAB_DIR/settings.json" --policy "$LAB_DIR/policy.json" --token-required no >/dev/null
for n in 1 2; do
  rg_ctl enroll --hostname "vm-$n" --pool "$POOL" --ek-cert "$(lab_dir "vm$n")/ek-rsa.der" \
    --address "InternalIP=$VM_NODE_IP" >/dev/null
done
# Each machine's root disk: a copy of the image's (sparse).
for m in vm1 vm2 vm3; do cp --sparse=always "$IMAGE/root.img" "$(lab_dir "$m")/disk.img"; done

# The fragment as a node fetches it, checked against pointer's digest.
served_code="$(rg_get /v1/agent/initramfs "$LAB_DIR/served.cpio.zst")"
vm_pointer "$LAB_DIR/served.cpio.zst" "$FRAGMENT"
served_digest() { vm_served_digest "$served_code" "$LAB_DIR/served.cpio.zst"; }
lab_check_shown "the served fragment has the SHA-256 rackgatectl pointer --kernel-args printed" served_digest
echo "# pointer --kernel-args: $VM_KERNEL_ARGS"
# initrd = the vendor's, the served fragment, the CA part (and a lab part).
cat "$IMAGE/vendor.img" "$LAB_DIR/served.cpio.zst" "$VM_DIR/ca.cpio.gz" > "$LAB_DIR/initrd.img"
# The unreachable machine's lab part: the attestation unit waits 20 s, not 1 h.
mkdir -p "$LAB_DIR/labpart/etc/systemd/system/rackgate-initrd-attest.service.d"
printf '# LAB ONLY: give up after 20 s\n[Service]\nEnvironment=RACKGATE_MAX_WAIT=20s\n' \
  > "$LAB_DIR/labpart/etc/systemd/system/rackgate-initrd-attest.service.d/lab.conf"
(cd "$LAB_DIR/labpart" && find . -print | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) | gzip -1 > "$LAB_DIR/lab.cpio.gz"
cat "$LAB_DIR/initrd.img" "$LAB_DIR/lab.cpio.gz" > "$LAB_DIR/initrd-wait.img"
VM_CMDLINE="$FIRSTBOOT_ARGS" vm_media first "" "$LAB_DIR/initrd.img"
VM_CMDLINE="$FIRSTBOOT_ARGS" vm_media odd "$ODD_ARG" "$LAB_DIR/initrd.img"
VM_CMDLINE="$FIRSTBOOT_ARGS" vm_media wait "" "$LAB_DIR/initrd-wait.img"
VM_CMDLINE="$VENDOR_ARGS" vm_media later "" "$LAB_DIR/initrd.img"
lab_check_shown "the first boot's command line: the vendor's arguments, then pointer --kernel-args' ($VM_KERNEL_ARGS)" \
  grep -qF "linux /vmlinuz $FIRSTBOOT_ARGS $VM_KERNEL_ARGS" "$VM_DIR/first/grub.cfg"

py() { vm_py "$@"; }
# boot M MEDIA [PORT]: one boot, stopped in emergency mode; QEMU's status
# to $(lab_dir M)/boot.rc (0: powered off; 125: emergency; 124: timeout).
boot() {
  local rc=0
  VM_STOP_ERE="$EMERGENCY_ERE" VM_GUESTFWD_PORT="${3:-}" vm_boot "$1" "$2" ms || rc=$?
  echo "$rc" > "$(lab_dir "$1")/boot.rc"
  echo "# $1 ($2): qemu $rc, $(cat "$(lab_dir "$1")/boot.ms") ms wall"
}
console() { lab_dir "$1" | sed 's|$|/serial.boot|'; }
# console_has M ERE: M's last boot's console matches ERE.
console_has() { grep -aEq -- "$2" "$(console "$1")"; }
# console_tail M: the end of M's console, for a failing check.
console_tail() { tr -d '\r' < "$(console "$1")" | grep -av '^\s*$' | tail -n "${2:-25}"; }
# line_of M ERE: the console line number of the first match (empty: none).
line_of() { grep -anE -- "$2" "$(console "$1")" | head -n 1 | cut -d: -f1; }
# before M ERE1 ERE2: ERE1's first line comes before ERE2's, both there;
# prints both lines (journald forwards with the monotonic time).
before() {
  local a b
  a="$(line_of "$1" "$2")"; b="$(line_of "$1" "$3")"
  [[ -n "$a" ]] || { echo "no /$2/ on the console"; console_tail "$1"; return 1; }
  [[ -n "$b" ]] || { echo "no /$3/ on the console"; console_tail "$1"; return 1; }
  sed -n "${a}p;${b}p" "$(console "$1")" | tr -d '\r' | sed 's/^/# /'
  (( a < b )) || { echo "line $a is not before line $b"; return 1; }
}
# pid1 UNIT VERB: PID 1's journal line for UNIT, forwarded to the console.
pid1() { echo "systemd\\[1\\]: $2 ${1//./\\.}"; }
# unit_order M: the units that matter in M's last boot, as the console
# carried them (journald's forward, with the kernel's monotonic time).
unit_order() {
  grep -aE 'systemd\[1\]: (Reached target network-online\.target|(Starting|Finished) (rackgate-initrd-[a-z]+|ignition-(fetch-offline|files)|rackgate-agent)\.service|Switching root)|fetched user config|reboot: Power down' \
    "$(console "$1")" | tr -d '\r' | cut -c1-110 | sed 's/^/#   /' || true
}
# journal M DIR: M's persistent journal, copied out of its disk (debugfs)
# into DIR/journal/MACHINE-ID; prints that directory, for journalctl -D.
journal() {
  local d
  rm -rf "$2"; mkdir -p "$2"
  PATH=$PATH:/usr/sbin:/sbin debugfs -R "rdump /var/log/journal $2" "$(lab_dir "$1")/disk.img" >/dev/null 2>&1
  d="$(find "$2/journal" -mindepth 1 -maxdepth 1 -type d | head -n 1)"
  [[ -n "$d" ]] && echo "$d"
}
# secret_free M: nothing of the attested config or the csr step on M's disk.
secret_free() {
  local f
  for f in /var/lib/kubelet/config.json /etc/rackgate/identity /var/lib/kubelet/kubeconfig /var/lib/kubelet/pki \
           /etc/.ignition-result.json /opt/rackgate-agent /etc/rackgate/agent.env; do
    if vm_disk_has "$1" "$f"; then echo "$f on $1's disk"; return 1; fi
  done
}

# failed_to_emergency M: M's attestation unit failed and its OnFailure= put
# the initramfs into emergency mode, where the boot was stopped. Whether
# systemd logs "Dependency failed for ignition-fetch-offline.service" is
# chance: the emergency isolate may cancel that waiting job first (it
# does not start either way; the checks after this one say so).
failed_to_emergency() {
  local c; c="$(console "$1")"
  grep -aEq "$(pid1 rackgate-initrd-attest.service 'Failed to start')" "$c" || { echo "the unit did not fail"; console_tail "$1"; return 1; }
  grep -aEq "$(pid1 emergency.target 'Reached target')" "$c" || { echo "no emergency.target"; console_tail "$1"; return 1; }
  [[ "$(cat "$(lab_dir "$1")/boot.rc")" == 125 ]] || { echo "qemu $(cat "$(lab_dir "$1")/boot.rc"), not stopped at the emergency shell"; return 1; }
  echo "# $1: $(grep -aEc 'Dependency failed for ignition-fetch-offline' "$c") 'Dependency failed for ignition-fetch-offline' line(s)"
}

# agent_unit_ran NAME: M's disk's journal (copied to $LAB_DIR/journal-NAME),
# its last boot: systemd (PID 1) started rackgate-agent.service and it
# ended with Result success (the unit-succeeded message, no UNIT_RESULT
# of a failure), the agent's own lines say it attested as vm-1, and
# rackgate-agent-renew.timer was started.
agent_unit_ran() {
  local j
  j="$(journal vm1 "$LAB_DIR/journal-$1")" || { echo "no journal on the disk"; return 1; }
  journalctl -D "$j" --list-boots --no-pager | sed 's/^/# /'
  journalctl -D "$j" -b -0 -o json --no-pager \
    UNIT=rackgate-agent.service + _SYSTEMD_UNIT=rackgate-agent.service + UNIT=rackgate-agent-renew.timer > "$LAB_DIR/agent-unit-$1.json"
  lab_python - "$LAB_DIR/agent-unit-$1.json" <<'PY'
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def msgs(**kv):
    return [x.get("MESSAGE", "") for x in e if all(x.get(k) == v for k, v in kv.items())]
done = msgs(UNIT="rackgate-agent.service", _PID="1", JOB_TYPE="start", JOB_RESULT="done")
ok = msgs(UNIT="rackgate-agent.service", _PID="1", MESSAGE_ID="7ad2d189f7e94e70a38c781354912448")
failed = [x for x in e if x.get("UNIT") == "rackgate-agent.service" and x.get("UNIT_RESULT")]
agent = msgs(_SYSTEMD_UNIT="rackgate-agent.service")
timer = msgs(UNIT="rackgate-agent-renew.timer", _PID="1", JOB_RESULT="done")
print("#", done, ok, [f.get("UNIT_RESULT") for f in failed], timer)
print(*("#   agent: " + m for m in agent[-6:]), sep="\n")
attested = [m for m in agent if "step=attest" in m and " ok hostname=vm-1" in m]
sys.exit(0 if done and ok and not failed and attested and timer else 1)
PY
}

# --- (a) first boots -------------------------------------------------------------
echo "# (a) three first boots at once: vm-1 joins, vm-2 another command line, vm-3 no appliance"
UNREACHABLE_PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
t=$(date +%s%N)
boot vm1 first & p1=$!
boot vm2 odd & p2=$!
boot vm3 wait "$UNREACHABLE_PORT" & p3=$!
wait "$p1" "$p2" "$p3" || true
echo "# (a) three first boots at once: $(lab_ms_since "$t") ms wall"

CLUSTER_CA="$RG_DIR/state/cluster-ca/ca.crt"
# joined_disk: what vm-1's first boot left on its disk, read from the host.
joined_disk() {
  local d="$LAB_DIR/disk-vm1"
  mkdir -p "$d"
  vm_disk_cat vm1 /var/lib/kubelet/pki/kubelet-client-current.pem > "$d/client.pem"
  openssl verify -CAfile "$CLUSTER_CA" "$d/client.pem" >/dev/null || { echo "client certificate does not verify"; return 1; }
  openssl x509 -in "$d/client.pem" -noout -subject | grep "CN *= *system:node:vm-1" >/dev/null || { echo "not system:node:vm-1"; return 1; }
  vm_disk_cat vm1 /var/lib/kubelet/pki/kubelet-server-current.pem > "$d/server.pem"
  openssl verify -CAfile "$CLUSTER_CA" "$d/server.pem" >/dev/null || { echo "serving certificate does not verify"; return 1; }
  vm_disk_has vm1 /var/lib/kubelet/kubeconfig || { echo "no kubeconfig"; return 1; }
}
# by_ignition: the attested files were written by Ignition's files stage
# in the initramfs (its journal says so; its result file is on the disk),
# the secret one mode 0600 as the template says.
by_ignition() {
  vm_disk_cat vm1 /var/lib/kubelet/config.json | grep registry.lab >/dev/null || { echo "no pull secret"; return 1; }
  [[ "$(vm_disk_cat vm1 /etc/rackgate/identity)" == "vm-1 $VM_NODE_IP" ]] || { echo "identity: $(vm_disk_cat vm1 /etc/rackgate/identity)"; return 1; }
  PATH=$PATH:/usr/sbin debugfs -R "stat /var/lib/kubelet/config.json" "$(lab_dir vm1)/disk.img" 2>/dev/null |
    grep -E 'Mode: +0600' >/dev/null || { echo "the pull secret is not mode 0600"; return 1; }
  vm_disk_cat vm1 /etc/.ignition-result.json | grep '"provisioningDate"' >/dev/null || { echo "no /etc/.ignition-result.json"; return 1; }
  local j
  j="$(journal vm1 "$LAB_DIR/journal-a")" || { echo "no journal on the disk"; return 1; }
  journalctl -D "$j" -b -0 -u ignition-files.service -o cat > "$LAB_DIR/files-stage.txt" 2>&1 || true
  for f in /sysroot/var/lib/kubelet/config.json /sysroot/etc/rackgate/identity; do
    grep -F "writing file \"$f\"" "$LAB_DIR/files-stage.txt" >/dev/null ||
      { echo "ignition-files.service did not write $f:"; tail -n 8 "$LAB_DIR/files-stage.txt"; return 1; }
  done
}
# installed: what rackgate-initrd-install.service wrote for later boots.
installed() {
  local f
  for f in /opt/rackgate-agent/rackgate-agent /etc/rackgate/ca.pem /etc/rackgate/agent.env \
           /etc/systemd/system/rackgate-agent.service /etc/systemd/system/rackgate-agent-renew.timer; do
    vm_disk_has vm1 "$f" || { echo "no $f"; return 1; }
  done
  vm_disk_cat vm1 /etc/rackgate/agent.env | grep -x "RACKGATE_URL=https://$VM_APPLIANCE_IP:22623" >/dev/null ||
    { echo "agent.env: no URL"; return 1; }
  vm_disk_cat vm1 /var/lib/rackgate-agent/config-applied | grep -E "^applied_at=[0-9]+ hostname=vm-1\$" >/dev/null ||
    { echo "no config stamp naming vm-1"; return 1; }
}
lab_check_shown "(a) vm-1: OVMF + shim + grub + kernel + the systemd initramfs, Secure Boot on: the boot powered off by itself (no emergency)" \
  bash -c "[[ \$(cat '$(lab_dir vm1)/boot.rc') == 0 ]] || { tail -n 30 '$(console vm1)'; exit 1; }"
lab_check "(a) vm-1 is joined" test "$(rg_state vm-1)" == joined
lab_check_shown "(a) vm-1's disk: the attested files (pull secret 0600, identity) written by Ignition's ignition-files.service (its journal on the disk)" \
  by_ignition
lab_check_shown "(a) vm-1's disk: kubelet certificates for system:node:vm-1 signed by the cluster CA, its kubeconfig" joined_disk
lab_check_shown "(a) vm-1's disk: rackgate-initrd-install.service installed the agent (/opt/rackgate-agent, unit, timer, agent.env, config stamp)" \
  installed
lab_check_shown "(a) console: rackgate-initrd-attest.service finished before ignition-fetch-offline.service started" \
  before vm1 "$(pid1 rackgate-initrd-attest.service Finished)" "$(pid1 ignition-fetch-offline.service Starting)"
lab_check_shown "(a) console: ignition-files.service finished before rackgate-initrd-install.service started" \
  before vm1 "$(pid1 ignition-files.service Finished)" "$(pid1 rackgate-initrd-install.service Starting)"
lab_check_shown "(a) console: rackgate-initrd-install.service finished before the switch to the real root" \
  before vm1 "$(pid1 rackgate-initrd-install.service Finished)" "$(pid1 initrd-switch-root.service Starting)"
lab_check_shown "(a) vm-1's disk's journal: after the switch, systemd in the real root ran the installed rackgate-agent.service to Result success (attest ok as vm-1), started its timer" \
  agent_unit_ran a
unit_order vm1

# vm-2: refused by its boot policy; Ignition never fetched.
lab_check_shown "(a) vm-2, another kernel command line: the agent is refused (403 boot_policy_violation) on the console" \
  console_has vm2 'refused status=403 reason=boot_policy_violation'
lab_check_shown "(a) vm-2: rackgate-initrd-attest.service failed, emergency mode (stopped there)" failed_to_emergency vm2
lab_check_fails "(a) vm-2: no Ignition stage started" console_has vm2 "$(pid1 'ignition-(fetch|fetch-offline|kargs|disks|mount|files)\.service' Starting)"
lab_check_shown "(a) vm-2: nothing of the attested config, the csr step or the agent on its disk" secret_free vm2
rg_ctl status --json > "$LAB_DIR/status.json"
lab_check_shown "(a) the appliance's record: vm-2's failure, boot_policy_violation, the kernel_cmdline rule" \
  py "$LAB_DIR/status.json" '
f = [x for x in d["recent_failures"] if x["hostname"] == "vm-2"]
print("#", f[:1])
sys.exit(0 if f and f[0]["reason"] == "boot_policy_violation"
         and any(r.startswith("kernel_cmdline:") for r in f[0]["reasons"]) else 1)'
lab_check "(a) vm-2 stays enrolled" test "$(rg_state vm-2)" == enrolled

# vm-3: the appliance does not answer.
lab_check_shown "(a) vm-3, no appliance: the agent waits (RACKGATE_MAX_WAIT=20s), then gives up, the unit fails, emergency mode" \
  failed_to_emergency vm3
lab_check_shown "(a) vm-3: the agent's reason on the console: gave up after max_wait=20s, exit 4 (appliance unreachable)" \
  bash -c "grep -aq 'gave_up max_wait=20s' '$(console vm3)' &&
           grep -aEq 'systemd\\[1\\]: rackgate-initrd-attest\\.service: Main process exited, code=exited, status=4/' '$(console vm3)'"
lab_check_fails "(a) vm-3: no Ignition stage started" console_has vm3 "$(pid1 'ignition-(fetch|fetch-offline|kargs|disks|mount|files)\.service' Starting)"
lab_check_shown "(a) vm-3: nothing on its disk" secret_free vm3

# --- (b) the second boot -----------------------------------------------------------
echo "# (b) vm-1's second boot: systemd in the real root runs the installed agent"
digest() { local f; for f in /var/lib/kubelet/pki/kubelet-client-current.pem /var/lib/kubelet/pki/kubelet-server-current.pem /var/lib/kubelet/config.json; do vm_disk_cat vm1 "$f" | sha256sum; done; }
attests() { rg_ctl audit --json | py /dev/stdin 'print(sum(1 for e in d["entries"] if e.get("action") == "attest" and e.get("hostname") == "vm-1"))'; }
before_digest="$(digest)"
attests_before="$(attests)"
boot vm1 later
unit_order vm1
lab_check_shown "(b) vm-1's second boot powered off by itself (no emergency)" \
  bash -c "[[ \$(cat '$(lab_dir vm1)/boot.rc') == 0 ]] || { tail -n 30 '$(console vm1)'; exit 1; }"
lab_check_fails "(b) no Ignition stage ran (no ignition.firstboot)" console_has vm1 "$(pid1 'ignition-(fetch|fetch-offline|kargs|disks|mount|files)\.service' Starting)"
lab_check_shown "(b) the disk's journal, this boot: systemd (PID 1) ran rackgate-agent.service to Result success (attest ok as vm-1), started rackgate-agent-renew.timer" \
  agent_unit_ran b
lab_check "(b) the appliance's audit: one attest row more for vm-1 ($attests_before before)" test "$(attests)" -gt "$attests_before"
lab_check "(b) kubelet's certificates and the pull secret kept byte for byte" test "$(digest)" == "$before_digest"
lab_check "(b) vm-1 is still joined" test "$(rg_state vm-1)" == joined

rg_stop
echo "# vm-systemd: $(lab_ms_since "$T_ALL") ms in all"
lab_finish
