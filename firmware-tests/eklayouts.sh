#!/usr/bin/env bash
# eklayouts.sh — the agent reads every TCG EK layout (issue 41): swtpm
# machines provisioned as TPM makers do it (tpm2_nvdefine/tpm2_nvwrite after
# swtpm_setup), each joined with the real rackgate-agent against one real
# rackgated:
#   h1  RSA-2048 EK from the high-range template H-1, its certificate (made
#       by the lab CA for that EK's key) at 0x01c00012 behind the PC Client
#       stored-certificate header and padded with 0xFF;
#   h2  P-256 from H-2 at 0x01c00014, the DER alone;
#   r3  RSA-3072 (H-6) as `swtpm_setup --rsa-keysize 3072` manufactures it
#       (certificate at 0x01c0001c), chosen with --ek-alg rsa;
#   p5  P-521 from H-4 at 0x01c00018, padded;
#   ch  RSA-2048 (L-1) whose certificate comes from a vendor CA the
#       appliance does not have (only the root is configured): refused
#       until its chain is in NV from 0x01c00100 (concatenated DER running
#       on from one index into the next, as Intel PTT stores it), then
#       joined with the chain the agent sends.
# Usage: eklayouts.sh RACKGATE_AGENT RACKGATED RACKGATECTL
set -euo pipefail

RC_OK=0
RC_REFUSED=3
R_ATTESTED='step=attest machine=[0-9a-f]{16} ok hostname='
R_NO_INTERMEDIATE='refused status=403 reason=ek_cert_missing_intermediate'

# TCG EK Credential Profile 2.5, high-range templates: attributes (with
# userWithAuth) and PolicyB in sha256 (Annex B.6.5); agent/templates.cc
# holds the same values, this is tpm2-tools making the same keys.
ATTRS_HIGH='fixedtpm|fixedparent|sensitivedataorigin|userwithauth|adminwithpolicy|restricted|decrypt'
POLICY_B_SHA256=ca3d0a99a2b93906f7a3342414efcfb3a385d44cd1fd459089d19b5071c0b7a0
# An EK certificate index as a manufacturer defines it (platform auth,
# readable with the owner's or its own empty auth).
NV_ATTRS='ppwrite|ppread|ownerread|authread|platformcreate|no_da'

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: eklayouts.sh RACKGATE_AGENT RACKGATED RACKGATECTL}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"

lab_skip_unless_tools
command -v curl >/dev/null || lab_skip "curl missing"
lab_init eklayouts
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
W="$LAB_DIR/work"
mkdir -p "$W"

# machine NAME [SWTPM_SETUP ARGS...]: a TPM manufactured by swtpm_setup
# (EK certificates only when the arguments ask for them), started.
machine() {
  local name="$1" m; shift
  m="$(lab_dir "$name")"
  mkdir -p "$m/state" "$m/ekcerts"
  if ! swtpm_setup --tpm2 --tpmstate "$m/state" --config "$(lab_ca_dir lab)/swtpm_setup.conf" \
      --pcr-banks sha1,sha256 --write-ek-cert-files "$m/ekcerts" --logfile "$m/setup.log" "$@" >/dev/null 2>&1; then
    echo "# swtpm_setup failed for $name:" >&2
    sed 's/^/#   /' "$m/setup.log" >&2 || true
    return 1
  fi
  lab_machine_start "$name"
}

# nv_put MACHINE INDEX FILE: a new NV index holding FILE.
nv_put() {
  lab_tpm "$1" tpm2_nvdefine "$2" -C p -s "$(stat -c %s "$3")" -a "$NV_ATTRS" >/dev/null &&
    lab_tpm "$1" tpm2_nvwrite "$2" -C p -i "$3" >/dev/null
}

# ek_cert EK.pub OUT.der [CA.pem CA.key]: an EK certificate (the EK EKU, the
# TPM's SAN, keyEncipherment) for the EK public area EK.pub, from the lab
# intermediate unless another CA is named.
ek_cert() {
  tpm2_print -t TPM2B_PUBLIC -f pem "$1" > "$1.pem" &&
    openssl x509 -req -in "$W/ek.csr" -force_pubkey "$1.pem" -CA "${3:-$(lab_ca_intermediate lab)}" \
      -CAkey "${4:-$(lab_ca_intermediate_key lab)}" -CAcreateserial -days 30 -sha256 -extfile "$W/ek.ext" \
      -outform der -out "$2" 2>/dev/null
}

