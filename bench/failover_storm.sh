#!/usr/bin/env bash
# Failover under load (suite slow; docs/performance.md "Two appliances on
# PostgreSQL"). Runs under `script/pg-lab run --standby --sync --`: a
# PostgreSQL primary with a synchronous standby, and two rackgated (a and b)
# on the libpq multi-host URL (target_session_attrs=read-write). A boot storm
# (bench/boot-storm) runs across both with --ack-log; mid-storm appliance a is
# SIGKILLed (its machines move to b), later the primary is crashed
# (`pg-lab kill-primary`) and the standby promoted (b rides it out with 503s
# and goes on). Then:
#  - the storm completed with failed=0, and no answer was a 5xx other than a
#    waitable 503 (none is a wrong answer), and those of the primary's outage
#    said db_unavailable;
#  - every step any appliance acknowledged (the ack-log) is in the database:
#    attestations, served configs (by their digest in the audit),
#    certificates (by serial) — those acknowledged before the primary's crash
#    counted apart: the standby was synchronous, none may be lost;
#  - every machine is joined with exactly one client certificate;
#  - the audit chain verifies (`rackgatectl audit verify` through b).
# It prints the time to recover after each fault and the 503s seen.
#   failover_storm.sh RACKGATED RACKGATECTL BOOT_STORM [--machines N] [--concurrency C]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; STORM="$(realpath "$3")"; shift 3
PG_LAB="$HERE/../script/pg-lab"
MACHINES=300 CONCURRENCY=60
while [[ $# -gt 0 ]]; do
  case "$1" in
    --machines) MACHINES="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    *) echo "usage: failover_storm.sh RACKGATED RACKGATECTL BOOT_STORM [--machines N] [--concurrency C]" >&2; exit 2 ;;
  esac
done
source "$HERE/../firmware-tests/lab.sh"
source "$HERE/../daemon/tests/appliance.sh"
if [[ -z "${RACKGATE_TEST_POSTGRES_MULTI:-}" || -z "${PG_LAB_DIR:-}" ]]; then
  lab_skip "no PostgreSQL: run through \`script/pg-lab run --standby --sync --\` (PostgreSQL 15 not installed? script/bootstrap installs it)"
fi
# shellcheck disable=SC1091
source "$PG_LAB_DIR/env"
if [[ -z "${PG_STANDBY_PORT:-}" ]]; then
  lab_skip "no standby: run through \`script/pg-lab run --standby --sync --\`"
fi
PSQL="$PG_BIN/psql"
# psql against whichever server is the primary now (the multi-host URL).
pg() { "$PSQL" -X -A -t -q -d "$PG_MULTI_URL" -c "$1"; }

lab_init failover-storm
rg_init "$RACKGATED" "$RACKGATECTL"
EKCA="$LAB_DIR/ekca"
rg_storm_config "$EKCA" "$CONCURRENCY"
rg_database "$PG_MULTI_URL"
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
rg_add_appliance b

# The storm's EK manufacturer CA: made by its first run, then trusted.
"$STORM" --url "https://127.0.0.1:$RG_PORT" --ca "$RG_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" \
  --socket "$RG_DIR/admin.sock" --ek-ca-dir "$EKCA" --machines 1 >"$LAB_DIR/ekca.out" 2>&1 || true
lab_check "the storm made its EK CA" test -s "$EKCA/root.pem"
rg_start || { rg_log_tail 30; exit 1; }
A_PORT="$RG_PORT" A_PID="$RG_PID" A_DIR="$RG_DIR"
rg_use b
rg_start || { rg_log_tail 30; exit 1; }
B_PORT="$RG_PORT" B_PID="$RG_PID" B_DIR="$RG_DIR"
rg_use a
lab_ok "two rackgated on one PostgreSQL (primary $PG_PORT, synchronous standby $PG_STANDBY_PORT)"

ACKS="$LAB_DIR/acks"
"$STORM" --url "https://127.0.0.1:$A_PORT,https://127.0.0.1:$B_PORT" --pid "$A_PID,$B_PID" \
  --ca "$A_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" --socket "$B_DIR/admin.sock" --ek-ca-dir "$EKCA" \
  --database "$PG_MULTI_URL" --machines "$MACHINES" --concurrency "$CONCURRENCY" \
  --deadline 600 --ack-log "$ACKS" --workdir "$LAB_DIR/storm" >"$LAB_DIR/storm.out" 2>&1 &
storm=$!
echo "$storm" >> "$LAB_DIR/pids"

# wait_acks N: until the storm has acknowledged N steps (or ended).
wait_acks() {
  while [[ "$( (wc -l < "$ACKS") 2>/dev/null || echo 0)" -lt "$1" ]] && kill -0 "$storm" 2>/dev/null; do
    sleep 0.02
  done
}
now() { date +%s.%N; }
total=$((MACHINES * 3))

# Fault 1, a third in: appliance a SIGKILLed.
wait_acks $((total / 3))
kill -0 "$storm" 2>/dev/null || lab_not_ok "the storm was still running at the first fault"
T_KILL_A="$(now)"
kill -KILL "$A_PID" 2>/dev/null || true
wait "$A_PID" 2>/dev/null || true
echo "# appliance a SIGKILLed after $(wc -l < "$ACKS") acknowledged steps"

# Fault 2, two thirds in: the primary crashes; the standby is promoted after
# a moment in which b has no database (its answers: 503 db_unavailable).
wait_acks $((total * 2 / 3))
kill -0 "$storm" 2>/dev/null || lab_not_ok "the storm was still running at the second fault"
ACKED_BEFORE_CRASH="$(wc -l < "$ACKS")"
# Steps acknowledged before the crash began count as "before"; the crash
# itself (pg_ctl -m immediate) takes a moment on a busy machine.
T_KILL_PRIMARY="$(now)"
"$PG_LAB" kill-primary "$PG_LAB_DIR" >"$LAB_DIR/kill-primary.out" 2>&1
T_PRIMARY_DOWN="$(now)"
echo "# primary crashed (immediate stop) after $ACKED_BEFORE_CRASH acknowledged steps"
sleep 2
"$PG_LAB" promote "$PG_LAB_DIR" >"$LAB_DIR/promote.out" 2>&1 \
  || { lab_not_ok "the standby is promoted"; sed 's/^/#   /' "$LAB_DIR/promote.out"; }
T_PROMOTED="$(now)"
echo "# standby promoted $(lab_python -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$T_KILL_PRIMARY" "$T_PROMOTED") s after the crash"

