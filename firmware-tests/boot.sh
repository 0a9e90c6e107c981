#!/usr/bin/env bash
# boot.sh — whole simulated machines boot through a real rackgated on
# loopback, no stand-ins: the real Ignition follows the pool's pointer
# config to the public config and writes it into the machine's root, then
# rackgate-agent on the machine's own swtpm attests, applies the attested
# config into that root and gets kubelet's client and serving certificates
# (boot-lib.sh). Scenarios, each reported as "(x) ...":
#   (a) a rack of 8 machines, imported from an inventory, boots in parallel
#       and joins (RSA and P-384 EKs, one TPM-resident kubelet key);
#   (b) an unenrolled machine waits (503) and joins once enrolled;
#   (c) a measured boot (a real event log replayed into the PCRs) against a
#       golden pool policy: it joins; one extra extend the log does not
#       record, or another OS's boot, is refused and named;
#   (d) a clone presenting a copied EK certificate and public area is
#       refused (activation_failed); the honest agent on a TPM carrying
#       another machine's EK certificate stops before it says anything;
#   (e) a revoked machine is refused (exit 3);
#   (f) a rebooted machine runs the shipped unit again: it re-attests
#       (resetCount up), keeps its config and certificates, exits 0; with
#       its disk wiped it does not join twice (client_cert_already_issued);
#   (g) a machine reset by the operator re-provisions and joins again with a
#       second client certificate.
# Every machine's agent runs the exact command line of the built
# rackgate-agent.service (boot-lib.sh, boot_unit).
# Usage: boot.sh RACKGATE_AGENT RACKGATED RACKGATECTL [RACKGATE_AGENT_UNIT]
set -euo pipefail

# Agent exit codes (agent/failure.h) and log lines (docs/agent.md).
RC_OK=0
RC_REFUSED=3
RC_TPM=5
R_WAITING='step=attest machine=[0-9a-f]{16} wait status=503 reason=machine_not_enrolled .*retry_in='
R_JOINED='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_TAMPERED='step=attest machine=[0-9a-f]{16} refused status=403 reason=eventlog_pcr_mismatch message="sha256 PCR 4 does not match the event log"'
R_OTHER_OS='refused status=403 reason=boot_policy_violation message=".*pcrs:pcr_mismatch'
R_REVOKED='step=attest machine=[0-9a-f]{16} refused status=403 reason=machine_revoked'
R_SECOND_JOIN='step=csr machine=[0-9a-f]{16} refused status=403 reason=client_cert_already_issued'
R_KEPT='step=csr machine=[0-9a-f]{16} ok certificate=client kept '
R_CONFIG_KEPT='step=config machine=[0-9a-f]{16} ok kept=.*/var/lib/rackgate-agent/config-applied state=joined'
R_NOT_ITS_CERT='step=attest machine=[0-9a-f]{16} tpm-failure reason=ek_template_mismatch'

# The measured boot: a real log, and the other OS that is not allowed.
GOLDEN_LOG=tpm2-tools_event-gce-ubuntu-2104-log.bin                     # GCE, Ubuntu 21.04
OTHER_LOG=go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin  # GCE, Fedora CoreOS 36
RACK=(r1 r2 r3 r4 r5 r6 r7 r8)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: boot.sh RACKGATE_AGENT RACKGATED RACKGATECTL}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
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
for log in "$GOLDEN_LOG" "$OTHER_LOG"; do
  [[ -r "$TESTDATA/eventlogs/$log" ]] || { echo "not ok - event log not found: $TESTDATA/eventlogs/$log"; echo "1..1"; exit 1; }
done
lab_init boot
rg_init "$RACKGATED" "$RACKGATECTL"
# Machines waiting for enrollment come back within seconds.
rg_config retry_after_seconds 1
lab_ca lab
boot_init "$AGENT" ${4:+"$4"}

