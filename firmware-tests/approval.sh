#!/usr/bin/env bash
# approval.sh — an operator in the loop, with the real rackgate-agent on
# swtpm machines against a real rackgated on loopback (docs/csr.md, "Manual
# approval"; docs/operations.md, "Discovery"):
#  (a) a pool whose client CSRs wait for an operator: the agent's CSR waits
#      (503 csr_awaiting_approval, the agent keeps asking), `rackgatectl csr
#      list` shows it, `csr approve ID` releases it and the agent ends with
#      its certificate; a second machine's CSR is denied with a reason, and
#      its agent ends refused (exit 3) with csr_denied and that reason;
#  (b) discovery: an unknown EK with a trusted chain is recorded pending, the
#      agent waits, `rackgatectl approve pending-… --hostname node-x --pool P
#      --address InternalIP=…` names, moves and addresses it, and the agent
#      joins as system:node:node-x.
# Usage: approval.sh RACKGATE_AGENT RACKGATED RACKGATECTL
set -euo pipefail

RC_OK=0
RC_REFUSED=3

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: approval.sh RACKGATE_AGENT RACKGATED RACKGATECTL}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=boot-lib.sh
source "$HERE/boot-lib.sh"

lab_skip_unless_tools
lab_init approval
rg_init "$RACKGATED" "$RACKGATECTL"
boot_init "$AGENT"
lab_ca lab
# Short waits: every wait below should take a second or two.
rg_config retry_after_seconds 1
rg_config discovery true
rg_config discovery_pool '"default"'

lab_machine a1 lab   # (a) approved
lab_machine a2 lab   # (a) denied
lab_machine d1 lab   # (b) discovered
A1="$(lab_dir a1)"; A2="$(lab_dir a2)"
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null

AGENT_URL="$(rg_url "")"
AGENT_CA="$RG_DIR/state/ca/ca.crt"
S="$LAB_DIR/nodes"
mkdir -p "$S"
state_is() { test "$(rg_state "$1" 2>/dev/null)" == "$2"; }
count_of() { grep -Ec -- "$1" "$2" || true; }
# csr_field N FIELD: FIELD of the Nth waiting CSR (`csr list --json`).
csr_field() {
  rg_ctl csr list --json | lab_python -c 'import json, sys
cs = json.load(sys.stdin)["csrs"]
print(cs[int(sys.argv[1])][sys.argv[2]] if len(cs) > int(sys.argv[1]) else "")' "$1" "$2"
}
# audit_count HOSTNAME ACTION: that machine's audit rows with ACTION.
audit_count() {
  rg_ctl audit --hostname "$1" --limit 1000 --json | lab_python -c 'import json, sys
print(sum(1 for e in json.load(sys.stdin)["entries"] if e["action"] == sys.argv[1]))' "$2"
}
# agent_bg MACHINE NAME: the agent's csr step in the background (it attests
# first), logging to $S/NAME.err; sets AGENT_PID.
agent_bg() {
  mkdir -p "$S/$2"
  "$AGENT" --tcti "$(lab_tcti "$1")" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 60)" \
    --steps csr --kubelet-dir "$S/$2/pki" --kubeconfig "$S/$2/kubeconfig" --apiserver https://api.lab:6443 \
    </dev/null 2>"$S/$2.err" {LAB_STDOUT}>&- {LAB_STDERR}>&- &
  AGENT_PID=$!
  echo "$AGENT_PID" >> "$LAB_DIR/pids"
}
R_CSR_WAIT='step=csr machine=[0-9a-f]{16} wait status=503 reason=csr_awaiting_approval .*retry_in='
R_CSR_OK='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_PENDING='step=attest machine=[0-9a-f]{16} wait status=503 reason=machine_pending .*retry_in='

# --- (a) manual approval --------------------------------------------------------

echo '{"csr_approval": {"client": "manual", "serving": "auto"}}' > "$S/manual.json"
rg_ctl pool put default --settings "$S/manual.json" >/dev/null
rg_ctl enroll --hostname node-a1 --pool default --ek-cert "$A1/ek-rsa.der" --address InternalIP=10.0.0.21 >/dev/null
rg_ctl enroll --hostname node-a2 --pool default --ek-cert "$A2/ek-rsa.der" --address InternalIP=10.0.0.22 >/dev/null

agent_bg a1 a1
a1_pid=$AGENT_PID
lab_check "manual pool: the client CSR waits (503 csr_awaiting_approval)" boot_wait_for "$S/a1.err" "$R_CSR_WAIT" 30
# Let it ask again at least once with the same key.
asked_twice() { [[ "$(count_of "$R_CSR_WAIT" "$S/a1.err")" -ge 2 ]]; }
lab_check "the agent keeps asking (re-attests and resubmits)" lab_wait 10 asked_twice
lab_check "csr list shows one waiting CSR, node-a1's client CSR" \
  test "$(csr_field 0 hostname) $(csr_field 0 kind) $(csr_field 1 hostname)" == "node-a1 client "
