#!/usr/bin/env bash
# Integration: the alert rules that ship (daemon/alerts/rackgate.rules.yml,
# docs/observability.md "Alert rules") against a real rackgated. promtool
# accepts the file; rackgated is driven into the states the alerts watch
# where that is cheap (a refused attestation and so an untrusted machine, a
# sender without the TPM, an unknown EK, a pool observing, a webhook that
# fails, an unaudited admin refusal, a serving certificate that expires in 10
# days, an EK root that expires in 30); every metric, label and label value
# an alert uses is in the scraped /metrics (a rule with a renamed metric
# fails); and `promtool test rules` runs the unit tests of
# daemon/alerts/rackgate.rules.cases.yml built from the scraped series.
#   alerts.sh RACKGATED RACKGATECTL RULES CASES SOURCE_ROOT
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
RULES="$(realpath "$3")"; CASES="$(realpath "$4")"; SRC="$(realpath "$5")"
DOC="$SRC/docs/observability.md"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
for t in curl openssl; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
# Debian package `prometheus` (promtool); python3-yaml reads the rules.
command -v promtool >/dev/null || lab_skip "promtool missing (apt-get install prometheus)"
lab_python -c 'import yaml' 2>/dev/null || lab_skip "python3-yaml missing"
lab_init alerts
PY=(lab_python "$HERE/alerts_rules.py")

lab_check_shown "promtool check rules accepts the rules file" promtool check rules "$RULES"

# --- an appliance to drive --------------------------------------------------

rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
new_machine() {  # NAME
  lab_machine "$1" lab; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}
new_machine m1; new_machine m2
rg_trust lab
# An EK root that expires in 30 days.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=alerts test EK root" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$LAB_DIR/short-root.key" -out "$RG_DIR/roots/short-root.pem" -days 30 2>/dev/null
# Every admin refusal goes unaudited; a webhook whose receiver never answers.
rg_config metrics '{"audited_refusals_per_minute": 0}'
openssl rand -hex 32 > "$LAB_DIR/webhook.secret"
DEAD_PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
rg_config webhooks "[{\"url\":\"http://127.0.0.1:$DEAD_PORT/hook\",\"secret_file\":\"$LAB_DIR/webhook.secret\"}]"
rg_start

BEFORE="$LAB_DIR/before.txt"; AFTER="$LAB_DIR/after.txt"
lab_check "GET /metrics before" test "$(rg_get /metrics "$BEFORE")" = 200

# --- drive it ---------------------------------------------------------------

M1="$(lab_dir m1)"; M2="$(lab_dir m2)"
lab_check "enroll node-1" rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der"
lab_check "node-1 attests" test "$(attest m1 rsa "$M1/ak")" = 200
# A quote over another session's nonce: refused after the TPM proved itself,
# so node-1 is untrusted.
challenge m1 rsa "$M1/ak" >/dev/null; cp "$M1/ch.json" "$LAB_DIR/ch-other.json"
lab_check "a second challenge" test "$(challenge m1 rsa "$M1/ak")" = 200
activate_and_quote m1 rsa "$M1/ak" "" "$(rg_wire get "$LAB_DIR/ch-other.json" nonce)"
lab_check "a quote over another nonce is refused" test "$(evidence m1)" = 403
lab_check "node-1 is untrusted" bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' show node-1 --json | grep -q '\"trust\": *\"untrusted\"'"
# A guessed activation secret: refused before proof of the TPM.
lab_check "a third challenge" test "$(challenge m1 rsa "$M1/ak")" = 200
activate_and_quote m1 rsa "$M1/ak"
rg_wire set "$M1/ev.req" secret "\"$(head -c 32 /dev/urandom | xxd -p -c 64)\""
lab_check "a guessed secret is refused" test "$(evidence m1)" = 403
lab_check "an unknown EK waits" test "$(challenge m2 rsa "$M2/ak")" = 503
lab_check "pool default observes its boot policy" rg_ctl policy observe --pool default --reason "alerts test"
lab_check_fails "revoking an unknown host is refused" rg_ctl revoke no-such-host --reason typo
# The serving certificate reissued for 10 days under the same CA and key
# (read from the file at scrape time).
S="$RG_DIR/state"
openssl req -new -key "$S/tls/server.key" -subj /CN=localhost 2>/dev/null |
  openssl x509 -req -CA "$S/ca/ca.crt" -CAkey "$S/ca/ca.key" -CAcreateserial -days 10 -out "$LAB_DIR/short.crt" \
    -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') 2>/dev/null
