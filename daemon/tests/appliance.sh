# appliance.sh — starts a real rackgated on loopback for integration tests,
# with a fresh state dir made by `rackgatectl init`, and talks to it over
# HTTPS (curl, pinned to the appliance CA) and the admin socket
# (rackgatectl). Source it after firmware-tests/lab.sh and lab_init.
#
#   rg_init RACKGATED RACKGATECTL      # init state, write config, no daemon yet
#   rg_config KEY JSON                 # change one config key before rg_start
#   rg_start / rg_stop                 # start (waits for /readyz) / SIGTERM
#   rg_post PATH BODYFILE OUT          # prints the HTTP status, body to OUT
#   rg_get PATH OUT [TOKEN]            # likewise, optional bearer token
#   rg_ctl ARGS...                     # rackgatectl against this daemon

RG_DIR="" RG_D="" RG_CTL="" RG_PORT="" RG_PID="" RG_WIRE=""
# What one request to the appliance may take (lab.sh, "time").
RG_MAX_TIME="$(lab_seconds 30)"

rg_init() {
  RG_D="$(realpath "$1")"; RG_CTL="$(realpath "$2")"
  RG_DIR="$LAB_DIR/appliance"
  # The lab's test client (firmware-tests/wire_tool.cc), which meson builds
  # and names in the test environment.
  RG_WIRE="${RACKGATE_WIRE_TOOL:?RACKGATE_WIRE_TOOL must name the built rackgate-wire-tool}"
  mkdir -p "$RG_DIR/roots" "$RG_DIR/intermediates"
  "$RG_CTL" init --state-dir "$RG_DIR/state" --name localhost --address 127.0.0.1 >"$RG_DIR/init.log" 2>&1 \
    || { cat "$RG_DIR/init.log" >&2; return 1; }
  RG_PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  cat > "$RG_DIR/config.json" <<JSON
{
  "state_dir": "$RG_DIR/state",
  "listen_addresses": ["127.0.0.1"],
  "port": $RG_PORT,
  "admin_socket": "$RG_DIR/admin.sock",
  "ek_roots": ["$RG_DIR/roots"],
  "ek_intermediates": ["$RG_DIR/intermediates"],
  "log_level": "debug"
}
JSON
}

# rg_trust CA: trust a lab CA's root (and its intermediate) for EK certificates.
rg_trust() {
  cp "$(lab_ca_root "$1")" "$RG_DIR/roots/$1.pem"
  cp "$(lab_ca_intermediate "$1")" "$RG_DIR/intermediates/$1.pem"
}

rg_config() {
  lab_python - "$RG_DIR/config.json" "$1" "$2" <<'PY'
import json, sys
p, k, v = sys.argv[1:]
c = json.load(open(p)); c[k] = json.loads(v); json.dump(c, open(p, "w"), indent=1)
PY
}

rg_start() {
  # No inherited descriptors: a daemon left holding the test's output would
  # keep meson waiting.
  "$RG_D" --config "$RG_DIR/config.json" </dev/null >>"$RG_DIR/rackgated.log" 2>&1 \
    {LAB_STDOUT}>&- {LAB_STDERR}>&- &
  RG_PID=$!
  echo "$RG_PID" >> "$LAB_DIR/pids"
  local deadline=$(( $(date +%s) + $(lab_seconds 10) ))
  while (( $(date +%s) < deadline )); do
    if [[ "$(rg_get /readyz /dev/null)" == 200 ]]; then return 0; fi
    kill -0 "$RG_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "# rackgated did not become ready:" >&2
  tail -n 30 "$RG_DIR/rackgated.log" | sed 's/^/#   /' >&2
  return 1
}

rg_stop() {
  [[ -n "$RG_PID" ]] || return 0
  kill -TERM "$RG_PID" 2>/dev/null || true
  wait "$RG_PID" 2>/dev/null || true
  RG_PID=""
}

rg_url() { echo "https://127.0.0.1:$RG_PORT$1"; }

rg_post() {
  curl -sS -o "$3" -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    -H 'Content-Type: application/json' --data-binary "@$2" "$(rg_url "$1")" || echo 000
}

rg_get() {
  local auth=()
  [[ -n "${3:-}" ]] && auth=(-H "Authorization: Bearer $3")
  curl -sS -o "$2" -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" --max-time "$RG_MAX_TIME" \
    "${auth[@]}" "$(rg_url "$1")" 2>/dev/null || echo 000
}

rg_ctl() { "$RG_CTL" --socket "$RG_DIR/admin.sock" "$@"; }

rg_wire() { "$RG_WIRE" "$@"; }

# rg_state HOSTNAME: the machine's state as the admin API reports it.
rg_state() { rg_ctl show "$1" --json | lab_python -c 'import json,sys; print(json.load(sys.stdin)["state"])'; }

# rg_log_tail: the daemon's last log lines, for a failing check.
rg_log_tail() { tail -n "${1:-15}" "$RG_DIR/rackgated.log" | sed 's/^/#   /' >&2; }

# --- a client built from tpm2-tools (docs/protocol.md) ---------------------

