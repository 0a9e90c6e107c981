#!/usr/bin/env bash
# approver.sh — approver mode (docs/kubernetes.md) against a real Kubernetes
# 1.20 control plane (k8s-lib.sh: etcd, kube-apiserver, kube-controller-
# manager's csrsigning), a real rackgated watching it with the approver's
# RBAC (rbac-approver.yaml), the real rackgate-agent on swtpm machines and
# the real kubelet:
#  (a) the real kubelet's TLS bootstrap: the agent attests and registers the
#      kubelet's key; the kubelet's own bootstrap CSR (bootstrap token) is
#      approved by rackgate, issued by kube-controller-manager, and the
#      kubelet writes kubelet-client-current.pem with that key;
#  (b) never approved: a name that never attested, an attested name with a
#      key nobody attested, SANs that are not enrolled, a machine that is
#      untrusted after a bad boot; a name rackgate does not know is left
#      pending for another approver;
#  (c) the node's own serving and rotation CSRs (the calls the kubelet's
#      certificate manager makes, as the node) approved while it attests;
#  (d) rackgated restarted mid-watch and the API server restarted: nothing
#      missed, nothing approved twice; 500 pending CSRs with bounded memory;
#  (e) issue 40: a decision is written to the object (uid) it was made for
#      and never to a CSR re-created under its name; `csr approve` of a
#      reused name names the uid; the agent waits only on its own CSR; a
#      reset ends the old owner's rotation until the new owner joined.
# Usage: approver.sh RACKGATE_AGENT RACKGATED RACKGATECTL KUBE_CLIENT_PROBE
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: approver.sh RACKGATE_AGENT RACKGATED RACKGATECTL}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
PROBE="$(realpath "${4:?usage: approver.sh RACKGATE_AGENT RACKGATED RACKGATECTL KUBE_CLIENT_PROBE}")"
# shellcheck source=../firmware-tests/lab.sh
source "$HERE/../firmware-tests/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=../firmware-tests/boot-lib.sh
source "$HERE/../firmware-tests/boot-lib.sh"
# shellcheck source=k8s-lib.sh
source "$HERE/k8s-lib.sh"
TESTDATA="${RACKGATE_TESTDATA_DIR:-$HERE/../testdata}"

lab_skip_unless_tools
k8s_lab_bin || lab_skip "the Kubernetes binaries are not built (script/k8s-lab build)"
lab_init k8s-approver
T0=$SECONDS
if ! k8s_lab_start "$LAB_DIR/k8s"; then
  lab_not_ok "the Kubernetes lab starts" "$(tail -n 20 "$LAB_DIR"/k8s/logs/*.log 2>/dev/null | sed 's/^/#   /')"
  lab_finish
fi
# k8s_lab_start took the EXIT trap: the swtpm lab's cleanup runs after it.
K8S_ON_EXIT='lab_cleanup_inner "$rc"'  # k8s_lab_exit's rc (bash scopes it dynamically)
lab_ok "the Kubernetes lab starts ($K8S_START_MS ms: $K8S_START_PHASES)"

rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
rg_config retry_after_seconds 1
rg_config kubernetes "{\"kubeconfig\": \"$K8S_DIR/approver.kubeconfig\"}"
for m in m1 m2 m3 m4 m5 m6 m7; do lab_machine "$m" lab; done
rg_trust lab
rg_start

N="$LAB_DIR/nodes"
mkdir -p "$N"
# The machines' pool: approver mode. node-4's pool also has a boot policy
# (PCR 4 trusted on first use, the event log checked against the quote), and
# its swtpm a real firmware event log replayed into its PCRs, so that a PCR 4
# extended behind the appliance's back is a bad boot.
echo '{"kubelet_certificates": "approver"}' > "$N/settings.json"
echo '{"version": 1, "tofu": {"sha256": [4]}}' > "$N/policy.json"
rg_ctl pool put workers --settings "$N/settings.json" --token-required no >/dev/null
rg_ctl pool put guarded --settings "$N/settings.json" --policy "$N/policy.json" --token-required no >/dev/null
echo '{"kubelet_certificates": "approver", "csr_approval": {"client": "manual"}}' > "$N/manual-join.json"
rg_ctl pool put manual-join --settings "$N/manual-join.json" --token-required no >/dev/null
for i in 1 2 3 4 5 6 7; do
  pool=workers; [[ "$i" == 4 ]] && pool=guarded; [[ "$i" == 7 ]] && pool=manual-join
  rg_ctl enroll --hostname "node-$i" --pool "$pool" --ek-cert "$(lab_dir "m$i")/ek-rsa.der" \
    --address "InternalIP=10.0.0.1$i" --address "Hostname=node-$i" >/dev/null