# padded FILE SIZE: FILE followed by 0xFF up to SIZE bytes.
padded() { cat "$1"; head -c "$(( $2 - $(stat -c %s "$1") ))" /dev/zero | tr '\0' '\377'; }

# --- manufacture --------------------------------------------------------------
# r3 first: its swtpm_setup creates the lab CA the other certificates come
# from. The others need no certificate from swtpm_setup and start meanwhile.
machine r3 --create-ek-cert --rsa-keysize 3072 &
r3_pid=$!
for m in h1 h2 p5 ch; do machine "$m" & done
wait "$r3_pid"
wait
for m in r3 h1 h2 p5 ch; do test -s "$(lab_dir "$m")/port"; done
H1="$(lab_dir h1)"; H2="$(lab_dir h2)"; R3="$(lab_dir r3)"; P5="$(lab_dir p5)"; CH="$(lab_dir ch)"

lab_ek_extfile "$W/ek.ext"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/csr.key" -subj "/CN=unknown" \
  -out "$W/ek.csr" 2>/dev/null
echo "$POLICY_B_SHA256" | xxd -r -p > "$W/policy-b-sha256.bin"

# h1: H-1 (RSA-2048, sha256, PolicyB, AES-128, empty unique), the
# certificate behind the stored-certificate header (10 01 00, size, 10 02)
# and padded.
lab_tpm h1 tpm2_createprimary -C e -g sha256 -G rsa2048:aes128cfb -a "$ATTRS_HIGH" -L "$W/policy-b-sha256.bin" \
  -c "$H1/ek.ctx" >/dev/null
lab_tpm h1 tpm2_readpublic -c "$H1/ek.ctx" -f tss -o "$H1/ek.pub" >/dev/null
lab_flush h1
ek_cert "$H1/ek.pub" "$H1/ek.der"
{ printf '100100%04x1002' "$(( $(stat -c %s "$H1/ek.der") + 2 ))" | xxd -r -p; cat "$H1/ek.der"; } > "$H1/ek.hdr"
padded "$H1/ek.hdr" 1792 > "$H1/ek.nv"
nv_put h1 0x01c00012 "$H1/ek.nv"

# h2: H-2 (P-256, sha256, PolicyB, AES-128, empty unique), the DER alone.
lab_tpm h2 tpm2_createprimary -C e -g sha256 -G ecc256:aes128cfb -a "$ATTRS_HIGH" -L "$W/policy-b-sha256.bin" \
  -c "$H2/ek.ctx" >/dev/null
lab_tpm h2 tpm2_readpublic -c "$H2/ek.ctx" -f tss -o "$H2/ek.pub" >/dev/null
lab_flush h2
ek_cert "$H2/ek.pub" "$H2/ek.der"
nv_put h2 0x01c00014 "$H2/ek.der"

# p5: H-4 (P-521, sha512, PolicyB in sha512, AES-256), tpm2-tools' own
# template for it, padded.
lab_tpm p5 tpm2_createek -G ecc521 -c "$P5/ek.ctx" -u "$P5/ek.pub" -f tss >/dev/null
lab_flush p5
ek_cert "$P5/ek.pub" "$P5/ek.der"
padded "$P5/ek.der" 1536 > "$P5/ek.nv"
nv_put p5 0x01c00018 "$P5/ek.nv"

# ch: L-1 with a certificate from "Lab vendor EK CA 2", an intermediate the
# lab root issued that the appliance is never given.
lab_tpm ch tpm2_createek -G rsa -c "$CH/ek.ctx" -u "$CH/ek.pub" -f tss >/dev/null
lab_flush ch
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' \
  > "$W/vendor.ext"
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/vendor.key" \
  -subj "/CN=Lab vendor EK CA 2" -out "$W/vendor.csr" 2>/dev/null
