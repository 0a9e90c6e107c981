#!/usr/bin/env bash
# Integration: a real rackgated on loopback, swtpm machines driven with
# tpm2-tools as the client (docs/protocol.md). A machine enrolls, attests and
# receives a token; then the refusal matrix: each case with its expected status
# and reason code, and the machine's state unchanged where nothing should
# change.
#   protocol.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
command -v curl >/dev/null || lab_skip "curl missing"
lab_init protocol
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
lab_ca foreign
# The session lifetime stays the appliance's default (120 s): a client
# built from tpm2-tools is slow on a loaded machine, and no check but the
# one of an expired session may depend on how slow. That one restarts the
# appliance with the shortest lifetime it takes.
SHORT_TTL=5 DEFAULT_TTL=120
rg_config connection_timeout_seconds 2
rg_config max_body_bytes 65536


reason_of() { rg_wire get "$1" error.reason 2>/dev/null || echo "?"; }

# expect WHAT WANT_STATUS WANT_REASON GOT_STATUS BODYFILE
expect() {
  local what="$1" want="$2" want_reason="$3" got="$4" body="$5" reason
  reason="$(reason_of "$body")"
  if [[ "$got" == "$want" && ( -z "$want_reason" || "$reason" == "$want_reason" ) ]]; then
    lab_ok "$what ($got${want_reason:+ $reason})"
  else
    lab_not_ok "$what: want $want $want_reason, got $got $reason: $(head -c 300 "$body")"
    rg_log_tail
  fi
}

# must_challenge NAME EK AK: a challenge that must succeed, so that the step
# after it tests what it means to; otherwise say why and stop.
must_challenge() {
  local st m; m="$(lab_dir "$1")"
  st="$(challenge "$@")"
  if [[ "$st" != 200 ]]; then
    lab_not_ok "challenge of $1 before the next check: got $st $(head -c 300 "$m/ch.json")"
    rg_log_tail 25
    exit 1
  fi
}

expect_state() {
  local got; got="$(rg_state "$1" 2>/dev/null || echo '?')"
  lab_check "$1 is $2 ($3)" test "$got" == "$2"
}

# A machine with an RSA EK whose certificate chains to the lab root.
new_machine() {  # NAME CA [ecc384]
  local ek="${3:-rsa}"
  lab_machine "$1" "$2"
  if [[ "$ek" == rsa ]]; then lab_ek_rsa "$1"; else lab_ek_ecc384 "$1"; fi
  lab_pcr_extend "$1"
  lab_ak "$1" "$ek" rsassa "$(lab_dir "$1")/ak"
}

# --- start -------------------------------------------------------------------

new_machine m1 lab                   # also creates the lab CA files
rg_trust lab
rg_start
lab_check "readyz answers 200" test "$(rg_get /readyz /dev/null)" == 200
lab_check "healthz answers 200" test "$(rg_get /healthz /dev/null)" == 200

M1="$(lab_dir m1)"
lab_check "enroll node-1 from its EK certificate" \
  rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der" --address InternalIP=10.0.0.11
expect_state node-1 enrolled "after enroll"

# --- the happy path ----------------------------------------------------------

st="$(challenge m1 rsa "$M1/ak")"
expect "challenge of an enrolled machine" 200 "" "$st" "$M1/ch.json"
activate_and_quote m1 rsa "$M1/ak"
st="$(evidence m1)"
expect "evidence of an enrolled machine" 200 "" "$st" "$M1/ev.json"
TOKEN="$(rg_wire get "$M1/ev.json" token)"
expect_state node-1 attested "after a good attestation"
st="$(rg_get /v1/machine "$LAB_DIR/me.json" "$TOKEN")"
expect "token authenticates as node-1" 200 "" "$st" "$LAB_DIR/me.json"
lab_check "token names node-1" test "$(rg_wire get "$LAB_DIR/me.json" hostname)" == node-1
expect "a wrong token is refused" 401 token_unknown "$(rg_get /v1/machine "$LAB_DIR/x.json" AAAA)" "$LAB_DIR/x.json"
expect "no token is refused" 401 token_missing "$(rg_get /v1/machine "$LAB_DIR/x.json")" "$LAB_DIR/x.json"

# Re-attestation after a reboot keeps the state and issues a new token.
swtpm_ioctl --tcp "127.0.0.1:$(cat "$M1/ctrlport")" -i >/dev/null && lab_tpm m1 tpm2_startup -c >/dev/null
lab_ek_rsa m1; lab_ak m1 rsa rsassa "$M1/ak"   # saved contexts die with a reset
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak"
expect "rebooted machine re-attests" 200 "" "$(evidence m1)" "$M1/ev.json"

# --- the refusal matrix ------------------------------------------------------

# Session reused: the same evidence again.
expect "session reused" 403 session_used "$(evidence m1)" "$M1/ev.json"
expect_state node-1 attested "session reuse changes nothing"