done
boot_replay_eventlog m4 "$TESTDATA/eventlogs/tpm2-tools_event-gce-ubuntu-2104-log.bin"

# agent MACHINE [ARGS...]: the agent's csr step (it attests first) into
# $N/MACHINE/pki; its stderr in $N/MACHINE.err; returns its exit code.
agent() {
  local m="$1" rc=0 log=""
  shift
  [[ -s "$(lab_dir "$m")/eventlog" ]] && log="$(cat "$(lab_dir "$m")/eventlog")"
  "$AGENT" --tcti "$(lab_tcti "$m")" --url "$(rg_url "")" --ca "$RG_DIR/state/ca/ca.crt" --eventlog "$log" \
    --max-wait "$(lab_seconds 30)" --steps csr --kubelet-dir "$N/$m/pki" --kubeconfig "$N/$m/kubeconfig" "$@" \
    </dev/null 2>"$N/$m.err" {LAB_STDOUT}>&- {LAB_STDERR}>&- || rc=$?
  cat "$N/$m.err" >&2
  return "$rc"
}
BOOT="$K8S_DIR/bootstrap.kubeconfig"
CLIENT="$K8S_SIGNER_CLIENT_KUBELET"
SERVING="$K8S_SIGNER_SERVING"
reason_of() { k8s_kubectl get csr "$1" -o jsonpath='{.status.conditions[*].reason}'; }
has_certificate() { [[ -n "$(k8s_kubectl get csr "$1" -o jsonpath='{.status.certificate}')" ]]; }
# decided NAME Approved|Denied REASON: within the lab's wait.
decided() {
  k8s_wait_csr_condition "$1" "$2" "$(lab_seconds 60)" && [[ "$(reason_of "$1")" == "$3" ]] ||
    { echo "# $1: conditions '$(k8s_csr_conditions "$1")' reasons '$(reason_of "$1")'" >&2; return 1; }
}
pubkey() { openssl pkey -in "$1" -pubout 2>/dev/null | openssl dgst -sha256 -r | cut -d' ' -f1; }
audit_count() {
  rg_ctl audit --hostname "$1" --limit 1000 --json | lab_python -c 'import json, sys
print(sum(1 for e in json.load(sys.stdin)["entries"] if e["action"] == sys.argv[1]))' "$2"
}
# node_kubeconfig NODE CERT KEY: a kubeconfig of the node's client certificate.
node_kubeconfig() {
  local out="$N/$1.kubeconfig"
  KUBECONFIG="$out" kubectl config set-cluster lab --server="$(k8s_kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')" \
    --certificate-authority="$K8S_DIR/pki/ca.crt" --embed-certs >/dev/null
  KUBECONFIG="$out" kubectl config set-credentials node --client-certificate="$2" --client-key="$3" --embed-certs >/dev/null
  KUBECONFIG="$out" kubectl config set-context lab --cluster=lab --user=node >/dev/null
  KUBECONFIG="$out" kubectl config use-context lab >/dev/null
  echo "$out"
}

# --- (a) the real kubelet's TLS bootstrap ---------------------------------------------
lab_expect 0 "kubelet_key=registered" "(a) the agent attests and registers the kubelet's key" agent m1
lab_check "(a) the key is where the kubelet's bootstrap takes it (kubelet-client.key.tmp, 0600)" \
  test "$(stat -c %a "$N/m1/pki/kubelet-client.key.tmp" 2>/dev/null)" == 600
cp "$N/m1/pki/kubelet-client.key.tmp" "$N/m1.registered.key"
lab_check "(a) node-1 is not joined before its kubelet's CSR" test "$(rg_state node-1)" == attested
k8s_kubelet_start node-1 "$N/m1"
lab_check "(a) the kubelet's certificate file appears (approved by rackgate, issued by kube-controller-manager)" \
  lab_wait "$(lab_seconds 120)" test -e "$N/m1/pki/kubelet-client-current.pem"
