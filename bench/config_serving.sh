#!/usr/bin/env bash
# config-serving: requests per second for GET /config/{pool} on rackgated,
# against nginx serving the same bytes as a static file over HTTPS with the
# same certificate, on loopback, driven by the same client (wrk, keep-alive)
# in the same run. Rounds alternate between the two so that a noisy neighbour
# hurts both; each side's best round counts. Last line:
#   config-serving: rate=R/s nginx=N/s ratio=X
#   config_serving.sh RACKGATED RACKGATECTL [--seconds S] [--rounds N] [--connections C]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; shift 2
SECONDS_PER_ROUND=5 ROUNDS=3 CONNECTIONS=64
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_PER_ROUND="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --connections) CONNECTIONS="$2"; shift 2 ;;
    *) echo "usage: config_serving.sh RACKGATED RACKGATECTL [--seconds S] [--rounds N] [--connections C]" >&2; exit 2 ;;
  esac
done
for t in nginx wrk curl; do
  command -v "$t" >/dev/null || [[ -x "/usr/sbin/$t" ]] || { echo "config-serving: $t missing (script/bootstrap installs it)" >&2; exit 77; }
done
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
source "$HERE/../firmware-tests/lab.sh"
source "$HERE/../daemon/tests/appliance.sh"
lab_init config-serving
rg_init "$RACKGATED" "$RACKGATECTL"
rg_config ek_roots '[]'
rg_config ek_intermediates '[]'
rg_config log_level '"warn"'
rg_config per_client_connections $((CONNECTIONS * 2))
rg_start

# A public config of a realistic size: the agent's unit, its CA and settings,
# and a few small files (about 6 KB).
D="$LAB_DIR/bench"; mkdir -p "$D/www/config" "$D/tmp"
lab_python - "$D/public.ign" <<'PY'
import json, sys
files = [{"path": "/etc/rackgate/ca.pem", "mode": 420, "contents": {"source": "data:,{{appliance.ca_pem}}"}},
         {"path": "/etc/rackgate/agent.env", "mode": 420,
          "contents": {"source": "data:,RACKGATE_URL%3D{{appliance.url}}%0ARACKGATE_CA%3D/etc/rackgate/ca.pem%0A"}}]
for i in range(8):
    files.append({"path": "/etc/sysctl.d/%02d-rack.conf" % i, "mode": 420,
                  "contents": {"source": "data:,net.core.somaxconn%3D" + str(1024 + i) + "%0A" + "x" * 300}})
unit = "[Unit]\nDescription=rackgate agent\nAfter=network-online.target\n[Service]\nType=oneshot\n" \
       "EnvironmentFile=/etc/rackgate/agent.env\nExecStart=/usr/bin/rackgate-agent\n[Install]\nWantedBy=multi-user.target\n"
json.dump({"ignition": {"version": "3.3.0"}, "storage": {"files": files},
           "systemd": {"units": [{"name": "rackgate-agent.service", "enabled": True, "contents": unit}]}},
          open(sys.argv[1], "w"))
PY
rg_ctl pool put bench --public-template "$D/public.ign" > "$D/put.out"
TOKEN="$(tail -n 1 "$D/put.out")"
ACCEPT='application/vnd.coreos.ignition+json;version=3.3.0, */*;q=0.1'
curl -sS --fail -o "$D/www/config/bench" --cacert "$RG_DIR/state/ca/ca.crt" \
  -H "Authorization: Bearer $TOKEN" -H "Accept: $ACCEPT" "$(rg_url /config/bench)"
echo "config-serving: the config is $(stat -c %s "$D/www/config/bench") bytes"

NPORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
chmod -R a+rX "$D/www"
cat > "$D/nginx.conf" <<CONF
$([[ "$(id -u)" == 0 ]] && echo "user root;")
worker_processes 2;
pid $D/nginx.pid;
error_log $D/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $D/tmp/body; proxy_temp_path $D/tmp/proxy; fastcgi_temp_path $D/tmp/fcgi;
  uwsgi_temp_path $D/tmp/uwsgi; scgi_temp_path $D/tmp/scgi;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$NPORT ssl;
    ssl_certificate $RG_DIR/state/tls/server.crt;
    ssl_certificate_key $RG_DIR/state/tls/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    location /config/ { root $D/www; default_type application/vnd.coreos.ignition+json; }
  }
}
CONF
# Stopped by its PID on every way out: lab_init's EXIT trap stops what
# $LAB_DIR/pids lists (lab_kill_pid knows nginx), and the end of this script
# stops it first and checks it is gone (issue 32: its master outlived the
# benchmark by hours when the trap did not know it).
"$NGINX" -c "$D/nginx.conf" -p "$D" -g 'daemon off;' </dev/null >"$D/nginx.out" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
NGINX_PID=$!
echo "$NGINX_PID" >> "$LAB_DIR/pids"
for _ in $(seq 1 50); do
  curl -sS -o /dev/null --cacert "$RG_DIR/state/ca/ca.crt" "https://127.0.0.1:$NPORT/config/bench" 2>/dev/null && break
  sleep 0.1
done
curl -sS -o "$D/nginx.body" --cacert "$RG_DIR/state/ca/ca.crt" "https://127.0.0.1:$NPORT/config/bench"
cmp -s "$D/nginx.body" "$D/www/config/bench" || { echo "config-serving: nginx does not serve the same bytes" >&2; exit 1; }

# run_wrk URL: requests per second; fails on any non-2xx answer or error.
run_wrk() {
  wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_PER_ROUND}s" -H "Authorization: Bearer $TOKEN" -H "Accept: $ACCEPT" "$1" \
    > "$D/wrk.out" 2>&1
  if grep -q -e 'Non-2xx' -e 'Socket errors' "$D/wrk.out"; then
    echo "config-serving: errors from $1:" >&2; cat "$D/wrk.out" >&2; return 1
  fi
  awk '/^Requests\/sec:/ {printf "%d\n", $2}' "$D/wrk.out"
}
best_rg=0 best_nginx=0
for r in $(seq 1 "$ROUNDS"); do
  n="$(run_wrk "https://127.0.0.1:$NPORT/config/bench")"
  g="$(run_wrk "$(rg_url /config/bench)")"
  echo "config-serving: round $r: rackgated=$g/s nginx=$n/s"
  (( g > best_rg )) && best_rg=$g
  (( n > best_nginx )) && best_nginx=$n
done
rg_stop
ratio="$(lab_python -c "print(f'{$best_rg / $best_nginx:.3f}')")"
lab_kill_pid "$NGINX_PID"
if ! lab_pid_gone "$NGINX_PID" || pgrep -f -- "$D/nginx.conf" >/dev/null; then
  echo "config-serving: nginx ($NGINX_PID) is still running after the benchmark" >&2
  exit 1
fi
echo "config-serving: rate=${best_rg}/s nginx=${best_nginx}/s ratio=${ratio}"
