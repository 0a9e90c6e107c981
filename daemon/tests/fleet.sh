#!/usr/bin/env bash
# Integration: two real rackgated (A and B) on one PostgreSQL, sharing the
# appliance CA as docs/ha.md says (init once, copy the CA, init B with its
# own serving certificate). A challenge on A and its evidence on B; the same
# evidence raced to A and B, twenty times: exactly one 200, the other 403
# session_used; a pool token rotated on A refused by B within the cache
# bound (measured); a revoke on A refused by B at once; the admin API and
# /metrics of both. Runs under `script/pg-lab run --` (RACKGATE_TEST_POSTGRES).
#   fleet.sh RACKGATED RACKGATECTL
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
lab_init fleet

# --- two appliances ------------------------------------------------------------
# appliance.sh drives one appliance through RG_DIR, RG_PORT and RG_PID;
# use_a / use_b switch them.
declare -A DIR PORT PID
use() { RG_DIR="${DIR[$1]}"; RG_PORT="${PORT[$1]}"; RG_PID="${PID[$1]:-}"; }
save() { PID[$1]="$RG_PID"; }

lab_ca lab
rg_init "$RACKGATED" "$RACKGATECTL"   # A's state dir and config (and the lab's paths)
DIR[a]="$RG_DIR"; PORT[a]="$RG_PORT"
rc=0; "$RG_CTL" init --state-dir "${DIR[a]}/state" --database "$DB" --token-out "$LAB_DIR/pool.token" \
  >"${DIR[a]}/init.log" 2>&1 || rc=$?
grep -q db_backend_unsupported "${DIR[a]}/init.log" && lab_skip "this rackgate is built without the PostgreSQL backend"
lab_check "init A on the fleet database" bash -c "test $rc = 0 || { cat '${DIR[a]}/init.log' >&2; false; }"
lab_check "init A printed no password or URL query" bash -c "! grep -q '?' '${DIR[a]}/init.log'"

DIR[b]="$LAB_DIR/appliance-b"
PORT[b]="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "${DIR[b]}/state"
# The second init on the fleet database, without A's CA: a refusal (exit 1,
# `rackgatectl: refused: REASON: message`, docs/cli.md), not unusable
# input (issue 27, item 9); twice, to show it leaves nothing behind.
for try in 1 2; do
  rc=0; "$RG_CTL" init --state-dir "${DIR[b]}/state" --database "$DB" >"$LAB_DIR/b-noca.out" 2>"$LAB_DIR/b-noca.err" || rc=$?
  lab_check_shown "init B without A's CA ($try): exit 1 (refused), not 2" bash -c "echo 'exit $rc'; test $rc = 1"
  lab_check_shown "init B without A's CA ($try): stderr is 'rackgatectl: refused: ca_missing: ...'" \
    bash -c "head -n 1 '$LAB_DIR/b-noca.err' | grep -q '^rackgatectl: refused: ca_missing: ' || { cat '$LAB_DIR/b-noca.err' >&2; false; }"
  lab_check "init B without A's CA ($try): no CA made, nothing on stdout" \
    bash -c "test ! -e '${DIR[b]}/state/ca/ca.key' && test ! -e '${DIR[b]}/state/ca/ca.crt' && test ! -s '$LAB_DIR/b-noca.out'"
done
mkdir -p "${DIR[b]}/state/ca" && chmod 0750 "${DIR[b]}/state/ca"
cp -p "${DIR[a]}/state/ca/ca.crt" "${DIR[a]}/state/ca/ca.key" "${DIR[b]}/state/ca/"
"$RG_CTL" init --state-dir "${DIR[b]}/state" --database "$DB" --renew-serving-cert --name localhost \
  --address 127.0.0.1 --json >"$LAB_DIR/b-init.json"
lab_check "init B keeps the fleet's default pool token (no second one)" \
  bash -c "grep -q '\"token\": *\"kept\"' '$LAB_DIR/b-init.json' && ! grep -q default_pool_token '$LAB_DIR/b-init.json'"
lab_check "B serves under the fleet's CA" \
  openssl verify -CAfile "${DIR[a]}/state/ca/ca.crt" "${DIR[b]}/state/tls/server.crt"

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

new_machine() {  # NAME CA
  lab_machine "$1" "$2"; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}
new_machine m1 lab
for x in a b; do use "$x"; rg_trust lab; rg_start; save "$x"; done
lab_check "both appliances ready on one database" \
  bash -c "test \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '${DIR[a]}/state/ca/ca.crt' https://127.0.0.1:${PORT[b]}/readyz)\" = 200"
use a
lab_check "A logs the database without its secrets" grep -q "store: postgresql://" "${DIR[a]}/rackgated.log"

M1="$(lab_dir m1)"
use a
lab_check "enroll node-1 on A" \
  rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der" --address InternalIP=10.0.0.11
use b
lab_check "B's admin API sees node-1" test "$(rg_state node-1)" = enrolled

# --- a challenge on A, the evidence on B ------------------------------------------
use a
st="$(challenge m1 rsa "$M1/ak")"
lab_check "challenge on A" test "$st" = 200
activate_and_quote m1 rsa "$M1/ak"
use b
st="$(evidence m1)"
lab_check "evidence on B for A's session ($st)" test "$st" = 200
TOKEN="$(rg_wire get "$M1/ev.json" token)"
use a
lab_check "B's token works on A" test "$(rg_get /v1/machine "$LAB_DIR/me.json" "$TOKEN")" = 200