lab_check "(a) with the key the agent registered" \
  test "$(pubkey "$N/m1/pki/kubelet-client-current.pem")" == "$(pubkey "$N/m1.registered.key")"
KUBELET_CSR="$(k8s_kubectl get csr -o jsonpath='{range .items[*]}{.metadata.name} {.spec.username}{"\n"}{end}' |
  awk '$2 ~ /^system:bootstrap:/ { print $1 }' | head -n 1)"
lab_check "(a) the kubelet's CSR: Approved with rackgate's reason" \
  test "$(k8s_csr_conditions "$KUBELET_CSR") $(reason_of "$KUBELET_CSR")" == "Approved RackgateAttestedJoin"
lab_check "(a) the certificate verifies against the cluster's signing CA" \
  openssl verify -CAfile "$K8S_DIR/pki/signing-ca.crt" "$N/m1/pki/kubelet-client-current.pem"
lab_check "(a) node-1 is joined" test "$(rg_state node-1)" == joined
lab_check "(a) rackgatectl csr list --all: source kubernetes, the kubelet's CSR approved" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' csr list --all | grep -E '^$KUBELET_CSR +kubernetes +node-1 +client/join .*approved: RackgateAttestedJoin'"
lab_check "(a) audited: kubelet_key_registered, kubernetes_csr_approved" \
  test "$(audit_count node-1 kubelet_key_registered) $(audit_count node-1 kubernetes_csr_approved)" == "1 1"
k8s_kubelet_stop

# --- (a) with --rotate-certificates ---------------------------------------------------------
# A kubelet with --rotate-certificates makes a new in-memory key for its
# bootstrap CSR and never reads kubelet-client.key.tmp (README.md): the agent
# files the CSR of the key it registered, with the bootstrap kubeconfig, and
# the kubelet starts with the issued certificate.
csrs_of() { k8s_kubectl get csr -o jsonpath='{range .items[*]}{.spec.username} {.spec.request}{"\n"}{end}' | wc -l; }
lab_expect 0 "kubelet_csr=node-csr-rackgate-[0-9a-f]{32} issued" \
  "(a) --bootstrap-kubeconfig: the agent files the kubelet's CSR, rackgate approves, the cluster issues" \
  agent m6 --bootstrap-kubeconfig "$BOOT"
lab_check "(a) ... the certificate (CN=system:node:node-6) and the kubelet's kubeconfig are written" \
  test "$(openssl x509 -in "$N/m6/pki/kubelet-client-current.pem" -noout -subject 2>/dev/null) $(grep -c kubelet-client-current.pem "$N/m6/kubeconfig")" \
    == "subject=O = system:nodes, CN = system:node:node-6 2"
lab_check "(a) ... node-6 is joined" test "$(rg_state node-6)" == joined
lab_expect 0 "kubelet_key=kept" "(a) the agent again: the kubelet's certificate is kept, nothing filed" \
  agent m6 --bootstrap-kubeconfig "$BOOT"
before="$(csrs_of)"
k8s_kubelet_start node-6 "$N/m6" --rotate-certificates
lab_check "(a) the real kubelet with --rotate-certificates takes the certificate and stops at the missing runtime" \
  lab_wait "$(lab_seconds 120)" k8s_log_grep kubelet-node-6 'runtime'
k8s_kubelet_stop
lab_check "(a) ... without a bootstrap CSR of its own ($before CSRs before, $(csrs_of) after)" test "$(csrs_of)" == "$before"

# A pool whose new nodes wait for an operator: the key registration waits
# (503 csr_awaiting_approval, the agent asks again with the same key) until
# `rackgatectl csr approve ID`, and the kubelet's CSR of that key is approved.
agent m7 --max-wait "$(lab_seconds 120)" >/dev/null 2>&1 &
M7_PID=$!
echo "$M7_PID" >> "$LAB_DIR/pids"
agent_waits() { rg_ctl csr list | grep -Eq '^[0-9]+ +agent +node-7 +client '; }
lab_check "(a) manual pool: node-7's key registration waits for an operator (csr list)" \
  lab_wait "$(lab_seconds 60)" agent_waits
