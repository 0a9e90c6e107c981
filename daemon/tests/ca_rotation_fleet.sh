#!/usr/bin/env bash
# Integration (issue 44): the appliance CA rotated by two real rackgated (A
# and B) on one PostgreSQL, as docs/operations.md §8 says for several
# appliances. prepare on A: B hands out the bundle in its evidence answers
# (the fleet's record through B's cache, told by NOTIFY; the delay is
# measured); switch on B before next.* are copied: ca_next_missing; both
# switch and reload, machines attest on both through the new serving
# certificates; A retires (the fleet's record goes), B still hands out the
# bundle until it retires too; one prepared, two switched, one retired audit
# row. Runs under `script/pg-lab run --` (RACKGATE_TEST_POSTGRES).
#   ca_rotation_fleet.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
command -v curl >/dev/null || lab_skip "curl missing"
[[ -n "${RACKGATE_TEST_POSTGRES:-}" ]] ||
  lab_skip "PostgreSQL is not installed (apt-get install postgresql): RACKGATE_TEST_POSTGRES is unset"
DB="$RACKGATE_TEST_POSTGRES"
lab_init ca-rotation-fleet

declare -A DIR PORT PID
use() { RG_DIR="${DIR[$1]}"; RG_PORT="${PORT[$1]}"; RG_PID="${PID[$1]:-}"; }
save() { PID[$1]="$RG_PID"; }
# What the test's client trusts: the bundle `ca bundle --appliance` prints.
TRUST="$LAB_DIR/trust.pem"
rg_post() {
  curl -sS -o "$3" -w '%{http_code}' --cacert "$TRUST" --max-time "$RG_MAX_TIME" \
    -H 'Content-Type: application/json' --data-binary "@$2" "$(rg_url "$1")" || echo 000
}
rg_get() { curl -sS -o "$2" -w '%{http_code}' --cacert "$TRUST" --max-time "$RG_MAX_TIME" "$(rg_url "$1")" 2>/dev/null || echo 000; }
ca() { "$RACKGATECTL" ca "$@" --database "$DB"; }  # ca ... --state-dir DIR
trust_now() { ca bundle --appliance --state-dir "${DIR[a]}/state" --out "$TRUST"; }
# reload X: SIGHUP, waited for in X's log.
reload() {
  use "$1"
  local before; before="$(grep -c 'reload: TLS certificate' "$RG_DIR/rackgated.log" || true)"
  kill -HUP "$RG_PID"
  lab_wait 10 bash -c "(( \$(grep -c 'reload: TLS certificate' '$RG_DIR/rackgated.log') > $before ))"
}
# bundle_from X: attests m1 on X; prints the certificates in the answer's ca_bundle.
bundle_from() {
  use "$1"
  [[ "$(attest m1 rsa "$M1/ak")" == 200 ]] || { echo "attest on $1 failed"; return 1; }
  lab_python -c 'import json, sys; print(json.load(open(sys.argv[1])).get("ca_bundle", "").count("-----BEGIN CERTIFICATE-----"))' \
    "$M1/ev.json"
}
bundle_is() { [[ "$(bundle_from "$1")" == "$2" ]]; }
audit_count() {
  use a
  rg_ctl audit --limit 1000 --json | lab_python -c 'import json, sys
print(sum(1 for e in json.load(sys.stdin)["entries"] if e.get("action") == sys.argv[1]))' "$1"
}

# --- two appliances on one database (as daemon/tests/fleet.sh) ---------------------
lab_ca lab
rg_init "$RACKGATED" "$RACKGATECTL"
DIR[a]="$RG_DIR"; PORT[a]="$RG_PORT"
rc=0; "$RG_CTL" init --state-dir "${DIR[a]}/state" --database "$DB" >"${DIR[a]}/init.log" 2>&1 || rc=$?
grep -q db_backend_unsupported "${DIR[a]}/init.log" && lab_skip "this rackgate is built without the PostgreSQL backend"
lab_check "init A on the fleet database" test "$rc" = 0
DIR[b]="$LAB_DIR/appliance-b"
PORT[b]="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "${DIR[b]}/state/ca" && chmod 0750 "${DIR[b]}/state/ca"
cp -p "${DIR[a]}/state/ca/ca.crt" "${DIR[a]}/state/ca/ca.key" "${DIR[b]}/state/ca/"
"$RG_CTL" init --state-dir "${DIR[b]}/state" --database "$DB" --renew-serving-cert --name localhost \
  --address 127.0.0.1 >/dev/null
