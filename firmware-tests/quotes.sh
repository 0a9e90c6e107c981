#!/usr/bin/env bash
# quotes.sh — `rackgatectl verify-quote` against real tpm2_quote output from
# swtpm machines: RSASSA, RSAPSS and ECDSA AKs, both `tpm2_quote -o` formats,
# and one refusal per field an attacker can touch.
# Usage: quotes.sh RACKGATECTL
set -euo pipefail

# Expected outcomes: exit codes and reasons on stderr (extended regexes). The
# reason codes are attest/quote.h's; rackgatectl prints
# "rackgatectl: refused: REASON: message" (docs/cli.md).
RC_VALID=0
RC_INVALID=1
RC_UNUSABLE=2
R_SIGNATURE=': signature_invalid\b'
R_SCHEME=': signature_scheme_mismatch\b'
R_NONCE=': quote_nonce_mismatch\b'
R_PCR_DIGEST=': quote_pcr_digest_mismatch\b'
R_PCR_NOT_SELECTED=': quote_pcr_not_selected\b'
R_MAGIC=': quote_magic_invalid\b'
R_TYPE=': quote_type_invalid\b'
# Evidence that does not parse is an invalid quote (1), not unusable input.
RC_MALFORMED_EVIDENCE=1
R_ATTEST_MALFORMED=': attest_malformed\b'
R_SIGNATURE_MALFORMED=': signature_malformed\b'
R_SCHEME_UNSUPPORTED=': signature_scheme_unsupported\b'
# AK policy (attest/quote.h CheckAkPolicy).
R_AK_UNRESTRICTED=': ak_not_restricted_signing\b'
R_AK_NOT_FIXED_TPM=': ak_not_fixed_tpm\b'
R_AK_NOT_SIGNING=': ak_(decrypt_key|not_restricted_signing)\b'
R_UNUSABLE=''  # any reason; exit code RC_UNUSABLE is what counts

RACKGATECTL="${1:?usage: quotes.sh RACKGATECTL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
if [[ ! -x "$RACKGATECTL" ]]; then echo "not ok - rackgatectl not found at $RACKGATECTL"; echo "1..1"; exit 1; fi
lab_init quotes

vq() { # vq AKPUB PREFIX NONCE [args...]
  local ak="$1" q="$2" nonce="$3"; shift 3
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$q.sig" \
    --pcrs "$q.pcrs" --nonce "$nonce" "$@"
}

# Offsets of the first and last selected PCR value in each -o format, for a
# single TPML_DIGEST of five sha256 values (see README.md for the layout).
first_pcr_offset() { if [[ "$1" == values ]]; then echo 0; else echo $((132 + 4 + 4 + 2)); fi; }
# Offset of extraData's first byte in a TPMS_ATTEST: magic(4) type(2)
# qualifiedSigner(TPM2B) extraData(TPM2B).
nonce_offset() { echo $(( 8 + $(od -An -tu1 -j6 -N1 "$1") * 256 + $(od -An -tu1 -j7 -N1 "$1") + 2 )); }
# extraData of a TPMS_ATTEST, in hex.
attest_nonce() {
  local off; off="$(nonce_offset "$1")"
  xxd -p -c 256 -s "$off" -l $(( $(od -An -tu1 -j $((off - 2)) -N1 "$1") * 256 + $(od -An -tu1 -j $((off - 1)) -N1 "$1") )) "$1"
}
last_pcr_offset() { if [[ "$1" == values ]]; then echo -1; else echo $((132 + 4 + 4 + 4 * 66 + 2 + 31)); fi; }

lab_ca lab
lab_machine m1 lab
lab_machine m2 lab
lab_pcr_extend m1
lab_ek_rsa m1
lab_ek_ecc384 m1
lab_ek_rsa m2
D1="$(lab_dir m1)"
D2="$(lab_dir m2)"
for kind in rsassa rsapss ecdsa; do
  lab_ak m1 rsa "$kind" "$D1/ak-$kind"
  lab_ak m2 rsa "$kind" "$D2/ak-$kind"
done
lab_ak m1 ecc384 ecdsa "$D1/ak384-ecdsa"

NONCE="$(openssl rand -hex 20)"
OTHER_NONCE="$(openssl rand -hex 20)"
PCRS=sha256:0,1,2,3,7