wait "$storm" || true
grep -E '^boot-storm: (failed|waited|transport|moved|appliance|database|postgresql|challenge|evidence|config|csr|machines=)' \
  "$LAB_DIR/storm.out" | sed 's/^/# /'
last="$(grep '^boot-storm: machines=' "$LAB_DIR/storm.out" | tail -n 1 || true)"
lab_check "the storm completed with failed=0: $last" bash -c "[[ '$last' == *\" ok=$MACHINES failed=0 \"* ]]"
# Answers that are neither a 200, a final 4xx nor a waitable 503/429 (a 500
# during the promotion would be a wrong answer).
wrong="$(grep -E '^boot-storm: waited out: [a-z]+ 5[0-9][0-9] ' "$LAB_DIR/storm.out" | grep -vE ' 503 ' || true)"
lab_check "no 5xx other than a waitable 503 ${wrong:+($wrong)}" test -z "$wrong"
n503="$(awk '/^boot-storm: waited out: [a-z]+ 503 / {sub(/.* x/, ""); n += $0} END {print n + 0}' "$LAB_DIR/storm.out")"
echo "# 503s seen by the storm: ${n503:-0}"
# While b had no primary, its answers said why: 503 db_unavailable (not
# busy), so an agent's log names the database, not the load.
n_lost="$(awk '/^boot-storm: waited out: [a-z]+ 503 db_unavailable / {sub(/.* x/, ""); n += $0} END {print n + 0}' "$LAB_DIR/storm.out")"
lab_check "b's answers while the primary was down said db_unavailable ($n_lost of them)" test "${n_lost:-0}" -gt 0

rg_use b
verify_out="$(rg_ctl audit verify 2>&1)" && verify_rc=0 || verify_rc=$?
echo "$verify_out" | sed 's/^/#   /'
lab_check "the audit chain verifies through b (rackgatectl audit verify)" test "$verify_rc" == 0
rg_stop

# The database, as the new primary has it.
pg "SELECT detail_json FROM audit WHERE action = 'config_served'" > "$LAB_DIR/served.txt"
pg "SELECT serial FROM certificates" > "$LAB_DIR/serials.txt"
pg "SELECT hostname || ' ' || state FROM machines" > "$LAB_DIR/states.txt"
pg "SELECT count(*) FROM (SELECT m.id, count(x.serial) AS k FROM machines m
    LEFT JOIN certificates x ON x.machine_id = m.id AND x.kind = 'client'
    WHERE m.hostname LIKE 'storm-%' GROUP BY m.id) AS per_machine WHERE k != 1" > "$LAB_DIR/wrong_certs.txt"