# challenge NAME EK AKPREFIX: POST the challenge (with the EK certificate
# unless NO_CERT=1); leaves the answer in $(lab_dir NAME)/ch.json and prints
# the status.
challenge() {
  local name="$1" ek="$2" ak="$3" m; m="$(lab_dir "$name")"
  local cert=()
  [[ -s "$m/ek-$ek.der" && "${NO_CERT:-0}" != 1 ]] && cert=(--ek-cert "$m/ek-$ek.der")
  rg_wire challenge --ek-public "$m/ek-$ek.pub" --ak-public "$ak.pub" "${cert[@]}" > "$m/ch.req"
  rg_post /v1/attest/challenge "$m/ch.req" "$m/ch.json"
}

# activate_and_quote NAME EK AKPREFIX [PCRLIST] [NONCE]: recover the secret,
# quote over the session nonce (or NONCE); writes $m/ev.req.
activate_and_quote() {
  local name="$1" ek="$2" ak="$3" list="${4:-}" nonce="${5:-}" m; m="$(lab_dir "$name")"
  rg_wire get "$m/ch.json" credential --b64-out "$m/cred"
  [[ -n "$list" ]] || list="$(rg_wire get "$m/ch.json" pcr_selection)"
  [[ -n "$nonce" ]] || nonce="$(rg_wire get "$m/ch.json" nonce)"
  # A TPM that does not hold the EK the credential was made for cannot
  # activate it; such a client (a clone) can only send a guess.
  lab_activate "$name" "$ek" "$ak" "$m/cred" "$m/secret" || head -c 32 /dev/urandom > "$m/secret"
  lab_quote "$name" "$ak" "$nonce" "$list" "$m/q" values
  rg_wire evidence --session="$(rg_wire get "$m/ch.json" session)" --secret "$m/secret" \
    --quote "$m/q.msg" --signature "$m/q.sig" --pcr-values "$m/q.pcrs" --selection "$list" > "$m/ev.req"
}

evidence() { local m; m="$(lab_dir "$1")"; rg_post /v1/attest/evidence "$m/ev.req" "$m/ev.json"; }


# attest NAME EK AKPREFIX: the whole path; prints the evidence status.
attest() {
  local st
  st="$(challenge "$1" "$2" "$3")"
  if [[ "$st" != 200 ]]; then echo "$st"; return 0; fi
  activate_and_quote "$1" "$2" "$3"
  evidence "$1"
}

# The config of an appliance under a boot storm (bench/boot-storm's machines,
# C at a time, all from 127.0.0.1): the storm's EK CA in EKCA_DIR trusted,
# per-client bounds raised for one address that is a whole fleet, short
# Retry-After so the storm's waits stay short, and a body for its import.
#   rg_storm_config EKCA_DIR C
rg_storm_config() {
  local ekca="$1" c="$2"
  rg_config ek_roots "[\"$ekca/root.pem\"]"
  rg_config ek_intermediates "[\"$ekca/intermediate.pem\"]"
  rg_config log_level '"warn"'
  rg_config per_client_connections $((c * 4))
  rg_config max_open_sessions_per_client 4096
  rg_config max_csrs_in_flight $((c * 2))
  rg_config retry_after_seconds 1
  rg_config busy_retry_after_seconds 1
  rg_config max_body_bytes $((16 << 20))
}

# --- several appliances on one database (docs/ha.md) ----------------------
#
#   rg_database URL          # the current appliance's "database" (before rg_start)
#   rg_add_appliance NAME    # a second appliance, made from the current one
#   rg_use NAME              # make appliance NAME current (rg_init's is `a`)
#
# Every rg_* function acts on the current appliance: rg_use switches RG_DIR,
# RG_PORT and RG_PID. An appliance made by rg_add_appliance gets a copy of
# the current one's state dir (its CA, cluster CA and keys; not its SQLite
# file) and of its config, with a port, admin socket and state dir of its
# own: call it after rg_config and `ca generate` on the first one.

RG_NAME="a"
declare -A RG_APPLIANCES=()

rg_database() { rg_config database "$(lab_python -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1")"; }

rg_add_appliance() {
  local name="$1" dir="$LAB_DIR/appliance-$1" port
  mkdir -p "$dir"
  local sub
  for sub in state roots intermediates; do
    [[ -e "$RG_DIR/$sub" ]] && cp -a "$RG_DIR/$sub" "$dir/$sub"
  done
  rm -f "$dir/state"/rackgate.db*
  port="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  lab_python - "$RG_DIR/config.json" "$dir" "$port" "$RG_DIR" <<'PY'
import json, sys
src, d, port, old = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = json.load(open(src))
c.update(state_dir=d + "/state", port=port, admin_socket=d + "/admin.sock")
# The lab's trust dirs inside the appliance's own dir follow it.
for k in ("ek_roots", "ek_intermediates"):
    if isinstance(c.get(k), list):
        c[k] = [p.replace(old + "/", d + "/", 1) if p.startswith(old + "/") else p for p in c[k]]
json.dump(c, open(d + "/config.json", "w"), indent=1)
PY
  RG_APPLIANCES["$RG_NAME"]="$RG_DIR|$RG_PORT|$RG_PID"
  RG_APPLIANCES["$name"]="$dir|$port|"
}

rg_use() {
  [[ -n "${RG_APPLIANCES[$1]:-}" ]] || { echo "# rg_use: no appliance $1 (rg_add_appliance $1 first)" >&2; return 1; }
  RG_APPLIANCES["$RG_NAME"]="$RG_DIR|$RG_PORT|$RG_PID"
  IFS='|' read -r RG_DIR RG_PORT RG_PID <<<"${RG_APPLIANCES[$1]}"
  RG_NAME="$1"
}