lab_check "csr list (table) names it with its key hash prefix" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' csr list | grep -Eq '^[0-9]+ +agent +node-a1 +client +[0-9a-f]{16} '"
lab_check "asking again found the same request: one csr_waiting audit row" test "$(audit_count node-a1 csr_waiting)" == 1
lab_check "node-a1 is not joined while its CSR waits" state_is node-a1 attested
A1_ID="$(csr_field 0 id)"
lab_expect 0 "" "rackgatectl csr approve $A1_ID" rg_ctl csr approve "$A1_ID" --reason "lab: checked"
rc=0; wait "$a1_pid" || rc=$?
if [[ "$rc" == "$RC_OK" ]] && grep -Eq "$R_CSR_OK" "$S/a1.err"; then
  lab_ok "approved: the agent gets its certificate and ends with exit 0"
else
  lab_not_ok "approved: the agent ends with exit $rc" "$(tail -n 5 "$S/a1.err")"
fi
lab_check "node-a1 is joined" state_is node-a1 joined
lab_check "its client certificate is written, CN=system:node:node-a1" \
  test "$(openssl x509 -in "$S/a1/pki/kubelet-client-current.pem" -noout -subject)" \
    == "subject=O = system:nodes, CN = system:node:node-a1"
lab_check "csr_approved and certificate_issued audited" \
  test "$(audit_count node-a1 csr_approved) $(audit_count node-a1 certificate_issued)" == "1 2"
lab_check "nothing waits any more" test -z "$(csr_field 0 id)"

agent_bg a2 a2
a2_pid=$AGENT_PID
lab_check "second machine: its CSR waits too" boot_wait_for "$S/a2.err" "$R_CSR_WAIT" 30
A2_ID="$(csr_field 0 id)"
lab_expect_refused "csr deny without --reason is refused" rg_ctl csr deny "$A2_ID"
lab_expect 0 "" "rackgatectl csr deny $A2_ID --reason ..." rg_ctl csr deny "$A2_ID" --reason "not in the rack plan"
rc=0; wait "$a2_pid" || rc=$?
lab_check "denied: the agent ends refused (exit $rc)" test "$rc" == "$RC_REFUSED"
lab_check "... with csr_denied and the operator's reason" \
  grep -Eq 'step=csr .*refused status=403 reason=csr_denied .*not in the rack plan' "$S/a2.err"
lab_check "csr_denied audited; no certificate for node-a2" \
  test "$(audit_count node-a2 csr_denied) $(audit_count node-a2 certificate_issued)" == "1 0"
lab_check "csr list --all shows both decisions" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' csr list --all | grep -q 'denied: not in the rack plan'"
lab_expect 1 "state_conflict" "a denied CSR cannot be approved afterwards" rg_ctl csr approve "$A2_ID"

# --- (b) discovery --------------------------------------------------------------

echo '{}' > "$S/auto.json"
rg_ctl pool put default --settings "$S/auto.json" >/dev/null
echo '{}' > "$S/rack.json"
rg_ctl pool put rack-1 --settings "$S/rack.json" --token-required no >/dev/null
agent_bg d1 d1
d1_pid=$AGENT_PID
lab_check "unknown EK with a trusted chain: the agent waits (503 machine_pending)" \
  boot_wait_for "$S/d1.err" "$R_PENDING" 30
PENDING="$(rg_ctl list --state pending --json | lab_python -c 'import json, sys
d = json.load(sys.stdin); ms = d["machines"] if isinstance(d, dict) else d
print(ms[0]["hostname"] if ms else "")')"
lab_check "recorded pending as pending-<hash> ($PENDING)" bash -c "[[ '$PENDING' =~ ^pending-[0-9a-f]+$ ]]"
lab_expect 1 "hostname_taken.*node-a1" "approve as a hostname another machine has: refused, naming it" \
  rg_ctl approve "$PENDING" --hostname node-a1 --pool rack-1 --address InternalIP=10.0.0.31
lab_check "... and nothing changed" state_is "$PENDING" pending
lab_expect 0 "" "rackgatectl approve $PENDING --hostname node-x --pool rack-1 --address InternalIP=10.0.0.31" \
  rg_ctl approve "$PENDING" --hostname node-x --pool rack-1 --address InternalIP=10.0.0.31 --reason "lab: rack 1"
rc=0; wait "$d1_pid" || rc=$?
if [[ "$rc" == "$RC_OK" ]] && grep -Eq "$R_CSR_OK" "$S/d1.err"; then
  lab_ok "the agent goes on and joins (exit 0)"
else
  lab_not_ok "the agent goes on: exit $rc" "$(tail -n 5 "$S/d1.err")"
fi
lab_check "node-x is joined, in pool rack-1, with its address" \
  test "$(rg_ctl show node-x --json | lab_python -c 'import json, sys
m = json.load(sys.stdin); print(m["state"], m["pool"], [a["value"] for a in m["addresses"]])')" \
    == "joined rack-1 ['10.0.0.31']"
lab_check "the client certificate's subject is CN=system:node:node-x" \
  test "$(openssl x509 -in "$S/d1/pki/kubelet-client-current.pem" -noout -subject)" \
    == "subject=O = system:nodes, CN = system:node:node-x"
# approve_rows: node-x's approve audit rows, one line each: OLD NEW.
approve_rows() {
  rg_ctl audit --hostname node-x --limit 100 --json | lab_python -c 'import json, sys
for e in json.load(sys.stdin)["entries"]:
    if e["action"] == "approve":
        print(e["detail"]["old_hostname"], e["detail"]["hostname"])'
}
lab_check "one approve audit row, with the old and the new name" test "$(approve_rows)" == "$PENDING node-x"
lab_check_fails "the pending name is gone" rg_ctl show "$PENDING"

lab_finish