TIMES=()
scenario_done() { TIMES+=("$1 $(lab_ms_since "$2") ms"); echo "# $1: $(lab_ms_since "$2") ms"; }
state_of() { rg_state "$1" 2>/dev/null || echo "?"; }
state_is() { local s; s="$(state_of "$1")"; [[ "$s" == "$2" ]] || { echo "$1 is $s, want $2"; return 1; }; }
agent_log() { cat "$(lab_dir "$1")/agent.last" 2>/dev/null; }
# status_names HOSTNAME REASON: `rackgatectl status` (the operator's view)
# lists a recent failure of HOSTNAME with REASON.
status_names() {
  rg_ctl status > "$LAB_DIR/status.txt"
  grep -Eq "^  .{21} $1 +$2\$" "$LAB_DIR/status.txt" || { cat "$LAB_DIR/status.txt"; return 1; }
}
# status_anonymous HOSTNAME REASON: `rackgatectl status` lists HOSTNAME under
# the refusals before proof of the TPM, latest reason REASON (docs/trust.md).
status_anonymous() {
  rg_ctl status > "$LAB_DIR/status.txt"
  sed -n '/^refused before proof of the TPM/,/^[^ ]/p' "$LAB_DIR/status.txt" |
    grep -Eq "^  .{21} $1 +[0-9]+  [^ ]+ +$2\$" || { cat "$LAB_DIR/status.txt"; return 1; }
}
# trust_of HOSTNAME: the machine's trust (trusted, untrusted, or empty).
trust_of() { rg_ctl show "$1" --json | lab_python -c 'import json,sys; print(json.load(sys.stdin).get("trust") or "")'; }
# public_only NAME: Ignition's public files are in the root and nothing the
# attested config or the csr step would have written.
public_only() {
  local R; R="$(boot_root "$1")"
  cmp -s "$R/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt" || { echo "no appliance CA from Ignition"; return 1; }
  local f
  for f in var/lib/kubelet/config.json etc/rackgate/identity var/lib/kubelet/kubeconfig var/lib/kubelet/pki; do
    [[ ! -e "$R/$f" ]] || { echo "/$f exists"; return 1; }
  done
}

# root_ok NAME HOSTNAME POOL: the machine's disk after a whole first boot.
# Ignition wrote the public part (and its preset for the agent's unit); the
# agent applied the attested part on top, and wrote kubelet's PKI.
root_ok() {
  local name="$1" host="$2" pool="$3" R ip ek pki
  R="$(boot_root "$name")"; ip="$(boot_ip "$name")"; pki="$R/var/lib/kubelet/pki"
  ek="$(rg_ctl show "$host" --json | boot_json - ek_hash)"
  [[ "$(cat "$R/etc/rackgate/pool")" == "$pool" ]] || { echo "/etc/rackgate/pool"; return 1; }
  [[ "$(cat "$R/etc/rackgate/appliance")" == "$(rg_url "")" ]] || { echo "/etc/rackgate/appliance"; return 1; }
  cmp -s "$R/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt" || { echo "/etc/rackgate/ca.pem"; return 1; }
  grep -qx 'enable rackgate-agent.service' "$R/etc/systemd/system-preset/20-ignition.preset" \
    || { echo "Ignition's preset for the agent"; return 1; }
  [[ "$(stat -c %a "$R/var/lib/kubelet/config.json")" == 600 ]] || { echo "pull secret mode"; return 1; }
  grep -q '"registry.lab"' "$R/var/lib/kubelet/config.json" || { echo "pull secret contents"; return 1; }
  [[ "$(cat "$R/etc/hostname")" == "$host" ]] || { echo "/etc/hostname: $(cat "$R/etc/hostname")"; return 1; }
  [[ "$(cat "$R/etc/rackgate/identity")" == "$host $ek $ip" ]] \
    || { echo "/etc/rackgate/identity: $(cat "$R/etc/rackgate/identity")"; return 1; }
  [[ "$(stat -c %a "$R/var/lib/rackgate")" == 700 ]] || { echo "/var/lib/rackgate mode"; return 1; }
  [[ "$(stat -c %a "$R/usr/local/bin/hello")" == 755 ]] || { echo "/usr/local/bin/hello mode"; return 1; }
  [[ "$(readlink "$R/etc/hello")" == /usr/local/bin/hello ]] || { echo "/etc/hello link"; return 1; }
  [[ "$(readlink "$R/etc/systemd/system/multi-user.target.wants/kubelet.service")" == /etc/systemd/system/kubelet.service ]] \
    || { echo "kubelet.service not enabled"; return 1; }
  cmp -s "$pki/ca.crt" "$RG_DIR/state/cluster-ca/ca.crt" || { echo "pki/ca.crt is not the cluster CA"; return 1; }
  openssl verify -x509_strict -purpose sslclient -CAfile "$pki/ca.crt" "$pki/kubelet-client-current.pem" || return 1
  openssl verify -x509_strict -purpose sslserver -CAfile "$pki/ca.crt" "$pki/kubelet-server-current.pem" || return 1
  [[ "$(openssl x509 -in "$pki/kubelet-client-current.pem" -noout -subject)" == "subject=O = system:nodes, CN = system:node:$host" ]] \
    || { echo "client subject"; return 1; }
  openssl x509 -in "$pki/kubelet-server-current.pem" -noout -ext subjectAltName | grep -q "DNS:$host, IP Address:$ip" \
    || { echo "serving SANs"; return 1; }
  grep -q "server: \"$BOOT_APISERVER\"" "$R/var/lib/kubelet/kubeconfig" || { echo "kubeconfig"; return 1; }
}

