#!/usr/bin/env bash
# ca-rotation.sh — the appliance CA rotated under a live fleet (issue 44):
# swtpm machines run the shipped rackgate-agent.service (boot-lib.sh,
# boot_unit) against a real rackgated while docs/operations.md §8's blocks
# (marked `<!-- ca-rotation: NAME -->`) run in order. Parts, each "(x) ...":
#   (a) three machines join under the first CA; their ca.pem is that CA;
#   (b) prepare: the appliance serves the bundle (public config, pointer);
#       m1 and m2 reboot, attest, renew and take the bundle into ca.pem;
#       m3 stays off;
#   (c) switch: refused (ca_rotation_unconfirmed, naming one machine) while
#       m3 has not attested; the runbook's block switches (--force) and
#       reloads; the serving certificate is under the next CA; m1 and m2
#       reboot, attest and renew through it;
#   (d) retire: the old CA moves to ca/retired/, ca.crt is the next CA; m1
#       and m2 reboot and their ca.pem becomes the new CA alone;
#   (e) m3, back after missing the overlap: refused with
#       appliance_untrusted naming `ca bundle --appliance`; recovered by the
#       runbook's recovery blocks, it attests and renews.
# Certificates last 60 s and the pool renews at once (renew_fraction 1), so
# every run renews both kubelet certificates.
# Usage: ca-rotation.sh RACKGATE_AGENT RACKGATED RACKGATECTL RACKGATE_AGENT_UNIT
set -euo pipefail

RC_OK=0
RC_UNREACHABLE=4
R_RENEWED='step=csr machine=[0-9a-f]{16} ok certificate=client key=software renewed=(due|expired) serial='
R_JOINED='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_CA_REPLACED="step=attest machine=[0-9a-f]{16} note ca_file=.* replaced with the appliance's CA bundle"
R_UNTRUSTED='reason=appliance_untrusted message=".*ca bundle --appliance'

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: ca-rotation.sh RACKGATE_AGENT RACKGATED RACKGATECTL RACKGATE_AGENT_UNIT"
AGENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
UNIT="${4:?$USAGE}"
DOC="$HERE/../docs/operations.md"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=boot-lib.sh
source "$HERE/boot-lib.sh"

lab_skip_unless_tools
boot_skip_unless_ignition
lab_init ca-rotation
T0="$(date +%s%N)"
rg_init "$RACKGATED" "$RACKGATECTL"
rg_config retry_after_seconds 1
rg_config client_certificate_validity_seconds 60
rg_config serving_certificate_validity_seconds 60
lab_ca lab
boot_init "$AGENT" "$UNIT"
STATE="$RG_DIR/state"

# --- the runbook's blocks ---------------------------------------------------------
# block NAME: the ```sh fence after `<!-- ca-rotation: NAME -->`.
block() {
  lab_python - "$DOC" "$1" <<'PY'
import sys
doc, name = sys.argv[1:]
lines = open(doc).read().split("\n")
for i, line in enumerate(lines):
    if line.strip() == "<!-- ca-rotation: %s -->" % name:
        j = i + 1
        if lines[j].strip() != "```sh":
            sys.exit("the block %s is not a ```sh fence" % name)
        end = lines.index("```", j + 1)
        print("\n".join(lines[j + 1:end]))
        sys.exit(0)
sys.exit("docs/operations.md has no block %s" % name)
PY
}
# The block's commands as on an appliance, in the lab: rackgatectl on this
# state dir (and $EXTRA's flags), sudo as nothing, `systemctl reload rackgated` a SIGHUP waited
# for, /tmp the lab's. Output to $LAB_DIR/block.NAME.out.
run_block() {
  local name="$1" text
  text="$(block "$name")" || { echo "$text"; return 1; }
  text="${text//\/tmp\//$LAB_DIR/}"
  RG_PID="$RG_PID" RACKGATECTL="$RACKGATECTL" STATE="$STATE" RG_LOG="$RG_DIR/rackgated.log" \
    EXTRA="${EXTRA:-}" bash -euo pipefail -c '
sudo() { if [[ "$1" == -u ]]; then shift 2; fi; "$@"; }
rackgatectl() { "$RACKGATECTL" "$@" --state-dir "$STATE" $EXTRA; }
systemctl() {
  [[ "$*" == "reload rackgated" ]] || { echo "systemctl $*: not in the lab"; return 1; }
  local before; before="$(grep -c "reload: TLS certificate" "$RG_LOG" || true)"
  kill -HUP "$RG_PID"
  for _ in $(seq 200); do
    (( $(grep -c "reload: TLS certificate" "$RG_LOG" || true) > before )) && return 0
    sleep 0.05
  done
  echo "rackgated did not reload"; return 1
}
'"$text" >"$LAB_DIR/block.$name.out" 2>&1
}
run_block_shown() { run_block "$1" || { cat "$LAB_DIR/block.$1.out"; return 1; }; }