openssl x509 -req -in "$W/vendor.csr" -CA "$(lab_ca_root lab)" \
  -CAkey "$(lab_ca_dir lab)/state/swtpm-localca-rootca-privkey.pem" -CAcreateserial -days 30 -sha256 \
  -extfile "$W/vendor.ext" -out "$W/vendor.pem" 2>/dev/null
ek_cert "$CH/ek.pub" "$CH/ek.der" "$W/vendor.pem" "$W/vendor.key"
nv_put ch 0x01c00002 "$CH/ek.der"

rg_trust lab
# Every machine here is enrolled before its agent runs: a 503 is a failure,
# and need not be waited out for long.
rg_config retry_after_seconds 1
rg_start
AGENT_URL="$(rg_url "")"
AGENT_CA="$RG_DIR/state/ca/ca.crt"
agent() {
  local m="$1"; shift
  "$AGENT" --tcti "$(lab_tcti "$m")" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 2)" "$@"
}
# Enrolled as an operator does: by the certificate (which rackgatectl
# verifies), ch by its EK public (the appliance alone cannot verify its
# certificate).
enroll() { rg_ctl enroll --hostname "node-$1" --pool default "${@:2}"; }
lab_check_shown "h1 enrolled by its H-1 certificate" enroll h1 --ek-cert "$H1/ek.der"
lab_check_shown "h2 enrolled by its H-2 certificate" enroll h2 --ek-cert "$H2/ek.der"
lab_check_shown "r3 enrolled by its RSA-3072 certificate" enroll r3 --ek-cert "$R3/ekcerts/ek-rsa3072.crt"
lab_check_shown "p5 enrolled by its P-521 certificate" enroll p5 --ek-cert "$P5/ek.der"
lab_check_shown "ch enrolled by its EK public" enroll ch --ek-public "$CH/ek.pub"

# --- join -----------------------------------------------------------------------

lab_expect "$RC_OK" "$R_ATTESTED.* ek=rsa2048-high ak=ecc " \
  "H-1 RSA-2048 at 0x01c00012, header and padding: joins (sha256 PolicyOR session)" agent h1
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p256-high ak=ecc " "H-2 P-256 at 0x01c00014: joins" agent h2
lab_expect "$RC_OK" "$R_ATTESTED.* ek=rsa3072 ak=ecc " \
  "H-6 RSA-3072 as swtpm_setup --rsa-keysize 3072 made it: joins with --ek-alg rsa (sha384 PolicyOR)" \
  agent r3 --ek-alg rsa
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p521 ak=ecc " \
  "H-4 P-521 at 0x01c00018, padded: joins (sha512 PolicyOR session)" agent p5

lab_expect "$RC_REFUSED" "$R_NO_INTERMEDIATE" "vendor-CA certificate, no chain in NV: refused (missing intermediate)" \
  agent ch
# The chain as Intel PTT stores it: DER back to back from 0x01c00100, here
# in 512-byte indices' worth: the intermediate the appliance lacks begins in
# 0x01c00100 and runs on into 0x01c00101, the root after it (an agent that
# read each index on its own would send nothing usable).
openssl x509 -in "$W/vendor.pem" -outform der > "$W/chain.der"
openssl x509 -in "$(lab_ca_root lab)" -outform der >> "$W/chain.der"
head -c 512 "$W/chain.der" > "$W/chain.0"
tail -c +513 "$W/chain.der" > "$W/chain.1.der"
padded "$W/chain.1.der" $(( $(stat -c %s "$W/chain.1.der") + 64 )) > "$W/chain.1"
nv_put ch 0x01c00100 "$W/chain.0"
nv_put ch 0x01c00101 "$W/chain.1"
lab_expect "$RC_OK" "$R_ATTESTED.* ek=rsa2048 ak=ecc " \
  "the chain in NV from 0x01c00100, split across two indices: sent, and the machine joins" agent ch
for h in h1 h2 r3 p5 ch; do
  lab_check "node-$h is attested" test "$(rg_state "node-$h" 2>/dev/null)" == attested
done

lab_finish
