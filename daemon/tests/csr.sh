#!/usr/bin/env bash
# Integration: CSR vouching end to end (docs/csr.md). A real rackgated, swtpm
# machines attesting with tpm2-tools, CSRs made the way kubelet makes them
# (ECDSA P-256, O and CN only) and by `openssl req`, the refusal matrix over
# HTTP, and the issued certificates checked with `openssl verify` against the
# cluster CA.
#   csr.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
for t in curl openssl; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
lab_init csr
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
rg_config max_csrs_in_flight_per_machine 1

reason_of() { rg_wire get "$1" error.reason 2>/dev/null || echo "?"; }
expect() {  # WHAT WANT_STATUS WANT_REASON GOT_STATUS BODY
  local reason; reason="$(reason_of "$5")"
  if [[ "$4" == "$2" && ( -z "$3" || "$reason" == "$3" ) ]]; then lab_ok "$1 ($4${3:+ $reason})"
  else lab_not_ok "$1: want $2 $3, got $4 $reason: $(head -c 300 "$5")"; rg_log_tail; fi
}
new_machine() {  # NAME
  lab_machine "$1" lab; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}
C="$LAB_DIR/csrs"; mkdir -p "$C"
# csr NAME SUBJECT [KEYTYPE] [SANS]: a CSR made by openssl; KEYTYPE p256 (the
# kubelet's choice), rsa2048, rsa1024, ed25519.
csr() {
  local name="$1" subj="$2" kt="${3:-p256}" sans="${4:-}"
  case "$kt" in
    p256) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$C/$name.key" 2>/dev/null ;;
    rsa2048) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$C/$name.key" 2>/dev/null ;;
    rsa1024) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$C/$name.key" 2>/dev/null ;;
    ed25519) openssl genpkey -algorithm ED25519 -out "$C/$name.key" 2>/dev/null ;;
  esac
  local ext=()
  [[ -n "$sans" ]] && ext=(-addext "subjectAltName=$sans")
  openssl req -new -key "$C/$name.key" -subj "$subj" "${ext[@]}" -out "$C/$name.csr" 2>/dev/null
}
# submit NAME TOKEN SIGNER [USAGES_JSON]: POST the CSR; prints the status.
submit() {
  local usages="${4:-}"
  lab_python - "$C/$1.csr" "$3" "$usages" > "$C/$1.req" <<'PY'
import json, sys
body = {"signer": sys.argv[2], "csr": open(sys.argv[1]).read()}
if sys.argv[3]: body["usages"] = json.loads(sys.argv[3])
print(json.dumps(body))
PY
  curl -sS -o "$C/$1.json" -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    -H "Authorization: Bearer $2" -H 'Content-Type: application/json' --data-binary "@$C/$1.req" \
    "$(rg_url /v1/machine/csr)" || echo 000
}
CLIENT=kubernetes.io/kube-apiserver-client-kubelet
SERVING=kubernetes.io/kubelet-serving

new_machine m1; new_machine m2
rg_trust lab
rg_start
M1="$(lab_dir m1)"; M2="$(lab_dir m2)"
rg_ctl pool put workers --token-required no >/dev/null
rg_ctl enroll --hostname node-1 --pool workers --ek-cert "$M1/ek-rsa.der" \
  --address InternalIP=10.0.0.11 --address InternalDNS=node-1.rack.example >/dev/null
rg_ctl enroll --hostname node-2 --pool workers --ek-cert "$M2/ek-rsa.der" --address InternalIP=10.0.0.12 >/dev/null
lab_check "node-1 attests" test "$(attest m1 rsa "$M1/ak")" == 200
T1="$(rg_wire get "$M1/ev.json" token)"
lab_check "node-2 attests" test "$(attest m2 rsa "$M2/ak")" == 200
T2="$(rg_wire get "$M2/ev.json" token)"

