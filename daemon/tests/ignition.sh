#!/usr/bin/env bash
# Integration: Ignition serving end to end (docs/ignition.md). A real
# rackgated on loopback, the real Ignition binary as the client (LAB.md runs
# it without a reboot), a swtpm machine attesting with tpm2-tools.
#  - templates: validation on upload, the secret rules of the public part;
#  - the pointer config from `rackgatectl pointer` leads Ignition to the
#    public config with the appliance CA and the token header, and its files
#    stage writes the files into a temporary root;
#  - wrong, missing and rotated-out tokens and an unknown pool fail as
#    Ignition expects (4xx: at once); the previous token works inside its
#    grace period and not after it;
#  - the Accept negotiation table, HEAD, no redirects;
#  - the attested config: only with an attestation token, applied by the real
#    Ignition, the machine provisioned, the digest audited.
#   ignition.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
source "$HERE/../../firmware-tests/boot-lib.sh"
lab_skip_unless_tools
boot_skip_unless_ignition
lab_init ignition
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab

T="$LAB_DIR/templates"; mkdir -p "$T"
# The public part: what a machine needs before it has proven anything.
cat > "$T/public.ign" <<'IGN'
{
  "ignition": {"version": "3.3.0"},
  "storage": {"files": [
    {"path": "/etc/rackgate/pool", "mode": 420, "contents": {"source": "data:,{{pool}}"}},
    {"path": "/etc/rackgate/appliance", "mode": 420, "contents": {"source": "data:,{{appliance.url}}"}},
    {"path": "/etc/rackgate/ca.pem", "mode": 420, "contents": {"source": "data:,{{appliance.ca_pem}}"}}
  ]},
  "systemd": {"units": [
    {"name": "rackgate-agent.service", "enabled": true,
     "contents": "[Unit]\nDescription=rackgate agent\n[Service]\nType=oneshot\nExecStart=/usr/bin/rackgate-agent\n[Install]\nWantedBy=multi-user.target\n"}
  ]}
}
IGN
# The attested part: secrets and per-machine values.
cat > "$T/attested.ign" <<'IGN'
{
  "ignition": {"version": "3.2.0"},
  "storage": {"files": [
    {"path": "/etc/kubernetes/kubeconfig", "mode": 384, "rackgate": {"secret": true},
     "contents": {"source": "data:;base64,YXBpVmVyc2lvbjogdjEKIyBzZWNyZXQta3ViZWNvbmZpZy1tYXJrZXIK"}},
    {"path": "/etc/hostname", "mode": 420, "overwrite": true, "contents": {"source": "data:,{{hostname}}"}},
    {"path": "/etc/rackgate/rack", "mode": 420, "contents": {"source": "data:,{{machine.rack}}"}},
    {"path": "/etc/rackgate/pool", "mode": 420, "overwrite": true, "contents": {"source": "data:,attested-{{pool}}"}}
  ]}
}
IGN
# A public template that would leak a kubeconfig.
lab_python - "$T/public.ign" "$T/leaky.ign" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["storage"]["files"].append({"path": "/etc/kubernetes/kubeconfig", "contents": {"source": "data:,x"}})
json.dump(c, open(sys.argv[2], "w"))
PY

# run_ignition NAME POINTER: the fetch and files stages into a fresh root
# $LAB_DIR/ign/NAME/root; their output in .../log (firmware-tests/boot-lib.sh).
run_ignition() {
  local R="$LAB_DIR/ign/$1"
  mkdir -p "$R"
  boot_run_ignition "$R/root" "$R/work" "$2" "$R/log"
}
ign_root() { echo "$LAB_DIR/ign/$1/root"; }
ign_log_tail() { tail -n "${2:-8}" "$LAB_DIR/ign/$1/log" | sed 's/^/#   /' >&2; }

# expect_ignition_fails NAME POINTER WANT: Ignition gives up (4xx is final)
# at once, having logged "GET result: WANT" (the status text: Forbidden,
# Unauthorized, Not Found): after its first attempt, with no second one
# (a 5xx or a connection error is retried until boot_run_ignition's
# timeout).
expect_ignition_fails() {
  local start=$SECONDS
  if run_ignition "$1" "$2"; then lab_not_ok "$1: Ignition succeeded"; return; fi
  local took=$((SECONDS - start)) log="$LAB_DIR/ign/$1/log"
  if grep -q "GET result: $3" "$log" && grep -q 'attempt #1' "$log" && ! grep -q 'attempt #2' "$log"; then
    lab_ok "$1: Ignition gave up at once on $3 (one attempt, ${took}s)"
  else
    lab_not_ok "$1: want a failure on $3 at the first attempt, took ${took}s"; ign_log_tail "$1"
  fi
}

