#!/usr/bin/env bash
# Integration: pools and provisioning tokens that never lose data (issue 15;
# docs/ignition.md, docs/protocol.md). A real rackgated on loopback, driven
# with rackgatectl:
#  - a refused `pool put` (a good public and a bad attested template) names
#    the template and leaves every table of the database as it was;
#  - the put that succeeds shows the one token it stored;
#  - `token rotate` needs --grace;
#  - the token as ?token= on /config/POOL works, the header wins over it, and
#    the token never reaches the daemon's log;
#  - `pointer --spec` 3.0 to 3.3 pass ignition-validate, 3.0 with the token
#    in the URL, and the real Ignition fetches the config with a 3.0 pointer;
#  - a kernel command line in a pool's boot policy (issue 27, item 8) is
#    stored as written but never printed, audited or logged: `policy put`,
#    `policy show`, `pool show` and `audit` show its SHA-256; only
#    `policy show --output FILE` (mode 0600) holds the text;
#  - `init` on the running appliance's state keeps the default pool's token
#    and the serving certificate's names.
#   pools.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
source "$HERE/../../firmware-tests/boot-lib.sh"
boot_skip_unless_ignition
command -v sqlite3 >/dev/null 2>&1 || lab_skip "sqlite3 missing (apt-get install sqlite3)"
lab_init pools
rg_init "$RACKGATED" "$RACKGATECTL"
# No machine attests here; rackgated wants an EK root all the same.
cp "$RG_DIR/state/ca/ca.crt" "$RG_DIR/roots/unused.pem"
rg_start
URL="https://127.0.0.1:$RG_PORT"
T="$LAB_DIR/templates"; mkdir -p "$T"

# dump_db FILE: every row of every table, as text.
dump_db() {
  local t
  for t in $(sqlite3 "$RG_DIR/state/rackgate.db" "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"); do
    # The refusal itself is audited (admin_refused, docs/observability.md):
    # everything but that row, and the audit id counter it moved, must stay.
    local where=""
    case "$t" in
      audit) where="WHERE action <> 'admin_refused'" ;;
      sqlite_sequence) where="WHERE name <> 'audit'" ;;
    esac
    echo "== $t"; sqlite3 "$RG_DIR/state/rackgate.db" "SELECT * FROM \"$t\" $where"
  done > "$1"
}

cat > "$T/public.ign" <<'IGN'
{"ignition": {"version": "3.3.0"},
 "storage": {"files": [
   {"path": "/etc/rackgate/pool", "mode": 420, "contents": {"source": "data:,{{pool}}"}},
   {"path": "/etc/rackgate/ca.pem", "mode": 420, "contents": {"source": "data:,{{appliance.ca_pem}}"}}]}}
IGN
# docs/ignition.md's worked example had "data:;base64,..." here: not base64
# (ignition-validate: "illegal base64 data"), so it is refused.
cat > "$T/attested-bad.ign" <<'IGN'
{"ignition": {"version": "3.3.0"},
 "storage": {"files": [
   {"path": "/etc/kubernetes/kubeconfig", "mode": 384, "rackgate": {"secret": true},
    "contents": {"source": "data:;base64,..."}}]}}
IGN
sed 's/base64,\.\.\./base64,YXBpVmVyc2lvbjogdjEK/' "$T/attested-bad.ign" > "$T/attested.ign"

# --- a refused put changes nothing -------------------------------------------
dump_db "$LAB_DIR/before.db.txt"
rc=0; rg_ctl pool put workers --public-template "$T/public.ign" --attested-template "$T/attested-bad.ign" \
  > "$LAB_DIR/bad.out" 2> "$LAB_DIR/bad.err" || rc=$?
lab_check "a put with a bad attested template is refused (exit 1)" test "$rc" = 1
lab_check "  the error names the attested template" grep -q 'template_invalid: attested template: ' "$LAB_DIR/bad.err"
lab_check "  and prints no token" test ! -s "$LAB_DIR/bad.out"
dump_db "$LAB_DIR/after.db.txt"
lab_check "  the database is unchanged after the refused pool put" cmp -s "$LAB_DIR/before.db.txt" "$LAB_DIR/after.db.txt"
lab_check "  but for one admin_refused audit row naming template_invalid" test "$(sqlite3 "$RG_DIR/state/rackgate.db" \
  "SELECT count(*) FROM audit WHERE action = 'admin_refused' AND detail_json LIKE '%template_invalid%'")" = 1
lab_check_fails "  no pool workers" rg_ctl pool show workers

rg_ctl pool put workers --public-template "$T/public.ign" --attested-template "$T/attested.ign" --json \
  > "$LAB_DIR/put.json"
