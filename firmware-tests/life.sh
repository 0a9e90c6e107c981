#!/usr/bin/env bash
# life.sh — one machine's whole life (issue 14), through the real Ignition,
# the real agent run as the shipped rackgate-agent.service runs it
# (boot-lib.sh, boot_unit) and a real rackgated. Parts, each reported as
# "(x) ...":
#   (a) first boot: Ignition, attest, config, certificates: joined;
#   (b) two reboots: each attests again (resetCount up), keeps its config
#       and both certificates byte for byte, and exits 0;
#   (c) renewal: short certificate validity configured and the pool's
#       renewal window opened: the next run renews both certificates (new
#       serial, new key), audited `certificate_renewed`; the run's
#       provisioning report is on the machine (`rackgatectl show`);
#   (d) a PCR the pool's policy pins is extended behind its back (no event
#       log entry): the run is refused (exit 3), the certificates stay, the
#       machine is untrusted (`rackgatectl show --json` "trust"), and a
#       webhook receiver got the event with a valid HMAC;
#   (e) fixed: a clean boot again (TPM reset, the measured boot replayed):
#       the machine attests, renews and is trusted again.
# The machine boots measured: the GCE Ubuntu log replayed into its PCRs on
# every boot, the pool's policy that boot's sha256 PCRs 0-7 (as boot.sh's
# golden pool).
# Usage: life.sh RACKGATE_AGENT RACKGATED RACKGATECTL RACKGATE_AGENT_UNIT RACKGATE_WEBHOOK_RECEIVER
set -euo pipefail

# Agent exit codes (agent/failure.h) and log lines (docs/agent.md).
RC_OK=0
RC_REFUSED=3
R_JOINED='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_CLIENT_KEPT='step=csr machine=[0-9a-f]{16} ok certificate=client kept '
R_SERVING_KEPT='step=csr machine=[0-9a-f]{16} ok certificate=serving kept '
R_CONFIG_KEPT='step=config machine=[0-9a-f]{16} ok kept=.*/var/lib/rackgate-agent/config-applied state=joined'
R_CLIENT_RENEWED='step=csr machine=[0-9a-f]{16} ok certificate=client key=software renewed=(due|expired) serial='
R_SERVING_RENEWED='step=csr machine=[0-9a-f]{16} ok certificate=serving renewed=(due|expired) serial='
R_POLICY_REFUSED='step=attest machine=[0-9a-f]{16} refused status=403 reason=eventlog_pcr_mismatch message="sha256 PCR 4 does not match the event log"'
HOST=node-life
POLICY_PCR=4
GOLDEN_LOG=tpm2-tools_event-gce-ubuntu-2104-log.bin
# A short certificate validity (rackgated's config), and the pool setting
# that opens the renewal window at once (renew_fraction 1: "at most all of
# the validity left").
SHORT_VALIDITY=60
RENEW_SETTINGS='{"renew_fraction": 1.0}'

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: life.sh RACKGATE_AGENT RACKGATED RACKGATECTL RACKGATE_AGENT_UNIT RACKGATE_WEBHOOK_RECEIVER"
AGENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
UNIT="${4:?$USAGE}"
RECEIVER="$(realpath "${5:?$USAGE}")"
TESTDATA="${RACKGATE_TESTDATA_DIR:-$HERE/../testdata}"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=boot-lib.sh
source "$HERE/boot-lib.sh"

lab_skip_unless_tools
boot_skip_unless_ignition
command -v tpm2_eventlog >/dev/null || lab_skip "tpm2_eventlog missing"
[[ -r "$TESTDATA/eventlogs/$GOLDEN_LOG" ]] || { echo "not ok - event log not found: $TESTDATA/eventlogs/$GOLDEN_LOG"; echo "1..1"; exit 1; }
lab_init life
rg_init "$RACKGATED" "$RACKGATECTL"
rg_config retry_after_seconds 1
lab_ca lab
boot_init "$AGENT" "$UNIT"