M7_ID="$(rg_ctl csr list | awk '$3 == "node-7" { print $1 }' | head -n 1)"
lab_expect 0 "" "(a) rackgatectl csr approve $M7_ID" rg_ctl csr approve "$M7_ID" --reason "lab: rack plan checked"
rc=0; wait "$M7_PID" || rc=$?
lab_check "(a) ... the agent registers that same key and ends with exit 0 (exit $rc)" \
  bash -c "[[ $rc == 0 ]] && grep -q 'kubelet_key=registered' '$N/m7.err'"
C="$(k8s_node_csr node-7 "$N/m7/pki/kubelet-client.key.tmp" "$BOOT" "$CLIENT")"
lab_check_shown "(a) ... and the kubelet's CSR of it is approved" decided "$C" Approved RackgateAttestedJoin

# --- (b) never approved -----------------------------------------------------------------
# A name rackgate does not know: left alone (another approver may own it).
STRANGER="$(k8s_node_csr stranger "$N/stranger.key" "$BOOT" "$CLIENT")"
# node-2 is enrolled and never attested.
C="$(k8s_node_csr node-2 "$N/n2.key" "$BOOT" "$CLIENT")"
lab_check_shown "(b) a name that never attested: Denied key_not_attested" decided "$C" Denied key_not_attested
lab_check_fails "(b) ... and nothing issued" has_certificate "$C"
lab_check "(b) a name rackgate does not know stays pending (no condition)" test -z "$(k8s_csr_conditions "$STRANGER")"
lab_expect 0 "kubelet_key=registered" "(b) node-3 attests and registers its kubelet's key" agent m3
C="$(k8s_node_csr node-3 "$N/n3-other.key" "$BOOT" "$CLIENT")"
lab_check_shown "(b) an attested name with a key nobody attested: Denied key_not_attested" decided "$C" Denied key_not_attested
lab_check "(b) node-3 is not joined" test "$(rg_state node-3)" == attested

# --- (c) serving and rotation while the machine attests ---------------------------------
lab_expect 0 "kubelet_key=registered" "(c) node-4 attests and registers its kubelet's key" agent m4
C="$(k8s_node_csr node-4 "$N/m4/pki/kubelet-client.key.tmp" "$BOOT" "$CLIENT")"
lab_check_shown "(c) node-4's bootstrap CSR with its registered key: Approved" decided "$C" Approved RackgateAttestedJoin
k8s_wait_csr_issued "$C" "$(lab_seconds 60)"
k8s_csr_certificate "$C" > "$N/n4-client.crt"
NODE4="$(node_kubeconfig node-4 "$N/n4-client.crt" "$N/m4/pki/kubelet-client.key.tmp")"
C="$(k8s_node_csr node-4 "$N/n4-serving.key" "$NODE4" "$SERVING" DNS:node-4 IP:10.0.0.14)"
lab_check_shown "(c) a serving CSR for its enrolled names, as the node: Approved" decided "$C" Approved RackgateAttestedServing
lab_check "(c) ... and issued by kube-controller-manager" k8s_wait_csr_issued "$C" "$(lab_seconds 60)"
C="$(k8s_node_csr node-4 "$N/n4-serving2.key" "$NODE4" "$SERVING" DNS:node-4 IP:10.9.9.9)"
lab_check_shown "(c) a serving CSR with a SAN that is not enrolled: Denied csr_san_not_enrolled" \
  decided "$C" Denied csr_san_not_enrolled
C="$(k8s_node_csr node-4 "$N/n4-rotated.key" "$NODE4" "$CLIENT")"
lab_check_shown "(c) the node's rotation of its client certificate (a new key): Approved" \
  decided "$C" Approved RackgateAttestedRotation
