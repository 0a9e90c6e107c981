#!/usr/bin/env bash
# uki_signed.sh — signed PCR 11 (a policy's "uki_signed") against what
# systemd 252 really makes: fake UKI sections are signed with
# `systemd-measure sign --phase=enter-initrd` (a trusted and another key);
# swtpm machines replay a real event log and then extend PCR 11 as
# systemd-stub does (per section, in the UKI's order: SHA-256 of the section
# name in ASCII with its NUL, then of the contents) and as systemd-pcrphase
# does (the phase word), with those section events appended to the log
# (EV_IPL, data: the name in UTF-16LE with its NUL). Then tpm2_quote over
# sha256:0-7,11 and `rackgatectl policy check --pcr-signature`: the trusted
# key passes; another key, a damaged signature, a quote after leave-initrd
# (only enter-initrd was signed) and a UKI with another .linux are each
# refused with their reason. Also: systemd-measure calculate's PCR 11 is the
# swtpm's.
# Usage: uki_signed.sh RACKGATECTL
set -euo pipefail

RC_PASS=0
RC_FAIL=1
BASE_LOG_NAME=tpm2-tools_event-moklisttrusted.bin  # sha256 only, no StartupLocality
QUOTE_PCRS=sha256:0,1,2,3,4,5,6,7,11
MEASURE="${SYSTEMD_MEASURE:-/usr/lib/systemd/systemd-measure}"

RACKGATECTL="${1:?usage: uki_signed.sh RACKGATECTL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
[[ -x "$MEASURE" ]] || lab_skip "systemd-measure not found at $MEASURE (Debian 12: package systemd)"
if [[ ! -x "$RACKGATECTL" ]]; then echo "not ok - rackgatectl not found at $RACKGATECTL"; echo "1..1"; exit 1; fi
TESTDATA="${RACKGATE_TESTDATA_DIR:-$HERE/../testdata}"
BASE_LOG="$TESTDATA/eventlogs/$BASE_LOG_NAME"
if [[ ! -r "$BASE_LOG" ]]; then echo "not ok - event log not found at $BASE_LOG"; echo "1..1"; exit 1; fi
lab_init uki_signed
T0=$SECONDS
W="$LAB_DIR/work"
mkdir -p "$W"

lab_ca lab
lab_machine signer lab  # systemd-measure sign computes its digest on a TPM

# ------------------------------------------------------- the OS builder ----

printf 'KERNEL' > "$W/linux"
printf 'ANOTHER KERNEL' > "$W/linux2"
printf 'ID=lab\n' > "$W/osrel"
printf 'console=ttyS0 ro' > "$W/cmdline"
printf 'INITRD' > "$W/initrd"
SECTIONS=(--linux="$W/linux" --osrel="$W/osrel" --cmdline="$W/cmdline" --initrd="$W/initrd")
for k in trusted other; do
  openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$W/$k.key" 2>/dev/null
  openssl pkey -in "$W/$k.key" -pubout -out "$W/$k.pub"
  if "$MEASURE" sign "${SECTIONS[@]}" --bank=sha256 --phase=enter-initrd \
      --private-key="$W/$k.key" --public-key="$W/$k.pub" \
      --tpm2-device="$(lab_tcti signer)" > "$W/sig-$k.json" 2>"$W/sign-$k.err"; then
    lab_ok "systemd-measure sign --phase=enter-initrd with the $k key"
  else
    lab_not_ok "systemd-measure sign with the $k key" "$(cat "$W/sign-$k.err")"
  fi
done
"$MEASURE" calculate "${SECTIONS[@]}" --bank=sha256 > "$W/calculate.txt" 2>"$W/calculate.err"
# The first line is the enter-initrd phase: "11:sha256=<hex>".
CALC_PCR11="$(head -n 1 "$W/calculate.txt" | sed -n 's/^11:sha256=\([0-9a-f]*\)$/\1/p')"