show_json() { rg_ctl show "$HOST" --json; }
reset_count() { show_json | boot_json - last_attestation.reset_count; }
PKI() { echo "$(boot_root m1)/var/lib/kubelet/pki"; }
serial_of() { openssl x509 -in "$(PKI)/kubelet-$1-current.pem" -noout -serial | cut -d= -f2 | tr A-F a-f; }
pubkey_of() { openssl x509 -in "$(PKI)/kubelet-$1-current.pem" -noout -pubkey; }
# pair_sum: both certificate files as they are (certificate and key).
pair_sum() { cat "$(PKI)/kubelet-client-current.pem" "$(PKI)/kubelet-server-current.pem" | sha256sum | cut -d' ' -f1; }
last_log() { cat "$(lab_dir m1)/agent.last"; }
state_is() { local s; s="$(rg_state "$HOST" 2>/dev/null || echo '?')"; [[ "$s" == "$1" ]] || { echo "$HOST is $s, want $1"; return 1; }; }
# trust_is WORD: `show --json` carries "trust", a string or an object with
# a "state" (the trust helper's contract: trusted | untrusted).
trust_is() {
  show_json | lab_python -c 'import json, sys
m = json.load(sys.stdin)
t = m.get("trust")
print("# trust:", json.dumps(m.get("trust")))
sys.exit(0 if t == sys.argv[1] else 1)' "$1"
}
# audited ACTION: the machine's audit log has ACTION (after entry N, when given).
audit_count() {
  rg_ctl audit --hostname "$HOST" --json | lab_python -c 'import json, sys
print(sum(1 for e in json.load(sys.stdin)["entries"] if e.get("action") == sys.argv[1]))' "$1"
}
# power_cycle: a reboot of the machine: TPM reset, then its measured boot.
power_cycle() { boot_reboot m1 && boot_replay_eventlog m1 "$TESTDATA/eventlogs/$GOLDEN_LOG"; }
pool_update() {  # pool_update POLICY_FILE [SETTINGS_FILE]
  local settings=()
  [[ -n "${2:-}" ]] && settings=(--settings "$2")
  rg_ctl pool put life --public-template "$BOOT_DIR/public.ign" --attested-template "$BOOT_DIR/attested.ign" \
    --policy "$1" "${settings[@]}" >/dev/null
}

# The webhook receiver (rackgate-webhook-receiver): it checks each delivery's HMAC with the shared secret and appends the good
# ones, one JSON object a line, to its --out file; bad ones are refused.
RECEIVER_PORT="" RECEIVER_OUT="$LAB_DIR/webhooks.jsonl"
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$LAB_DIR/webhook.secret"
chmod 600 "$LAB_DIR/webhook.secret"
"$RECEIVER" --port 0 --port-file "$LAB_DIR/receiver.port" --secret-file "$LAB_DIR/webhook.secret" \
  --out "$RECEIVER_OUT" </dev/null >>"$LAB_DIR/receiver.log" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
echo "$!" >> "$LAB_DIR/pids"
lab_wait 5 test -s "$LAB_DIR/receiver.port" || true
RECEIVER_PORT="$(cat "$LAB_DIR/receiver.port" 2>/dev/null)"
rg_config webhooks "[{\"url\": \"http://127.0.0.1:$RECEIVER_PORT/hook\", \"secret_file\": \"$LAB_DIR/webhook.secret\"}]"
# received EVENT: a delivery of EVENT for the machine, HMAC checked.
delivered() {
  [[ -s "$RECEIVER_OUT" ]] && lab_python - "$RECEIVER_OUT" "$1" "$HOST" <<'PY'
import json, sys
path, want, host = sys.argv[1:]
for line in open(path):
    e = json.loads(line)
    body = e.get("body", e)
    if body.get("type") == want and body.get("machine", {}).get("hostname") == host:
        sys.exit(0)
sys.exit(1)
PY
}
received() {
  lab_wait 10 delivered "$1" && return 0
  echo "no '$1' delivery for $HOST in $RECEIVER_OUT"; cat "$RECEIVER_OUT" 2>/dev/null; tail -n 5 "$LAB_DIR/receiver.log" 2>/dev/null
  return 1
}

