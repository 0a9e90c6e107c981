#!/usr/bin/env bash
# Hardware (suite `hardware`, not in the default run): the same checks as
# the lab, against this machine's real TPM at /dev/tpmrm0 (through the kernel
# resource manager). Prints TAP; skips (`1..0 # SKIP`) without the device or
# tpm2-tools.
#   hardware.sh RACKGATECTL
# Optional: RACKGATE_EK_ROOTS=DIR (and RACKGATE_EK_INTERMEDIATES=DIR) with the
# TPM vendor's EK CA certificates, to validate the EK certificate too.
set -euo pipefail
CTL="$(realpath "$1")"
[[ -c /dev/tpmrm0 ]] || { echo "1..0 # SKIP no /dev/tpmrm0"; exit 0; }
for t in tpm2_createek tpm2_createak tpm2_quote tpm2_nvread tpm2_activatecredential; do
  command -v "$t" >/dev/null || { echo "1..0 # SKIP $t missing"; exit 0; }
done
export TPM2TOOLS_TCTI=device:/dev/tpmrm0
D="$(mktemp -d)"
trap 'tpm2_flushcontext -t >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
passed=0 failed=0
check() {
  local what="$1"; shift
  if "$@" >"$D/out" 2>&1; then passed=$((passed + 1)); echo "ok - $what"
  else failed=$((failed + 1)); echo "not ok - $what"; sed 's/^/#   /' "$D/out"; fi
}

check "create the RSA EK" tpm2_createek -c "$D/ek.ctx" -G rsa -u "$D/ek.pub" -f tss
check "create an AK" tpm2_createak -C "$D/ek.ctx" -c "$D/ak.ctx" -G rsa -g sha256 -s rsassa \
  -u "$D/ak.pub" -f tss -n "$D/ak.name"
NONCE="$(head -c 32 /dev/urandom | xxd -p -c 64)"
check "quote PCRs 0-7" tpm2_quote -c "$D/ak.ctx" -l sha256:0,1,2,3,4,5,6,7 -q "$NONCE" \
  -m "$D/q.msg" -s "$D/q.sig" -o "$D/q.pcrs" -F values -g sha256
check "rackgatectl verifies the quote" "$CTL" verify-quote --ak-public "$D/ak.pub" --message "$D/q.msg" \
  --signature "$D/q.sig" --pcrs "$D/q.pcrs" --nonce "$NONCE" --pcr-list sha256:0,7
head -c 32 /dev/urandom > "$D/secret"
check "rackgatectl makecredential" "$CTL" makecredential --ek-public "$D/ek.pub" --name "$D/ak.name" \
  --secret "$D/secret" --output "$D/cred"
check "the TPM activates it" bash -c "
  tpm2_startauthsession --policy-session -S '$D/s.ctx' && tpm2_policysecret -S '$D/s.ctx' -c e &&
  tpm2_activatecredential -c '$D/ak.ctx' -C '$D/ek.ctx' -i '$D/cred' -o '$D/out.secret' -P 'session:$D/s.ctx' &&
  tpm2_flushcontext '$D/s.ctx' && cmp '$D/secret' '$D/out.secret'"
if log=/sys/kernel/security/tpm0/binary_bios_measurements; [[ -r "$log" ]]; then
  check "rackgatectl replays this machine's event log" "$CTL" eventlog replay "$log" --json
fi
if [[ -n "${RACKGATE_EK_ROOTS:-}" ]] && tpm2_nvread 0x01c00002 -C o -o "$D/ek.der" >/dev/null 2>&1; then
  # NV indices may be padded: keep exactly the DER the header announces.
  openssl x509 -inform der -in "$D/ek.der" -outform der -out "$D/ek-trim.der" 2>/dev/null || cp "$D/ek.der" "$D/ek-trim.der"
  check "the EK certificate validates against RACKGATE_EK_ROOTS" "$CTL" ek verify --roots "$RACKGATE_EK_ROOTS" \
    ${RACKGATE_EK_INTERMEDIATES:+--intermediates "$RACKGATE_EK_INTERMEDIATES"} --cert "$D/ek-trim.der" --ek-public "$D/ek.pub"
fi
echo "# hardware: $passed passed, $failed failed"
echo "1..$((passed + failed))"
(( failed == 0 ))