for kind in rsassa rsapss ecdsa; do
  ak="$D1/ak-$kind.pub"
  for fmt in serialized values; do
    q="$D1/q-$kind-$fmt"
    t="$kind/$fmt"
    if ! lab_quote m1 "$D1/ak-$kind" "$NONCE" "$PCRS" "$q" "$fmt"; then
      lab_not_ok "$t: tpm2_quote" "$(tail -n 5 "$D1/tpm.log")"
      continue
    fi
    lab_expect "$RC_VALID" "" "$t: valid quote verifies" vq "$ak" "$q" "$NONCE"
    lab_expect "$RC_VALID" "" "$t: valid quote with required PCRs sha256:0,7" \
      vq "$ak" "$q" "$NONCE" --pcr-list sha256:0,7
    lab_expect "$RC_VALID" "" "$t: valid quote with all quoted PCRs required" \
      vq "$ak" "$q" "$NONCE" --pcr-list "$PCRS"

    # Cross-check with tpm2-tools. tpm2_checkquote 5.4 has no RSAPSS (added
    # after 5.4), so the PSS signature is checked with openssl (salt = 32).
    if [[ "$kind" == rsapss ]]; then
      tpm2_print -t TPM2B_PUBLIC -f pem "$ak" > "$q.akpem" 2>/dev/null
      tail -c 256 "$q.sig" > "$q.sigraw"
      lab_check "$t: cross-check: openssl verifies the RSAPSS signature (salt 32)" \
        openssl dgst -sha256 -verify "$q.akpem" -sigopt rsa_padding_mode:pss \
        -sigopt rsa_pss_saltlen:32 -signature "$q.sigraw" "$q.msg"
    else
      if [[ "$fmt" == values ]]; then
        lab_check "$t: cross-check: tpm2_checkquote accepts it" \
          tpm2_checkquote -u "$ak" -m "$q.msg" -s "$q.sig" -f "$q.pcrs" -l "$PCRS" -g sha256 -q "$NONCE"
      else
        lab_check "$t: cross-check: tpm2_checkquote accepts it" \
          tpm2_checkquote -u "$ak" -m "$q.msg" -s "$q.sig" -f "$q.pcrs" -g sha256 -q "$NONCE"
      fi
    fi

    # One flipped bit per file.
    b="$D1/bad-$kind-$fmt"
    cp "$q.sig" "$b.sig"; cp "$q.pcrs" "$b.pcrs"; lab_flip_bit "$q.msg" -1 "$b.msg"
    lab_expect "$RC_INVALID" "$R_SIGNATURE" "$t: flipped bit in the message's pcrDigest is refused" \
      vq "$ak" "$b" "$NONCE"
    lab_flip_bit "$q.msg" "$(( $(nonce_offset "$q.msg") + 5 ))" "$b.msg"
    lab_expect "$RC_INVALID" "$R_SIGNATURE" "$t: flipped bit inside the message's nonce is refused" \
      vq "$ak" "$b" "$NONCE"
    cp "$q.msg" "$b.msg"; lab_flip_bit "$q.sig" -1 "$b.sig"
    lab_expect "$RC_INVALID" "$R_SIGNATURE" "$t: flipped bit in the signature is refused" \
      vq "$ak" "$b" "$NONCE"
    lab_flip_bit "$q.sig" 10 "$b.sig" 7
    lab_expect "$RC_INVALID" "$R_SIGNATURE" "$t: flipped high bit early in the signature is refused" \
      vq "$ak" "$b" "$NONCE"
    cp "$q.sig" "$b.sig"; lab_flip_bit "$q.pcrs" "$(first_pcr_offset "$fmt")" "$b.pcrs"
    lab_expect "$RC_INVALID" "$R_PCR_DIGEST" "$t: flipped bit in the first PCR value is refused" \
      vq "$ak" "$b" "$NONCE"
    lab_flip_bit "$q.pcrs" "$(last_pcr_offset "$fmt")" "$b.pcrs" 7
    lab_expect "$RC_INVALID" "$R_PCR_DIGEST" "$t: flipped bit in the last PCR value is refused" \
      vq "$ak" "$b" "$NONCE"

    lab_expect "$RC_INVALID" "$R_NONCE" "$t: wrong nonce is refused" vq "$ak" "$q" "$OTHER_NONCE"
    lab_expect "$RC_INVALID" "$R_NONCE" "$t: nonce one byte short is refused" vq "$ak" "$q" "${NONCE:0:38}"
    lab_expect "$RC_INVALID" "$R_SIGNATURE" "$t: another machine's AK public is refused" \
      vq "$D2/ak-$kind.pub" "$q" "$NONCE"
    lab_expect "$RC_INVALID" "$R_PCR_NOT_SELECTED" "$t: required PCR 10 outside the selection is refused" \
      vq "$ak" "$q" "$NONCE" --pcr-list sha256:0,1,2,3,7,10
    lab_expect "$RC_INVALID" "$R_PCR_NOT_SELECTED" "$t: required sha1 bank outside the selection is refused" \
      vq "$ak" "$q" "$NONCE" --pcr-list sha1:0
  done