new_machine() {  # NAME CA
  lab_machine "$1" "$2"; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}

new_machine m1 lab
rg_trust lab
rg_start
URL="https://127.0.0.1:$RG_PORT"

# --- templates ---------------------------------------------------------------
lab_check_fails "a public template carrying a kubeconfig is refused" \
  rg_ctl pool put leaky --public-template "$T/leaky.ign"
rg_ctl pool put leaky --public-template "$T/leaky.ign" >/dev/null 2>"$LAB_DIR/leaky.err" || true
lab_check "  with reason template_secret_in_public" grep -q template_secret_in_public "$LAB_DIR/leaky.err"
lab_check_fails "  and nothing of it is stored" sh -c "\"$RG_CTL\" --socket \"$RG_DIR/admin.sock\" pool show leaky --template public"
echo '{"ignition": {"version": "3.3.0"}, "storage": {"files": [{"path": "relative", "contents": {"source": "data:,"}}]}}' \
  > "$T/bad.ign"
lab_check_fails "a template with a relative path is refused" rg_ctl pool put bad --public-template "$T/bad.ign"
echo '{"ignition": {"version": "2.2.0"}}' > "$T/old.ign"
lab_check_fails "a spec 2.2 template is refused" rg_ctl pool put old --public-template "$T/old.ign"

lab_check "pool put with both templates" \
  sh -c "\"$RG_CTL\" --socket \"$RG_DIR/admin.sock\" pool put workers --public-template \"$T/public.ign\" --attested-template \"$T/attested.ign\" > \"$LAB_DIR/put.out\""
TOKEN1="$(tail -n 1 "$LAB_DIR/put.out")"
lab_check "a new pool gets a provisioning token" test "${#TOKEN1}" -ge 40
lab_check "pool show says the token is required" sh -c "\"$RG_CTL\" --socket \"$RG_DIR/admin.sock\" pool show workers | grep -q 'token required: *yes'"
lab_check "pool diff: same file, exit 0" rg_ctl pool diff workers --public-template "$T/public.ign"
sed 's/{{pool}}/{{pool}}-changed/' "$T/public.ign" > "$T/public2.ign"
rc=0; rg_ctl pool diff workers --public-template "$T/public2.ign" > "$LAB_DIR/diff.out" || rc=$?
lab_check "pool diff: changed file, exit 1 with the change" \
  sh -c "[ $rc = 1 ] && grep -q '^+.*pool}}-changed' \"$LAB_DIR/diff.out\""
lab_check_fails "the token is not in the audit log" sh -c "\"$RG_CTL\" --socket \"$RG_DIR/admin.sock\" audit --json --limit 1000 | grep -q \"$TOKEN1\""

# --- the pointer and the real Ignition ---------------------------------------
printf '%s\n' "$TOKEN1" > "$LAB_DIR/token1"
rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/token1" \
  > "$LAB_DIR/pointer1.ign"
lab_check "the pointer config passes ignition-validate" ignition-validate "$LAB_DIR/pointer1.ign"
lab_check "the pointer is spec 3.3.0 and merges" \
  sh -c "grep -q '\"version\": \"3.3.0\"' \"$LAB_DIR/pointer1.ign\" && grep -q '\"merge\"' \"$LAB_DIR/pointer1.ign\""
if run_ignition pub1 "$LAB_DIR/pointer1.ign"; then lab_ok "Ignition fetched the public config through the pointer"
else lab_not_ok "Ignition with the pointer failed"; ign_log_tail pub1 20; rg_log_tail; fi
R="$(ign_root pub1)"
lab_check "  its files stage wrote /etc/rackgate/pool = workers" test "$(cat "$R/etc/rackgate/pool" 2>/dev/null)" == workers
lab_check "  with the appliance URL" test "$(cat "$R/etc/rackgate/appliance" 2>/dev/null)" == "$URL"
lab_check "  and the appliance CA" cmp -s "$R/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt"
lab_check "  and the agent unit" test -s "$R/etc/systemd/system/rackgate-agent.service"
lab_check "  enabled (Ignition writes a preset)" grep -qx 'enable rackgate-agent.service' "$R/etc/systemd/system-preset/20-ignition.preset"
lab_check_fails "  and no kubeconfig" test -e "$R/etc/kubernetes/kubeconfig"
lab_check "  Ignition sent the token header (the pool needs it)" grep -q 'GET .*config/workers: attempt #1' "$LAB_DIR/ign/pub1/log"