# Wrong activation proof.
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak"
rg_wire set "$M1/ev.req" secret "\"$(head -c 32 /dev/urandom | xxd -p -c 64)\""
expect "wrong activation proof" 403 activation_failed "$(evidence m1)" "$M1/ev.json"

# Quote over another session's nonce.
must_challenge m1 rsa "$M1/ak"; cp "$M1/ch.json" "$LAB_DIR/ch-a.json"
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak" "" "$(rg_wire get "$LAB_DIR/ch-a.json" nonce)"
expect "quote with another session's nonce" 403 quote_nonce_mismatch "$(evidence m1)" "$M1/ev.json"

# Required PCR missing: quote over fewer PCRs than the selection.
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak" sha256:0,1,2
expect "required PCR missing from the quote" 403 quote_pcr_not_selected "$(evidence m1)" "$M1/ev.json"

# PCR values that do not match the quote.
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak"
lab_python - "$M1/ev.req" <<'PY'
import json, sys
p = sys.argv[1]; d = json.load(open(p))
v = d["pcrs"]["sha256"]["7"]; d["pcrs"]["sha256"]["7"] = ("0" if v[0] != "0" else "1") + v[1:]
json.dump(d, open(p, "w"))
PY
expect "PCR values not matching the quote" 403 quote_pcr_digest_mismatch "$(evidence m1)" "$M1/ev.json"

# An event log that does not replay to the quoted PCRs.
must_challenge m1 rsa "$M1/ak"
activate_and_quote m1 rsa "$M1/ak"
rg_wire set "$M1/ev.req" event_log "\"$(base64 -w0 "${RACKGATE_TESTDATA_DIR:-$HERE/../../testdata}/eventlogs/tpm2-tools_event-gce-ubuntu-2104-log.bin")\""
expect "event log not matching the quote" 403 eventlog_pcr_mismatch "$(evidence m1)" "$M1/ev.json"

# Session expired: an appliance with the shortest session lifetime; the
# evidence is sent once the lifetime has passed by the appliance's clock,
# however long the client took to make it. The session was made (whole
# seconds) no later than the answer came back, and a session expires at
# made + lifetime.
rg_stop
rg_config session_ttl_seconds "$SHORT_TTL"
rg_start
must_challenge m1 rsa "$M1/ak"
challenged_at="$(date +%s)"
activate_and_quote m1 rsa "$M1/ak"
lab_sleep_until $(( challenged_at + SHORT_TTL ))
expect "session expired (session_ttl_seconds $SHORT_TTL)" 403 session_expired "$(evidence m1)" "$M1/ev.json"
expect_state node-1 attested "refusals change nothing"
rg_stop
rg_config session_ttl_seconds "$DEFAULT_TTL"
rg_start

# Reset counter going backwards: attest after a reboot, then bring back the
# TPM's state from before it.
lab_machine_stop m1
cp -a "$M1/state" "$LAB_DIR/m1-tpm-before"
lab_machine_start m1
swtpm_ioctl --tcp "127.0.0.1:$(cat "$M1/ctrlport")" -i >/dev/null && lab_tpm m1 tpm2_startup -c >/dev/null
lab_ek_rsa m1; lab_ak m1 rsa rsassa "$M1/ak"
must_challenge m1 rsa "$M1/ak"; activate_and_quote m1 rsa "$M1/ak"
expect "attestation after a reboot" 200 "" "$(evidence m1)" "$M1/ev.json"
lab_machine_stop m1
rm -rf "$M1/state"; cp -a "$LAB_DIR/m1-tpm-before" "$M1/state"
lab_machine_start m1
lab_ek_rsa m1; lab_ak m1 rsa rsassa "$M1/ak"
must_challenge m1 rsa "$M1/ak"; activate_and_quote m1 rsa "$M1/ak"
expect "reset counter going backwards" 403 reset_count_regressed "$(evidence m1)" "$M1/ev.json"

# AK without fixedTPM: a duplicable restricted signing key.
lab_tpm m1 tpm2_createprimary -C o -c "$M1/srk.ctx" >/dev/null; lab_flush m1
lab_tpm m1 tpm2_create -C "$M1/srk.ctx" -G rsa2048:rsassa-sha256:null -g sha256 \
  -a 'sensitivedataorigin|userwithauth|restricted|sign' -u "$M1/dup.pub" -r "$M1/dup.priv" >/dev/null
lab_flush m1
expect "AK without fixedTPM" 403 ak_not_fixed_tpm "$(challenge m1 rsa "$M1/dup")" "$M1/ch.json"