done

# An RSASSA quote checked with the RSAPSS AK of the same TPM (another key, and
# another scheme).
lab_expect "$RC_INVALID" "$R_SCHEME" "rsassa quote with the machine's RSAPSS AK public is refused (scheme)" \
  vq "$D1/ak-rsapss.pub" "$D1/q-rsassa-serialized" "$NONCE"
lab_expect "$RC_INVALID" "$R_SIGNATURE" "ecdsa quote with the machine's other (P-384 EK) ECDSA AK is refused" \
  vq "$D1/ak384-ecdsa.pub" "$D1/q-ecdsa-serialized" "$NONCE"

# An AK under the P-384 EK (sha384 name).
q="$D1/q-ak384"
if lab_quote m1 "$D1/ak384-ecdsa" "$NONCE" "$PCRS" "$q"; then
  lab_expect "$RC_VALID" "" "AK under the P-384 EK: valid ECDSA quote verifies" vq "$D1/ak384-ecdsa.pub" "$q" "$NONCE"
else
  lab_not_ok "AK under the P-384 EK: tpm2_quote"
fi

# Two banks and more than eight PCRs: the serialized file then holds two
# TPML_DIGESTs (8 + 5 values), the values file 3*20 + 10*32 bytes.
MULTI=sha1:0,1,2+sha256:0,1,2,3,4,5,6,7,8,9
for fmt in serialized values; do
  q="$D1/q-multi-$fmt"
  if lab_quote m1 "$D1/ak-rsassa" "$NONCE" "$MULTI" "$q" "$fmt"; then
    lab_expect "$RC_VALID" "" "sha1+sha256, 13 PCRs, $fmt: valid quote verifies" vq "$D1/ak-rsassa.pub" "$q" "$NONCE"
    lab_expect "$RC_VALID" "" "sha1+sha256, 13 PCRs, $fmt: required sha256:8,9 verifies" \
      vq "$D1/ak-rsassa.pub" "$q" "$NONCE" --pcr-list sha256:8,9
    lab_expect "$RC_INVALID" "$R_PCR_NOT_SELECTED" "sha1+sha256, 13 PCRs, $fmt: required sha1:7 is refused" \
      vq "$D1/ak-rsassa.pub" "$q" "$NONCE" --pcr-list sha1:7
    b="$D1/bad-multi-$fmt"; cp "$q.msg" "$b.msg"; cp "$q.sig" "$b.sig"
    if [[ "$fmt" == serialized ]]; then
      # Last value: the 5th digest of the second TPML_DIGEST.
      lab_flip_bit "$q.pcrs" $((136 + 532 + 4 + 4 * 66 + 2 + 31)) "$b.pcrs"
    else
      lab_flip_bit "$q.pcrs" -1 "$b.pcrs"
    fi
    lab_expect "$RC_INVALID" "$R_PCR_DIGEST" "sha1+sha256, 13 PCRs, $fmt: flipped bit in the last PCR value is refused" \
      vq "$D1/ak-rsassa.pub" "$b" "$NONCE"
  else
    lab_not_ok "sha1+sha256, 13 PCRs, $fmt: tpm2_quote"
  fi
done
lab_check "sha1+sha256, 13 PCRs, serialized: cross-check: tpm2_checkquote accepts it" \
  tpm2_checkquote -u "$D1/ak-rsassa.pub" -m "$D1/q-multi-serialized.msg" -s "$D1/q-multi-serialized.sig" \
  -f "$D1/q-multi-serialized.pcrs" -g sha256 -q "$NONCE"