# Wrong token, no token, unknown pool: 4xx, and Ignition stops at once.
printf 'not-the-token\n' > "$LAB_DIR/wrong"
rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/wrong" > "$LAB_DIR/p-wrong.ign"
expect_ignition_fails wrong-token "$LAB_DIR/p-wrong.ign" Forbidden
rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --no-token > "$LAB_DIR/p-none.ign"
expect_ignition_fails no-token "$LAB_DIR/p-none.ign" Unauthorized
rg_ctl pointer --pool nosuch --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/token1" > "$LAB_DIR/p-pool.ign"
expect_ignition_fails unknown-pool "$LAB_DIR/p-pool.ign" "Not Found"

# Rotation with a grace period: both work; after it, only the new one. The
# grace that is tested from inside is long (a run of Ignition on a loaded
# machine takes seconds); the one that is tested from after is short, and
# waited out by the clock: a previous token works while its end (the
# rotation's second plus the grace) is later than now.
SHORT_GRACE=2
rg_ctl token rotate --pool workers --grace 1h --out "$LAB_DIR/token2" 2>/dev/null >/dev/null
rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/token2" > "$LAB_DIR/pointer2.ign"
if run_ignition new-token "$LAB_DIR/pointer2.ign"; then lab_ok "the new token works"; else lab_not_ok "the new token fails"; ign_log_tail new-token; fi
if run_ignition grace "$LAB_DIR/pointer1.ign"; then lab_ok "the previous token works inside its grace period"
else lab_not_ok "the previous token fails inside its grace period"; ign_log_tail grace; fi
lab_check "pool show lists the previous token with its end" \
  sh -c "\"$RG_CTL\" --socket \"$RG_DIR/admin.sock\" pool show workers | grep -q 'previous since .*valid until'"
rg_ctl token rotate --pool workers --grace "${SHORT_GRACE}s" --out "$LAB_DIR/token3" 2>/dev/null >/dev/null
ROTATED_AT="$(date +%s)"
lab_sleep_until $(( ROTATED_AT + SHORT_GRACE ))
expect_ignition_fails after-grace "$LAB_DIR/pointer2.ign" Forbidden
rg_ctl token rotate --pool workers --grace 0 --out "$LAB_DIR/token4" 2>/dev/null >/dev/null
rg_ctl pointer --pool workers --url "$URL" --state-dir "$RG_DIR/state" --token-file "$LAB_DIR/token3" > "$LAB_DIR/p3.ign"
expect_ignition_fails rotated-no-grace "$LAB_DIR/p3.ign" Forbidden
TOKEN="$(cat "$LAB_DIR/token4")"

# --- negotiation, HEAD, no redirects -----------------------------------------
# get_config ACCEPT|-: prints "STATUS VERSION" (VERSION from the body, or the reason).
get_config() {
  local hdr=(-H "Authorization: Bearer $TOKEN")
  [[ "$1" != - ]] && hdr+=(-H "Accept: $1")
  local st; st="$(curl -sS -o "$LAB_DIR/neg.json" -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" \
    "${hdr[@]}" "$URL/config/workers" || echo 000)"
  if [[ "$st" == 200 ]]; then echo "$st $(rg_wire get "$LAB_DIR/neg.json" ignition.version)"
  else echo "$st $(rg_wire get "$LAB_DIR/neg.json" error.reason 2>/dev/null || echo '?')"; fi
}
IGN_TYPE='application/vnd.coreos.ignition+json'
while IFS='|' read -r accept want; do
  got="$(get_config "$accept")"
  lab_check "Accept [$accept] -> $want (got $got)" test "$got" == "$want"
done <<TABLE
-|200 3.3.0
*/*|200 3.3.0
$IGN_TYPE;version=3.0.0|200 3.0.0
$IGN_TYPE;version=3.1.0|200 3.1.0
$IGN_TYPE;version=3.2.0|200 3.2.0
$IGN_TYPE;version=3.3.0|200 3.3.0
$IGN_TYPE;version=3.4.0|200 3.3.0
$IGN_TYPE;version=3.4.0-experimental|200 3.3.0
$IGN_TYPE;version=3.3.0, */*;q=0.1|200 3.3.0
$IGN_TYPE;version=3.1.0;q=0.5, $IGN_TYPE;version=3.2.0;q=0.9|200 3.2.0
$IGN_TYPE;version=3.2.0;q=0, $IGN_TYPE;version=3.0.0;q=0.3|200 3.0.0
$IGN_TYPE;version=2.2.0|406 ignition_version_unsupported
$IGN_TYPE;version=4.0.0|406 ignition_version_unsupported
text/html|406 ignition_version_unsupported
garbage|400 accept_malformed
TABLE

curl -sS -D "$LAB_DIR/get.h" -o "$LAB_DIR/get.body" --cacert "$RG_DIR/state/ca/ca.crt" \
  -H "Authorization: Bearer $TOKEN" "$URL/config/workers"