for x in a b; do
  use "$x"
  mkdir -p "$RG_DIR/roots" "$RG_DIR/intermediates"
  lab_python - "${DIR[a]}/config.json" "$RG_DIR" "$RG_PORT" "$DB" "$RG_DIR/config.json" <<'PY'
import json, sys
src, d, port, db, out = sys.argv[1:]
c = json.load(open(src))
c.update({"state_dir": d + "/state", "port": int(port), "admin_socket": d + "/admin.sock",
          "ek_roots": [d + "/roots"], "ek_intermediates": [d + "/intermediates"], "database": db})
json.dump(c, open(out, "w"), indent=1)
PY
done
cp "${DIR[a]}/state/ca/ca.crt" "$TRUST"
cp "${DIR[a]}/state/ca/ca.crt" "$LAB_DIR/first.crt"
lab_machine m1 lab; lab_ek_rsa m1; lab_pcr_extend m1; lab_ak m1 rsa rsassa "$(lab_dir m1)/ak"
M1="$(lab_dir m1)"
for x in a b; do use "$x"; rg_trust lab; rg_start; save "$x"; done
use a
lab_check "enroll node-1" rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der" --address InternalIP=10.0.0.11
lab_check_shown "before: B's evidence answer carries the one CA" bundle_is b 1

# --- prepare on A: B serves the bundle --------------------------------------------------
t0="$(date +%s%N)"
lab_check_shown "prepare on A" ca rotate --appliance prepare --state-dir "${DIR[a]}/state"
lab_check_shown "B's evidence answer carries the bundle (2 certificates)" lab_wait 10 bundle_is b 2
echo "# B served the bundle $(( ($(date +%s%N) - t0) / 1000000 )) ms after prepare on A (bound: 2 s cache, NOTIFY at once)"
lab_check_shown "so does A's" bundle_is a 2
PREPARED_AT="$(ca rotate --appliance status --state-dir "${DIR[a]}/state" --json |
  lab_python -c 'import json,sys; print(json.load(sys.stdin)["prepared_at"])')"
lab_sleep_until "$((PREPARED_AT + 3))"
lab_check_shown "node-1 attests after the bundle's publication" bundle_is a 2

# --- switch on both -------------------------------------------------------------------
lab_expect 1 "ca_next_missing: .*docs/ha.md" "switch on B before next.crt and next.key are copied: ca_next_missing" \
  ca rotate --appliance switch --state-dir "${DIR[b]}/state"
cp -p "${DIR[a]}/state/ca/next.crt" "${DIR[a]}/state/ca/next.key" "${DIR[b]}/state/ca/"
cp "${DIR[a]}/state/ca/next.crt" "$LAB_DIR/next.crt"
trust_now
for x in a b; do
  lab_check_shown "switch on $x" ca rotate --appliance switch --state-dir "${DIR[$x]}/state"
  lab_check_shown "reload $x" reload "$x"
  lab_check_shown "$x serves under the next CA" openssl verify -CAfile "$LAB_DIR/next.crt" "${DIR[$x]}/state/tls/server.crt"
done
for x in a b; do lab_check_shown "node-1 attests on $x through its new certificate; the bundle still" bundle_is "$x" 2; done

# --- retire on A, then on B -------------------------------------------------------------
lab_check_shown "retire on A (the fleet's record goes)" ca rotate --appliance retire --state-dir "${DIR[a]}/state"
lab_check_shown "reload A" reload a
lab_check_shown "A hands out the new CA alone" bundle_is a 1
lab_check_shown "B, not retired yet, still hands out both" lab_wait 10 bundle_is b 2
lab_check_shown "retire on B moves its files (the fleet's rotation retired already)" \
  bash -c "'$RACKGATECTL' ca rotate --appliance retire --state-dir '${DIR[b]}/state' --database '$DB' | grep -q 'retired already'"
lab_check_shown "reload B" reload b
lab_check_shown "B hands out the new CA alone" bundle_is b 1
lab_check_shown "B's ca.crt is the new CA" cmp "${DIR[b]}/state/ca/ca.crt" "$LAB_DIR/next.crt"
lab_check_shown "audit: one prepared, two switched, one retired" \
  test "$(audit_count ca_rotation_prepared) $(audit_count ca_rotation_switched) $(audit_count ca_rotation_retired)" == "1 2 1"

for x in a b; do use "$x"; rg_stop; done
lab_finish
