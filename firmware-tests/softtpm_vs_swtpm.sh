#!/usr/bin/env bash
# softtpm_vs_swtpm.sh — the boot storm's software TPM (attest/testing/soft_tpm,
# through softtpm-tool, which calls what bench/boot-storm calls) held against
# a real TPM implementation (swtpm, through tpm2-tools), so that the
# simulator cannot drift from the bytes a TPM produces. The keys differ (a
# TPM's never leave it), so the checks are structural and cryptographic:
#   - public areas: for the RSA-2048 (L-1), ECC P-256 (L-2) and P-384 (H-3)
#     EK templates and for ECC and RSA AKs, the marshalled TPMT_PUBLIC up to
#     the key itself is byte-identical, and tpm2_print reads the same fields;
#   - credentials cross both ways: MakeCredential as rackgated does it
#     (`rackgatectl makecredential`) for a swtpm EK is activated by swtpm, and
#     one made by `tpm2_makecredential -T none` for a simulator EK is
#     activated by the simulator (and refused for another AK's name);
#   - simulator quotes verify with tpm2_checkquote (and a flipped bit does not);
#   - a simulator quote over swtpm's PCR values, nonce, clock and firmware is
#     swtpm's TPMS_ATTEST byte for byte except the qualifiedSigner digest, and
#     the simulator computes swtpm's qualifiedSigner from its EK and AK.
# Usage: softtpm_vs_swtpm.sh SOFTTPM_TOOL RACKGATECTL
set -euo pipefail

SOFT="$(realpath "${1:?usage: softtpm_vs_swtpm.sh SOFTTPM_TOOL RACKGATECTL}")"
RACKGATECTL="$(realpath "${2:?usage: softtpm_vs_swtpm.sh SOFTTPM_TOOL RACKGATECTL}")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
lab_init softtpm-vs-swtpm
lab_ca lab
lab_machine m1 lab
M="$(lab_dir m1)"
S="$LAB_DIR/soft"; mkdir -p "$S"

# --- public areas -----------------------------------------------------------
lab_ek_rsa m1
lab_ek_ecc256 m1
lab_ek_ecc384 m1
lab_ak m1 rsa ecdsa "$M/ak-ecc"
lab_ak m1 rsa rsassa "$M/ak-rsa"
for ek in rsa ecc256 ecc384; do
  t="$ek"; [[ "$ek" == ecc256 ]] && t=ecc
  "$SOFT" ek --type "$t" --public "$S/ek-$ek.pub" --key "$S/ek-$ek.pem"
done
"$SOFT" ak --type ecc --public "$S/ak-ecc.pub" --name "$S/ak-ecc.name" --key "$S/ak-ecc.pem"
"$SOFT" ak --type rsa --public "$S/ak-rsa.pub" --name "$S/ak-rsa.name" --key "$S/ak-rsa.pem"

# tpm2_print without the key itself (rsa:, x:, y:).
print_fields() { tpm2_print -t TPM2B_PUBLIC "$1" 2>/dev/null | grep -Ev '^(rsa|x|y):'; }
same_public() {  # WHAT SWTPM.pub SOFT.pub
  local a b
  a="$("$SOFT" template "$2")"; b="$("$SOFT" template "$3")"
  if [[ -n "$a" && "$a" == "$b" ]]; then
    lab_ok "$1: TPMT_PUBLIC identical up to the key ($(echo "$a" | tail -n 1))"
  else
    lab_not_ok "$1: TPMT_PUBLIC differs" "swtpm: $a"$'\n'"soft:  $b"
  fi
  lab_check "$1: same TPM2B_PUBLIC size ($(stat -c %s "$2") bytes)" test "$(stat -c %s "$2")" == "$(stat -c %s "$3")"
  lab_check "$1: tpm2_print reads the same fields" cmp -s <(print_fields "$2") <(print_fields "$3")
}
same_public "RSA-2048 EK (L-1) vs tpm2_createek -G rsa" "$M/ek-rsa.pub" "$S/ek-rsa.pub"
same_public "ECC P-256 EK (L-2) vs tpm2_createek -G ecc" "$M/ek-ecc256.pub" "$S/ek-ecc256.pub"
same_public "ECC P-384 EK (H-3) vs swtpm_setup's persisted EK" "$M/ek-ecc384.pub" "$S/ek-ecc384.pub"
same_public "ECC AK vs tpm2_createak -G ecc -s ecdsa" "$M/ak-ecc.pub" "$S/ak-ecc.pub"
same_public "RSA AK vs tpm2_createak -G rsa -s rsassa" "$M/ak-rsa.pub" "$S/ak-rsa.pub"
lab_check "the simulator's EK key is the public area's (tpm2_print -f pem = openssl pkey -pubout)" \
  cmp -s <(tpm2_print -t TPM2B_PUBLIC -f pem "$S/ek-rsa.pub" 2>/dev/null) <(openssl pkey -in "$S/ek-rsa.pem" -pubout)