joined_ok() { state_is "$2" joined && root_ok "$@"; }
# agent_ok RC NAME ERE: the agent exited 0 and its log says ERE.
agent_ok() {
  if [[ "$1" != 0 ]] || ! grep -Eq -- "$3" "$(lab_dir "$2")/agent.log"; then
    tail -n 4 "$(lab_dir "$2")/agent.log"; return 1
  fi
}
not_known() { ! rg_ctl show "$1" >/dev/null 2>&1; }
# status_reasons HOSTNAME RULE:REASON: `status --json` lists a failure of
# HOSTNAME with that policy rule among its reasons.
status_reasons() {
  rg_ctl status --json | lab_python -c 'import json, sys
fs = json.load(sys.stdin)["recent_failures"]
sys.exit(0 if any(f["hostname"] == sys.argv[1] and sys.argv[2] in f["reasons"] for f in fs) else 1)' "$1" "$2"
}
client_serial() {
  openssl x509 -in "$(boot_root "$1")/var/lib/kubelet/pki/kubelet-client-current.pem" -noout -serial | cut -d= -f2 | tr A-F a-f
}
# tpms_clean NAME...: nothing left loaded (swtpm has 3 slots, no resource manager).
tpms_clean() {
  local m
  for m in "$@"; do
    [[ -z "$(lab_tpm "$m" tpm2_getcap handles-transient)$(lab_tpm "$m" tpm2_getcap handles-loaded-session)" ]] || { echo "$m"; return 1; }
  done
}
# none_of ITEM...: true when there is none; prints them otherwise.
none_of() { (( $# == 0 )) || { printf '%s\n' "$@"; return 1; }; }

T_ALL=$(date +%s%N)
t=$(date +%s%N)
boot_new_machines 10.0.0 "${RACK[@]}" late gold tamper otheros clone
scenario_done "manufacture 13 swtpm machines (parallel)" "$t"
rg_trust lab
rg_start
# The cluster CA that signs kubelet certificates (offline; rackgated loads
# it when the first CSR comes).
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
boot_pool rack
"$RACKGATECTL" eventlog replay "$TESTDATA/eventlogs/$GOLDEN_LOG" --json > "$BOOT_DIR/golden.pcrs.json"
# The golden policy: the firmware, boot loader and Secure Boot state of the
# known-good GCE boot (sha256 PCRs 0-7), every separator where it belongs.
lab_python - "$BOOT_DIR/golden.pcrs.json" > "$BOOT_DIR/golden.policy.json" <<'PY'
import json, sys
pcrs = json.load(open(sys.argv[1]))["pcrs"]["sha256"]
print(json.dumps({"version": 1, "comment": "lab: the GCE Ubuntu 21.04 boot",
                  "pcrs": {"sha256": {str(i): pcrs[str(i)] for i in range(8)}},
                  "require_separators": True}, indent=1))
PY
boot_pool measured --policy "$BOOT_DIR/golden.policy.json"

# --- (a) a rack of 8 -----------------------------------------------------------
echo "# (a) a rack of 8 machines joins"
t=$(date +%s%N)
{
  echo "hostname,pool,ek_certificate,addresses"
  for i in 1 2 3 4 5 6 8; do boot_inventory_row "r$i" "node-0$i" rack; done
  boot_inventory_row r7 node-07 rack ecc384   # this vendor ships the P-384 EK's certificate
} > "$BOOT_DIR/rack.csv"
lab_check_shown "(a) the rack's inventory is imported (8 machines, all or nothing)" rg_ctl import "$BOOT_DIR/rack.csv"
declare -A EXTRA=([r7]="--ek-alg ecc" [r8]="--tpm-key")
pids=()
for m in "${RACK[@]}"; do
  # shellcheck disable=SC2086  # EXTRA holds whole flags
  boot_machine "$m" rack ${EXTRA[$m]:-} >/dev/null 2>&1 & pids+=($!)
done
bad=()
for i in "${!RACK[@]}"; do
  rc=0; wait "${pids[$i]}" || rc=$?
  (( rc == RC_OK )) || bad+=("${RACK[$i]}: exit $rc $( (( rc == 100 )) && tail -n 3 "$(lab_dir "${RACK[$i]}")/ignition.log"; agent_log "${RACK[$i]}" | tail -n 2)")
done
scenario_done "(a) 8 machines boot in parallel (Ignition + agent)" "$t"
lab_check_shown "(a) 8 machines booted in parallel: Ignition and every agent step succeeded" none_of "${bad[@]}"
for i in "${!RACK[@]}"; do
  m="${RACK[$i]}"; host="node-0$((i + 1))"
  lab_check_shown "(a) $m is $host, joined; its root holds the public and attested files and kubelet's PKI" \
    joined_ok "$m" "$host" rack
done
lab_check_shown "(a) the P-384 machine attested with its P-384 EK" grep -Eq 'step=attest .* ek=ecc-p384 ak=ecc ' "$(lab_dir r7)/agent.log"
rg_ctl certs --json > "$LAB_DIR/certs.json"
cert_facts() {  # the certificates of the rack: "host kind tpm_resident" per line
  lab_python - "$LAB_DIR/certs.json" <<'PY'
import json, sys
for c in sorted(json.load(open(sys.argv[1]))["certificates"], key=lambda c: (c["hostname"], c["kind"])):
    print(c["hostname"], c["kind"], str(c["tpm_resident"]).lower())
PY
}
lab_check_shown "(a) rackgatectl certs: a client and a serving certificate per machine, 16" \
  test "$(cert_facts | grep -c '^node-0[1-8] ')" == 16
lab_check_shown "(a) node-08's client key is TPM-resident (--tpm-key), the others' are not" \
  test "$(cert_facts | grep ' client true$')" == "node-08 client true"
lab_check_shown "(a) node-08's certificate carries the key the agent left in the TPM" \
  test "$(openssl x509 -in "$(boot_root r8)/var/lib/kubelet/pki/kubelet-client-current.pem" -noout -pubkey)" \
    == "$(tpm2_print -t TPM2B_PUBLIC -f pem "$(boot_root r8)/var/lib/kubelet/pki/kubelet-client-tpm.pub")"

# --- (b) waiting for the operator ---------------------------------------------
echo "# (b) an unenrolled machine waits, and joins once enrolled"
t=$(date +%s%N)
boot_machine late rack >/dev/null 2>&1 & late_pid=$!
lab_check_shown "(b) Ignition ran and the agent waits: 503 machine_not_enrolled" \
  boot_wait_for "$(lab_dir late)/agent.last" "$R_WAITING" 30
lab_check_shown "(b) it is not a machine the appliance knows" not_known node-late
boot_enroll late node-late rack
rc=0; wait "$late_pid" || rc=$?
lab_check_shown "(b) once the operator enrolled it, the same agent run joined (exit $rc)" agent_ok "$rc" late "$R_JOINED"
lab_check_shown "(b) node-late is joined" state_is node-late joined
scenario_done "(b) wait for enrollment" "$t"

# --- (c) measured boot against a golden policy --------------------------------
echo "# (c) measured boot: the golden boot joins; a tampered one and another OS are refused and named"
t=$(date +%s%N)
boot_replay_eventlog gold "$TESTDATA/eventlogs/$GOLDEN_LOG"
boot_replay_eventlog tamper "$TESTDATA/eventlogs/$GOLDEN_LOG"
# After the logged boot, one more measurement into PCR 4 (boot applications)
# that the log does not record: a boot loader nobody logged.
lab_tpm tamper tpm2_pcrextend \
  "4:sha1=$(printf 'bootkit' | openssl dgst -sha1 -r | cut -d' ' -f1),sha256=$(printf 'bootkit' | openssl dgst -sha256 -r | cut -d' ' -f1)" >/dev/null
# A different, complete and honestly logged boot: its log replays, its PCRs
# are not the golden ones.
boot_replay_eventlog otheros "$TESTDATA/eventlogs/$OTHER_LOG"
for m in gold tamper otheros; do boot_enroll "$m" "node-$m" measured; done
rc=0; boot_machine gold measured >/dev/null 2>&1 || rc=$?
lab_check_shown "(c) the golden boot joins (exit $rc)" agent_ok "$rc" gold "$R_JOINED"
lab_check_shown "(c) with its event log sent and the policy's PCRs quoted" \
  grep -Eq 'step=attest .* pcrs=sha256:0,1,2,3,4,5,6,7 eventlog=[0-9]+B ' "$(lab_dir gold)/agent.log"
lab_check_shown "(c) node-gold is joined" state_is node-gold joined
lab_expect "$RC_REFUSED" "$R_TAMPERED" "(c) an extra PCR 4 extend the log does not record: refused, eventlog_pcr_mismatch naming sha256 PCR 4" \
  boot_machine tamper measured
lab_check_shown "(c) rackgatectl status names node-tamper: eventlog_pcr_mismatch" status_names node-tamper eventlog_pcr_mismatch
lab_check_shown "(c) node-tamper stays enrolled" state_is node-tamper enrolled
lab_check_shown "(c) its disk has the public config only: no secret, no kubelet credentials" public_only tamper
lab_expect "$RC_REFUSED" "$R_OTHER_OS" "(c) another OS's boot (its own log replays): refused, boot_policy_violation pcrs:pcr_mismatch" \
  boot_machine otheros measured
lab_check_shown "(c) rackgatectl status names node-otheros: boot_policy_violation" status_names node-otheros boot_policy_violation
lab_check_shown "(c) the status report lists the broken rule (pcrs:pcr_mismatch)" status_reasons node-otheros pcrs:pcr_mismatch
lab_check_shown "(c) node-otheros stays enrolled" state_is node-otheros enrolled
scenario_done "(c) measured boot" "$t"

# --- (d) a cloned identity ------------------------------------------------------
echo "# (d) a cloned identity is refused"
t=$(date +%s%N)
CL="$(lab_dir clone)"
# The attacker copies node-01's EK certificate and EK public area (both
# public) and answers the challenge from its own TPM with an AK of its own,
# with tpm2-tools (appliance.sh's reference client): the honest agent would
# never present them (below). Only node-01's TPM can activate the credential.
lab_ek_rsa r1
lab_ek_rsa clone
lab_ak clone rsa ecdsa "$CL/ak"
cp "$(lab_dir r1)/ek-rsa.der" "$(lab_dir r1)/ek-rsa.pub" "$CL/"
st="$(attest clone rsa "$CL/ak")"
reason="$(rg_wire get "$CL/ev.json" error.reason 2>/dev/null || rg_wire get "$CL/ch.json" error.reason 2>/dev/null || echo '?')"
lab_check_shown "(d) a clone with node-01's EK certificate and public area: refused, activation_failed ($st $reason)" \
  test "$st $reason" == "403 activation_failed"
lab_check_shown "(d) rackgatectl status names node-01 under refusals before proof of the TPM: activation_failed" \
  status_anonymous node-01 activation_failed
lab_check_shown "(d) node-01 itself stays joined" state_is node-01 joined
lab_check_shown "(d) ... and trusted: a stranger cannot move its trust ($(trust_of node-01))" \
  test "$(trust_of node-01)" == trusted
# The clone's NV now carries node-01's certificate where its own was (as a
# copied TPM identity would): the agent creates the EK the certificate is
# for, finds another key, and stops before it sends anything.
lab_tpm clone tpm2_nvundefine -C p "$LAB_NV_EK_RSA2048" >/dev/null
lab_tpm clone tpm2_nvdefine "$LAB_NV_EK_RSA2048" -C p -s "$(stat -c %s "$CL/ek-rsa.der")" \
  -a 'ppwrite|ppread|ownerread|authread|platformcreate|no_da|writedefine' >/dev/null
lab_tpm clone tpm2_nvwrite "$LAB_NV_EK_RSA2048" -C p -i "$CL/ek-rsa.der" >/dev/null
lab_expect "$RC_TPM" "$R_NOT_ITS_CERT" "(d) the agent on a TPM carrying another machine's EK certificate stops (exit 5)" \
  boot_machine clone rack
clone_id="$(grep -Eo 'machine=[0-9a-f]{16}' "$CL/agent.log" | tail -n 1 | cut -d= -f2)"
lab_check_shown "(d) ... before the appliance heard of it (its EK ${clone_id:-?} is not in rackgated's log)" \
  bash -c "[ -n '$clone_id' ] && ! grep -q 'ek=$clone_id' '$RG_DIR/rackgated.log'"
scenario_done "(d) cloned identity" "$t"

# --- (e) revoked ----------------------------------------------------------------
echo "# (e) a revoked machine is refused"
t=$(date +%s%N)
rg_ctl revoke node-02 --reason "lab: RMA 4711" >/dev/null
boot_reboot r2
lab_expect "$RC_REFUSED" "$R_REVOKED" "(e) revoked node-02 boots again: Ignition runs, the agent is refused (exit 3, machine_revoked)" \
  boot_machine r2 rack
lab_check_shown "(e) its fresh disk has the public config only" public_only r2
lab_check_shown "(e) node-02 stays revoked" state_is node-02 revoked
scenario_done "(e) revoked" "$t"

# --- (f) reboot -------------------------------------------------------------------
echo "# (f) a rebooted machine re-attests, keeps what it has and exits 0"
t=$(date +%s%N)
pki="$(boot_root r3)/var/lib/kubelet/pki"
before="$(rg_ctl show node-03 --json | boot_json - last_attestation.reset_count)"
client_before="$(cat "$pki/kubelet-client-current.pem")"
server_before="$(cat "$pki/kubelet-server-current.pem")"
boot_reboot r3
lab_expect "$RC_OK" "$R_KEPT" \
  "(f) node-03 after a TPM reset: the shipped unit's command line attests again and exits 0" boot_unit r3
after="$(rg_ctl show node-03 --json | boot_json - last_attestation.reset_count)"
lab_check_shown "(f) its reset count went up ($before -> $after)" test "$after" -gt "$before"
lab_check_shown "(f) the attested config is not applied again (the stamp)" grep -Eq "$R_CONFIG_KEPT" "$(lab_dir r3)/agent.last"
lab_check_shown "(f) it keeps its client certificate, byte for byte" test "$(cat "$pki/kubelet-client-current.pem")" == "$client_before"
lab_check_shown "(f) and its serving certificate" test "$(cat "$pki/kubelet-server-current.pem")" == "$server_before"
lab_check_shown "(f) node-03 is joined, its disk complete" joined_ok r3 node-03 rack
# A wiped disk: no certificates left. The approver's "no Node exists yet"
# rule: a second client certificate needs an operator's reset.
mv "$pki" "$pki.saved"
boot_reboot r3
lab_expect "$RC_REFUSED" "$R_SECOND_JOIN" \
  "(f) with its certificates wiped, a new client CSR is refused (client_cert_already_issued, exit 3)" boot_unit r3
rm -rf "$pki"; mv "$pki.saved" "$pki"
lab_check_shown "(f) node-03 is still joined" state_is node-03 joined
scenario_done "(f) reboot" "$t"

# --- (g) reset by the operator ----------------------------------------------------
echo "# (g) a machine reset by the operator re-provisions and joins again"
t=$(date +%s%N)
first_serial="$(client_serial r4)"
rg_ctl reset node-04 --reason "lab: reinstall" >/dev/null
lab_check_shown "(g) rackgatectl reset: node-04 is enrolled again" state_is node-04 enrolled
boot_reboot r4
lab_expect "$RC_OK" "$R_JOINED" "(g) node-04 reinstalls: Ignition on a blank disk, the agent's every step" boot_machine r4 rack
lab_check_shown "(g) node-04 is joined again, its disk complete" joined_ok r4 node-04 rack
rg_ctl certs --hostname node-04 --json > "$LAB_DIR/certs4.json"
second_serial="$(client_serial r4)"
clients="$(lab_python - "$LAB_DIR/certs4.json" <<'PY'
import json, sys
print(" ".join(sorted(c["serial"] for c in json.load(open(sys.argv[1]))["certificates"] if c["kind"] == "client")))
PY
)"
lab_check_shown "(g) rackgatectl certs: two client certificates for node-04, the first and the new one" \
  test "$clients" == "$(printf '%s\n' "$first_serial" "$second_serial" | sort | tr '\n' ' ' | sed 's/ $//')"
lab_check_shown "(g) the new one differs from the first" test "$first_serial" != "$second_serial"
scenario_done "(g) reset and rejoin" "$t"

echo "# rackgatectl list:"
rg_ctl list | sed 's/^/#   /'
lab_check_shown "no provisioning token in rackgated's log" bash -c "! grep -qF -f <(cat '$BOOT_DIR'/*.token) '$RG_DIR/rackgated.log'"
lab_check_shown "no transient object or session left in any rack machine's TPM" tpms_clean "${RACK[@]}"
rg_stop
echo "# times: ${TIMES[*]/%/;}"
echo "# boot.sh total: $(lab_ms_since "$T_ALL") ms"
lab_finish
