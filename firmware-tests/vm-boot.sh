#!/usr/bin/env bash
# vm-boot.sh — a real firmware boot through rackgate (issue 30; vm-lib.sh):
# QEMU with OVMF (Secure Boot on, Microsoft's keys), shim, Debian's signed
# grub and kernel, a TPM backed by swtpm with a lab EK certificate, and the
# self-contained agent in a busybox initramfs, against a real rackgated on
# 127.0.0.1 (the guest reaches nothing else). Parts, each reported as
# "(x) ...":
#   (a) observing: the machine boots, its agent sends the real TPM's EK,
#       a quote and the firmware's own event log (securityfs); the pool
#       observes, the agent waits (503 boot_policy_observing) and gives up;
#       the appliance recorded the observed boot;
#   (b) `policy propose` from that real boot, `policy accept`;
#   (c) the same machine boots again: attested;
#   (d) refusals, each by the rule that names the difference: Secure Boot
#       off (PCR 7), another kernel command line (grub's, PCR 8), a
#       tampered initramfs (PCR 9).
# Usage: vm-boot.sh FRAGMENT RACKGATED RACKGATECTL
set -euo pipefail

RC_OK=0
RC_REFUSED=3
RC_GAVE_UP=4
R_OBSERVING='step=attest machine=[0-9a-f]{16} wait status=503 reason=boot_policy_observing'
R_ATTESTED='step=attest machine=[0-9a-f]{16} ok hostname=vm-1'
R_VIOLATION='step=attest machine=[0-9a-f]{16} refused status=403 reason=boot_policy_violation'
POOL=default

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: vm-boot.sh FRAGMENT RACKGATED RACKGATECTL"
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
lab_init vm-boot
T_ALL=$(date +%s%N)
rg_init "$RACKGATED" "$RACKGATECTL"
# The serving certificate names the address the guest dials too.
"$RACKGATECTL" init --state-dir "$RG_DIR/state" --renew-serving-cert --name localhost \
  --address 127.0.0.1 --address "$VM_APPLIANCE_IP" >/dev/null
rg_config retry_after_seconds 1
# Quotes cover grub's PCRs too: 8 (its commands, the kernel command line),
# 9 (the files it reads: grub.cfg, kernel, initramfs) and 14 (shim's MOK
# lists). rackgated's default (0-7) leaves the initramfs unquoted.
rg_config default_pcr_selection '"sha256:0,1,2,3,4,5,6,7,8,9,14"'
lab_ca lab
lab_machine_create vm1 lab
rg_trust lab
rg_start
rg_ctl enroll --hostname vm-1 --pool "$POOL" --ek-cert "$(lab_dir vm1)/ek-rsa.der" >/dev/null
rg_ctl policy observe --pool "$POOL" --reason "lab: learn a real firmware boot" >/dev/null
vm_init "$FRAGMENT"
vm_media good

# py FILE CODE ARGS...: CODE with `d`, FILE's JSON; exits as CODE says.
py() {
  local file="$1" code="$2"; shift 2
  lab_python -c "import json, sys
d = json.load(open(sys.argv[1]))
$code" "$file" "$@"
}
# boot_check M MEDIA KEYS RC ERE DESC: one boot, judged by the agent's exit
# status and its log line on the serial console.
boot_check() {
  local m="$1" media="$2" keys="$3" want="$4" ere="$5" desc="$6" rc=0 got
  vm_boot "$m" "$media" "$keys" || rc=$?
  got="$(vm_agent_exit "$m")"
  echo "# $m ($media, secure boot $keys): boot ${rc}, $(cat "$(lab_dir "$m")/boot.ms") ms wall, agent exit ${got:-none}"
  if [[ "$rc" == 0 && "$got" == "$want" ]] && vm_serial "$m" | grep -Eq -- "$ere"; then
    lab_ok "$desc"
  else
    lab_not_ok "$desc" "qemu $rc, agent exit ${got:-none} (want $want, /$ere/); console:"$'\n'"$(vm_serial "$m" | grep -v '^\s*$' | tail -n 15)"$'\n'"qemu: $(tail -n 3 "$(lab_dir "$m")/qemu.log")"
  fi
}

