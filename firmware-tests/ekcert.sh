#!/usr/bin/env bash
# ekcert.sh — `rackgatectl ek verify` against the EK certificates swtpm_setup
# writes (RSA-2048 at NV 0x01c00002, ECC P-384 at 0x01c00016): accepted under
# the lab root with its intermediate, refused for a foreign CA, a missing
# intermediate, a mismatched EK public area and certificates that are no EK
# certificates. Cross-checked with `openssl verify -x509_strict`.
# Usage: ekcert.sh RACKGATECTL
set -euo pipefail

# Expected outcomes: exit codes and reasons on stderr (extended regexes). The
# reason codes are attest/ek_cert.h's; rackgatectl prints
# "rackgatectl: refused: REASON: message" (docs/cli.md). Both lab CAs are named
# CN=swtpm-localca, so a foreign chain fails on the issuer lookup (OpenSSL
# matches the authority key id) and reads as a missing intermediate.
RC_OK=0
RC_REFUSED=1
RC_UNUSABLE=2
R_UNTRUSTED=': ek_cert_(untrusted|missing_intermediate|signature_invalid)\b'
R_MISSING_INTERMEDIATE=': ek_cert_missing_intermediate\b'
R_KEY_MISMATCH=': ek_public_mismatch\b'
R_NOT_EK=': ek_cert_not_ek\b'
R_CA_AS_EK=': ek_cert_(bad_basic_constraints|not_ek)\b'
R_ISSUER_NOT_CA=': ek_cert_(bad_basic_constraints|untrusted|missing_intermediate)\b'
R_EXPIRED=': ek_cert_expired\b'
R_NOT_YET_VALID=': ek_cert_not_yet_valid\b'
R_WEAK=': ek_cert_weak_crypto\b'
R_UNUSABLE=''  # any reason; the exit code is what counts

RACKGATECTL="${1:?usage: ekcert.sh RACKGATECTL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
if [[ ! -x "$RACKGATECTL" ]]; then echo "not ok - rackgatectl not found at $RACKGATECTL"; echo "1..1"; exit 1; fi
lab_init ekcert

ekv() { "$RACKGATECTL" ek verify "$@"; }

lab_ca lab
lab_ca other
lab_machine m1 lab
lab_machine m2 lab
lab_machine f1 other
for m in m1 m2 f1; do lab_ek_rsa "$m"; lab_ek_ecc384 "$m"; done
D1="$(lab_dir m1)"; D2="$(lab_dir m2)"; F1="$(lab_dir f1)"
ROOT="$(lab_ca_root lab)"; INT="$(lab_ca_intermediate lab)"
OROOT="$(lab_ca_root other)"; OINT="$(lab_ca_intermediate other)"
W="$LAB_DIR/work"; mkdir -p "$W/roots" "$W/ints" "$W/tworoots"
cp "$ROOT" "$W/roots/lab-root.pem"; cp "$INT" "$W/ints/lab-int.pem"
cp "$ROOT" "$W/tworoots/lab-root.pem"; cp "$OROOT" "$W/tworoots/other-root.pem"
cat "$OROOT" "$ROOT" > "$W/bundle.pem"

# Lab sanity: NV holds what swtpm_setup wrote, and tpm2_createek recreates the
# certified keys (for P-384: the high-range template, see lab_ek_ecc384).
lab_check "lab: NV 0x01c00002 holds the RSA EK cert swtpm_setup wrote" cmp "$D1/ek-rsa.der" "$D1/ekcerts/ek-rsa2048.crt"
lab_check "lab: NV 0x01c00016 holds the P-384 EK cert swtpm_setup wrote" cmp "$D1/ek-ecc384.der" "$D1/ekcerts/ek-secp384r1.crt"
lab_check "lab: tpm2_createek -G rsa recreates the RSA EK in the certificate" lab_ek_matches_cert m1 rsa
lab_check "lab: tpm2_createek -G ecc384 recreates the P-384 EK in the certificate" lab_ek_matches_cert m1 ecc384
lab_check "lab: the P-384 EK equals the persistent 0x81010016" \
  bash -c "TPM2TOOLS_TCTI='$(lab_tcti m1)' tpm2_readpublic -c 0x81010016 -f tss -o '$W/p16.pub' >/dev/null 2>&1 && cmp '$W/p16.pub' '$D1/ek-ecc384.pub'"