# A bad boot: PCR 4 extended behind the appliance's back.
lab_tpm m4 tpm2_pcrextend "4:sha256=$(printf 'rootkit' | openssl dgst -sha256 -r | cut -d' ' -f1)" >/dev/null
lab_expect 3 "" "(c) after a bad boot node-4's attestation is refused" agent m4
lab_check "(c) node-4 is untrusted" bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' show node-4 --json | grep -q '\"trust\": *\"untrusted\"'"
C="$(k8s_node_csr node-4 "$N/n4-rotated2.key" "$NODE4" "$CLIENT")"
lab_check_shown "(c) the next rotation of the untrusted machine: Denied machine_untrusted" \
  decided "$C" Denied machine_untrusted

# A pool whose serving certificates wait for an operator: the CSR waits,
# `rackgatectl csr approve NAME` decides, rackgated writes it at its next
# resync (30 s).
echo '{"kubelet_certificates": "approver", "csr_approval": {"serving": "manual"}}' > "$N/manual.json"
rg_ctl pool put workers --settings "$N/manual.json" --token-required no >/dev/null
NODE1="$(node_kubeconfig node-1 "$N/m1/pki/kubelet-client-current.pem" "$N/m1/pki/kubelet-client-current.pem")"
C="$(k8s_node_csr node-1 "$N/n1-serving.key" "$NODE1" "$SERVING" DNS:node-1 IP:10.0.0.11)"
waiting() { rg_ctl csr list | grep -Eq "^$1 +kubernetes +node-1 +serving/serving .*waiting"; }
lab_check "(c) manual pool: node-1's serving CSR waits for an operator (csr list)" \
  lab_wait "$(lab_seconds 60)" waiting "$C"
lab_check "(c) ... and stays pending in the API server" test -z "$(k8s_csr_conditions "$C")"
lab_expect 0 "" "(c) rackgatectl csr approve $C" rg_ctl csr approve "$C" --reason "lab: checked"
lab_check_shown "(c) ... approved in the API server at the next resync" decided "$C" Approved RackgateAttestedServing
rg_ctl pool put workers --settings "$N/settings.json" --token-required no >/dev/null

# --- (e) issue 40: decisions bound to their object; a reset ends the past ----------------
# named NAME NODE KEY KUBECONFIG SIGNER [SAN...]: k8s_node_csr under a fixed name.
named() { K8S_CSR_NAME="$1" k8s_node_csr "${@:2}"; }
# A decision held while its CSR is deleted and re-created under the same name
# (a name rackgate does not know, so nothing else decides it): the probe
# writes as rackgated does (kube::WriteDecision), bound to the uid it read.
named swap-1 stranger "$N/stranger.key" "$BOOT" "$CLIENT" >/dev/null
"$PROBE" --kubeconfig "$K8S_DIR/approver.kubeconfig" --hold "$N/swap.go" approve swap-1 >"$N/swap.out" 2>&1 &
PROBE_PID=$!
echo "$PROBE_PID" >> "$LAB_DIR/pids"
lab_wait "$(lab_seconds 30)" grep -q '"read"' "$N/swap.out" || true
OLD_UID="$(k8s_kubectl get csr swap-1 -o jsonpath='{.metadata.uid}')"
k8s_kubectl delete csr swap-1 >/dev/null
named swap-1 stranger "$N/swap-other.key" "$BOOT" "$CLIENT" >/dev/null
NEW_UID="$(k8s_kubectl get csr swap-1 -o jsonpath='{.metadata.uid}')"
touch "$N/swap.go"
rc=0; wait "$PROBE_PID" || rc=$?
lab_check "(e) an approval held while swap-1 was deleted and re-created: the API server answers 409, nothing written to the new object (exit $rc: $(tail -n 1 "$N/swap.out"))" \
  bash -c "[[ $rc == 1 && '$OLD_UID' != '$NEW_UID' ]] && grep -q '\"error\":\"kube_csr_replaced\"' '$N/swap.out'"
lab_check "(e) ... the re-created swap-1 has no condition" test -z "$(k8s_csr_conditions swap-1)"

