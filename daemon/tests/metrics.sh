#!/usr/bin/env bash
# Integration: a fresh appliance's /metrics (docs/observability.md). Every
# series docs/operations.md lists ("### Metrics") is present before any
# machine boots, promtool accepts the page, labels carry no client text, the
# plain metrics listener works with /metrics off the HTTPS port, and a
# refused admin request is audited as admin_refused.
#   metrics.sh RACKGATED RACKGATECTL OPERATIONS_MD
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; DOC="$(realpath "$3")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
for t in curl openssl; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
# Debian package `prometheus` (promtool).
command -v promtool >/dev/null || lab_skip "promtool missing (apt-get install prometheus)"
lab_init metrics
rg_init "$RACKGATED" "$RACKGATECTL"
# An EK root to trust (no machine boots here: any CA will do).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=metrics test EK root" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$RG_DIR/roots/root.key" -out "$RG_DIR/roots/root.pem" -days 30 2>/dev/null
rm -f "$RG_DIR/roots/root.key"
rg_start

M="$LAB_DIR/metrics.txt"
lab_check "GET /metrics answers 200 on the HTTPS port" test "$(rg_get /metrics "$M")" = 200
lab_check "promtool check metrics passes on a fresh appliance" promtool check metrics < "$M"

# The doc's list: the bullets of its "### Metrics" section.
mapfile -t NAMES < <(awk '/^### Metrics/{on=1; next} /^#/{on=0} on && /^- `/' "$DOC" | sed -E 's/^- `([a-z_:]+)`.*/\1/')
lab_check "docs/operations.md lists the series (${#NAMES[@]})" test "${#NAMES[@]}" -ge 10
for n in "${NAMES[@]}"; do
  lab_check "documented series $n is present" grep -Eq "^$n(\{| |_bucket)" "$M"
done
for s in pending enrolled attested provisioned joined revoked; do
  lab_check "rackgate_machines{state=\"$s\"} is present at start" grep -q "^rackgate_machines{state=\"$s\"} 0" "$M"
done
lab_check "certificate expiry of the serving certificate and the appliance CA" \
  bash -c "grep -q 'certificate=\"serving\"' '$M' && grep -q 'certificate=\"appliance_ca\"' '$M'"
lab_check "a refusal reason is there at 0 before any machine" \
  grep -q '^rackgate_attestations_total{reason="ek_public_mismatch",verdict="refused"} 0' "$M"
# The EK trust anchors (issue 41): the one root, valid for 30 days, is
# counted and counted again as expiring within a year; the start-up log says so.
lab_check "rackgate_ek_anchors counts the root" grep -q '^rackgate_ek_anchors 1$' "$M"
lab_check "rackgate_ek_anchors_expiring_within_year counts it too" \
  grep -q '^rackgate_ek_anchors_expiring_within_year 1$' "$M"
lab_check "the start-up log says how many anchors are loaded" \
  grep -q '1 EK trust anchors loaded (1 self-signed, 0 partial-chain CAs)' "$RG_DIR/rackgated.log"
lab_check "... and names the one expiring within a year" \
  grep -q 'anchor CN=metrics test EK root (sha256 [0-9a-f]*) expires at' "$RG_DIR/rackgated.log"

# Labels: the pattern, never the client's path or token.
rg_get "/config/secret-pool?token=tok3n-value" /dev/null >/dev/null
rg_get "/no/such/path-xyz" /dev/null >/dev/null
rg_get /metrics "$M" >/dev/null
lab_check "route label is the pattern" grep -q 'method="GET",route="/config/{pool}"' "$M"
lab_check "unmatched paths are route=\"other\"" grep -q 'route="other",status="404"' "$M"
lab_check "no client text in labels" bash -c "! grep -Eq 'tok3n|secret-pool|path-xyz' '$M'"

# A refused read: logged, not audited (issue 32); a refused change: both.
rg_ctl show no-such-machine >/dev/null 2>&1 || true
lab_check "the refused read is logged with its route" grep -q 'admin GET /v1/admin/machines/{hostname} refused' "$RG_DIR/rackgated.log"
lab_check_fails "the refused read is not audited" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' audit --json | grep -q admin_refused"
rg_ctl revoke no-such-machine --reason typo >/dev/null 2>&1 || true
lab_check "the refused change is audited as admin_refused" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' audit --json | grep -q admin_refused"
lab_check "the refusal is logged with its route" grep -q 'admin POST /v1/admin/machines/{hostname}/revoke refused' "$RG_DIR/rackgated.log"
rg_get /metrics "$M" >/dev/null
lab_check "refusals are counted by reason, reads and changes alike" grep -Eq '^rackgate_admin_refusals_total\{reason="hostname_unknown"\} 2' "$M"
lab_check "status shows the unknown EK section" bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' status | grep -q 'unknown EKs knocking (last hour): 0'"

# /metrics off the machines' port.
rg_stop
MPORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
rg_config metrics "{\"listen\": \"127.0.0.1:$MPORT\", \"public\": false}"
rg_start
lab_check "metrics.public false: /metrics is 404 on the HTTPS port" test "$(rg_get /metrics /dev/null)" = 404
lab_check "metrics.listen serves /metrics over plain HTTP" \
  bash -c "curl -sSf 'http://127.0.0.1:$MPORT/metrics' | promtool check metrics"
lab_check "metrics.listen serves nothing else" \
  test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/v1/admin/status")" = 404
rg_stop
# A relaxation for an anchor that is not loaded stops the start, and
# --check-config names it (issue 41).
rg_config ek_anchor_relaxations "{\"$(printf 'ab%.0s' $(seq 32))\": [\"sha1\"]}"
check_config_names_it() {
  local rc=0; "$RACKGATED" --config "$RG_DIR/config.json" --check-config >"$LAB_DIR/check.out" 2>&1 || rc=$?
  test "$rc" = 2 && grep -q 'ek_anchor_relaxations' "$LAB_DIR/check.out"
}
lab_check "--check-config refuses a relaxation of no loaded anchor, naming the key (exit 2)" check_config_names_it
lab_finish
