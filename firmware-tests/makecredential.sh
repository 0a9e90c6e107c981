#!/usr/bin/env bash
# makecredential.sh — `rackgatectl makecredential` output is recovered by
# TPM2_ActivateCredential (tpm2_activatecredential on a swtpm machine) for the
# RSA-2048 EK and the P-384 EK, and only for the AK and EK it was made for.
# Usage: makecredential.sh RACKGATECTL
set -euo pipefail

# Expected outcomes — adjust here. Reason codes are attest/credential.cc's.
RC_OK=0
RC_UNUSABLE=2
R_SECRET_SIZE=': credential_secret_size\b'  # secret is 1..digest size of the EK's nameAlg
R_NAME=': object_name_malformed\b'
R_UNUSABLE=''  # any reason; the exit code is what counts
CRED_MAGIC=badcc0de00000001  # tpm2_makecredential's file header

RACKGATECTL="${1:?usage: makecredential.sh RACKGATECTL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
if [[ ! -x "$RACKGATECTL" ]]; then echo "not ok - rackgatectl not found at $RACKGATECTL"; echo "1..1"; exit 1; fi
lab_init makecredential

mkcred() { # mkcred EKPUB AKNAME SECRET OUT
  "$RACKGATECTL" makecredential --ek-public "$1" --name "$2" --secret "$3" --output "$4"
}

# The file is `badcc0de 00000001`, TPM2B_ID_OBJECT, TPM2B_ENCRYPTED_SECRET and
# nothing after; an ID object holds a TPM2B HMAC of the EK's nameAlg size.
cred_well_formed() { # cred_well_formed FILE HMAC_SIZE
  local f="$1" hmac="$2" size id sec
  size="$(stat -c %s "$f")"
  [[ "$(xxd -p -l 8 "$f")" == "$CRED_MAGIC" ]] || return 1
  id=$(( 0x$(xxd -p -s 8 -l 2 "$f") ))
  [[ "$(xxd -p -s 10 -l 2 "$f")" == "$(printf '%04x' "$hmac")" ]] || return 1
  sec=$(( 0x$(xxd -p -s $((10 + id)) -l 2 "$f") ))
  (( size == 8 + 2 + id + 2 + sec ))
}

lab_ca lab
lab_machine m1 lab
lab_machine m2 lab
D1="$(lab_dir m1)"
D2="$(lab_dir m2)"
lab_ek_rsa m1
lab_ek_ecc384 m1
lab_ek_rsa m2
lab_ek_ecc384 m2
# Two AKs under each EK of m1.
lab_ak m1 rsa rsassa "$D1/ak-rsa-a"
lab_ak m1 rsa ecdsa "$D1/ak-rsa-b"
lab_ak m1 ecc384 ecdsa "$D1/ak-ecc384-a"
lab_ak m1 ecc384 rsassa "$D1/ak-ecc384-b"

head -c 32 /dev/urandom > "$D1/secret32"
head -c 1 /dev/urandom > "$D1/secret1"
: > "$D1/secret0"

for ek in rsa ecc384; do
  if [[ "$ek" == rsa ]]; then hmac=32; else hmac=48; fi
  ekpub="$D1/ek-$ek.pub"
  a="$D1/ak-$ek-a"; b="$D1/ak-$ek-b"
  c="$D1/cred-$ek"

  # Lab sanity: tpm2-tools' own MakeCredential round-trips on this EK.
  if lab_makecredential "$ekpub" "$a.name" "$D1/secret32" "$c.ref" &&
     lab_activate m1 "$ek" "$a" "$c.ref" "$c.ref.out" && cmp -s "$c.ref.out" "$D1/secret32"; then
    lab_ok "$ek EK: lab: tpm2_makecredential output is recovered by tpm2_activatecredential"
  else
    lab_not_ok "$ek EK: lab: tpm2_makecredential round trip" "$(tail -n 5 "$D1/tpm.log")"
  fi

  lab_expect "$RC_OK" "" "$ek EK: makecredential for AK a succeeds" \
    mkcred "$ekpub" "$a.name" "$D1/secret32" "$c.a"
  [[ -s "$c.a" ]] || continue
  lab_check "$ek EK: output has tpm2_makecredential's layout (header, ID object with a $hmac-byte HMAC, secret, nothing after)" \
    cred_well_formed "$c.a" "$hmac"
  if lab_activate m1 "$ek" "$a" "$c.a" "$c.a.out" && cmp -s "$c.a.out" "$D1/secret32"; then
    lab_ok "$ek EK: tpm2_activatecredential with AK a recovers the secret"
  else
    lab_not_ok "$ek EK: tpm2_activatecredential with AK a recovers the secret" \
      "$(tail -n 5 "$D1/tpm.log")"$'\n'"repro: $(lab_keep_repro "$ek activate" mkcred "$ekpub" "$a.name" "$D1/secret32" "$c.a")"
  fi
  lab_check_fails "$ek EK: the same credential is refused by AK b (made for AK a's name)" \
    lab_activate m1 "$ek" "$b" "$c.a" "$c.a.wrong"

  lab_expect "$RC_OK" "" "$ek EK: makecredential for AK b succeeds" \
    mkcred "$ekpub" "$b.name" "$D1/secret32" "$c.b"
  lab_check_fails "$ek EK: a credential made for AK b's name is refused with AK a" \
    lab_activate m1 "$ek" "$a" "$c.b" "$c.b.wrong"
  if lab_activate m1 "$ek" "$b" "$c.b" "$c.b.out" && cmp -s "$c.b.out" "$D1/secret32"; then
    lab_ok "$ek EK: ...and recovered with AK b"
  else
    lab_not_ok "$ek EK: ...and recovered with AK b"
  fi

  lab_expect "$RC_OK" "" "$ek EK: makecredential with another machine's EK succeeds" \
    mkcred "$D2/ek-$ek.pub" "$a.name" "$D1/secret32" "$c.m2"
  lab_check_fails "$ek EK: a credential made for another machine's EK is refused" \
    lab_activate m1 "$ek" "$a" "$c.m2" "$c.m2.wrong"

  mkcred "$ekpub" "$a.name" "$D1/secret32" "$c.a2" >/dev/null 2>&1 || true
  lab_check_fails "$ek EK: two credentials for the same inputs differ (fresh seed)" cmp -s "$c.a" "$c.a2"

  # TPM2_MakeCredential limits the credential to the digest size of the EK's
  # nameAlg (TPM_RC_SIZE above it): 32 bytes for the RSA EK, 48 for P-384.
  # (swtpm's ActivateCredential would still unwrap up to 64.)
  if [[ "$ek" == rsa ]]; then max=32; else max=48; fi
  head -c "$max" /dev/urandom > "$D1/secret$max"
  head -c "$((max + 1))" /dev/urandom > "$D1/secret$((max + 1))"
  for n in 1 "$max"; do
    if mkcred "$ekpub" "$a.name" "$D1/secret$n" "$c.s$n" >/dev/null 2>&1 &&
       lab_activate m1 "$ek" "$a" "$c.s$n" "$c.s$n.out" && cmp -s "$c.s$n.out" "$D1/secret$n"; then
      lab_ok "$ek EK: a $n-byte secret round-trips"
    else
      lab_not_ok "$ek EK: a $n-byte secret round-trips"
    fi
  done
  lab_expect "$RC_UNUSABLE" "$R_SECRET_SIZE" "$ek EK: a $((max + 1))-byte secret (over the nameAlg digest) exits 2" \
    mkcred "$ekpub" "$a.name" "$D1/secret$((max + 1))" "$c.big"
  lab_expect "$RC_UNUSABLE" "$R_SECRET_SIZE" "$ek EK: an empty secret exits 2" \
    mkcred "$ekpub" "$a.name" "$D1/secret0" "$c.s0"