# --- helpers ----------------------------------------------------------------------
certs_in() { grep -c -- '-----BEGIN CERTIFICATE-----' "$1" || true; }
ca_pem() { echo "$(boot_root "$1")/etc/rackgate/ca.pem"; }
fingerprint() { openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2; }
# ca_pem_is NAME FILE...: the machine's ca.pem holds exactly FILE's certificates, in order.
ca_pem_is() {
  local name="$1"; shift
  local want="" f
  for f in "$@"; do want+="$(openssl x509 -in "$f" -outform PEM)"$'\n'; done
  local got=""
  got="$(lab_python - "$(ca_pem "$name")" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
print("\n".join(re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", text, re.S)))
PY
)"
  [[ "$got" == "${want%$'\n'}" ]] || { echo "ca.pem of $name holds $(certs_in "$(ca_pem "$name")") certificates, not those of $*"; return 1; }
}
# run NAME: a reboot and the shipped unit's run.
run() { boot_reboot "$1" && boot_unit "$1"; }
# served_certs: certificates in the public config's ca.pem as rackgated renders it now.
served_certs() {
  local body="$LAB_DIR/public.json" ca="$LAB_DIR/trust-now.pem"
  # Trusting what `ca bundle --appliance` says to trust now (the serving
  # certificate moves to the next CA at the switch).
  "$RACKGATECTL" ca bundle --appliance --state-dir "$STATE" --out "$ca" || return 1
  [[ "$(curl -sS -o "$body" -w '%{http_code}' --cacert "$ca" --max-time "$RG_MAX_TIME" \
        -H "Authorization: Bearer $(cat "$BOOT_DIR/rot.token")" "$(rg_url /config/rot)")" == 200 ]] || return 1
  lab_python - "$body" <<'PY'
import json, sys, urllib.parse
cfg = json.load(open(sys.argv[1]))
for f in cfg["storage"]["files"]:
    if f["path"] == "/etc/rackgate/ca.pem":
        src = f["contents"]["source"]
        print(urllib.parse.unquote(src.split(",", 1)[1]).count("-----BEGIN CERTIFICATE-----"))
PY
}
served_is() { [[ "$(served_certs)" == "$1" ]]; }
# pointer_certs: certificates in a pointer config made now.
pointer_certs() {
  rg_ctl pointer --pool rot --url "$(rg_url "")" --state-dir "$STATE" --token-file "$BOOT_DIR/rot.token" |
    lab_python -c 'import base64, json, sys
cas = json.load(sys.stdin)["ignition"]["security"]["tls"]["certificateAuthorities"]
src = cas[0]["source"].split(",", 1)
data = base64.b64decode(src[1]).decode() if src[0].endswith(";base64") else src[1]
print(data.count("-----BEGIN CERTIFICATE-----"))'
}
rotation_json() { "$RACKGATECTL" ca rotate --appliance status --state-dir "$STATE" --json; }
audit_has() {
  rg_ctl audit --json | lab_python -c 'import json, sys
sys.exit(0 if any(e.get("action") == sys.argv[1] for e in json.load(sys.stdin)["entries"]) else 1)' "$1"
}
pointer_is() { [[ "$(pointer_certs)" == "$1" ]]; }
machine_block_names_ca_pem() { grep -q 'rackgate-ca.pem /etc/rackgate/ca.pem' <<<"$(block recover-machine)"; }

boot_new_machines 10.0.0 m1 m2 m3
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$STATE" >/dev/null
echo '{"renew_fraction": 1.0}' > "$BOOT_DIR/rot.settings.json"
boot_pool rot --settings "$BOOT_DIR/rot.settings.json"
cp "$STATE/ca/ca.crt" "$LAB_DIR/first-ca.crt"

# --- (a) three machines join under the first CA ---------------------------------------
for m in m1 m2 m3; do
  boot_enroll "$m" "node-$m" rot
  lab_expect "$RC_OK" "$R_JOINED" "(a) $m joins under the first CA (exit 0)" boot_machine "$m" rot
done
lab_check_shown "(a) m1's ca.pem is the first CA alone" ca_pem_is m1 "$LAB_DIR/first-ca.crt"
lab_check_shown "(a) no rotation: status says none" bash -c "'$RACKGATECTL' ca rotate --appliance status --state-dir '$STATE' --json | grep -q '\"stage\": *\"none\"'"

# --- (b) prepare ---------------------------------------------------------------------
echo "# (b) prepare (docs/operations.md §8, block prepare)"
lab_check_shown "(b) the prepare block runs" run_block_shown prepare
lab_check_shown "(b) STATE/ca/next.crt and next.key exist, the key 0600" \
  bash -c "test -f '$STATE/ca/next.crt' && test \"\$(stat -c %a '$STATE/ca/next.key')\" == 600"
cp "$STATE/ca/next.crt" "$LAB_DIR/next-ca.crt"
lab_check_shown "(b) status: prepared, the next CA's fingerprint" \
  bash -c "grep -q 'stage: *prepared' '$LAB_DIR/block.prepare.out'"
lab_check_shown "(b) rackgatectl status shows the rotation" bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' status | grep -q 'appliance CA rotation: prepared'"
lab_check_shown "(b) audited ca_rotation_prepared" audit_has ca_rotation_prepared
# Within the cache's bound (2 s; docs/ha.md): polled, never assumed.
lab_check_shown "(b) rackgated serves the bundle ({{appliance.ca_pem}}: 2 certificates)" lab_wait 10 served_is 2
lab_check_shown "(b) a pointer config made now carries the bundle" pointer_is 2
PREPARED_AT="$(rotation_json | lab_python -c 'import json,sys; print(json.load(sys.stdin)["prepared_at"])')"
# The switch counts attestations after the bundle's publication (prepare +
# 2 s): wait for the clock to pass it rather than guess.
lab_sleep_until "$((PREPARED_AT + 3))"
for m in m1 m2; do
  lab_expect "$RC_OK" "$R_CA_REPLACED" "(b) $m reboots, attests and takes the bundle into its ca.pem (exit 0)" run "$m"
  lab_check_shown "(b) $m renewed its certificates" grep -Eq "$R_RENEWED" "$(lab_dir "$m")/agent.last"
  lab_check_shown "(b) $m's ca.pem is the current then the next CA" ca_pem_is "$m" "$LAB_DIR/first-ca.crt" "$LAB_DIR/next-ca.crt"
done
lab_expect "$RC_OK" "$R_RENEWED" "(b) m1 again: attests and renews (the bundle unchanged)" run m1
lab_check_shown "(b) an unchanged bundle is not written again" bash -c "! grep -q 'replaced with' '$(lab_dir m1)/agent.last'"

# --- (c) switch -----------------------------------------------------------------------
echo "# (c) switch (block switch), m3 still off"
if run_block switch; then
  lab_not_ok "(c) the switch block is refused while m3 has not attested since prepare" \
    "it switched: $(cat "$LAB_DIR/block.switch.out")"
else
  lab_check_shown "(c) the switch block is refused while m3 has not attested since prepare (ca_rotation_unconfirmed, one machine: node-m3)" \
    grep -Eq "refused: ca_rotation_unconfirmed: 1 machine\(s\) have not attested.*node-m3" "$LAB_DIR/block.switch.out"
fi
lab_check_shown "(c) the refused switch changed nothing: serving under the first CA" \
  openssl verify -CAfile "$LAB_DIR/first-ca.crt" "$STATE/tls/server.crt"
EXTRA=--force lab_check_shown "(c) the switch block with --force switches and reloads rackgated" run_block_shown switch
lab_check_shown "(c) the serving certificate is under the next CA" \
  openssl verify -CAfile "$LAB_DIR/next-ca.crt" "$STATE/tls/server.crt"
lab_check_shown "(c) audited ca_rotation_switched" audit_has ca_rotation_switched
for m in m1 m2; do
  lab_expect "$RC_OK" "$R_RENEWED" "(c) $m reboots, attests and renews through the new serving certificate" run "$m"
done
lab_check_shown "(c) the bundle is still served during the switch" served_is 2

# --- (d) retire -----------------------------------------------------------------------
echo "# (d) retire (block retire)"
lab_check_shown "(d) the retire block runs and reloads rackgated" run_block_shown retire
lab_check_shown "(d) ca.crt is the next CA" test "$(fingerprint "$STATE/ca/ca.crt")" == "$(fingerprint "$LAB_DIR/next-ca.crt")"
lab_check_shown "(d) the old CA is in ca/retired/<UTC>/" \
  bash -c "test \"\$(openssl x509 -in $STATE/ca/retired/*/ca.crt -noout -fingerprint -sha256)\" == \"\$(openssl x509 -in '$LAB_DIR/first-ca.crt' -noout -fingerprint -sha256)\""
lab_check_shown "(d) no next CA is left" test ! -e "$STATE/ca/next.crt"
lab_check_shown "(d) audited ca_rotation_retired" audit_has ca_rotation_retired
lab_check_shown "(d) rackgated serves the new CA alone" lab_wait 10 served_is 1
for m in m1 m2; do
  lab_expect "$RC_OK" "$R_CA_REPLACED" "(d) $m reboots, attests and takes the new CA alone" run "$m"
  lab_check_shown "(d) $m's ca.pem is the new CA alone" ca_pem_is "$m" "$LAB_DIR/next-ca.crt"
  lab_check_shown "(d) $m renewed its certificates" grep -Eq "$R_RENEWED" "$(lab_dir "$m")/agent.last"
done

# --- (e) the machine that missed the overlap ----------------------------------------
echo "# (e) m3 comes back after the rotation"
BOOT_MAX_WAIT=1 lab_expect "$RC_UNREACHABLE" "$R_UNTRUSTED" \
  "(e) m3 is refused by TLS and told why (appliance_untrusted, the recovery named)" run m3
lab_check_shown "(e) the recovery block writes the bundle on the appliance" run_block_shown recover
lab_check_shown "(e) the machine's recovery block puts it in /etc/rackgate/ca.pem" machine_block_names_ca_pem
install -m 0644 "$LAB_DIR/rackgate-ca.pem" "$(ca_pem m3)"
lab_expect "$RC_OK" "$R_RENEWED" "(e) m3 attests and renews again (exit 0)" boot_unit m3
lab_check_shown "(e) m3's ca.pem is the new CA" ca_pem_is m3 "$LAB_DIR/next-ca.crt"

rg_stop
echo "# ca rotation: $(( ($(date +%s%N) - T0) / 1000000 )) ms"
lab_finish