boot_new_machine m1 10.0.0.21
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
"$RACKGATECTL" eventlog replay "$TESTDATA/eventlogs/$GOLDEN_LOG" --json > "$BOOT_DIR/golden.pcrs.json"
lab_python - "$BOOT_DIR/golden.pcrs.json" > "$BOOT_DIR/life.policy.json" <<'PY'
import json, sys
pcrs = json.load(open(sys.argv[1]))["pcrs"]["sha256"]
print(json.dumps({"version": 1, "comment": "lab: life.sh, the GCE Ubuntu 21.04 boot",
                  "pcrs": {"sha256": {str(i): pcrs[str(i)] for i in range(8)}},
                  "require_separators": True}, indent=1))
PY
boot_replay_eventlog m1 "$TESTDATA/eventlogs/$GOLDEN_LOG"
boot_pool life --policy "$BOOT_DIR/life.policy.json"
boot_enroll m1 "$HOST" life

# --- (a) first boot ---------------------------------------------------------------
echo "# (a) first boot: Ignition, then the shipped unit's command line"
lab_expect "$RC_OK" "$R_JOINED" "(a) the first boot joins (exit 0)" boot_machine m1 life
lab_check_shown "(a) $HOST is joined" state_is joined
lab_check_shown "(a) the agent ran the shipped unit's command line (--steps attest,config,csr --apply-root / ...)" \
  bash -c "paste -sd ' ' '$(lab_dir m1)/unit.argv' | grep -qF -- ' --steps attest,config,csr --apply-root / --apiserver https://api.lab:6443 --tcti '"
lab_check_shown "(a) the attested config was applied and stamped" \
  test -f "$(boot_root m1)/var/lib/rackgate-agent/config-applied"
lab_check_shown "(a) the run was reported (step=report, or a note on an appliance without reports)" \
  grep -Eq 'step=report machine=[0-9a-f]{16} (ok|note) ' "$(lab_dir m1)/agent.last"

# --- (b) two reboots ----------------------------------------------------------------
sum_first="$(pair_sum)"
for n in 1 2; do
  echo "# (b) reboot $n"
  before="$(reset_count)"
  power_cycle
  lab_expect "$RC_OK" "$R_CLIENT_KEPT" "(b) reboot $n: attests again and exits 0, keeping its client certificate" boot_unit m1
  lab_check_shown "(b) reboot $n: its serving certificate too" grep -Eq "$R_SERVING_KEPT" "$(lab_dir m1)/agent.last"
  lab_check_shown "(b) reboot $n: the attested config is not applied again" grep -Eq "$R_CONFIG_KEPT" "$(lab_dir m1)/agent.last"
  after="$(reset_count)"
  lab_check_shown "(b) reboot $n: resetCount went up ($before -> $after)" test "$after" -gt "$before"
  lab_check_shown "(b) reboot $n: the same certificates and keys, byte for byte" test "$(pair_sum)" == "$sum_first"
  lab_check_shown "(b) reboot $n: $HOST is still joined" state_is joined
done

# --- (c) renewal --------------------------------------------------------------------
echo "# (c) renewal: ${SHORT_VALIDITY}s certificates, the pool's renewal window open"
rg_stop
rg_config client_certificate_validity_seconds "$SHORT_VALIDITY"
rg_config serving_certificate_validity_seconds "$SHORT_VALIDITY"
if rg_start 2>"$LAB_DIR/short.err"; then
  lab_ok "(c) rackgated restarts with ${SHORT_VALIDITY}s certificate validity"