csr good "/O=system:nodes/CN=system:node:node-1"
expect "no cluster CA yet: wait" 503 signer_unavailable "$(submit good "$T1" "$CLIENT")" "$C/good.json"
lab_check "rackgatectl ca generate --cluster" rg_ctl ca generate --cluster --state-dir "$RG_DIR/state"
lab_check_fails "  it never overwrites" rg_ctl ca generate --cluster --state-dir "$RG_DIR/state"
CA="$RG_DIR/state/cluster-ca/ca.crt"

# --- the refusal matrix (each: status, reason; the machine's state unchanged) --
csr wrong-cn "/O=system:nodes/CN=node-1"
expect "wrong CN" 403 csr_subject_common_name "$(submit wrong-cn "$T1" "$CLIENT")" "$C/wrong-cn.json"
csr other-host "/O=system:nodes/CN=system:node:node-2"
expect "another machine's hostname" 403 csr_subject_common_name "$(submit other-host "$T1" "$CLIENT")" "$C/other-host.json"
expect "a token from another machine" 403 csr_subject_common_name "$(submit good "$T2" "$CLIENT")" "$C/good.json"
csr wrong-o "/O=system:masters/CN=system:node:node-1"
expect "wrong O" 403 csr_subject_organization "$(submit wrong-o "$T1" "$CLIENT")" "$C/wrong-o.json"
csr extra-o "/O=system:nodes/O=system:masters/CN=system:node:node-1"
expect "extra O" 403 csr_subject_organization "$(submit extra-o "$T1" "$CLIENT")" "$C/extra-o.json"
csr client-sans "/O=system:nodes/CN=system:node:node-1" p256 "DNS:node-1"
expect "SANs on a client CSR" 403 csr_client_has_sans "$(submit client-sans "$T1" "$CLIENT")" "$C/client-sans.json"
expect "wrong usages" 403 csr_usages \
  "$(submit good "$T1" "$CLIENT" '["digital signature","client auth","server auth"]')" "$C/good.json"
csr rsa1024 "/O=system:nodes/CN=system:node:node-1" rsa1024
expect "RSA-1024" 403 csr_key_unsupported "$(submit rsa1024 "$T1" "$CLIENT")" "$C/rsa1024.json"
csr ed "/O=system:nodes/CN=system:node:node-1" ed25519
expect "Ed25519 (unsupported)" 403 csr_key_unsupported "$(submit ed "$T1" "$CLIENT")" "$C/ed.json"
csr serving-early "/O=system:nodes/CN=system:node:node-1" p256 "DNS:node-1,IP:10.0.0.11"
expect "serving CSR before provisioning" 403 csr_state "$(submit serving-early "$T1" "$SERVING")" "$C/serving-early.json"
echo 'garbage' > "$C/junk.csr"
expect "not a CSR" 400 csr_malformed "$(submit junk "$T1" "$CLIENT")" "$C/junk.json"
expect "an unknown signer" 400 signer_unknown "$(submit good "$T1" kubernetes.io/legacy-unknown)" "$C/good.json"
expect "no token" 401 token_missing "$(submit good "" "$CLIENT")" "$C/good.json"
lab_check "node-1 is still attested after the refusals" test "$(rg_state node-1)" == attested
rg_ctl audit --hostname node-1 --json --limit 1000 > "$LAB_DIR/audit1.json"
refused="$(lab_python - "$LAB_DIR/audit1.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["entries"] if isinstance(doc, dict) else doc
print(sorted({json.loads(r["detail"]) ["reason"] if isinstance(r.get("detail"), str) else r["detail"]["reason"]
              for r in rows if r["action"] == "csr_refused"}))
PY
)"
lab_check "every final refusal is audited with its reason: $refused" \
  test "$refused" == "['csr_client_has_sans', 'csr_key_unsupported', 'csr_malformed', 'csr_state', 'csr_subject_common_name', 'csr_subject_organization', 'csr_usages']"