for ek in rsa ecc384; do
  cert="$D1/ek-$ek.der"; pub="$D1/ek-$ek.pub"
  openssl x509 -inform der -in "$cert" -out "$D1/ek-$ek.pem"

  lab_expect "$RC_OK" "" "$ek: EK cert (DER) with its EK public is accepted" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_OK" "" "$ek: EK cert (PEM) with its EK public is accepted" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$D1/ek-$ek.pem" --ek-public "$pub"
  lab_expect "$RC_OK" "" "$ek: EK cert without --ek-public is accepted" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$cert"
  lab_expect "$RC_OK" "" "$ek: roots and intermediates given as directories" \
    ekv --roots "$W/roots" --intermediates "$W/ints" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_OK" "" "$ek: a roots directory with a second, foreign root" \
    ekv --roots "$W/tworoots" --intermediates "$INT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_OK" "" "$ek: a roots bundle file with a second, foreign root" \
    ekv --roots "$W/bundle.pem" --intermediates "$INT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_OK" "" "$ek: another machine of the same CA is accepted" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$D2/ek-$ek.der" --ek-public "$D2/ek-$ek.pub"

  lab_expect "$RC_REFUSED" "$R_UNTRUSTED" "$ek: a foreign CA's root is refused" \
    ekv --roots "$OROOT" --intermediates "$INT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_REFUSED" "$R_UNTRUSTED" "$ek: a foreign CA's root and intermediate are refused" \
    ekv --roots "$OROOT" --intermediates "$OINT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_REFUSED" "$R_UNTRUSTED" "$ek: a machine of a foreign CA is refused" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$F1/ek-$ek.der" --ek-public "$F1/ek-$ek.pub"
  lab_expect "$RC_REFUSED" "$R_MISSING_INTERMEDIATE" "$ek: a missing intermediate is refused" \
    ekv --roots "$ROOT" --cert "$cert" --ek-public "$pub"
  lab_expect "$RC_REFUSED" "$R_KEY_MISMATCH" "$ek: another machine's EK public is refused" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$cert" --ek-public "$D2/ek-$ek.pub"

  # Cross-check with openssl (no purpose: swtpm EK certs fail any SSL purpose).
  lab_check "$ek: cross-check: openssl verify -x509_strict accepts the chain" \
    openssl verify -x509_strict -CAfile "$ROOT" -untrusted "$INT" "$D1/ek-$ek.pem"
  lab_check_fails "$ek: cross-check: openssl refuses it without the intermediate" \
    openssl verify -x509_strict -CAfile "$ROOT" "$D1/ek-$ek.pem"
  lab_check_fails "$ek: cross-check: openssl refuses it under the foreign root" \
    openssl verify -x509_strict -CAfile "$OROOT" -untrusted "$INT" "$D1/ek-$ek.pem"
done
lab_expect "$RC_REFUSED" "$R_KEY_MISMATCH" "RSA EK cert with the same TPM's P-384 EK public is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$D1/ek-rsa.der" --ek-public "$D1/ek-ecc384.pub"
lab_expect "$RC_REFUSED" "$R_KEY_MISMATCH" "P-384 EK cert with the same TPM's RSA EK public is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$D1/ek-ecc384.der" --ek-public "$D1/ek-rsa.pub"

# Certificates that chain to the lab root but are no EK certificates.
lab_platform_cert m1 "$W/platform.der"
lab_check "non-EK: cross-check: openssl accepts the swtpm platform cert's chain" \
  openssl verify -x509_strict -CAfile "$ROOT" -untrusted "$INT" <(openssl x509 -inform der -in "$W/platform.der")
lab_expect "$RC_REFUSED" "$R_NOT_EK" "non-EK: the swtpm platform certificate (same key as the RSA EK, no EK EKU) is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/platform.der" --ek-public "$D1/ek-rsa.pub"
lab_expect "$RC_REFUSED" "$R_NOT_EK" "non-EK: the platform certificate without --ek-public is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/platform.der"

# A plain leaf made with openssl and signed by the lab intermediate's key.
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/plain.key" \
  -subj "/CN=not-an-ek" -out "$W/plain.csr" 2>/dev/null
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' > "$W/plain.ext"
openssl x509 -req -in "$W/plain.csr" -CA "$INT" -CAkey "$(lab_ca_intermediate_key lab)" -CAcreateserial \
  -days 30 -sha256 -extfile "$W/plain.ext" -out "$W/plain.pem" 2>/dev/null
lab_check "non-EK: cross-check: openssl accepts the plain leaf's chain" \
  openssl verify -x509_strict -CAfile "$ROOT" -untrusted "$INT" "$W/plain.pem"
lab_expect "$RC_REFUSED" "$R_NOT_EK" "non-EK: a plain openssl leaf signed by the lab intermediate is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/plain.pem"