cat "$LAB_DIR/short.crt" "$S/ca/ca.crt" > "$S/tls/server.crt"

# The webhook's failed attempts and its queue (a gauge set every 5 s).
scraped() { rg_get /metrics "$AFTER" >/dev/null && grep -Eq "$1" "$AFTER"; }
lab_check "the webhook's deliveries fail" lab_wait 30 scraped '^rackgate_webhook_deliveries_total\{result="failed"\} [1-9]'
lab_check "the webhook queue is counted" lab_wait 30 scraped '^rackgate_webhook_queue_depth [1-9]'
lab_check "GET /metrics after" test "$(rg_get /metrics "$AFTER")" = 200
LEFT_AT="$(date +%s)"
lab_check_shown "promtool check metrics passes on the driven appliance" promtool check metrics < "$AFTER"

# --- the rules against what was scraped -------------------------------------

lab_check_shown "every metric, label and value the alerts use is on /metrics" \
  "${PY[@]}" names "$RULES" "$BEFORE" "$AFTER" "$DOC" "$SRC"
lab_check_shown "docs/observability.md lists every alert with its for and severity" "${PY[@]}" doc "$RULES" "$DOC"
sed -e '0,/for: 1m/s//for: 2m/' "$RULES" > "$LAB_DIR/other-for.yml"
lab_check_fails "... and the check sees a for the doc does not say" "${PY[@]}" doc "$LAB_DIR/other-for.yml" "$DOC"
# The check can fail: a renamed metric, label value or label is found.
sed -e 's/rackgate_machines_untrusted/rackgate_untrusted_machines/' "$RULES" > "$LAB_DIR/renamed-metric.yml"
sed -e 's/verdict="refused"/verdict="rejected"/' "$RULES" > "$LAB_DIR/renamed-value.yml"
sed -e 's/without (reason, verdict)/without (cause, verdict)/' "$RULES" > "$LAB_DIR/renamed-label.yml"
for f in renamed-metric renamed-value renamed-label; do
  lab_check_fails "a rules file with a $f is refused" \
    "${PY[@]}" names "$LAB_DIR/$f.yml" "$BEFORE" "$AFTER" "$DOC" "$SRC"
done

TESTS="$LAB_DIR/rackgate.rules.test.yml"
make_tests() { "${PY[@]}" cases "$RULES" "$CASES" "$BEFORE" "$AFTER" "$LEFT_AT" "$DOC" "$TESTS" > "$TESTS.list"; }
lab_check_shown "the unit tests are built from the scraped series (a case per alert that fires and one that does not)" \
  make_tests
mapfile -t TEST_FILES < "$TESTS.list"
lab_check_shown "promtool test rules passes" promtool test rules "${TEST_FILES[@]}"
# ... and can fail: a rule whose threshold is off fails its cases.
sed -e 's/expr: rackgate_db_up == 0/expr: rackgate_db_up < 0/' "$RULES" > "$LAB_DIR/broken.yml"
"${PY[@]}" cases "$LAB_DIR/broken.yml" "$CASES" "$BEFORE" "$AFTER" "$LEFT_AT" "$DOC" "$LAB_DIR/broken.test.yml" >/dev/null || true
lab_check_fails "a broken rule fails promtool test rules" promtool test rules "$LAB_DIR/broken.test.yml"
lab_check "each alert is tested" test "$(cat "${TEST_FILES[@]}" | grep -c 'alertname:')" -ge "$(grep -c '^ *- alert:' "$RULES")"
lab_finish