# --- the client certificate ----------------------------------------------------
expect "kubelet-style P-256 client CSR is signed" 200 "" "$(submit good "$T1" "$CLIENT")" "$C/good.json"
rg_wire get "$C/good.json" certificate > "$C/good.crt"
lab_check "  openssl verify -CAfile cluster CA" openssl verify -x509_strict -purpose sslclient -CAfile "$CA" "$C/good.crt"
openssl x509 -in "$C/good.crt" -noout -text > "$C/good.txt"
lab_check "  subject O=system:nodes, CN=system:node:node-1" \
  sh -c "openssl x509 -in \"$C/good.crt\" -noout -subject -nameopt RFC2253 | grep -qx 'subject=CN=system:node:node-1,O=system:nodes'"
lab_check "  KU digital signature, critical" grep -A1 -q 'Key Usage: critical' "$C/good.txt"
lab_check "  EKU client auth only" sh -c "grep -A1 'Extended Key Usage' \"$C/good.txt\" | tail -1 | grep -qx ' *TLS Web Client Authentication'"
lab_check_fails "  no SANs" grep -q 'Subject Alternative Name' "$C/good.txt"
lab_check "  the certificate's key is the CSR's key" \
  sh -c "[ \"\$(openssl x509 -in \"$C/good.crt\" -noout -pubkey)\" = \"\$(openssl pkey -in \"$C/good.key\" -pubout)\" ]"
lab_check "node-1 is joined" test "$(rg_state node-1)" == joined
csr second "/O=system:nodes/CN=system:node:node-1"
expect "a second client CSR without reset" 403 client_cert_already_issued "$(submit second "$T1" "$CLIENT")" "$C/second.json"
# The same CSR again (its answer lost to a crash or a cut connection): the
# same certificate, not a refusal and not a second certificate.
expect "the same key asks again (lost answer)" 200 "" "$(submit good "$T1" "$CLIENT")" "$C/good.json"
rg_wire get "$C/good.json" certificate > "$C/good-again.crt"
lab_check "  and gets the same certificate" cmp -s "$C/good.crt" "$C/good-again.crt"

# --- serving -------------------------------------------------------------------
csr serving "/O=system:nodes/CN=system:node:node-1" p256 "DNS:node-1,DNS:NODE-1.rack.example.,IP:10.0.0.11"
expect "serving CSR with enrolled SANs is signed" 200 "" "$(submit serving "$T1" "$SERVING")" "$C/serving.json"
rg_wire get "$C/serving.json" certificate > "$C/serving.crt"
lab_check "  openssl verify -purpose sslserver" openssl verify -x509_strict -purpose sslserver -CAfile "$CA" "$C/serving.crt"
openssl x509 -in "$C/serving.crt" -noout -ext subjectAltName > "$C/serving.san" 2>/dev/null
lab_check "  SANs DNS:node-1, node-1.rack.example, IP 10.0.0.11" \
  sh -c "grep -q 'DNS:node-1,' \"$C/serving.san\" && grep -q 'DNS:node-1.rack.example' \"$C/serving.san\" && grep -q 'IP Address:10.0.0.11' \"$C/serving.san\""
lab_check "  EKU server auth" sh -c "openssl x509 -in \"$C/serving.crt\" -noout -ext extendedKeyUsage | grep -q 'TLS Web Server Authentication'"
csr serving-bad "/O=system:nodes/CN=system:node:node-1" p256 "DNS:node-1,IP:10.0.0.99"
expect "a serving SAN not enrolled" 403 csr_san_not_enrolled "$(submit serving-bad "$T1" "$SERVING")" "$C/serving-bad.json"
expect "serving CSR with client usages" 403 csr_usages \
  "$(submit serving "$T1" "$SERVING" '["digital signature","client auth"]')" "$C/serving.json"

# --- node-2: a CSR made by `openssl req` with RSA-2048 --------------------------
csr rsa "/O=system:nodes/CN=system:node:node-2" rsa2048
expect "openssl req RSA-2048 client CSR is signed" 200 "" \
  "$(submit rsa "$T2" "$CLIENT" '["digital signature","key encipherment","client auth"]')" "$C/rsa.json"