# An openssl-made certificate with swtpm's EK extensions (EK EKU, TPM SAN) over
# m1's RSA EK key: an EK certificate in form, from a CA we trust, so it must
# pass; with another EK public it must fail the key check. This shows the
# platform and plain-leaf refusals above come from the EK checks.
openssl x509 -inform der -in "$D1/ek-rsa.der" -noout -pubkey > "$W/ek-rsa.pubkey.pem"
lab_ek_extfile "$W/forged.ext"
openssl req -new -key "$W/plain.key" -subj "/CN=unknown" -out "$W/labmade.csr" 2>/dev/null
openssl x509 -req -in "$W/labmade.csr" -force_pubkey "$W/ek-rsa.pubkey.pem" -CAcreateserial \
  -CA "$INT" -CAkey "$(lab_ca_intermediate_key lab)" -days 30 -sha256 -extfile "$W/forged.ext" \
  -out "$W/labmade-ek.pem" 2>/dev/null || true
if [[ -s "$W/labmade-ek.pem" ]]; then
  lab_expect "$RC_OK" "" "an openssl-made cert with the EK EKU and the EK's key, from the lab intermediate, is accepted" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/labmade-ek.pem" --ek-public "$D1/ek-rsa.pub"
  lab_expect "$RC_REFUSED" "$R_KEY_MISMATCH" "...and refused with another EK public" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/labmade-ek.pem" --ek-public "$D2/ek-rsa.pub"
else
  lab_not_ok "lab: openssl could not make the EK-like certificate"
fi

# Validity: swtpm_localca certs run from manufacture to 9999-12-31 (a later
# --at is not representable as an X.509 time), so expiry is checked on the
# openssl-made EK cert, valid for 30 days.
lab_expect "$RC_REFUSED" "$R_NOT_YET_VALID" "--at 1970 refuses the swtpm EK cert as not yet valid" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$D1/ek-rsa.der" --at 86400

if [[ -s "$W/labmade-ek.pem" ]]; then
  lab_expect "$RC_REFUSED" "$R_EXPIRED" "--at 60 days on refuses the 30-day EK cert as expired" \
    ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/labmade-ek.pem" --at "$(( $(date +%s) + 60 * 86400 ))"
  # The same EK certificate signed with SHA-1.
  openssl x509 -req -in "$W/labmade.csr" -force_pubkey "$W/ek-rsa.pubkey.pem" -CAcreateserial \
    -CA "$INT" -CAkey "$(lab_ca_intermediate_key lab)" -days 30 -sha1 -extfile "$W/forged.ext" \
    -out "$W/sha1-ek.pem" 2>/dev/null || true
  if [[ -s "$W/sha1-ek.pem" ]]; then
    lab_expect "$RC_REFUSED" "$R_WEAK" "an EK cert signed with SHA-1 is refused" \
      ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/sha1-ek.pem" --ek-public "$D1/ek-rsa.pub"
  else
    lab_not_ok "lab: openssl could not make the SHA-1 EK certificate"
  fi
  # The same EK certificate "issued" by the plain leaf (CA:FALSE) with the
  # leaf given as an intermediate: a leaf cannot issue.
  openssl x509 -req -in "$W/labmade.csr" -force_pubkey "$W/ek-rsa.pubkey.pem" -CAcreateserial \
    -CA "$W/plain.pem" -CAkey "$W/plain.key" -days 30 -sha256 -extfile "$W/forged.ext" \
    -out "$W/leaf-issued-ek.pem" 2>/dev/null || true
  if [[ -s "$W/leaf-issued-ek.pem" ]]; then
    cat "$W/plain.pem" "$INT" > "$W/leaf-and-int.pem"
    lab_expect "$RC_REFUSED" "$R_ISSUER_NOT_CA" "an EK cert issued by a CA:FALSE leaf of the lab intermediate is refused" \
      ekv --roots "$ROOT" --intermediates "$W/leaf-and-int.pem" --cert "$W/leaf-issued-ek.pem" --ek-public "$D1/ek-rsa.pub"
    lab_check_fails "...cross-check: openssl refuses it too" \
      openssl verify -x509_strict -CAfile "$ROOT" -untrusted "$W/leaf-and-int.pem" "$W/leaf-issued-ek.pem"
  else
    lab_not_ok "lab: openssl could not make the leaf-issued EK certificate"
  fi
fi

lab_expect "$RC_REFUSED" "$R_CA_AS_EK" "non-EK: the lab intermediate (a CA cert) as the EK cert is refused" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$INT"

# Unusable input exits 2.
head -c 700 /dev/urandom > "$W/garbage.bin"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "garbage cert exits 2" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/garbage.bin"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing cert file exits 2" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$W/no-such.der"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing roots file exits 2" \
  ekv --roots "$W/no-such-root.pem" --intermediates "$INT" --cert "$D1/ek-rsa.der"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "garbage EK public exits 2" \
  ekv --roots "$ROOT" --intermediates "$INT" --cert "$D1/ek-rsa.der" --ek-public "$W/garbage.bin"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing --cert exits 2" \
  ekv --roots "$ROOT" --intermediates "$INT"

lab_finish