# The policy trusts the first key only; a signature document with one byte
# of its signature changed (base64 of other bytes).
lab_python - "$W" <<'EOF'
import base64, json, sys
w = sys.argv[1]
pem = open(f"{w}/trusted.pub").read()
json.dump({"version": 1, "uki_signed": {"public_keys": [pem]}}, open(f"{w}/policy.json", "w"))
doc = json.load(open(f"{w}/sig-trusted.json"))
sig = bytearray(base64.b64decode(doc["sha256"][0]["sig"]))
sig[10] ^= 1
doc["sha256"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
json.dump(doc, open(f"{w}/sig-damaged.json", "w"))
EOF

# -------------------------------------------------------- the machines ----

# boot NAME LINUX: a machine that replays the base log into its swtpm, then
# boots a UKI with the given .linux through systemd-stub: its log is the base
# log with PCR 11's section events appended (NAME/eventlog.bin).
boot() {
  local name="$1" linux="$2" d pcr digest
  lab_machine "$name" lab
  lab_ek_rsa "$name"
  d="$(lab_dir "$name")"
  lab_ak "$name" rsa rsassa "$d/ak"
  lab_python - "$BASE_LOG" "$d/eventlog.bin" "$d/extends.txt" \
    .linux "$linux" .osrel "$W/osrel" .cmdline "$W/cmdline" .initrd "$W/initrd" <<'EOF'
import hashlib, struct, sys
base, out_log, out_extends = sys.argv[1:4]
sections = list(zip(sys.argv[4::2], sys.argv[5::2]))
b = open(base, "rb").read()
# TCG_PCClientPCREvent (the Spec ID event), then TCG_PCR_EVENT2s.
size = struct.unpack_from("<I", b, 28)[0]
spec = b[32:32 + size]
n = struct.unpack_from("<I", spec, 24)[0]
algs = dict(struct.unpack_from("<HH", spec, 28 + 4 * i) for i in range(n))
if algs != {0x000B: 32}:
    sys.exit(f"the base log must be sha256 only, not {algs}")
extends, off = [], 32 + size
while off < len(b):
    pcr, typ, count = struct.unpack_from("<III", b, off); off += 12
    digest = None
    for _ in range(count):
        alg = struct.unpack_from("<H", b, off)[0]
        if alg == 0x000B: digest = b[off + 2:off + 34]
        off += 2 + algs[alg]
    off += 4 + struct.unpack_from("<I", b, off)[0]
    if typ != 3:  # EV_NO_ACTION extends nothing
        extends.append((pcr, digest))
log = bytearray(b)
EV_IPL = 0x0D
def event(pcr, digest, data):
    extends.append((pcr, digest))
    log.extend(struct.pack("<III", pcr, EV_IPL, 1) + struct.pack("<H", 0x000B) + digest
               + struct.pack("<I", len(data)) + data)
for name, path in sections:
    label = (name + "\0").encode("utf-16-le")
    event(11, hashlib.sha256((name + "\0").encode()).digest(), label)
    event(11, hashlib.sha256(open(path, "rb").read()).digest(), label)
open(out_log, "wb").write(log)
with open(out_extends, "w") as f:
    for pcr, digest in extends:
        f.write(f"{pcr} {digest.hex()}\n")
EOF
  local -a args=()
  while read -r pcr digest; do
    args+=("$pcr:sha256=$digest")
    if (( ${#args[@]} >= 32 )); then lab_tpm "$name" tpm2_pcrextend "${args[@]}" >/dev/null; args=(); fi
  done < "$d/extends.txt"
  if (( ${#args[@]} > 0 )); then lab_tpm "$name" tpm2_pcrextend "${args[@]}" >/dev/null; fi
}

# phase NAME WORD: systemd-pcrphase's extend of PCR 11 (SHA-256 of the word,
# no NUL; not in the firmware's log).
phase() {
  lab_tpm "$1" tpm2_pcrextend "11:sha256=$(printf '%s' "$2" | openssl dgst -sha256 -r | cut -d' ' -f1)" >/dev/null
}

# check NAME QUOTE SIGFILE WANT_RC WANT_REASON DESCRIPTION
check() {
  local name="$1" q="$2" sig="$3" want_rc="$4" want="$5" what="$6" d rc=0
  d="$(lab_dir "$name")"
  "$RACKGATECTL" policy check --policy "$W/policy.json" --eventlog "$d/eventlog.bin" \
    --pcrs "$q.pcrs" --message "$q.msg" --pcr-signature "$sig" >"$q.out" 2>"$q.err" || rc=$?
  if [[ "$rc" == "$want_rc" ]] && { [[ -z "$want" ]] || grep -qE "$want" "$q.err"; }; then
    lab_ok "$what"
  else
    lab_not_ok "$what (exit $rc, want $want_rc${want:+ and $want})" "$(cat "$q.err")"
  fi
}

boot m1 "$W/linux"
D1="$(lab_dir m1)"
phase m1 enter-initrd
lab_quote m1 "$D1/ak" "$(openssl rand -hex 20)" "$QUOTE_PCRS" "$D1/q-initrd"
SWTPM_PCR11="$(lab_tpm m1 tpm2_pcrread sha256:11 | sed -n 's/^ *11 *: 0x\([0-9A-Fa-f]*\)$/\1/p' | tr 'A-F' 'a-f')"
if [[ -n "$CALC_PCR11" && "$CALC_PCR11" == "$SWTPM_PCR11" ]]; then
  lab_ok "systemd-measure calculate's PCR 11 (enter-initrd) is the swtpm's, extended as systemd-stub does"
else
  lab_not_ok "systemd-measure calculate's PCR 11 is the swtpm's" "calculate: $CALC_PCR11; swtpm: $SWTPM_PCR11"
fi

check m1 "$D1/q-initrd" "$W/sig-trusted.json" "$RC_PASS" "" \
  "enter-initrd, signed by the trusted key: passes"
check m1 "$D1/q-initrd" "$W/sig-other.json" "$RC_FAIL" "refused: uki_signed: uki_signature_untrusted_key: " \
  "signed by a key the policy does not trust: uki_signature_untrusted_key"
check m1 "$D1/q-initrd" "$W/sig-damaged.json" "$RC_FAIL" "refused: uki_signed: uki_signature_invalid: " \
  "a damaged signature by the trusted key: uki_signature_invalid"

phase m1 leave-initrd
lab_quote m1 "$D1/ak" "$(openssl rand -hex 20)" "$QUOTE_PCRS" "$D1/q-leave"
check m1 "$D1/q-leave" "$W/sig-trusted.json" "$RC_FAIL" "refused: uki_signed: uki_signature_missing: " \
  "quoted at enter-initrd:leave-initrd, only enter-initrd signed: uki_signature_missing"

# The same signature document beside a UKI whose .linux was changed.
boot m2 "$W/linux2"
D2="$(lab_dir m2)"
phase m2 enter-initrd
lab_quote m2 "$D2/ak" "$(openssl rand -hex 20)" "$QUOTE_PCRS" "$D2/q-initrd"
check m2 "$D2/q-initrd" "$W/sig-trusted.json" "$RC_FAIL" "refused: uki_signed: uki_signature_missing: " \
  "a UKI with another .linux (unsigned value): uki_signature_missing"

echo "# uki_signed: $((SECONDS - T0)) s"
lab_finish