# --- the same evidence raced to A and B ------------------------------------------
post_to() {  # X BODY OUT
  curl -sS -o "$3" -w '%{http_code}' --cacert "${DIR[a]}/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    -H 'Content-Type: application/json' --data-binary "@$2" "https://127.0.0.1:${PORT[$1]}/v1/attest/evidence" ||
    echo 000
}
wins=0 bad=""
for i in $(seq 1 20); do
  use $([[ $((i % 2)) = 0 ]] && echo a || echo b)
  st="$(challenge m1 rsa "$M1/ak")"
  [[ "$st" = 200 ]] || { bad+=" challenge#$i=$st"; continue; }
  activate_and_quote m1 rsa "$M1/ak"
  post_to a "$M1/ev.req" "$LAB_DIR/ra.json" >"$LAB_DIR/ra.st" &
  pa=$!
  post_to b "$M1/ev.req" "$LAB_DIR/rb.json" >"$LAB_DIR/rb.st" &
  pb=$!
  wait "$pa" "$pb" || true
  sa="$(cat "$LAB_DIR/ra.st")" sb="$(cat "$LAB_DIR/rb.st")"
  if [[ "$sa" = 200 && "$sb" = 403 && "$(rg_wire get "$LAB_DIR/rb.json" error.reason)" = session_used ]] ||
     [[ "$sb" = 200 && "$sa" = 403 && "$(rg_wire get "$LAB_DIR/ra.json" error.reason)" = session_used ]]; then
    wins=$((wins + 1))
  else
    bad+=" race#$i=$sa/$sb"
  fi
done
lab_check "20 races: exactly one 200 and one 403 session_used each ($wins;$bad)" test "$wins" = 20

# --- a pool token rotated on A, refused by B -------------------------------------
OLD="$(tr -d '\n' <"$LAB_DIR/pool.token")"
pool_on() {  # X TOKEN -> status of GET /config/default
  curl -s -o "$LAB_DIR/pool.json" -w '%{http_code}' --cacert "${DIR[a]}/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    -H "Authorization: Bearer $2" "https://127.0.0.1:${PORT[$1]}/config/default" || echo 000
}
# The pool has no template yet: a token that passes is 503 config_unavailable,
# one that does not is 403 token_invalid. B reads (and caches) the pool now.
st="$(pool_on b "$OLD")"
lab_check "B takes the fleet's pool token ($st config_unavailable)" test "$st" = 503
# B may take the old token for as long as it caches the pool (2 s, from a
# read before the rotate committed): every request B takes it from starts
# less than 2 s after the rotate returned, whatever the requests' own
# durations on a busy machine, and once B refuses it, it goes on refusing.
use a
rg_ctl token rotate --pool default --grace 0 >/dev/null
t0="$(date +%s%N)"; seen="" last_taken="" deadline=$(( $(date +%s) + $(lab_seconds 10) ))
while (( $(date +%s) < deadline )); do
  started="$(( ($(date +%s%N) - t0) / 1000000 ))"
  st="$(pool_on b "$OLD")"
  if [[ "$st" = 403 ]]; then seen="$started"; break; fi
  [[ "$st" = 503 ]] && last_taken="$started"
  sleep 0.05
done
lab_check "B refuses the rotated token within the 2 s cache bound (the last request it let through started ${last_taken:+$last_taken ms after the rotate on A}${last_taken:-before the rotate}; refused from ${seen:-never} ms)" \
  test -n "$seen" -a "${last_taken:--1}" -le 2000
lab_check "... and keeps refusing it" test "$(pool_on b "$OLD")" = 403
echo "# pool token rotated on A: refused by B from a request started ${seen:-never} ms after (NOTIFY, else the 2 s TTL)"

# --- a revoke on A, honoured by B at once -----------------------------------------
use b
lab_check "B takes node-1's token before the revoke" test "$(rg_get /v1/machine "$LAB_DIR/me.json" "$TOKEN")" = 200
use a
rg_ctl revoke node-1 --reason "fleet test" >/dev/null
use b
st="$(rg_get /v1/machine "$LAB_DIR/me.json" "$TOKEN")"
lab_check "B refuses node-1's token at once after the revoke on A ($st $(rg_wire get "$LAB_DIR/me.json" error.reason 2>/dev/null || true))" \
  test "$st" = 403 -o "$st" = 401
lab_check "B's admin API shows node-1 revoked" test "$(rg_state node-1)" = revoked

# --- the admin API and /metrics of both -------------------------------------------
for x in a b; do
  use "$x"
  lab_check "$x: rackgatectl list answers" bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' list | grep -q node-1"
  rg_get /metrics "$LAB_DIR/metrics-$x.txt" >/dev/null
  lab_check "$x: /metrics says the database is up" grep -q '^rackgate_db_up 1' "$LAB_DIR/metrics-$x.txt"
  lab_check "$x: no password in the log" bash -c "! grep -qi 'password=' '$RG_DIR/rackgated.log'"
done

for x in a b; do use "$x"; rg_stop; save "$x"; done
lab_finish