# Unknown EK: a machine nobody enrolled waits (503 + Retry-After).
new_machine m2 lab
M2="$(lab_dir m2)"
st="$(challenge m2 rsa "$M2/ak")"
expect "unknown EK waits" 503 machine_not_enrolled "$st" "$M2/ch.json"
ra="$(curl -sS -D - -o /dev/null --cacert "$RG_DIR/state/ca/ca.crt" -H 'Content-Type: application/json' \
      --data-binary "@$M2/ch.req" "$(rg_url /v1/attest/challenge)" | tr -d '\r' | sed -n 's/^[Rr]etry-[Aa]fter: //p')"
lab_check "503 carries Retry-After ($ra)" test -n "$ra"

# Revoked machine.
rg_ctl enroll --hostname node-2 --pool default --ek-cert "$M2/ek-rsa.der" >/dev/null
rg_ctl revoke node-2 --reason "integration test" >/dev/null
expect "revoked machine" 403 machine_revoked "$(challenge m2 rsa "$M2/ak")" "$M2/ch.json"
expect_state node-2 revoked "refused machine stays revoked"

# EK certificate from a foreign CA: enrolled by its EK public area (the
# operator vouched for the key), but the certificate it presents chains to
# nobody we trust.
new_machine m3 foreign
M3="$(lab_dir m3)"
rg_ctl enroll --hostname node-3 --pool default --ek-public "$M3/ek-rsa.pub" >/dev/null
st="$(challenge m3 rsa "$M3/ak")"
r="$(reason_of "$M3/ch.json")"
lab_check "EK certificate from a foreign CA refused ($st $r)" \
  bash -c "[[ $st == 403 && ( $r == ek_cert_untrusted || $r == ek_cert_missing_intermediate ) ]]"
expect_state node-3 enrolled "foreign certificate changes nothing"

# Malformed JSON and oversized bodies.
echo '{"ek_public": ' > "$LAB_DIR/bad.json"
expect "malformed JSON" 400 bad_json "$(rg_post /v1/attest/challenge "$LAB_DIR/bad.json" "$LAB_DIR/bad.out")" "$LAB_DIR/bad.out"
head -c 70000 /dev/zero | tr '\0' 'a' > "$LAB_DIR/big.json"
st="$(rg_post /v1/attest/challenge "$LAB_DIR/big.json" "$LAB_DIR/big.out")"
lab_check "oversized body refused with 413 ($st)" test "$st" == 413

# A client that sends nothing is dropped (connection_timeout_seconds is 2):
# within 6 s times the lab's time factor, but never 25 s or more, so that
# the check still tells the setting from the default (30 s).
IDLE_BOUND="$(lab_seconds 6)"; (( IDLE_BOUND < 25 )) || IDLE_BOUND=25
lab_check "an idle client is disconnected (within ${IDLE_BOUND} s)" lab_python - "$RG_PORT" "$IDLE_BOUND" <<'PY'
import socket, sys, time
bound = float(sys.argv[2])
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(bound + 5)
start = time.time()
# The server may send a TLS alert before it closes; what matters is the close.
while s.recv(64):
    pass
sys.exit(0 if time.time() - start < bound else 1)
PY

# Import: all or nothing. A bad row in the middle leaves nothing behind and
# the error names it; the good inventory enrolls every machine.
new_machine m4 lab
new_machine m5 lab
M4="$(lab_dir m4)"; M5="$(lab_dir m5)"
printf 'hostname,pool,ek_certificate,addresses\nnode-4,default,%s,InternalIP=10.0.0.14\nNODE 5,default,%s,\n' \
  "$M4/ek-rsa.der" "$M5/ek-rsa.der" > "$LAB_DIR/bad.csv"
lab_expect 1 "line 3 \\(NODE 5\\)" "import with a bad row is refused and names it" \
  "$RG_CTL" --socket "$RG_DIR/admin.sock" import "$LAB_DIR/bad.csv"
lab_check "a refused import enrolls nothing" bash -c "! '$RG_CTL' --socket '$RG_DIR/admin.sock' show node-4"
# node-5's certificate inline, as base64 (the documented alternative to a
# file name; longer than any file name may be).
printf 'hostname,pool,ek_certificate,addresses\nnode-4,default,%s,InternalIP=10.0.0.14\nnode-5,default,%s,\n' \
  "$M4/ek-rsa.der" "$(base64 -w0 "$M5/ek-rsa.der")" > "$LAB_DIR/good.csv"
lab_check "import enrolls a CSV inventory" rg_ctl import "$LAB_DIR/good.csv"
expect_state node-5 enrolled "after import"
expect "an imported machine attests" 200 "" "$(attest m5 rsa "$M5/ak")" "$M5/ev.json"