TOKEN="$(lab_python -c 'import json,sys; print(json.load(open(sys.argv[1]))["provisioning_token"])' "$LAB_DIR/put.json")"
lab_check "the good put shows the token" test "${#TOKEN}" -ge 40
lab_check "  one token stored, and it is the one shown" test "$(sqlite3 "$RG_DIR/state/rackgate.db" \
  "SELECT lower(hex(hash)) FROM pool_tokens WHERE pool = 'workers'")" = \
  "$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)"
lab_check "  one pool_put audit row with both templates' digests" test "$(sqlite3 "$RG_DIR/state/rackgate.db" \
  "SELECT count(*) FROM audit WHERE action = 'pool_put' AND detail_json LIKE '%\"workers\"%' AND detail_json LIKE '%attested%'")" = 1

rc=0; rg_ctl token rotate --pool workers > /dev/null 2> "$LAB_DIR/rotate.err" || rc=$?
lab_check "token rotate without --grace is refused (exit 2)" test "$rc" = 2
lab_check "  naming both choices" sh -c "grep -q -- '--grace 0' '$LAB_DIR/rotate.err' && grep -q -- '--grace 1h' '$LAB_DIR/rotate.err'"

rc=0; rg_ctl pool diff workers --public-template "$T/public.ign" --json > "$LAB_DIR/diff.json" || rc=$?
lab_check "pool diff --json: same, exit 0" sh -c "[ $rc = 0 ] && grep -q '\"same\": true' '$LAB_DIR/diff.json'"

