#!/usr/bin/env bash
# Integration: webhook events end to end (docs/events.md). rackgated with a
# webhook at rackgate-webhook-receiver (firmware-tests/webhook_receiver.cc);
# events made while the receiver is down (a refused attestation of an
# enrolled swtpm machine, two revocations); rackgated SIGKILLed with the
# deliveries queued, started again, the receiver brought up: every event
# arrives, signed (the receiver writes only what its HMAC check passes), none
# lost, and the queue drains.
#   events.sh RACKGATED RACKGATECTL RECEIVER
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; RECEIVER="$(realpath "$3")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
for t in curl openssl; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
lab_init events
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab

# The receiver is ours to stop: lab_cleanup only stops swtpm and rackgated.
RECV_PID=""
recv_stop() { [[ -z "$RECV_PID" ]] || { kill -TERM "$RECV_PID" 2>/dev/null || true; wait "$RECV_PID" 2>/dev/null || true; }; RECV_PID=""; }
events_cleanup() { local rc=$?; recv_stop; (exit "$rc"); lab_cleanup; }
trap events_cleanup EXIT

W="$LAB_DIR/webhook"; mkdir -p "$W"
openssl rand -hex 32 > "$W/secret"
RECV_PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
recv_start() {
  rm -f "$W/port"
  "$RECEIVER" --secret-file "$W/secret" --out "$W/events.jsonl" --port "$RECV_PORT" --port-file "$W/port" \
    </dev/null >>"$W/receiver.log" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
  RECV_PID=$!
  lab_wait 5 test -s "$W/port"
}
lines() { [[ -f "$W/events.jsonl" ]] && wc -l < "$W/events.jsonl" || echo 0; }
# jcheck FILE EXPR: EXPR (Python, over `ev`, the file's "events") holds.
jcheck() { lab_python -c 'import json,sys; ev=json.load(open(sys.argv[1]))["events"]; sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }
# lcheck EXPR: EXPR holds for some line `e` the receiver wrote.
lcheck() { lab_python -c 'import json,sys; sys.exit(0 if any(eval(sys.argv[2]) for e in map(json.loads, open(sys.argv[1]))) else 1)' "$W/events.jsonl" "$1"; }

# --- events while the receiver is down ------------------------------------------

new_machine() {  # NAME
  lab_machine "$1" lab; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}
new_machine m1; new_machine m2
rg_trust lab
# --- the secret file is checked at start

printf 'too-short\n' > "$W/short"
rg_config webhooks "[{\"url\":\"http://127.0.0.1:$RECV_PORT/hook\",\"secret_file\":\"$W/short\"}]"
lab_expect 2 "at least 32" "a short secret file stops the start" "$RACKGATED" --config "$RG_DIR/config.json" --check-config
lab_check "the refusal does not show the secret" bash -c "! '$RACKGATED' --config '$RG_DIR/config.json' --check-config 2>&1 | grep -q too-short"
rg_config webhooks "[{\"url\":\"http://10.1.2.3/hook\",\"secret_file\":\"$W/secret\"}]"
lab_expect 2 "loopback" "plain http to another host is refused" "$RACKGATED" --config "$RG_DIR/config.json" --check-config
rg_config webhooks "[{\"url\":\"http://127.0.0.1:$RECV_PORT/hook\",\"secret_file\":\"$W/secret\"}]"

rg_start
M1="$(lab_dir m1)"; M2="$(lab_dir m2)"
lab_check "enroll node-1" rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der"
lab_check "enroll node-2" rg_ctl enroll --hostname node-2 --pool default --ek-cert "$M2/ek-rsa.der"

# Evidence for an enrolled machine with a wrong activation proof: refused
# before the sender proved it holds the TPM, so anonymous (docs/trust.md):
# one anonymous_refusals summary, no attestation_failed, no untrusted.
st="$(challenge m1 rsa "$M1/ak")"
lab_check "challenge of node-1 ($st)" test "$st" == 200
activate_and_quote m1 rsa "$M1/ak"
rg_wire set "$M1/ev.req" secret "\"$(head -c 32 /dev/urandom | xxd -p -c 64)\""
st="$(evidence m1)"
lab_check "a wrong activation proof is refused ($st)" test "$st" == 403
lab_check "revoke node-1" rg_ctl revoke node-1 --reason "stolen"
lab_check "revoke node-2" rg_ctl revoke node-2 --reason "decommissioned"

rg_ctl events --json > "$W/before.json"
lab_check "three events queued" lab_python - "$W/before.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))["events"]
got = sorted((e["type"], e["machine"]["hostname"]) for e in ev)
# The anonymous refusal moved no trust: no attestation_failed, no untrusted.
want = [("anonymous_refusals", "node-1"), ("machine_revoked", "node-1"), ("machine_revoked", "node-2")]
assert got == want, got
assert all(len(e["deliveries"]) == 1 and "delivered_at" not in e["deliveries"][0] for e in ev), ev
PY
# Let the dispatcher fail at least once against the closed port.
# pending_holds EXPR: the pending deliveries, read again, make EXPR hold.
pending_holds() { rg_ctl events --pending --json > "$W/pending.json" && jcheck "$W/pending.json" "$1"; }
lab_wait 10 pending_holds 'all(d["attempts"] >= 1 for e in ev for d in e["deliveries"])' || true
lab_check "a delivery to a dead receiver is retried later, with its error" \
  jcheck "$W/pending.json" 'len(ev) == 3 and all(d["last_error"] and d["next_attempt_at"] for e in ev for d in e["deliveries"])'
rg_ctl events > "$W/table.txt"
lab_check "rackgatectl events shows the pending deliveries" grep -q "pending, attempts" "$W/table.txt"

# --- SIGKILL, restart, receiver up -------------------------------------------------

kill -KILL "$RG_PID"; wait "$RG_PID" 2>/dev/null || true; RG_PID=""
lab_check "rackgated restarts after SIGKILL" rg_start
lab_check "the receiver starts" recv_start
at_least_lines() { (( $(lines) >= $1 )); }
lab_wait 60 at_least_lines 3 || true
lab_wait 10 pending_holds 'not ev' || true
lab_check "every queued event arrived after the restart, none lost" lab_python - "$W/before.json" "$W/events.jsonl" <<'PY'
import json, sys
queued = {e["id"]: e for e in json.load(open(sys.argv[1]))["events"]}
got = [json.loads(l) for l in open(sys.argv[2])]
ids = {e["id"] for e in got}
assert ids == set(queued), (sorted(ids), sorted(queued))
for e in got:
    q = queued[e["id"]]
    assert e["type"] == q["type"] and e["machine"] == q["machine"] and e["at"] == q["at"], (e, q)
    assert set(e) == {"id", "type", "at", "machine", "detail"}, e
PY
lab_check "the queue is drained" jcheck "$W/pending.json" 'not ev'
lab_check "the anonymous refusal's count and reason are in its event" \
  lcheck 'e["type"] == "anonymous_refusals" and e["detail"]["count"] == 1 and e["detail"]["reasons"] == {"activation_failed": 1}'
lab_check "the operator's reason is in the revocation" \
  lcheck 'e["type"] == "machine_revoked" and e["machine"]["hostname"] == "node-1" and e["detail"]["why"] == "stolen"'

# A new event while everything is up arrives within a few polls.
# node-2 is revoked: a plain reset is refused (issue 32), --unrevoke lifts it.
lab_expect 1 'machine_revoked: .*--unrevoke' "a plain reset of a revoked machine is refused" rg_ctl reset node-2
lab_check "reset --unrevoke lifts the revocation" rg_ctl reset node-2 --unrevoke --reason "events test"
before="$(lines)"
rg_ctl revoke node-2 --reason again >/dev/null
lab_wait 10 at_least_lines $(( before + 1 )) || true
lab_check "a live event arrives at once" lcheck 'e["detail"].get("why") == "again"'

# --- the receiver's own check, and the metrics ---------------------------------------

body='{"id":999,"type":"machine_revoked","at":1,"machine":{"hostname":"x","pool":"p"},"detail":{}}'
st="$(curl -sS -o /dev/null -w '%{http_code}' -H "X-Rackgate-Timestamp: $(date +%s)" \
  -H 'X-Rackgate-Signature: sha256=0000000000000000000000000000000000000000000000000000000000000000' \
  --data-binary "$body" "http://127.0.0.1:$RECV_PORT/hook" || echo 000)"
lab_check "the receiver refuses a bad signature with 401 ($st)" test "$st" == 401
ts="$(date +%s)"
sig="$(printf '%s.%s' "$ts" "$body" | openssl dgst -sha256 -hmac "$(cat "$W/secret")" -r | cut -d' ' -f1)"
st="$(curl -sS -o /dev/null -w '%{http_code}' -H "X-Rackgate-Timestamp: $ts" -H "X-Rackgate-Signature: sha256=$sig" \
  --data-binary "$body" "http://127.0.0.1:$RECV_PORT/hook" || echo 000)"
lab_check "the documented openssl recipe makes a signature the receiver accepts ($st)" test "$st" == 200
rg_get /metrics "$W/metrics.txt" >/dev/null
lab_check "metrics count delivered webhooks" grep -q '^rackgate_webhook_deliveries_total{result="delivered"}' "$W/metrics.txt"
lab_check "no secret in the daemon's log" bash -c "! grep -qF '$(cat "$W/secret")' '$RG_DIR/rackgated.log'"

rg_stop
recv_stop
lab_finish
