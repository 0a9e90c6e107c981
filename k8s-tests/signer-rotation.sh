#!/usr/bin/env bash
# signer-rotation.sh — the cluster CA's rotation in signer mode (issue 44;
# docs/operations.md, "Rotating the cluster CA") against the real
# kube-apiserver 1.20 of the k8s lab (k8s-lib.sh): a real rackgated signs
# kubelet client certificates for swtpm machines through the real agent
# (`--steps csr`), and the API server authenticates them with
# --client-ca-file = the lab's own client CAs + `rackgatectl ca bundle
# --cluster`. It shows, following the runbook's commands:
#  - the certificate of the old cluster CA is accepted with the bundle;
#  - after switch (and a reload) a renewal is issued under the next CA, the
#    agent's kubelet CA file is the bundle, and both certificates are
#    accepted;
#  - after retire and the API server restarted with the new-only bundle,
#    the old certificate is refused (401) and the new one accepted;
#  - each stage audited (kind cluster), a stage out of order refused.
# Usage: signer-rotation.sh RACKGATE_AGENT RACKGATED RACKGATECTL
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: signer-rotation.sh RACKGATE_AGENT RACKGATED RACKGATECTL"
AGENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
DOC="$HERE/../docs/operations.md"
# shellcheck source=../firmware-tests/lab.sh
source "$HERE/../firmware-tests/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=k8s-lib.sh
source "$HERE/k8s-lib.sh"

lab_skip_unless_tools
k8s_lab_bin || lab_skip "the Kubernetes binaries are not built (script/k8s-lab build)"
lab_init k8s-signer-rotation
T0=$SECONDS
if ! k8s_lab_start "$LAB_DIR/k8s"; then
  lab_not_ok "the Kubernetes lab starts" "$(tail -n 20 "$LAB_DIR"/k8s/logs/*.log 2>/dev/null | sed 's/^/#   /')"
  lab_finish
fi
K8S_ON_EXIT='lab_cleanup_inner "$rc"'
lab_ok "the Kubernetes lab starts ($K8S_START_MS ms)"

rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab
rg_config retry_after_seconds 1
for m in m1 m2; do lab_machine "$m" lab; done
rg_trust lab
STATE="$RG_DIR/state"
"$RACKGATECTL" ca generate --cluster --name "rackgate lab cluster CA 1" --state-dir "$STATE" >/dev/null
rg_start
N="$LAB_DIR/nodes"
mkdir -p "$N"
# Signer mode (the default), renewal due at once (renew_fraction 1).
echo '{"renew_fraction": 1.0}' > "$N/settings.json"
rg_ctl pool put workers --settings "$N/settings.json" --token-required no >/dev/null
for i in 1 2; do
  rg_ctl enroll --hostname "node-$i" --pool workers --ek-cert "$(lab_dir "m$i")/ek-rsa.der" >/dev/null
done

# agent MACHINE: the agent's csr step (it attests first) into $N/MACHINE/pki.
agent() {
  local m="$1" rc=0
  "$AGENT" --tcti "$(lab_tcti "$m")" --url "$(rg_url "")" --ca "$STATE/ca/ca.crt" --max-wait "$(lab_seconds 30)" \
    --steps csr --kubelet-dir "$N/$m/pki" --kubeconfig "$N/$m/kubeconfig" --apiserver "$K8S_API_URL" \
    </dev/null 2>"$N/$m.err" {LAB_STDOUT}>&- {LAB_STDERR}>&- || rc=$?
  cat "$N/$m.err" >&2
  return "$rc"
}
# runbook "WORDS" [ARG...]: `rackgatectl WORDS` as docs/operations.md's
# section 9 writes it, run here with ARGs and this lab's --state-dir: the
# test takes the runbook's steps, and fails when the runbook lost one.
runbook() {
  local words="$1"; shift
  # (grep without -q: an early exit would fail the pipeline with sed's SIGPIPE)
  if ! sed -n '/^## 9\. Rotating the cluster CA/,/^## 10\./p' "$DOC" | grep -F -- "rackgatectl $words" >/dev/null; then
    echo "# docs/operations.md section 9 lacks: rackgatectl $words" >&2
    return 1
  fi
  # shellcheck disable=SC2086 # (WORDS: words)
  "$RACKGATECTL" $words "$@" --state-dir "$STATE"
}
# reload_rackgated: `systemctl reload rackgated` here (SIGHUP); returns once
# rackgated logged that the cluster CA was reloaded (not refused).
reloads() { grep -c 'reload: cluster CA reloaded' "$RG_DIR/rackgated.log" || true; }
reloaded_since() { (( $(reloads) > $1 )); }
reload_rackgated() {
  local before; before="$(reloads)"
  kill -HUP "$RG_PID"
  lab_wait 20 reloaded_since "$before"
}
# The API server's --client-ca-file: the lab's own client CAs (admin,
# kube-controller-manager, the approver) and rackgate's cluster CA bundle;
# the API server restarted to read it (kill: no graceful wait).
apiserver_trusts() {
  cat "$K8S_DIR/pki/ca.crt" "$K8S_DIR/pki/signing-ca.crt" "$1" > "$K8S_DIR/pki/client-ca.crt.new"
  mv "$K8S_DIR/pki/client-ca.crt.new" "$K8S_DIR/pki/client-ca.crt"
  k8s_lab_restart_apiserver --kill
}
# http_code PEM: what the API server answers the node's client certificate
# (certificate and key in one file, as the agent writes it): 401 when it
# does not authenticate it; 403/404 when it does (a node may get its own
# Node, which does not exist here).
http_code() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$K8S_DIR/pki/ca.crt" --cert "$1" \
    "$K8S_API_URL/api/v1/nodes/node-1"
}
accepted() { local c; c="$(http_code "$1")"; echo "# $1: HTTP $c" >&2; [[ "$c" == 403 || "$c" == 404 ]]; }
refused() { local c; c="$(http_code "$1")"; echo "# $1: HTTP $c" >&2; [[ "$c" == 401 ]]; }
issuer_of() { openssl x509 -in "$1" -noout -issuer | sed 's/^issuer= *//'; }
status_shows() { rg_ctl status | grep -E -- "$1"; }
count_certs() { grep -c 'BEGIN CERTIFICATE' "$1"; }
audited() {
  rg_ctl audit --limit 100 --json | lab_python -c 'import json, sys
rows = [e for e in json.load(sys.stdin)["entries"] if e["action"] == sys.argv[1]]
assert len(rows) == 1 and rows[0]["detail"]["kind"] == "cluster", rows' "$1"
}