else
  lab_not_ok "(c) rackgated restarts with ${SHORT_VALIDITY}s certificate validity" "$(tail -n 5 "$RG_DIR/rackgated.log")"
  lab_finish
fi
echo "$RENEW_SETTINGS" > "$BOOT_DIR/life.settings.json"
lab_check_shown "(c) the pool's renewal window opens (settings $RENEW_SETTINGS)" \
  pool_update "$BOOT_DIR/life.policy.json" "$BOOT_DIR/life.settings.json"
client_serial="$(serial_of client)" server_serial="$(serial_of server)"
client_key="$(pubkey_of client)" server_key="$(pubkey_of server)"
renewed_before="$(audit_count certificate_renewed || echo 0)"
lab_expect "$RC_OK" "$R_CLIENT_RENEWED" "(c) the next run renews the client certificate (exit 0)" boot_unit m1
lab_check_shown "(c) and the serving certificate" grep -Eq "$R_SERVING_RENEWED" "$(lab_dir m1)/agent.last"
lab_check_shown "(c) a new client serial" test "$(serial_of client)" != "$client_serial"
lab_check_shown "(c) a new client key" test "$(pubkey_of client)" != "$client_key"
lab_check_shown "(c) a new serving serial and key" \
  test "$(serial_of server) $(pubkey_of server)" != "$server_serial $server_key"
lab_check_shown "(c) the renewed certificates verify against the cluster CA" \
  openssl verify -x509_strict -CAfile "$(PKI)/ca.crt" "$(PKI)/kubelet-client-current.pem" "$(PKI)/kubelet-server-current.pem"
lab_check_shown "(c) rackgatectl audit: two certificate_renewed rows more ($renewed_before before)" \
  test "$(audit_count certificate_renewed)" -eq "$((renewed_before + 2))"
lab_check_shown "(c) rackgatectl show: the last provisioning report (client_certificate_renewed)" \
  bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' show '$HOST' --json | grep -q client_certificate_renewed"
lab_check_shown "(c) $HOST is trusted" trust_is trusted

# --- (d) a PCR extended behind the policy's back ---------------------------------------
echo "# (d) PCR $POLICY_PCR extended behind the policy's back"
sum_before="$(pair_sum)"
lab_tpm m1 tpm2_pcrextend "$POLICY_PCR:sha256=$(printf 'rootkit' | openssl dgst -sha256 -r | cut -d' ' -f1)" >/dev/null
lab_expect "$RC_REFUSED" "$R_POLICY_REFUSED" \
  "(d) the next run is refused (eventlog_pcr_mismatch naming PCR $POLICY_PCR, exit 3): no token, no renewal" boot_unit m1
lab_check_shown "(d) the certificates on disk are kept" test "$(pair_sum)" == "$sum_before"
lab_check_shown "(d) $HOST is untrusted (rackgatectl show --json)" trust_is untrusted
lab_check_shown "(d) rackgatectl list shows it untrusted" bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' list | grep '$HOST' | grep -q untrusted"
lab_check_shown "(d) the webhook receiver got attestation_failed, its HMAC checked" received attestation_failed
lab_check_shown "(d) the webhook receiver got machine_untrusted, its HMAC checked" received machine_untrusted

# --- (e) fixed: a clean boot ------------------------------------------------------------
echo "# (e) a clean boot again (TPM reset, measured boot replayed): trusted again"
power_cycle
lab_expect "$RC_OK" "$R_CLIENT_RENEWED" "(e) the run after a clean boot attests and renews (exit 0)" boot_unit m1
lab_check_shown "(e) $HOST is trusted again" trust_is trusted
lab_check_shown "(e) the webhook receiver got machine_trusted, its HMAC checked" received machine_trusted
lab_check_shown "(e) and certificate_renewed" received certificate_renewed
lab_check_shown "(e) $HOST is joined" state_is joined

rg_stop
lab_finish