done

# The low-range P-256 EK (no certificate on swtpm, but a TCG template).
lab_ek_ecc256 m1
lab_ak m1 ecc256 ecdsa "$D1/ak-ecc256"
c="$D1/cred-ecc256"
lab_expect "$RC_OK" "" "ecc256 EK: makecredential succeeds" \
  mkcred "$D1/ek-ecc256.pub" "$D1/ak-ecc256.name" "$D1/secret32" "$c"
if [[ -s "$c" ]] && lab_activate m1 ecc256 "$D1/ak-ecc256" "$c" "$c.out" && cmp -s "$c.out" "$D1/secret32"; then
  lab_ok "ecc256 EK: tpm2_activatecredential recovers the secret"
else
  lab_not_ok "ecc256 EK: tpm2_activatecredential recovers the secret"
fi

# The AK's name algorithm need not be the EK's: an AK made under the P-384 EK
# (sha384 name) activated through the RSA EK (sha256), and the reverse.
for pair in "rsa ecc384-a" "ecc384 rsa-a"; do
  ek="${pair% *}"; ak="$D1/ak-${pair#* }"; c="$D1/cred-x-$ek"
  if mkcred "$D1/ek-$ek.pub" "$ak.name" "$D1/secret32" "$c" >/dev/null 2>&1 &&
     lab_activate m1 "$ek" "$ak" "$c" "$c.out" && cmp -s "$c.out" "$D1/secret32"; then
    lab_ok "$ek EK with a $(xxd -p -l 2 "$ak.name")-named AK: the secret round-trips"
  else
    lab_not_ok "$ek EK with a $(xxd -p -l 2 "$ak.name")-named AK: the secret round-trips" \
      "repro: $(lab_keep_repro "cross name alg $ek" mkcred "$D1/ek-$ek.pub" "$ak.name" "$D1/secret32" "$c")"
  fi
done

# Unusable input exits 2.
g="$D1/garbage"; head -c 200 /dev/urandom > "$g.bin"; printf '\x00\x0b\x01\x02' > "$g.name"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing EK public exits 2" \
  mkcred "$D1/no-such.pub" "$D1/ak-rsa-a.name" "$D1/secret32" "$g.out"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "garbage EK public exits 2" \
  mkcred "$g.bin" "$D1/ak-rsa-a.name" "$D1/secret32" "$g.out"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing name file exits 2" \
  mkcred "$D1/ek-rsa.pub" "$D1/no-such.name" "$D1/secret32" "$g.out"
lab_expect "$RC_UNUSABLE" "$R_NAME" "a name with a short digest exits 2" \
  mkcred "$D1/ek-rsa.pub" "$g.name" "$D1/secret32" "$g.out"
lab_expect "$RC_UNUSABLE" "$R_UNUSABLE" "missing secret file exits 2" \
  mkcred "$D1/ek-rsa.pub" "$D1/ak-rsa-a.name" "$D1/no-such.secret" "$g.out"
lab_expect_refused "an AK public (a signing key, not a storage key) as the EK is refused" \
  mkcred "$D1/ak-rsa-a.pub" "$D1/ak-rsa-a.name" "$D1/secret32" "$g.out"

lab_finish