# --- (a) observing ------------------------------------------------------------
echo "# (a) a real firmware boot into an observing pool"
boot_check vm1 good ms "$RC_GAVE_UP" "$R_OBSERVING" \
  "(a) OVMF + shim + grub + kernel, Secure Boot on: the agent in the initramfs attests, the pool observes (503)"
lab_check_shown "(a) the initramfs saw the firmware's event log in securityfs" \
  bash -c "vm_serial() { tr -d '\\r' < '$(lab_dir vm1)/serial.boot'; }; vm_serial | grep -Eq 'RACKGATE-LAB: eventlog [1-9][0-9]{3,} bytes'"
rg_ctl policy show --pool "$POOL" --json > "$LAB_DIR/show.observe.json"
lab_check_shown "(a) the appliance recorded the boot: policy show lists vm-1 observed" \
  py "$LAB_DIR/show.observe.json" '
hosts = [m["hostname"] for m in d["machines"]]
print("#", d["mode"], d.get("observed"), hosts)
sys.exit(0 if d["mode"] == "observe" and "vm-1" in hosts else 1)'

# --- (b) propose, accept ----------------------------------------------------------
echo "# (b) policy from the real boot"
rg_ctl policy propose --pool "$POOL" --json > "$LAB_DIR/propose.json" 2>"$LAB_DIR/propose.err" || true
rg_ctl policy propose --pool "$POOL" --output "$LAB_DIR/proposed.json" > "$LAB_DIR/propose.txt" 2>&1 || true
sed 's/^/#   /' "$LAB_DIR/propose.txt" | head -n 40
SHA="$(py "$LAB_DIR/propose.json" 'print(d["proposal_sha256"])' 2>/dev/null || echo '')"
lab_check_shown "(b) policy propose from the real log has a proposal ($SHA)" test -n "$SHA"
lab_check_shown "(b) it pins PCR 7 (Secure Boot), 8 and 9 (grub), the kernel command line and Secure Boot" \
  py "$LAB_DIR/proposed.json" '
pcrs = d.get("pcrs", {}).get("sha256", {})
print("# pcrs:", sorted(pcrs, key=int), "keys:", sorted(d))
sys.exit(0 if {"7", "8", "9"} <= set(pcrs) and d.get("kernel_cmdline") and d.get("require_secure_boot") else 1)'
lab_check_shown "(b) policy accept --proposal SHA" \
  rg_ctl policy accept --pool "$POOL" --proposal "$SHA" --reason "lab: the real firmware boot"

# --- (c) the same boot, enforced ---------------------------------------------------
echo "# (c) the same machine boots again"
boot_check vm1 good ms "$RC_OK" "$R_ATTESTED" "(c) the same boot again: attested against the accepted policy"
lab_check "(c) vm-1 is attested" test "$(rg_state vm-1)" == attested

# --- (d) refusals --------------------------------------------------------------------
echo "# (d) what the policy refuses"
boot_check vm1 good nokeys "$RC_REFUSED" "$R_VIOLATION.*pcr" \
  "(d) Secure Boot off: refused, boot_policy_violation"
vm_media cmdline "rackgate.extra=1"
boot_check vm1 cmdline ms "$RC_REFUSED" "$R_VIOLATION" \
  "(d) another kernel command line: refused, boot_policy_violation"
# One byte more in the initramfs: a cpio's trailing padding the kernel
# ignores, which grub measures all the same.
cp "$VM_DIR/good/initrd.img" "$LAB_DIR/tampered.img"
printf '\0\0\0\0' >> "$LAB_DIR/tampered.img"
vm_media tampered "" "$LAB_DIR/tampered.img"
boot_check vm1 tampered ms "$RC_REFUSED" "$R_VIOLATION" \
  "(d) a tampered initramfs: refused, boot_policy_violation"
rg_ctl show vm-1 --json > "$LAB_DIR/show.vm1.json" || true

echo "# vm-boot: $(lab_ms_since "$T_ALL") ms in all"
lab_finish
