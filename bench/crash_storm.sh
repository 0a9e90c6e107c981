#!/usr/bin/env bash
# Crash safety under load (suite slow; docs/storage.md "After a crash"): a
# boot storm (bench/boot-storm, software TPMs) runs against rackgated while
# this script kills the daemon with SIGKILL again and again and restarts it.
# Then:
#  - PRAGMA integrity_check is ok;
#  - every step the appliance acknowledged to a machine (the storm's
#    --ack-log) is in the database: attestations, served configs (by their
#    digest in the audit log), certificates (by serial);
#  - no machine is stuck: every one ends joined with exactly one client
#    certificate;
#  - the storm completes with failed=0.
#   crash_storm.sh RACKGATED RACKGATECTL BOOT_STORM [--machines N] [--kills K]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; STORM="$(realpath "$3")"; shift 3
MACHINES=600 KILLS=6 CONCURRENCY=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --machines) MACHINES="$2"; shift 2 ;;
    --kills) KILLS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    *) echo "usage: crash_storm.sh RACKGATED RACKGATECTL BOOT_STORM [--machines N] [--kills K]" >&2; exit 2 ;;
  esac
done
source "$HERE/../firmware-tests/lab.sh"
source "$HERE/../daemon/tests/appliance.sh"
lab_init crash-storm
rg_init "$RACKGATED" "$RACKGATECTL"
EKCA="$LAB_DIR/ekca"
rg_storm_config "$EKCA" "$CONCURRENCY"
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null

# The storm's EK manufacturer CA: made by its first run, then trusted.
"$STORM" --url "https://127.0.0.1:$RG_PORT" --ca "$RG_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" \
  --socket "$RG_DIR/admin.sock" --ek-ca-dir "$EKCA" --machines 1 >"$LAB_DIR/ekca.out" 2>&1 || true
lab_check "the storm made its EK CA" test -s "$EKCA/root.pem"
rg_start
DB="$RG_DIR/state/rackgate.db"
ACKS="$LAB_DIR/acks"

"$STORM" --url "https://127.0.0.1:$RG_PORT" --ca "$RG_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" \
  --socket "$RG_DIR/admin.sock" --ek-ca-dir "$EKCA" --machines "$MACHINES" --concurrency "$CONCURRENCY" \
  --deadline 600 --ack-log "$ACKS" --workdir "$LAB_DIR/storm" >"$LAB_DIR/storm.out" 2>&1 &
storm=$!
echo "$storm" >> "$LAB_DIR/pids"

# Kill only once the storm is under way (its setup enrolls the fleet).
for _ in $(seq 1 600); do
  [[ -s "$ACKS" ]] && break
  kill -0 "$storm" 2>/dev/null || break
  sleep 0.1
done
kills=0
# Kill at evenly spaced points of the storm's progress (each machine
# acknowledges three steps), measured in acknowledged steps rather than time so
# that a fast machine cannot finish the storm before the kills are spent; a
# random offset of up to 40 steps moves each kill off any fixed boundary.
total=$((MACHINES * 3))
while [[ $kills -lt $KILLS ]] && kill -0 "$storm" 2>/dev/null; do
  target=$(( total * (kills + 1) / (KILLS + 1) + RANDOM % 40 ))
  while [[ $(wc -l < "$ACKS") -lt $target ]] && kill -0 "$storm" 2>/dev/null; do
    sleep 0.02
  done
  kill -0 "$storm" 2>/dev/null || break
  kill -KILL "$RG_PID" 2>/dev/null || true
  wait "$RG_PID" 2>/dev/null || true
  kills=$((kills + 1))
  echo "# kill $kills: rackgated SIGKILLed after $(wc -l < "$ACKS") acknowledged steps"
  rg_start || { lab_not_ok "rackgated restarts after kill $kills"; rg_log_tail 30; break; }
done
wait "$storm" || true
grep -E '^boot-storm: (failed|wait|transport|challenge|evidence|config|csr|machines=)' "$LAB_DIR/storm.out" | sed 's/^/# /'
last="$(grep '^boot-storm: machines=' "$LAB_DIR/storm.out" | tail -n 1 || true)"
lab_check "the daemon was killed $KILLS times during the storm ($kills)" test "$kills" -eq "$KILLS"
lab_check "the storm completed with failed=0: $last" \
  bash -c "[[ '$last' == *\" ok=$MACHINES failed=0 \"* ]]"
rg_stop

lab_python - "$DB" "$ACKS" "$MACHINES" > "$LAB_DIR/verdict.txt" <<'PY' || true
import json, sqlite3, sys
db, acks, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sqlite3.connect(db)
print("integrity", c.execute("PRAGMA integrity_check").fetchone()[0])
lost = 0
served = set()
for (detail,) in c.execute("SELECT detail_json FROM audit WHERE action = 'config_served'"):
    served.add(json.loads(detail).get("sha256"))
serials = {s for (s,) in c.execute("SELECT serial FROM certificates")}
states = dict(c.execute("SELECT hostname, state FROM machines"))
acked = 0
for line in open(acks):
    kind, host, *rest = line.split()
    acked += 1
    if kind == "evidence" and states.get(host) not in ("attested", "provisioned", "joined"):
        lost += 1; print("lost attestation", host, states.get(host))
    if kind == "config" and rest[0] not in served:
        lost += 1; print("lost config", host)
    if kind == "csr" and rest[0] not in serials:
        lost += 1; print("lost certificate", host, rest[0])
print("acked", acked)
print("lost", lost)
storm = [h for h in states if h.startswith("storm-")]
print("machines", len(storm))
print("not_joined", sum(1 for h in storm if states[h] != "joined"))
bad = c.execute("""SELECT count(*) FROM (SELECT m.hostname, count(x.serial) AS k FROM machines m
                   LEFT JOIN certificates x ON x.machine_id = m.id AND x.kind = 'client'
                   WHERE m.hostname LIKE 'storm-%' GROUP BY m.id) WHERE k != 1""").fetchone()[0]
print("client_cert_count_wrong", bad)
PY
sed 's/^/# /' "$LAB_DIR/verdict.txt"
v() { awk -v k="$1" '$1 == k {print $2}' "$LAB_DIR/verdict.txt"; }
lab_check "PRAGMA integrity_check is ok" test "$(v integrity)" == ok
lab_check "every acknowledged step is in the database ($(v acked) acknowledged, $(v lost) lost)" \
  test "$(v lost)" == 0 -a "$(v acked)" -gt 0
lab_check "every machine of the storm is joined ($(v machines) machines, $(v not_joined) not)" \
  test "$(v machines)" == "$MACHINES" -a "$(v not_joined)" == 0
lab_check "each has exactly one client certificate" test "$(v client_cert_count_wrong)" == 0
lab_finish
