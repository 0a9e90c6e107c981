# script/upgrade-test-postgresql.sh: the 'upgrade postgresql' test's body
# (two appliances on one PostgreSQL, upgraded one after the other: docs/
# ha.md "Rolling upgrade"); sourced by script/upgrade-test (read its
# header) under `pg-lab run`, with lab.sh loaded, lab_init done and
# OLD/NEW (both versions unpacked with dpkg-deb -x) set. The appliances
# run the unpacked binaries directly (no container: the apt path is the
# 'upgrade' test's); their machines are swtpms attesting with the old agent.
# shellcheck shell=bash

# shellcheck source=../daemon/tests/appliance.sh
source "$source_dir/daemon/tests/appliance.sh"
DB="$RACKGATE_TEST_POSTGRES"
OLD_D="$OLD/usr/sbin/rackgated" NEW_D="$NEW/usr/sbin/rackgated"
OLD_STATE_CTL="$OLD/usr/libexec/rackgate/rackgatectl-state"
RG_CTL="$OLD/usr/bin/rackgatectl"
AGENT="$OLD/usr/bin/rackgate-agent"
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"

declare -A DIR PORT PID
use() { RG_DIR="${DIR[$1]}"; RG_PORT="${PORT[$1]}"; RG_PID="${PID[$1]:-}"; }
save() { PID[$1]="$RG_PID"; }
free_port() { lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
schema_version() { psql "$DB" -Atc 'SELECT version FROM rackgate_schema' 2>/dev/null; }

lab_ca lab
for m in m1 m2 m3 m4; do lab_machine "$m" lab & done
wait
for m in m1 m2 m3 m4; do [ -s "$(lab_dir "$m")/port" ] || lab_machine_start "$m"; done
for x in a b; do
  DIR[$x]="$LAB_DIR/appliance-$x"; PORT[$x]=$(free_port)
  mkdir -p "${DIR[$x]}/state" "${DIR[$x]}/roots" "${DIR[$x]}/intermediates"
  cp "$(lab_ca_root lab)" "${DIR[$x]}/roots/lab.pem"
  cp "$(lab_ca_intermediate lab)" "${DIR[$x]}/intermediates/lab.pem"
  cat > "${DIR[$x]}/config.json" <<JSON
{"state_dir": "${DIR[$x]}/state", "listen_addresses": ["127.0.0.1"], "port": ${PORT[$x]},
 "admin_socket": "${DIR[$x]}/admin.sock", "ek_roots": ["${DIR[$x]}/roots"],
 "ek_intermediates": ["${DIR[$x]}/intermediates"], "database": "$DB", "retry_after_seconds": 1,
 "log_level": "info"}
JSON
done
init_both() {
  "$OLD_STATE_CTL" init --state-dir "${DIR[a]}/state" --database "$DB" --name localhost --address 127.0.0.1 \
    --token-out "$LAB_DIR/pool.token" || return 1
  mkdir -p "${DIR[b]}/state/ca" && chmod 0750 "${DIR[b]}/state/ca"
  cp -p "${DIR[a]}/state/ca/ca.crt" "${DIR[a]}/state/ca/ca.key" "${DIR[b]}/state/ca/"
  "$OLD_STATE_CTL" init --state-dir "${DIR[b]}/state" --database "$DB" --renew-serving-cert --name localhost \
    --address 127.0.0.1
}
if out=$(init_both 2>&1); then
  lab_ok "A and B initialised by rackgatectl $old_version on one PostgreSQL (one CA)"
else
  grep -q db_backend_unsupported <<<"$out" && lab_skip "rackgate $old_version is built without the PostgreSQL backend"
  lab_not_ok "init A and B" "$out"
  lab_finish
fi
CA="${DIR[a]}/state/ca/ca.crt"
# start X BINARY: rackgated X from BINARY; waits until ready.
start() { use "$1"; RG_D="$2"; rg_start; local rc=$?; save "$1"; return $rc; }
stop() { use "$1"; rg_stop; save "$1"; }
# attest X MACHINE: the old agent attests MACHINE against appliance X.
attest() {
  "$AGENT" --tcti "$(lab_tcti "$2")" --url "https://127.0.0.1:${PORT[$1]}" --ca "$CA" --eventlog "" \
    --max-wait "$(lab_seconds 20)" --steps attest </dev/null 2>>"$LAB_DIR/agent.log"
}
enroll() {  # X MACHINE HOST
  use "$1"
  rg_ctl enroll --hostname "$3" --pool default --ek-cert "$(lab_dir "$2")/ek-rsa.der" --address InternalIP=10.0.0.1 >/dev/null
}

# step DESC CMD...: ok when CMD succeeds, in this shell (so that the
# appliances' PIDs are kept); the last lines of the agent's or rackgated's
# log otherwise.
step() {
  local desc="$1"; shift
  if "$@" >"$LAB_DIR/step.out" 2>&1; then lab_ok "$desc"; else
    lab_not_ok "$desc" "$(tail -n 6 "$LAB_DIR/step.out"; tail -n 3 "$LAB_DIR/agent.log" 2>/dev/null; tail -n 4 "$RG_DIR/rackgated.log" 2>/dev/null)"
  fi
}
started_pg=$(date +%s)

# 1. Both old, serving.
step "A and B run rackgated $old_version on one database" eval 'start a "$OLD_D" && start b "$OLD_D"'
v_old=$(schema_version)
step "A enrolls node-1, node-2 and node-3" eval 'enroll a m1 node-1 && enroll a m2 node-2 && enroll a m3 node-3'
step "node-1 attests on A, node-2 on B (both $old_version)" eval 'attest a m1 && attest b m2'

# 2. A upgraded: it migrates.
stop a
step "A upgraded: rackgated $version starts on the database B (old) is using" start a "$NEW_D"
v_new=$(schema_version)
echo "# schema version: $v_old with both at $old_version, $v_new once A ($version) started"
step "the schema version is $old_version's or newer ($v_old -> $v_new)" test "${v_new:-0}" -ge "${v_old:-1}"
step "node-1 attests on A ($version)" attest a m1

# 3. B, old and still running, keeps serving machines and operators.
step "B ($old_version, running since before A's migration) serves: node-2 attests on it" attest b m2
step "B ($old_version) enrolls node-4; node-3 and node-4 attest on it" \
  eval 'enroll b m4 node-4 && attest b m3 && attest b m4'
use a
step "A ($version) sees what B wrote: node-4 attested" \
  eval '[ "$(rg_ctl show node-4 --json | lab_python -c "import json,sys; print(json.load(sys.stdin)[\"state\"])")" = attested ]'

# 4. B restarted, still old: refuses a newer schema, starts on the same one.
stop b
use b
: > "$RG_DIR/rackgated.log"
rc=0; timeout "$(lab_seconds 30)" "$OLD_D" --config "$RG_DIR/config.json" </dev/null >"$RG_DIR/restart.log" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
restart_pid=$!
echo "$restart_pid" >> "$LAB_DIR/pids"
if [ "${v_new:-0}" -gt "${v_old:-0}" ]; then
  wait "$restart_pid" || rc=$?
  sed 's/^/#   B: /' "$RG_DIR/restart.log" | tail -n 3
  step "B restarted at $old_version refuses the newer schema clearly: exit 1, db_newer_than_code naming both versions" \
    eval '[ $rc = 1 ] && grep -q "db_newer_than_code" "$RG_DIR/restart.log" && grep -q "schema version $v_new" "$RG_DIR/restart.log"'
else
  echo "# the schema did not change between $old_version and $version ($v_old): an old B restarts and serves"
  step "B restarted at $old_version on the same schema ($v_old) is ready" \
    lab_wait 10 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$CA' https://127.0.0.1:${PORT[b]}/readyz)\" = 200 ]"
  kill -TERM "$restart_pid" 2>/dev/null; wait "$restart_pid" 2>/dev/null || true
fi

# 5. B upgraded: serves.
step "B upgraded: rackgated $version starts" start b "$NEW_D"
step "node-2 and node-4 attest on B ($version), node-3 on A" eval 'attest b m2 && attest b m4 && attest a m3'
use a
step "the audit chain verifies across both upgrades" rg_ctl audit verify
for x in a b; do stop "$x"; done
echo "# figures: 2 appliances, 4 machines, schema $v_old -> $v_new, wall time $(( $(date +%s) - started_pg )) s (packages included: $(( $(date +%s) - started )) s)"
lab_finish