# csr approve NAME of a name reused in the API server: two waiting objects.
rg_ctl pool put workers --settings "$N/manual.json" --token-required no >/dev/null
waiting_n() { [[ "$(rg_ctl csr list | grep -Ec "^$1 +kubernetes +node-1 +serving/serving .*waiting")" == "$2" ]]; }
named srv-reused node-1 "$N/n1-reused.key" "$NODE1" "$SERVING" DNS:node-1 IP:10.0.0.11 >/dev/null
lab_wait "$(lab_seconds 60)" waiting_n srv-reused 1 || true
k8s_kubectl delete csr srv-reused >/dev/null
named srv-reused node-1 "$N/n1-reused.key" "$NODE1" "$SERVING" DNS:node-1 IP:10.0.0.11 >/dev/null
lab_check "(e) srv-reused deleted and re-created: two waiting records of one name" \
  lab_wait "$(lab_seconds 60)" waiting_n srv-reused 2
lab_expect 1 "csr_name_ambiguous.*--uid" "(e) rackgatectl csr approve srv-reused: refused, the uids and --uid named" \
  rg_ctl csr approve srv-reused
REUSED_UID="$(k8s_kubectl get csr srv-reused -o jsonpath='{.metadata.uid}')"
lab_expect 0 "" "(e) rackgatectl csr approve srv-reused --uid (the API server's object)" \
  rg_ctl csr approve srv-reused --uid "$REUSED_UID"
reused_states() {
  rg_ctl csr list --all --json | lab_python -c 'import json, sys
print(" ".join(sorted(("api" if c.get("uid") == sys.argv[1] else "gone") + ":" + c["state"]
                      for c in json.load(sys.stdin)["csrs"] if c.get("name") == "srv-reused")))' "$REUSED_UID"
}
lab_check "(e) ... that uid approved, the deleted one still waits ($(reused_states))" \
  test "$(reused_states)" == "api:approved gone:waiting"
rg_ctl pool put workers --settings "$N/settings.json" --token-required no >/dev/null

# The agent's CSR name is predictable: one filed under it with another key
# is not waited on.
mkdir -p "$N/m2/pki"
openssl ecparam -name prime256v1 -genkey -noout -out "$N/m2/pki/kubelet-client.key.tmp"
chmod 600 "$N/m2/pki/kubelet-client.key.tmp"
SQUAT="node-csr-rackgate-$(openssl pkey -in "$N/m2/pki/kubelet-client.key.tmp" -pubout -outform DER | openssl dgst -sha256 -r | cut -c1-32)"
named "$SQUAT" node-2 "$N/squatter.key" "$BOOT" "$CLIENT" >/dev/null
lab_expect 3 "kubelet_csr_not_ours message=\"kubectl delete csr $SQUAT, then run the agent again" \
  "(e) a CSR of another key under the agent's name: refused kubelet_csr_not_ours, the fix named" \
  agent m2 --bootstrap-kubeconfig "$BOOT"
k8s_kubectl delete csr "$SQUAT" >/dev/null
lab_expect 0 "kubelet_csr=$SQUAT issued" "(e) ... deleted: the agent files its own, approved and issued" \
  agent m2 --bootstrap-kubeconfig "$BOOT"

# A reset ends the old owner's certificates: node-1's kubelet certificate
# (from (a)) still authenticates system:node:node-1, but its rotation is
# denied until the new owner has joined in the new epoch.
rg_ctl reset node-1 --reason "lab: re-provisioned for a new owner" >/dev/null
lab_check "(e) the reset denied node-1's waiting CSRs (machine_reset)" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' csr list --all | grep -Eq '^srv-reused .*denied: machine_reset'"
C="$(k8s_node_csr node-1 "$N/n1-old-rot1.key" "$NODE1" "$CLIENT")"
lab_check_shown "(e) after the reset, a rotation with the old owner's certificate: Denied machine_not_joined" \
  decided "$C" Denied machine_not_joined
mv "$N/m1/pki" "$N/m1/pki.old-owner"
mkdir -p "$N/m1/pki"
lab_expect 0 "kubelet_key=registered" "(e) the new owner attests and registers its kubelet's key" agent m1
lab_check "(e) ... node-1 attested (not joined)" test "$(rg_state node-1)" == attested
C="$(k8s_node_csr node-1 "$N/n1-old-rot2.key" "$NODE1" "$CLIENT")"
lab_check_shown "(e) the old owner's rotation after the new owner attested: Denied machine_not_joined" \
  decided "$C" Denied machine_not_joined