curl -sS -I -o "$LAB_DIR/head.h" --cacert "$RG_DIR/state/ca/ca.crt" -H "Authorization: Bearer $TOKEN" "$URL/config/workers"
len="$(tr -d '\r' < "$LAB_DIR/head.h" | awk -F': ' 'tolower($1)=="content-length"{print $2}')"
lab_check "HEAD answers 200 with the GET body's Content-Length ($len)" \
  sh -c "head -n1 \"$LAB_DIR/head.h\" | grep -q ' 200' && [ \"$len\" = \"$(stat -c %s "$LAB_DIR/get.body")\" ]"
lab_check "the content type names the spec version" grep -qi "content-type: $IGN_TYPE; version=3.3.0" "$LAB_DIR/get.h"
st="$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" -H "Authorization: Bearer $TOKEN" "$URL/config/workers/" || true)"
lab_check "a trailing slash is 404, never a redirect ($st)" test "$st" == 404
lab_check_fails "the public config holds no attested secret" grep -q kubeconfig "$LAB_DIR/get.body"

# --- the attested config -----------------------------------------------------
M1="$(lab_dir m1)"
rg_ctl enroll --hostname node-1 --pool workers --ek-cert "$M1/ek-rsa.der" --address InternalIP=10.0.0.11 \
  --var rack=r12 >/dev/null
st="$(rg_get /v1/machine/config "$LAB_DIR/x.json")"
lab_check "no token: no attested config ($st)" test "$st" == 401
st="$(rg_get /v1/machine/config "$LAB_DIR/x.json" "$TOKEN")"
lab_check "the provisioning token is no attestation token ($st $(rg_wire get "$LAB_DIR/x.json" error.reason))" test "$st" == 401
lab_check_fails "  and the answer holds nothing secret" grep -q -e kubeconfig -e c2VjcmV0 "$LAB_DIR/x.json"
st="$(attest m1 rsa "$M1/ak")"
lab_check "node-1 attests ($st)" test "$st" == 200
AT="$(rg_wire get "$M1/ev.json" token)"
lab_python - "$LAB_DIR/pointer1.ign" "$LAB_DIR/pointer-attested.ign" "$URL/v1/machine/config" "$AT" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p["ignition"]["config"]["merge"] = [{"source": sys.argv[3],
    "httpHeaders": [{"name": "Authorization", "value": "Bearer " + sys.argv[4]}]}]
json.dump(p, open(sys.argv[2], "w"))
PY
if run_ignition attested "$LAB_DIR/pointer-attested.ign"; then lab_ok "Ignition applied the attested config"
else lab_not_ok "Ignition with the attested config failed"; ign_log_tail attested 20; rg_log_tail; fi
R="$(ign_root attested)"
lab_check "  the kubeconfig (attested part) is in the root" grep -q secret-kubeconfig-marker "$R/etc/kubernetes/kubeconfig"
lab_check "  with mode 0600" test "$(stat -c %a "$R/etc/kubernetes/kubeconfig" 2>/dev/null)" == 600
lab_check "  /etc/hostname is the enrolled hostname" test "$(cat "$R/etc/hostname" 2>/dev/null)" == node-1
lab_check "  the operator's machine value was substituted" test "$(cat "$R/etc/rackgate/rack" 2>/dev/null)" == r12
lab_check "  the attested part overrides the public one" test "$(cat "$R/etc/rackgate/pool" 2>/dev/null)" == attested-workers
lab_check "  and the public part is there too" cmp -s "$R/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt"
lab_check "node-1 is provisioned" test "$(rg_state node-1)" == provisioned
curl -sS -o "$LAB_DIR/attested.body" --cacert "$RG_DIR/state/ca/ca.crt" -H "Authorization: Bearer $AT" \
  -H "Accept: $IGN_TYPE;version=3.3.0" "$URL/v1/machine/config"
DIGEST="$(sha256sum "$LAB_DIR/attested.body" | cut -d' ' -f1)"
rg_ctl audit --hostname node-1 --json --limit 100 > "$LAB_DIR/audit.json"
lab_check "the audit log has the served config's digest" grep -q "$DIGEST" "$LAB_DIR/audit.json"
lab_check_fails "  and never its contents" grep -q -e secret-kubeconfig -e YXBpVmVyc2lvbjog "$LAB_DIR/audit.json"
lab_check_fails "the daemon log holds no token" grep -q -e "$TOKEN" -e "$AT" "$RG_DIR/rackgated.log"
rg_ctl revoke node-1 --reason test >/dev/null
st="$(rg_get /v1/machine/config "$LAB_DIR/x.json" "$AT")"
lab_check "a revoked machine gets no config ($st)" test "$st" == 403

rg_stop
lab_finish