lab_python - "$LAB_DIR" "$ACKS" "$T_KILL_A" "$T_KILL_PRIMARY" "$T_PROMOTED" "$T_PRIMARY_DOWN" > "$LAB_DIR/verdict.txt" <<'PY' || true
import json, statistics, sys
d, acks, t_a, t_crash, t_promoted, t_down = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:])
served = set()
for line in open(d + "/served.txt"):
    if line.strip():
        served.add(json.loads(line).get("sha256"))
serials = {l.strip() for l in open(d + "/serials.txt") if l.strip()}
states = dict(l.split() for l in open(d + "/states.txt") if l.strip())
lost = lost_before_crash = acked = acked_before_crash = 0
by_host = {}
for line in open(acks):
    kind, host, *rest = line.split()
    fields = dict(f.split("=", 1) for f in rest if "=" in f)
    t = float(fields["t"])
    by_host.setdefault(host, []).append((t, fields["appliance"]))
    acked += 1
    before = t < t_crash
    acked_before_crash += before
    bad = (kind == "evidence" and states.get(host) not in ("attested", "provisioned", "joined")) or \
          (kind == "config" and rest[0] not in served) or (kind == "csr" and rest[0] not in serials)
    if bad:
        lost += 1; lost_before_crash += before
        print("lost", kind, host, *rest)
print("acked", acked)
print("lost", lost)
print("acked_before_crash", acked_before_crash)
print("lost_before_crash", lost_before_crash)
storm = [h for h in states if h.startswith("storm-")]
print("machines", len(storm))
print("not_joined", sum(1 for h in storm if states[h] != "joined"))
# Recovery after a's kill: machines a had acknowledged a step for and that
# were not done; how long until each acknowledged its next step (on b).
moved = []
for host, seq in by_host.items():
    seq.sort()
    last_before = [s for s in seq if s[0] < t_a]
    after = [s for s in seq if s[0] >= t_a]
    if last_before and last_before[-1][1] == "a" and len(last_before) < 3 and after:
        moved.append(after[0][0] - t_a)
print("a_moved_machines", len(moved))
print("a_recover_median_s", "%.2f" % (statistics.median(moved) if moved else 0))
print("a_recover_max_s", "%.2f" % (max(moved) if moved else 0))
all_t = sorted(t for seq in by_host.values() for t, _ in seq)
first_after_crash = next((t for t in all_t if t >= t_crash), None)
first_after_promote = next((t for t in all_t if t >= t_promoted), None)
print("acks_during_the_crash_command", sum(1 for t in all_t if t_crash <= t < t_down))
print("acks_between_primary_down_and_promote", sum(1 for t in all_t if t_down <= t < t_promoted))
print("crash_to_first_ack_after_promote_s", "%.2f" % ((first_after_promote - t_crash) if first_after_promote else -1))
print("promote_to_first_ack_s", "%.2f" % ((first_after_promote - t_promoted) if first_after_promote else -1))
PY
sed 's/^/# /' "$LAB_DIR/verdict.txt"
v() { awk -v k="$1" '$1 == k {print $2}' "$LAB_DIR/verdict.txt"; }
lab_check "every acknowledged step is in the database ($(v acked) acknowledged, $(v lost) lost)" \
  test "$(v lost)" == 0 -a "$(v acked)" -gt 0
lab_check "no write acknowledged before the primary's crash was lost across the promotion ($(v acked_before_crash) acknowledged, $(v lost_before_crash) lost)" \
  test "$(v lost_before_crash)" == 0 -a "$(v acked_before_crash)" -gt 0
lab_check "every machine of the storm is joined ($(v machines) machines, $(v not_joined) not)" \
  test "$(v machines)" == "$MACHINES" -a "$(v not_joined)" == 0
lab_check "each has exactly one client certificate" test "$(cat "$LAB_DIR/wrong_certs.txt")" == 0
lab_check "a's machines in flight went on at b ($(v a_moved_machines) machines: next step after median $(v a_recover_median_s) s, at most $(v a_recover_max_s) s)" \
  test "$(v a_moved_machines)" -gt 0
lab_check "b went on after the promotion (first acknowledged step $(v promote_to_first_ack_s) s after it, $(v crash_to_first_ack_after_promote_s) s after the crash)" \
  bash -c "[[ '$(v promote_to_first_ack_s)' != -1.00 ]]"
lab_finish