# --- before: the old CA, alone --------------------------------------------------------
lab_expect 0 "" "node-1 attests and gets its kubelet client certificate (signer mode)" agent m1
OLD="$N/old.pem"
cp "$(readlink -f "$N/m1/pki/kubelet-client-current.pem")" "$OLD"
lab_check_shown "it is issued by the old cluster CA" bash -c "[[ '$(issuer_of "$OLD")' == *'CA 1'* ]]"

# --- prepare --------------------------------------------------------------------------
lab_check_shown "prepare: a next cluster CA (--generate)" runbook "ca rotate --cluster prepare --generate"
lab_check_shown "status: prepared" bash -c "'$RACKGATECTL' ca rotate --cluster status --state-dir '$STATE' | grep -q 'rotation: prepared'"
lab_expect 1 "ca_rotation_in_progress" "a second prepare is refused (ca_rotation_in_progress)" \
  "$RACKGATECTL" ca rotate --cluster prepare --generate --state-dir "$STATE"
lab_expect 1 "ca_rotation_stage" "retire before switch is refused (ca_rotation_stage)" \
  "$RACKGATECTL" ca rotate --cluster retire --state-dir "$STATE"
runbook "ca bundle --cluster --out" "$N/bundle.pem"
lab_check "the bundle holds the current and the next CA" test "$(count_certs "$N/bundle.pem")" == 2
reload_rackgated
lab_check_shown "rackgatectl status shows the stage and both expiries" \
  status_shows 'cluster CA: rotation prepared, expires .*; next CA expires' 
apiserver_trusts "$N/bundle.pem"
lab_check_shown "kube-apiserver with the bundle accepts the old CA's certificate" accepted "$OLD"

# --- switch ---------------------------------------------------------------------------
lab_check_shown "switch" runbook "ca rotate --cluster switch"
reload_rackgated
lab_expect 0 "renewed=" "node-1 renews (renewal due)" agent m1
NEW="$N/new.pem"
cp "$(readlink -f "$N/m1/pki/kubelet-client-current.pem")" "$NEW"
lab_check_shown "the renewal is issued by the next CA" bash -c "[[ '$(issuer_of "$NEW")' != *'CA 1'* ]]"
lab_check "the kubelet's CA file the agent wrote is the bundle (2 CAs)" test "$(count_certs "$N/m1/pki/ca.crt")" == 2
lab_check_shown "the renewed certificate verifies against the bundle" openssl verify -CAfile "$N/bundle.pem" "$NEW"
lab_check_shown "kube-apiserver with the bundle accepts the next CA's certificate" accepted "$NEW"
lab_check_shown "... and still the old CA's" accepted "$OLD"
lab_expect 0 "" "node-2 joins under the next CA" agent m2
lab_check_shown "node-2's certificate is the next CA's" \
  bash -c "[[ '$(issuer_of "$(readlink -f "$N/m2/pki/kubelet-client-current.pem")")' != *'CA 1'* ]]"

# --- retire ---------------------------------------------------------------------------
lab_check_shown "retire" runbook "ca rotate --cluster retire"
reload_rackgated
runbook "ca bundle --cluster --out" "$N/bundle.pem"
lab_check "the bundle holds the new CA only" test "$(count_certs "$N/bundle.pem")" == 1
lab_check_shown "rackgatectl status: rotation none" status_shows 'cluster CA: rotation none, expires'
lab_check "the old CA is in retired/" bash -c "ls '$STATE'/cluster-ca/retired/*/ca.crt"
apiserver_trusts "$N/bundle.pem"
lab_check_shown "kube-apiserver restarted with the new-only bundle refuses the old certificate (401)" refused "$OLD"
lab_check_shown "... and accepts the new one" accepted "$NEW"
lab_expect 1 "ca_rotation_none" "retire again is refused (ca_rotation_none)" \
  "$RACKGATECTL" ca rotate --cluster retire --state-dir "$STATE"
for a in ca_rotation_prepared ca_rotation_switched ca_rotation_retired; do
  lab_check_shown "audited once: $a (kind cluster)" audited "$a"
done
lab_check_shown "the audit chain verifies" rg_ctl audit verify

echo "# signer rotation: $((SECONDS - T0)) s"
lab_finish
