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
lab_check_shown "(b) it pins PCRs 0-7, Secure Boot and the kernel command line grub measured" \
  py "$LAB_DIR/proposed.json" '
pcrs = d.get("pcrs", {}).get("sha256", {})
print("# pcrs:", sorted(pcrs, key=int), "keys:", sorted(d))
sys.exit(0 if "7" in pcrs and d.get("kernel_cmdline") and d.get("require_secure_boot") else 1)'
lab_check_shown "(b) policy accept --proposal SHA" \
  rg_ctl policy accept --pool "$POOL" --proposal "$SHA" --reason "lab: the real firmware boot"
# The proposal pins PCRs 0-7 only (docs/policy-proposal.md): grub's
# measurements of the files it read (PCR 9: grub.cfg, kernel, initramfs)
# and of its commands (PCR 8) are pinned by the operator from the
# machine's own log, which replays to what its quote vouched for.
vm_eventlog vm1 "$LAB_DIR/vm1.eventlog.bin"
"$RACKGATECTL" eventlog replay "$LAB_DIR/vm1.eventlog.bin" --json > "$LAB_DIR/vm1.replay.json"
lab_check_shown "(b) the console carried the firmware log; it replays (PCR 8 and 9 in sha256)" \
  py "$LAB_DIR/vm1.replay.json" 'p = d["pcrs"]["sha256"]; sys.exit(0 if "8" in p and "9" in p else 1)'
py "$LAB_DIR/proposed.json" '
r = json.load(open(sys.argv[2]))["pcrs"]["sha256"]
for n in ("8", "9"):
    d["pcrs"]["sha256"][n] = r[n]
json.dump(d, open(sys.argv[3], "w"), indent=1)' "$LAB_DIR/vm1.replay.json" "$LAB_DIR/pinned.json"
lab_check_shown "(b) policy put: the proposal with PCR 8 and 9 pinned" \
  rg_ctl policy put --pool "$POOL" --policy "$LAB_DIR/pinned.json" --reason "lab: pin grub's PCRs 8 and 9"

# --- (c) the same boot, enforced ---------------------------------------------------
echo "# (c) the same machine boots again"
boot_check vm1 good ms "$RC_OK" "$R_ATTESTED" "(c) the same boot again: attested against the accepted policy"
lab_check "(c) vm-1 is attested" test "$(rg_state vm-1)" == attested

# --- (d) refusals --------------------------------------------------------------------
# Each refused boot is judged by the agent's line (403
# boot_policy_violation, exit 3) and by the rules rackgated logged for it
# (one "policy violation" line a rule, naming what differs).
echo "# (d) what the policy refuses"
# violations_since N ERE: a "policy violation vm-1" line after log line N matches ERE.
violations_since() {
  tail -n "+$(( $1 + 1 ))" "$RG_DIR/rackgated.log" | grep -E "policy violation vm-1 " | grep -Eq -- "$2"
}
# only_since N ERE: every such line after log line N matches ERE (and one does).
only_since() {
  local lines
  lines="$(tail -n "+$(( $1 + 1 ))" "$RG_DIR/rackgated.log" | grep -E "policy violation vm-1 ")" || return 1
  ! grep -Evq -- "$2" <<<"$lines"
}
REFUSAL_MARK=0
refusal() {
  local media="$1" keys="$2" ere="$3" desc="$4" mark
  mark="$(wc -l < "$RG_DIR/rackgated.log")"
  REFUSAL_MARK="$mark"
  boot_check vm1 "$media" "$keys" "$RC_REFUSED" "$R_VIOLATION" "$desc: refused (403 boot_policy_violation)"
  lab_check_shown "$desc: rackgated names the rule ($ere)" violations_since "$mark" "$ere"
  echo "# rules rackgated logged:"
  tail -n "+$(( mark + 1 ))" "$RG_DIR/rackgated.log" | grep -E "policy violation vm-1 " | sed 's/^.*: /#   /' | head -n 6
}
# Secure Boot off (no keys enrolled): PCR 7 tells, and shim then boots
# grub, and grub the kernel, without the EFI stub handing the kernel the
# firmware's log (none in securityfs: eventlog_missing).
refusal good nokeys "secure_boot secure_boot_" "(d) Secure Boot off"
vm_media cmdline "rackgate.extra=1"
refusal cmdline ms "kernel_cmdline kernel_cmdline_mismatch" "(d) another kernel command line"
# Four bytes more in the initramfs (zeros after the last archive, which the
# kernel skips): grub measures the file it loaded into PCR 9.
cp "$VM_DIR/good/initrd.img" "$LAB_DIR/tampered.img"
printf '\0\0\0\0' >> "$LAB_DIR/tampered.img"
vm_media tampered "" "$LAB_DIR/tampered.img"
refusal tampered ms "pcrs pcr_mismatch \\(sha256 PCR 9 " "(d) a tampered initramfs"
lab_check_shown "(d) a tampered initramfs: PCR 9 is the only rule it breaks" \
  only_since "$REFUSAL_MARK" "pcrs pcr_mismatch \\(sha256 PCR 9 "
rg_ctl show vm-1 --json > "$LAB_DIR/show.vm1.json" || true

echo "# vm-boot: $(lab_ms_since "$T_ALL") ms in all"
lab_finish