# The import parses its rows as they stream in (docs/operations.md); a body
# refused whole is refused the same way as before.
admin_import() {  # BODY -> prints the status; the answer in $LAB_DIR/import.json
  printf '%s' "$1" > "$LAB_DIR/import.req"
  curl -sS -o "$LAB_DIR/import.json" -w '%{http_code}' --max-time "$RG_MAX_TIME" --unix-socket "$RG_DIR/admin.sock" \
    -H 'Content-Type: application/json' --data-binary "@$LAB_DIR/import.req" http://localhost/v1/admin/import || echo 000
}
expect "import: machines given twice" 400 field_invalid "$(admin_import '{"machines":[],"machines":[]}')" "$LAB_DIR/import.json"
expect "import: machines not a list" 400 field_missing "$(admin_import '{"machines":{"a":1}}')" "$LAB_DIR/import.json"
expect "import: body cut short" 400 bad_json "$(admin_import '{"machines":[{"hostname":"x"}')" "$LAB_DIR/import.json"
expect "import: a row that is not an object" 400 "" "$(admin_import '{"machines":[7]}')" "$LAB_DIR/import.json"
lab_check "the refusal names the row" grep -q 'machines\[0\]' "$LAB_DIR/import.json"
expect "import: an empty list" 200 "" "$(admin_import '{"machines":[]}')" "$LAB_DIR/import.json"

# Reset: an attested machine goes back to enrolled, audited, and may attest
# again (its counter baseline starts over).
lab_check "reset node-5" rg_ctl reset node-5 --reason "reinstall"
expect_state node-5 enrolled "after reset"
expect "a reset machine attests again" 200 "" "$(attest m5 rsa "$M5/ak")" "$M5/ev.json"

# Metrics: decisions by verdict and reason, and open sessions counted from
# the store (one challenge left unanswered here).
must_challenge m5 rsa "$M5/ak"
rg_get /metrics "$LAB_DIR/metrics.txt" >/dev/null
lab_check "metrics count attestations by verdict" grep -q 'rackgate_attestations_total{reason="",verdict="ok"}' "$LAB_DIR/metrics.txt"
lab_check "metrics count refusals by reason" grep -q 'reason="session_used",verdict="refused"' "$LAB_DIR/metrics.txt"
lab_check "metrics show the open session" grep -Eq '^rackgate_sessions_in_flight [1-9]' "$LAB_DIR/metrics.txt"

# The audit log names every state change.
lab_check "audit has enroll, attest and revoke" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' audit --json | grep -q revoke"

# Admission: at most two open sessions per client address. The third
# challenge is refused before any work, with a jittered Retry-After; an
# answered session frees its place.
rg_stop
rg_config max_open_sessions_per_client 2
rg_config busy_retry_after_seconds 2
rg_config admin_group '"users"'
rg_start

# The admin API admits members of the admin group by their supplementary
# groups (SO_PEERGROUPS), and nobody else. Needs root to act as another user.
if [[ "$(id -u)" == 0 ]] && command -v setpriv >/dev/null && getent group users >/dev/null; then
  chmod o+x "$LAB_DIR" "$RG_DIR"
  users_gid="$(getent group users | cut -d: -f3)"
  lab_check "a member of the admin group (supplementary) may use the admin API" \
    setpriv --reuid=65534 --regid=65534 --groups="$users_gid" "$RG_CTL" --socket "$RG_DIR/admin.sock" status
  # Past the socket's mode (made too permissive by hand), the peer check
  # still refuses a non-member.
  chmod 0666 "$RG_DIR/admin.sock"
  setpriv --reuid=65534 --regid=65534 --groups=65534 "$RG_CTL" --socket "$RG_DIR/admin.sock" status \
    >/dev/null 2>"$LAB_DIR/nogroup.err" || true
  lab_check "a non-member is refused by the peer check" grep -q admin_forbidden "$LAB_DIR/nogroup.err"
fi
must_challenge m5 rsa "$M5/ak"; cp "$M5/ch.json" "$LAB_DIR/ch-first.json"
must_challenge m5 rsa "$M5/ak"
curl -sS -D "$LAB_DIR/busy.h" -o "$LAB_DIR/busy.json" --cacert "$RG_DIR/state/ca/ca.crt" \
  -H 'Content-Type: application/json' --data-binary "@$M5/ch.req" "$(rg_url /v1/attest/challenge)" >/dev/null
expect "a third open session from one client waits" 503 busy_client \
  "$(head -n1 "$LAB_DIR/busy.h" | awk '{print $2}')" "$LAB_DIR/busy.json"
ra="$(tr -d '\r' < "$LAB_DIR/busy.h" | awk -F': ' 'tolower($1)=="retry-after"{print $2}')"
lab_check "  with Retry-After between 2 and 4 ($ra)" test "${ra:-0}" -ge 2 -a "${ra:-0}" -le 4
activate_and_quote m5 rsa "$M5/ak"
expect "evidence of the second session" 200 "" "$(evidence m5)" "$M5/ev.json"
must_challenge m5 rsa "$M5/ak"
lab_ok "an answered session frees its place for the next challenge"

rg_stop
lab_finish