# --- credentials -----------------------------------------------------------
head -c 32 /dev/urandom > "$LAB_DIR/secret"
for ek in rsa ecc384; do
  if "$RACKGATECTL" makecredential --ek-public "$M/ek-$ek.pub" --name "$M/ak-ecc.name" \
       --secret "$LAB_DIR/secret" --output "$LAB_DIR/cred-swtpm-$ek" >/dev/null 2>&1 &&
     lab_activate m1 "$ek" "$M/ak-ecc" "$LAB_DIR/cred-swtpm-$ek" "$LAB_DIR/out-swtpm-$ek" &&
     cmp -s "$LAB_DIR/secret" "$LAB_DIR/out-swtpm-$ek"; then
    lab_ok "$ek EK: rackgated's MakeCredential for a swtpm EK is activated by swtpm"
  else
    lab_not_ok "$ek EK: rackgated's MakeCredential for a swtpm EK is activated by swtpm" "$(tail -n 5 "$M/tpm.log")"
  fi
done
for ek in rsa ecc256 ecc384; do
  for ak in ecc rsa; do
    c="$LAB_DIR/cred-soft-$ek-$ak"
    lab_check "$ek EK, $ak AK: tpm2_makecredential -T none for a simulator EK" \
      lab_makecredential "$S/ek-$ek.pub" "$S/ak-$ak.name" "$LAB_DIR/secret" "$c"
    lab_check "  the simulator activates it to the same secret" \
      sh -c "\"$SOFT\" activate --ek-key \"$S/ek-$ek.pem\" --ek-public \"$S/ek-$ek.pub\" --name \"$S/ak-$ak.name\" \
        --credential \"$c\" --out \"$c.out\" && cmp -s \"$LAB_DIR/secret\" \"$c.out\""
    other=rsa; [[ "$ak" == rsa ]] && other=ecc
    lab_expect 1 "integrity check failed" "  and refuses it for another AK's name" \
      "$SOFT" activate --ek-key "$S/ek-$ek.pem" --ek-public "$S/ek-$ek.pub" --name "$S/ak-$other.name" \
        --credential "$c" --out "$c.wrong"
  done
  lab_check "$ek EK: rackgated's MakeCredential for a simulator EK is activated by the simulator" \
    sh -c "\"$RACKGATECTL\" makecredential --ek-public \"$S/ek-$ek.pub\" --name \"$S/ak-ecc.name\" \
      --secret \"$LAB_DIR/secret\" --output \"$LAB_DIR/cred-rg-$ek\" >/dev/null &&
      \"$SOFT\" activate --ek-key \"$S/ek-$ek.pem\" --ek-public \"$S/ek-$ek.pub\" --name \"$S/ak-ecc.name\" \
      --credential \"$LAB_DIR/cred-rg-$ek\" --out \"$LAB_DIR/cred-rg-$ek.out\" && cmp -s \"$LAB_DIR/secret\" \"$LAB_DIR/cred-rg-$ek.out\""
done

# --- quotes ----------------------------------------------------------------
lab_pcr_extend m1
NONCE="$(head -c 32 /dev/urandom | xxd -p -c 64)"

# attest_fields MSG: magic type qs_size qs extra clock reset restart safe firmware rest
attest_fields() {
  lab_python - "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
o = 0
magic, typ = struct.unpack_from(">IH", d, o); o += 6
n, = struct.unpack_from(">H", d, o); qs = d[o + 2:o + 2 + n]; o += 2 + n
n, = struct.unpack_from(">H", d, o); extra = d[o + 2:o + 2 + n]; o += 2 + n
clock, reset, restart, safe = struct.unpack_from(">QIIB", d, o); o += 17
fw, = struct.unpack_from(">Q", d, o); o += 8
print(f"{magic:08x} {typ:04x} {len(qs)} {qs.hex()} {extra.hex()} {clock} {reset} {restart} {safe} {fw:016x} {d[o:].hex()}")
PY
}