# --- the token in the URL ----------------------------------------------------
code() { curl -sS -o /dev/null -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" --max-time "$RG_MAX_TIME" "$@" || echo 000; }
lab_check "/config/workers?token=TOKEN: 200" test "$(code "$URL/config/workers?token=$TOKEN")" = 200
lab_check "/config/workers?token=wrong: 403" test "$(code "$URL/config/workers?token=wrong")" = 403
lab_check "/config/workers?token= (empty): 401" test "$(code "$URL/config/workers?token=")" = 401
lab_check "the header wins over the URL parameter" \
  test "$(code -H "Authorization: Bearer wrong" "$URL/config/workers?token=$TOKEN")" = 403
lab_check "  a good header with a wrong URL token: 200" \
  test "$(code -H "Authorization: Bearer $TOKEN" "$URL/config/workers?token=wrong")" = 200
curl -sS --cacert "$RG_DIR/state/ca/ca.crt" "$URL/metrics" > "$LAB_DIR/metrics.txt" 2>/dev/null || true

# --- pointers ----------------------------------------------------------------
printf '%s\n' "$TOKEN" > "$LAB_DIR/token"
for spec in 3.0 3.1 3.2 3.3; do
  rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/token" \
    --spec "$spec" --json > "$LAB_DIR/pointer-$spec.ign"
  lab_check "pointer --spec $spec passes ignition-validate" ignition-validate "$LAB_DIR/pointer-$spec.ign"
done
lab_check "  3.0 carries the token in the URL, no httpHeaders" \
  sh -c "grep -q 'config/workers?token=$TOKEN\"' '$LAB_DIR/pointer-3.0.ign' && ! grep -q httpHeaders '$LAB_DIR/pointer-3.0.ign'"
lab_check "  3.1 carries it as a header" \
  sh -c "grep -q 'Bearer $TOKEN' '$LAB_DIR/pointer-3.1.ign' && ! grep -q 'token=' '$LAB_DIR/pointer-3.1.ign'"
lab_check_fails "pointer --spec 2.2 is refused" rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" \
  --token-file "$LAB_DIR/token" --spec 2.2
R="$LAB_DIR/ign/spec30"; mkdir -p "$R"
if boot_run_ignition "$R/root" "$R/work" "$LAB_DIR/pointer-3.0.ign" "$R/log"; then
  lab_ok "the real Ignition fetched the config through a 3.0 pointer (token in the URL)"
else
  lab_not_ok "Ignition with the 3.0 pointer failed"; tail -n 20 "$R/log" | sed 's/^/#   /' >&2
fi
lab_check "  its files stage wrote /etc/rackgate/pool = workers" test "$(cat "$R/root/etc/rackgate/pool" 2>/dev/null)" = workers

# --- the token stays out of every log ----------------------------------------
lab_check "the daemon logged the requests" grep -q 'GET /config/workers' "$RG_DIR/rackgated.log"
lab_check_fails "  and never the token" grep -qF "$TOKEN" "$RG_DIR/rackgated.log"
lab_check_fails "  nor a ?token= query" grep -q 'token=' "$RG_DIR/rackgated.log"
lab_check_fails "the token is in no metric label" grep -qF "$TOKEN" "$LAB_DIR/metrics.txt"
lab_check_fails "the token is not in the audit log" grep -qF "$TOKEN" <(sqlite3 "$RG_DIR/state/rackgate.db" "SELECT * FROM audit")

# --- a kernel command line stays off screens and logs (issue 27, item 8) ------
CMDLINE="root=/dev/vda1 ro rd.luks.key=s3cret-passphrase"
CMDLINE_SHA="sha256:$(printf '%s' "$CMDLINE" | sha256sum | cut -d' ' -f1)"
lab_python - "$LAB_DIR/cmdline-policy.json" "$CMDLINE" <<'PY'
import json, sys
json.dump({"version": 1, "kernel_cmdline": {"exact": sys.argv[2], "forbidden": ["init="]}}, open(sys.argv[1], "w"))
PY
K="$LAB_DIR/cmdline"; mkdir -p "$K"
# Each output is kept, whatever the exit status: the checks below judge it.
capture() { local f="$1"; shift; rg_ctl "$@" > "$K/$f" 2>&1 || echo "exit $?" >> "$K/$f"; }
capture put.txt policy put --pool workers --policy "$LAB_DIR/cmdline-policy.json" --reason "lab: pin the command line"
capture put.json policy put --pool workers --policy "$LAB_DIR/cmdline-policy.json" --json
capture show.txt policy show --pool workers
capture show.json policy show --pool workers --json
capture pool.json pool show workers --json
capture audit.txt audit
capture audit.json audit --json
capture show-output.txt policy show --pool workers --output "$K/policy-out.json"
lab_check_shown "policy put prints the command line as its digest: + kernel_cmdline.exact $CMDLINE_SHA" \
  grep -qxF "+ kernel_cmdline.exact $CMDLINE_SHA" "$K/put.txt"
lab_check "  and the forbidden fragment as written: + kernel_cmdline.forbidden init=" \
  grep -qxF "+ kernel_cmdline.forbidden init=" "$K/put.txt"
lab_check_shown "policy show, pool show --json: exact_sha256 $CMDLINE_SHA" \
  bash -c "grep -qF '\"exact_sha256\": \"$CMDLINE_SHA\"' '$K/show.txt' && grep -qF '$CMDLINE_SHA' '$K/show.json' '$K/pool.json'"
lab_check_shown "audit: the pool_policy row's diff has the digest" \
  bash -c "grep -q pool_policy '$K/audit.txt' && grep -qF '+ kernel_cmdline.exact $CMDLINE_SHA' '$K/audit.json'"
for f in put.txt put.json show.txt show.json pool.json audit.txt audit.json show-output.txt; do
  lab_check_fails "  the command line's text is not in $f" grep -qF "s3cret" "$K/$f"
done
lab_check_fails "the command line is not in the audit table" \
  grep -qF s3cret <(sqlite3 "$RG_DIR/state/rackgate.db" "SELECT * FROM audit")
lab_check_fails "the command line is not in the daemon's log" grep -qF s3cret "$RG_DIR/rackgated.log"
lab_check_shown "policy show --output FILE writes the policy itself, mode 0600" \
  bash -c "grep -qF '$CMDLINE' '$K/policy-out.json' && test \"\$(stat -c %a '$K/policy-out.json')\" = 600"
lab_check_shown "  which policy put takes back as it is" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' policy put --pool workers --policy '$K/policy-out.json' | grep -qx '(no change)'"
rg_ctl policy put --pool workers --clear > /dev/null

# --- init again --------------------------------------------------------------
tokens_before="$(sqlite3 "$RG_DIR/state/rackgate.db" "SELECT count(*) FROM pool_tokens WHERE pool = 'default'")"
lab_check "init made the default pool's token" test "$tokens_before" = 1
lab_check "  and showed it once" grep -q '^provisioning token for pool "default" (shown once): ' "$RG_DIR/init.log"
rg_ctl init --state-dir "$RG_DIR/state" --renew-serving-cert --json > "$LAB_DIR/init2.json"
lab_check "init again mints no second token" test "$(sqlite3 "$RG_DIR/state/rackgate.db" \
  "SELECT count(*) FROM pool_tokens WHERE pool = 'default'")" = 1
lab_check "  and says it kept it" grep -q '"token": "kept"' "$LAB_DIR/init2.json"
lab_check_fails "  and prints no token" grep -q default_pool_token "$LAB_DIR/init2.json"
lab_check "--renew-serving-cert keeps the names: localhost, 127.0.0.1" \
  sh -c "openssl x509 -in '$RG_DIR/state/tls/server.crt' -noout -ext subjectAltName | grep -q 'DNS:localhost, IP Address:127.0.0.1'"

rg_stop
lab_finish