rg_wire get "$C/rsa.json" certificate > "$C/rsa.crt"
lab_check "  openssl verify" openssl verify -x509_strict -purpose sslclient -CAfile "$CA" "$C/rsa.crt"
lab_check "  KU has key encipherment for RSA" sh -c "openssl x509 -in \"$C/rsa.crt\" -noout -ext keyUsage | grep -q 'Key Encipherment'"

# --- a pool that requires TPM-resident client keys --------------------------------
echo '{"require_tpm_key": true}' > "$LAB_DIR/tpm-only.json"
rg_ctl pool put workers --settings "$LAB_DIR/tpm-only.json" >/dev/null
rg_ctl reset node-2 --reason "tpm key test" >/dev/null
lab_check "node-2 attests again after the reset" test "$(attest m2 rsa "$M2/ak")" == 200
T2="$(rg_wire get "$M2/ev.json" token)"
st="$(rg_get /v1/machine "$LAB_DIR/me2.json" "$T2")"
lab_check "GET /v1/machine tells the agent the pool requires a TPM key" \
  test "$st $(rg_wire get "$LAB_DIR/me2.json" require_tpm_key)" == "200 true"
csr soft "/O=system:nodes/CN=system:node:node-2"
expect "a software client key where the pool requires a TPM key" 403 csr_tpm_key_required \
  "$(submit soft "$T2" "$CLIENT")" "$C/soft.json"
echo '{}' > "$LAB_DIR/no-settings.json"
rg_ctl pool put workers --settings "$LAB_DIR/no-settings.json" >/dev/null

# --- the record ------------------------------------------------------------------
rg_ctl certs --json > "$LAB_DIR/certs.json"
lab_check "rackgatectl certs lists the three certificates" \
  test "$(lab_python -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["certificates"]))' "$LAB_DIR/certs.json")" == 3
serial="$(openssl x509 -in "$C/good.crt" -noout -serial | cut -d= -f2 | tr A-F a-f)"
lab_check "  by serial ($serial)" grep -q "$serial" "$LAB_DIR/certs.json"

# --- flood: one CSR in flight per machine; the rest wait with Retry-After ------
csr flood "/O=system:nodes/CN=system:node:node-2" p256 "DNS:node-2"
lab_python - "$C/flood.csr" "$SERVING" > "$C/flood.req" <<'PY'
import json, sys
print(json.dumps({"signer": sys.argv[2], "csr": open(sys.argv[1]).read()}))
PY
pids=()
for i in $(seq 1 24); do
  curl -sS -D "$C/flood.$i.h" -o "$C/flood.$i.json" --cacert "$RG_DIR/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    -H "Authorization: Bearer $T2" --data-binary "@$C/flood.req" "$(rg_url /v1/machine/csr)" 2>/dev/null &
  pids+=($!)
done
wait "${pids[@]}" || true  # not a bare wait: the daemon is a child too
limited=0 other=0
for i in $(seq 1 24); do
  code="$(head -n1 "$C/flood.$i.h" | awk '{print $2}')"
  case "$code" in
    429) grep -qi '^retry-after:' "$C/flood.$i.h" && limited=$((limited + 1)) ;;
    403|200) ;;
    *) other=$((other + 1)) ;;
  esac
done
lab_check "flood: some of 24 parallel CSRs got 429 + Retry-After ($limited), nothing else odd ($other)" \
  sh -c "[ $limited -ge 1 ] && [ $other -eq 0 ]"

# --- a revoked machine ----------------------------------------------------------
rg_ctl revoke node-2 --reason test >/dev/null
expect "a revoked machine" 403 token_revoked "$(submit rsa "$T2" "$CLIENT")" "$C/rsa.json"
lab_check_fails "no token in the daemon log" grep -q -e "$T1" -e "$T2" "$RG_DIR/rackgated.log"

rg_stop
lab_finish