# tpm2_checkquote 5.4 fails to hash 8 or more values of a `-F values` file,
# even for swtpm's own quotes ("Failed to hash PCR values related to
# quote"), so it checks the selections of at most 7 PCRs; the daemon's
# default selection, sha256:0-7, is checked by verify-quote and the layout.
for kind in ecc rsa; do
  for list in "sha256:0,1,2,3,4,5,6,7" "sha256:0,1,2,3,4,5,7" "sha1:0,7+sha256:0,1,2,3,7"; do
    t="$kind AK, $list"
    q="$LAB_DIR/q-$kind-${list//[:,+]/_}"
    if ! lab_quote m1 "$M/ak-$kind" "$NONCE" "$list" "$q.swtpm" values; then
      lab_not_ok "$t: tpm2_quote on swtpm" "$(tail -n 5 "$M/tpm.log")"; continue
    fi
    read -r magic typ qs_size qs extra clock reset restart safe fw rest <<<"$(attest_fields "$q.swtpm.msg")"
    # The simulator quotes swtpm's PCR values with swtpm's clock and firmware.
    "$SOFT" quote --ak-key "$S/ak-$kind.pem" --ak-public "$S/ak-$kind.pub" --ek-public "$S/ek-rsa.pub" \
      --pcr-list "$list" --pcr-values "$q.swtpm.pcrs" --nonce "$NONCE" \
      --clock "$clock" --reset "$reset" --restart "$restart" --firmware "$fw" \
      --message "$q.soft.msg" --signature "$q.soft.sig"
    read -r s_magic s_typ s_qs_size s_qs s_extra s_clock s_reset s_restart s_safe s_fw s_rest <<<"$(attest_fields "$q.soft.msg")"
    if (( $(echo "$list" | tr ',+' '\n\n' | wc -l) <= 7 )); then
      lab_check "$t: tpm2_checkquote accepts the simulator's quote" \
        tpm2_checkquote -u "$S/ak-$kind.pub" -m "$q.soft.msg" -s "$q.soft.sig" -f "$q.swtpm.pcrs" -l "$list" -g sha256 -q "$NONCE"
      lab_flip_bit "$q.soft.msg" -1 "$q.soft.bad"
      lab_check_fails "  and refuses it with one bit flipped" \
        tpm2_checkquote -u "$S/ak-$kind.pub" -m "$q.soft.bad" -s "$q.soft.sig" -f "$q.swtpm.pcrs" -l "$list" -g sha256 -q "$NONCE"
    fi
    lab_expect 0 "" "  rackgatectl verify-quote accepts it" \
      "$RACKGATECTL" verify-quote --ak-public "$S/ak-$kind.pub" --message "$q.soft.msg" --signature "$q.soft.sig" \
        --pcrs "$q.swtpm.pcrs" --nonce "$NONCE" --pcr-list "$list"
    lab_check "  same signature layout as swtpm's ($(stat -c %s "$q.swtpm.sig") bytes, $(xxd -p -l 6 "$q.swtpm.sig"))" \
      sh -c "[ \"$(stat -c %s "$q.swtpm.sig")\" = \"$(stat -c %s "$q.soft.sig")\" ] && [ \"$(xxd -p -l 6 "$q.swtpm.sig")\" = \"$(xxd -p -l 6 "$q.soft.sig")\" ]" \

    if [[ "$s_magic $s_typ $s_qs_size ${s_qs:0:4} $s_extra $s_clock $s_reset $s_restart $s_safe $s_fw $s_rest" == \
          "$magic $typ $qs_size ${qs:0:4} $extra $clock $reset $restart $safe $fw $rest" ]]; then
      lab_ok "$t: TPMS_ATTEST byte for byte as swtpm's but for the qualifiedSigner digest ($(stat -c %s "$q.swtpm.msg") bytes)"
    else
      lab_not_ok "$t: TPMS_ATTEST differs from swtpm's" \
        "swtpm: $(xxd -p -c 256 "$q.swtpm.msg")"$'\n'"soft:  $(xxd -p -c 256 "$q.soft.msg")"
    fi
    lab_check "$t: the simulator computes swtpm's qualifiedSigner from its EK and AK" \
      test "$("$SOFT" qualified-name --ek-public "$M/ek-rsa.pub" --ak-public "$M/ak-$kind.pub")" == "$qs"
  done
done

lab_finish