# A signature by the AK over a TPMS_ATTEST whose magic is not TPM_GENERATED:
# a restricted key signs outside data only with a TPM2_Hash ticket, which the
# TPM refuses for data starting with the magic. (tpm2_checkquote 5.4 accepts
# this one; its magic check came later.)
q="$D1/q-rsassa-serialized"; b="$D1/nomagic"
cp "$q.msg" "$b.msg"; lab_set_bytes "$b.msg" 0 00544347; cp "$q.pcrs" "$b.pcrs"
if lab_tpm m1 tpm2_hash -C e -g sha256 -o "$b.digest" -t "$b.ticket" "$b.msg" >/dev/null &&
   lab_tpm m1 tpm2_sign -c "$D1/ak-rsassa.ctx" -g sha256 -d -t "$b.ticket" -o "$b.sig" -f tss "$b.digest" >/dev/null; then
  lab_flush m1
  lab_expect "$RC_INVALID" "$R_MAGIC" "AK-signed message without the TPM_GENERATED magic is refused" \
    vq "$D1/ak-rsassa.pub" "$b" "$NONCE"
else
  lab_flush m1
  lab_not_ok "AK-signed message without the TPM_GENERATED magic: tpm2_hash/tpm2_sign"
fi

# A genuine TPM2_Certify by the AK is not a quote.
b="$D1/certify"
if lab_tpm m1 tpm2_certify -C "$D1/ak-rsassa.ctx" -c "$D1/ak-rsassa.ctx" -g sha256 \
     -o "$b.msg" -s "$b.sig" -f tss >/dev/null; then
  lab_flush m1
  cp "$q.pcrs" "$b.pcrs"
  certify_nonce="$(attest_nonce "$b.msg")"
  lab_expect "$RC_INVALID" "$R_TYPE" "AK-signed TPM2_Certify attestation is refused as a quote" \
    vq "$D1/ak-rsassa.pub" "$b" "${certify_nonce:-00}"
else
  lab_flush m1
  lab_not_ok "TPM2_Certify by the AK: tpm2_certify"
fi

# The longest nonce a TPM takes (extraData is at most 64 bytes), and PCR 23.
LONG_NONCE="$(openssl rand -hex 64)"
q="$D1/q-long"
if lab_quote m1 "$D1/ak-ecdsa" "$LONG_NONCE" sha256:0,23 "$q"; then
  lab_expect "$RC_VALID" "" "64-byte nonce over sha256:0,23 verifies" vq "$D1/ak-ecdsa.pub" "$q" "$LONG_NONCE"
  lab_expect "$RC_INVALID" "$R_NONCE" "64-byte nonce: the same nonce with its last byte changed is refused" \
    vq "$D1/ak-ecdsa.pub" "$q" "${LONG_NONCE:0:126}$( [[ "${LONG_NONCE:126:2}" == 00 ]] && echo 01 || echo 00)"
  lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "a 65-byte nonce exits 2" vq "$D1/ak-ecdsa.pub" "$q" "${LONG_NONCE}00"
else
  lab_not_ok "64-byte nonce: tpm2_quote"
fi

# --pcr-list over two banks, in tpm2-tools' syntax.
q="$D1/q-multi-serialized"
lab_expect "$RC_VALID" "" "sha1+sha256: required sha1:0,2+sha256:9 verifies" \
  vq "$D1/ak-rsassa.pub" "$q" "$NONCE" --pcr-list sha1:0,2+sha256:9
lab_expect "$RC_INVALID" "$R_PCR_NOT_SELECTED" "sha1+sha256: required sha1:0+sha256:10 is refused" \
  vq "$D1/ak-rsassa.pub" "$q" "$NONCE" --pcr-list sha1:0+sha256:10

# Keys that must not count as AKs, whatever they sign.
q="$D1/q-rsassa-serialized"
# A duplicable restricted signing key (fixedTPM and fixedParent clear): the
# TPM quotes with it, but its private key may live outside any TPM.
if lab_tpm m1 tpm2_createprimary -C o -c "$D1/srk.ctx" >/dev/null && lab_flush m1 &&
   lab_tpm m1 tpm2_create -C "$D1/srk.ctx" -G rsa2048:rsassa-sha256:null -g sha256 \
     -a 'sensitivedataorigin|userwithauth|restricted|sign' -u "$D1/dup.pub" -r "$D1/dup.priv" >/dev/null &&
   lab_flush m1 &&
   lab_tpm m1 tpm2_load -C "$D1/srk.ctx" -u "$D1/dup.pub" -r "$D1/dup.priv" -c "$D1/dup.ctx" >/dev/null &&
   lab_flush m1 && echo rsassa > "$D1/dup.kind" &&
   lab_quote m1 "$D1/dup" "$NONCE" "$PCRS" "$D1/q-dup"; then
  lab_expect "$RC_INVALID" "$R_AK_NOT_FIXED_TPM" "genuine quote by a duplicable (not fixedTPM) key is refused" \
    vq "$D1/dup.pub" "$D1/q-dup" "$NONCE"