C="$(k8s_node_csr node-1 "$N/n1-old-srv.key" "$NODE1" "$SERVING" DNS:node-1 IP:10.0.0.11)"
lab_check_shown "(e) ... and its serving CSR: Denied machine_not_joined" decided "$C" Denied machine_not_joined
C="$(k8s_node_csr node-1 "$N/m1/pki/kubelet-client.key.tmp" "$BOOT" "$CLIENT")"
lab_check_shown "(e) the new owner's join with its registered key: Approved" decided "$C" Approved RackgateAttestedJoin

# --- (d) restarts and a flood -------------------------------------------------------------
lab_expect 0 "kubelet_key=registered" "(d) node-5 attests and registers its kubelet's key" agent m5
rg_stop
C5="$(k8s_node_csr node-5 "$N/m5/pki/kubelet-client.key.tmp" "$BOOT" "$CLIENT")"
rg_start
lab_check_shown "(d) a CSR filed while rackgated was down is approved once it is back" \
  decided "$C5" Approved RackgateAttestedJoin
rg_stop
rg_start
# A marker decided after the restart: the relist has seen node-5's CSR again.
C="$(k8s_node_csr node-3 "$N/n3-marker1.key" "$BOOT" "$CLIENT")"
decided "$C" Denied key_not_attested || true
lab_check "(d) after another restart: node-5's CSR approved once (one condition, one audit row)" \
  test "$(k8s_csr_conditions "$C5") $(audit_count node-5 kubernetes_csr_approved)" == "Approved 1"
k8s_lab_restart_apiserver
C="$(k8s_node_csr node-3 "$N/n3-marker2.key" "$BOOT" "$CLIENT")"
lab_check_shown "(d) the API server restarted: the watch is back (a new CSR decided)" decided "$C" Denied key_not_attested
k8s_lab_restart_apiserver --kill
C="$(k8s_node_csr node-3 "$N/n3-marker3.key" "$BOOT" "$CLIENT")"
lab_check_shown "(d) the API server killed and started: the watch is back again" decided "$C" Denied key_not_attested
lab_check "(d) nothing approved twice: node-5 still one approval" test "$(audit_count node-5 kubernetes_csr_approved)" == 1

# 500 CSRs nobody decides (names rackgate does not know), in one request.
lab_python - "$N/flood.yaml" "$N/stranger.key" <<'PY'
import base64, subprocess, sys
out, key = sys.argv[1:]
items = []
for i in range(500):
    pem = subprocess.run(["openssl", "req", "-new", "-key", key, "-subj", f"/O=system:nodes/CN=system:node:flood-{i}"],
                         check=True, capture_output=True).stdout
    items.append(f"""- apiVersion: certificates.k8s.io/v1
  kind: CertificateSigningRequest
  metadata: {{name: flood-{i}}}
  spec:
    signerName: kubernetes.io/kube-apiserver-client-kubelet
    request: {base64.b64encode(pem).decode()}
    usages: [digital signature, key encipherment, client auth]""")
open(out, "w").write("apiVersion: v1\nkind: List\nitems:\n" + "\n".join(items) + "\n")
PY
k8s_kubectl_as "$BOOT" create -f "$N/flood.yaml" >/dev/null
rg_stop
rg_start   # relists all 500 (pages of 100)
C="$(k8s_node_csr node-3 "$N/n3-marker4.key" "$BOOT" "$CLIENT")"
lab_check_shown "(d) 500 pending CSRs: rackgated lists them and still decides a new one" decided "$C" Denied key_not_attested
HWM_KB="$(awk '/^VmHWM/ { print $2 }' "/proc/$RG_PID/status")"
lab_check "(d) rackgated's peak memory through it: $((HWM_KB / 1024)) MiB (< 128 MiB)" test "$HWM_KB" -lt $((128 * 1024))
PENDING="$(k8s_kubectl get csr -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[*].type}{"\n"}{end}' |
  awk '$1 ~ /^flood-/ && NF == 1' | wc -l)"
lab_check "(d) the 500 are left pending (not rackgate's to decide): $PENDING" test "$PENDING" == 500
lab_check "(d) rackgated logged no error writing to the API server" \
  bash -c "! grep -q 'not written to the API server' '$RG_DIR/rackgated.log'"

echo "# approver lab: $((SECONDS - T0)) s"
lab_finish