else
  lab_flush m1
  lab_not_ok "duplicable key: tpm2_create/tpm2_quote"
fi
# An unrestricted signing key signs any bytes, including a made-up
# TPMS_ATTEST that carries the attacker's nonce.
b="$D1/forged"
cp "$q.msg" "$b.msg"; lab_set_bytes "$b.msg" "$(nonce_offset "$q.msg")" "$OTHER_NONCE"; cp "$q.pcrs" "$b.pcrs"
if lab_tpm m1 tpm2_createprimary -C o -G rsa2048:rsassa-sha256:null -g sha256 \
     -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' -c "$D1/unr.ctx" >/dev/null &&
   lab_tpm m1 tpm2_readpublic -c "$D1/unr.ctx" -f tss -o "$D1/unr.pub" >/dev/null &&
   lab_tpm m1 tpm2_sign -c "$D1/unr.ctx" -g sha256 -f tss -o "$b.sig" "$b.msg" >/dev/null; then
  lab_flush m1
  lab_expect "$RC_INVALID" "$R_AK_UNRESTRICTED" "made-up attestation signed by an unrestricted key is refused" \
    vq "$D1/unr.pub" "$b" "$OTHER_NONCE"
else
  lab_flush m1
  lab_not_ok "unrestricted key: tpm2_createprimary/tpm2_sign"
fi
lab_expect "$RC_INVALID" "$R_AK_NOT_SIGNING" "the EK public (a decryption key) as the AK is refused" \
  vq "$D1/ek-rsa.pub" "$q" "$NONCE"

# Unusable input exits 2.
q="$D1/q-rsassa-serialized"; ak="$D1/ak-rsassa.pub"; g="$D1/garbage"
for _ in $(seq 1 15); do printf 'not a TPM structure! '; done > "$g.bin"; : > "$g.empty"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing message file exits 2" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$D1/no-such.msg" --signature "$q.sig" \
  --pcrs "$q.pcrs" --nonce "$NONCE"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing AK public file exits 2" \
  vq "$D1/no-such.pub" "$q" "$NONCE"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "garbage AK public exits 2" vq "$g.bin" "$q" "$NONCE"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "nonce that is not hex exits 2" vq "$ak" "$q" "xyz"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing --nonce exits 2" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$q.sig" --pcrs "$q.pcrs"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "malformed --pcr-list exits 2" vq "$ak" "$q" "$NONCE" --pcr-list "sha256:zero"
head -c 40 "$q.msg" > "$g.msg"
lab_expect "$RC_MALFORMED_EVIDENCE" "$R_ATTEST_MALFORMED" "truncated message is refused as malformed" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$g.msg" --signature "$q.sig" \
  --pcrs "$q.pcrs" --nonce "$NONCE"
lab_expect "$RC_MALFORMED_EVIDENCE" "$R_ATTEST_MALFORMED" "garbage message is refused as malformed" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$g.bin" --signature "$q.sig" \
  --pcrs "$q.pcrs" --nonce "$NONCE"
head -c 100 "$q.sig" > "$g.sig"
lab_expect "$RC_MALFORMED_EVIDENCE" "$R_SIGNATURE_MALFORMED" "truncated signature is refused as malformed" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$g.sig" \
  --pcrs "$q.pcrs" --nonce "$NONCE"
printf '\x00\x15\x00\x0b\x00\x01\x00' > "$g.sigalg"
lab_expect "$RC_INVALID" "$R_SCHEME_UNSUPPORTED" "signature with an unknown scheme (RSAES) is refused" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$g.sigalg" \
  --pcrs "$q.pcrs" --nonce "$NONCE"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "empty PCR file exits 2" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$q.sig" \
  --pcrs "$g.empty" --nonce "$NONCE"
head -c 400 "$q.pcrs" > "$g.trunc"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "truncated serialized PCR file exits 2" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$q.msg" --signature "$q.sig" \
  --pcrs "$g.trunc" --nonce "$NONCE"
head -c 128 "$D1/q-rsassa-values.pcrs" > "$g.short"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "values PCR file one value short exits 2" \
  "$RACKGATECTL" verify-quote --ak-public "$ak" --message "$D1/q-rsassa-values.msg" \
  --signature "$D1/q-rsassa-values.sig" --pcrs "$g.short" --nonce "$NONCE"

lab_finish
