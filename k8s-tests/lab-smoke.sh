#!/usr/bin/env bash
# lab-smoke.sh — the Kubernetes lab works (meson suite `k8s`; README.md):
# a real Kubernetes 1.20 control plane on 127.0.0.1 (k8s-lib.sh), a client
# CSR from the bootstrap token that nobody approves on their own, approval
# by hand, kube-controller-manager's certificate from the signing CA, the
# approver's RBAC (rbac-approver.yaml), a restart of the API server, and
# the real kubelet's TLS bootstrap with a manual approval standing in for
# rackgate: the kubelet asks with the key placed in its cert dir before it
# started and writes kubelet-client-current.pem.
#
#   bash k8s-tests/lab-smoke.sh               # TAP on stdout
#   K8S_KEEP=1 bash k8s-tests/lab-smoke.sh    # keep the lab's directory
#
# Skips (1..0 # SKIP) only when `script/k8s-lab bin` fails (not built).
# Runs as root for the kubelet (which touches nothing outside its
# directory but /var/lib/kubelet/device-plugins, removed again: README.md).
set -uo pipefail

# shellcheck source=k8s-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/k8s-lib.sh"

if ! k8s_lab_bin; then
  echo "1..0 # SKIP Kubernetes 1.20 not built (script/k8s-lab build)"
  exit 0
fi

# Every wait below is a bounded poll; this is the bound (seconds).
T="${K8S_LAB_TIMEOUT:-120}"
D="$(mktemp -d "${TMPDIR:-/tmp}/rackgate-k8s.smoke.XXXXXX")"
SMOKE_T0="$(k8s_now_ms)"

smoke_exit() {
  if [[ "${K8S_DONE:-0}" != 1 ]]; then
    k8s_not_ok "lab-smoke stopped before its checks finished"
    local f
    for f in "$D"/lab/logs/*.log; do
      [[ -s "$f" ]] || continue
      echo "# the end of $(basename "$f"):"
      # Not the goroutines a Go fatal error prints after its message.
      grep -vE '^([[:space:]]|goroutine |created by |$)|FLAG:' "$f" | tail -n 6 | cut -c1-300 | sed 's/^/#   /'
    done
  fi
  echo "# lab-smoke: $((K8S_TAP_N - K8S_TAP_FAILED)) passed, $K8S_TAP_FAILED failed; $(( ($(k8s_now_ms) - SMOKE_T0) / 1000 )) s"
  k8s_plan
  if [[ "${K8S_KEEP:-0}" == 1 ]]; then echo "# K8S_KEEP=1: kept $D" >&2; else rm -rf "$D"; fi
}
# shellcheck disable=SC2034 # (read by k8s-lib.sh)
K8S_ON_EXIT=smoke_exit
# Also before k8s_lab_start installs its trap.
trap 'K8S_ON_EXIT=""; smoke_exit' EXIT

lab="$D/lab"
pki="$lab/pki"

# ---- 1. the control plane
if ! k8s_lab_start "$lab"; then
  k8s_not_ok "the lab starts (etcd, kube-apiserver /readyz, kube-controller-manager /healthz)"
  exit 1
fi
k8s_ok "the lab starts: etcd, kube-apiserver /readyz, kube-controller-manager /healthz, RBAC in effect ($K8S_START_MS ms)"
echo "# kube-apiserver $K8S_API_URL, kubectl $(kubectl version --client 2>/dev/null | head -n1)"

v="$(k8s_kubectl get --raw /version 2>&1)"
if [[ "$v" == *'"gitVersion": "v1.20.'* ]]; then k8s_ok "the API server is Kubernetes 1.20"; else k8s_not_ok "the API server is Kubernetes 1.20" "$v"; fi

# No one but rackgate approves: csrapproving is not running, and no group
# holds the auto-approval roles.
kcm_controllers="$(grep -o 'Started "[a-z-]*"' "$lab/logs/kube-controller-manager.log" | sort -u | tr '\n' ' ')"
auto="$(k8s_kubectl get clusterrolebindings -o jsonpath='{range .items[*]}{.roleRef.name}{"\n"}{end}' |
        grep -c 'certificatesigningrequests:' || true)"
if [[ "$kcm_controllers" != *csrapproving* ]] && [[ "$auto" == 0 ]]; then
  k8s_ok "no auto-approval: kube-controller-manager runs only: ${kcm_controllers% }; no binding of the nodeclient roles"
else
  k8s_not_ok "no auto-approval" "started: $kcm_controllers; bindings of certificatesigningrequests roles: $auto"
fi

# ---- 2. who may do what
k8s_check "the bootstrap token may create CSRs" \
  k8s_can_i "$lab/bootstrap.kubeconfig" create certificates.k8s.io certificatesigningrequests
a="$lab/approver.kubeconfig"
if k8s_can_i "$a" approve certificates.k8s.io signers "$K8S_SIGNER_CLIENT_KUBELET" &&
   k8s_can_i "$a" approve certificates.k8s.io signers "$K8S_SIGNER_SERVING" &&
   k8s_can_i "$a" watch certificates.k8s.io certificatesigningrequests &&
   k8s_can_i "$a" update certificates.k8s.io certificatesigningrequests/approval &&
   ! k8s_can_i "$a" approve certificates.k8s.io signers kubernetes.io/kube-apiserver-client &&
   ! k8s_can_i "$a" sign certificates.k8s.io signers "$K8S_SIGNER_CLIENT_KUBELET" &&
   ! k8s_can_i "$a" update certificates.k8s.io certificatesigningrequests/status &&
   ! k8s_can_i "$a" create certificates.k8s.io certificatesigningrequests &&
   ! k8s_can_i "$a" delete certificates.k8s.io certificatesigningrequests; then
  k8s_ok "rackgate-approver (rbac-approver.yaml): watch, approve for the two kubelet signers only; no sign, status, create or delete"
else
  k8s_not_ok "rackgate-approver's permissions are rbac-approver.yaml's"
fi

# ---- 3. a client CSR as the kubelet's bootstrap would make it
mkdir -p "$D/keys"
csr_a="$(k8s_node_csr node-a "$D/keys/node-a.key" "$lab/bootstrap.kubeconfig" "$K8S_SIGNER_CLIENT_KUBELET" 2>&1)"
if [[ "$csr_a" =~ ^node-a-[a-z0-9]+$ ]]; then
  who="$(k8s_kubectl get csr "$csr_a" -o jsonpath='{.spec.username} {.spec.groups}')"
  if [[ "$who" == "system:bootstrap:$K8S_TOKEN_ID "*system:bootstrappers:rackgate* ]]; then
    k8s_ok "the bootstrapper creates a client CSR ($csr_a) as $who"
  else
    k8s_not_ok "the CSR's requester is the bootstrap token" "$who"
  fi
else
  k8s_not_ok "the bootstrapper creates a client CSR" "$csr_a"
  exit 1
fi

# It stays pending: a CSR made after it, approved by rackgate-approver, is
# issued (kube-controller-manager has seen both); the first has no condition.
csr_b="$(k8s_node_csr node-b "$D/keys/node-b.key" "$lab/bootstrap.kubeconfig" "$K8S_SIGNER_CLIENT_KUBELET" 2>&1)"
out="$(k8s_kubectl_as "$a" certificate approve "$csr_b" 2>&1)"
if k8s_wait_csr_issued "$csr_b" "$T"; then
  k8s_ok "rackgate-approver approves a later CSR ($csr_b) and kube-controller-manager issues it"
else
  k8s_not_ok "rackgate-approver approves a later CSR and kube-controller-manager issues it" "$out"
fi
state="$(k8s_kubectl get csr "$csr_a" -o jsonpath='[{.status.conditions}][{.status.certificate}]')"
if [[ "$state" == "[][]" ]]; then
  k8s_ok "$csr_a stays pending: no condition, no certificate, while a later one was issued"
else
  k8s_not_ok "$csr_a stays pending" "$state"
fi

# ---- 4. approved by hand, issued from the signing CA
out="$(k8s_kubectl certificate approve "$csr_a" 2>&1)"
if k8s_wait_csr_condition "$csr_a" Approved "$T" && k8s_wait_csr_issued "$csr_a" "$T"; then
  k8s_ok "kubectl certificate approve (admin): Approved, and kube-controller-manager issues the certificate"
else
  k8s_not_ok "approved and issued" "$out"
fi
k8s_csr_certificate "$csr_a" > "$D/keys/node-a.crt"
c="$D/keys/node-a.crt"
subject="$(openssl x509 -in "$c" -noout -subject -nameopt RFC2253 2>&1)"
if openssl verify -CAfile "$pki/signing-ca.crt" "$c" >/dev/null 2>&1 &&
   ! openssl verify -CAfile "$pki/ca.crt" "$c" >/dev/null 2>&1 &&
   [[ "$subject" == "subject=CN=system:node:node-a,O=system:nodes" ]] &&
   [[ "$(openssl x509 -in "$c" -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum)" == \
      "$(openssl pkey -in "$D/keys/node-a.key" -pubout -outform DER | sha256sum)" ]] &&
   openssl x509 -in "$c" -noout -ext extendedKeyUsage | grep 'TLS Web Client Authentication' >/dev/null; then
  k8s_ok "the certificate verifies against the signing CA (not the cluster CA): $subject, client auth, the CSR's key"
else
  k8s_not_ok "the certificate is the signing CA's, for node-a's key" "$subject"
fi

# A serving CSR with SANs, made with node-a's new client certificate (as a
# bootstrapped kubelet asks): the requester is the node itself.
cat > "$D/node-a.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "$K8S_API_URL", certificate-authority: "$pki/ca.crt"}
users:
- name: node-a
  user: {client-certificate: "$c", client-key: "$D/keys/node-a.key"}
contexts:
- name: node-a
  context: {cluster: lab, user: node-a}
current-context: node-a
EOF
csr_s="$(k8s_node_csr node-a "$D/keys/node-a-serving.key" "$D/node-a.kubeconfig" "$K8S_SIGNER_SERVING" DNS:node-a IP:10.0.0.11 2>&1)"
who="$(k8s_kubectl get csr "$csr_s" -o jsonpath='{.spec.username} {.spec.groups}' 2>&1)"
out="$(k8s_kubectl_as "$a" certificate approve "$csr_s" 2>&1)"
if [[ "$who" == "system:node:node-a "*system:nodes* ]] && k8s_wait_csr_issued "$csr_s" "$T" &&
   k8s_csr_certificate "$csr_s" > "$D/keys/node-a-serving.crt" &&
   openssl verify -CAfile "$pki/signing-ca.crt" "$D/keys/node-a-serving.crt" >/dev/null 2>&1 &&
   openssl x509 -in "$D/keys/node-a-serving.crt" -noout -ext subjectAltName | grep 'DNS:node-a, IP Address:10.0.0.11' >/dev/null; then
  k8s_ok "a kubelet-serving CSR from the node's own certificate ($who): approved by rackgate-approver, issued with its SANs"
else
  k8s_not_ok "a kubelet-serving CSR from the node's certificate" "$who / $out"
fi

# ---- 5. the API server restarts on the same data
# shellcheck disable=SC2119 # (no --kill: a graceful stop)
if k8s_lab_restart_apiserver && [[ -n "$(k8s_kubectl get csr "$csr_a" -o jsonpath='{.status.certificate}')" ]] &&
   k8s_can_i "$lab/bootstrap.kubeconfig" create certificates.k8s.io certificatesigningrequests; then
  k8s_ok "k8s_lab_restart_apiserver: ready again on port $K8S_API_PORT, the CSRs and the token kept"
else
  k8s_not_ok "k8s_lab_restart_apiserver"
fi

# ---- 6. the real kubelet's TLS bootstrap
# Its client key placed before it starts, where its bootstrap looks
# (kubelet-client.key.tmp; pkg/kubelet/certificate/bootstrap/bootstrap.go).
node=kubelet-1 nd="$D/$node"
mkdir -p "$nd/pki"
openssl ecparam -name prime256v1 -genkey -noout -out "$nd/pki/kubelet-client.key.tmp"
chmod 0600 "$nd/pki/kubelet-client.key.tmp"
placed="$(openssl pkey -in "$nd/pki/kubelet-client.key.tmp" -pubout -outform DER | sha256sum)"
mounts_before="$(mount | grep -cF "$D" || true)"
if [[ -e /var/lib/kubelet ]]; then vlk_before=yes; else vlk_before=no; fi
k8s_kubelet_start "$node" "$nd"
kubelet_csr() {
  k8s_kubectl get csr -o jsonpath='{range .items[*]}{.metadata.name} {.spec.request}{"\n"}{end}' |
    while read -r name req; do
      if printf '%s' "$req" | base64 -d | openssl req -noout -subject -nameopt RFC2253 2>/dev/null |
          grep -qx "subject=CN=system:node:$node,O=system:nodes"; then echo "$name"; fi
    done
}
kubelet_csr_seen() { [[ -n "$(kubelet_csr)" ]]; }
t0="$(k8s_now_ms)"
csr_k=""
k8s_wait "$T" kubelet_csr_seen && csr_k="$(kubelet_csr | head -n1)"
if [[ -n "$csr_k" ]]; then
  k8s_ok "the kubelet creates its client CSR $csr_k ($(( $(k8s_now_ms) - t0 )) ms after it started)"
else
  k8s_not_ok "the kubelet creates its client CSR" "$(k8s_log_last "kubelet-$node" | grep -v FLAG: | tail -n 8)"
  exit 1
fi
req_key="$(k8s_csr_request "$csr_k" | openssl req -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum)"
spec="$(k8s_kubectl get csr "$csr_k" -o jsonpath='{.spec.signerName} {.spec.username} {.spec.usages}')"
if [[ "$req_key" == "$placed" ]]; then
  k8s_ok "its CSR carries the pre-placed key ($spec)"
else
  k8s_not_ok "its CSR carries the pre-placed key" "$spec"
fi
if k8s_wait "$T" k8s_log_grep "kubelet-$node" 'Waiting for client certificate to be issued' &&
   [[ "$(k8s_kubectl get csr "$csr_k" -o jsonpath='[{.status.conditions}]')" == "[]" ]] &&
   k8s_pid_alive "$K8S_KUBELET_PID" && [[ ! -e "$nd/kubeconfig" ]]; then
  k8s_ok "the kubelet waits for its certificate (pending, alive, no kubeconfig yet)"
else
  k8s_not_ok "the kubelet waits for its certificate"
fi

# A kubelet restarted while it waits asks again with the same key, under the
# same (key-derived) CSR name: it finds its pending CSR and waits on it.
k8s_kubelet_stop
first_exit="$K8S_LAST_EXIT"
first_why="$(k8s_log_last "kubelet-$node" | grep -o 'failed to run Kubelet: .*' | head -n1)"
k8s_kubelet_start "$node" "$nd"
if k8s_wait "$T" k8s_log_grep "kubelet-$node" 'csr for this node is still valid' &&
   [[ "$(kubelet_csr)" == "$csr_k" ]] &&
   [[ "$(openssl pkey -in "$nd/pki/kubelet-client.key.tmp" -pubout -outform DER | sha256sum)" == "$placed" ]]; then
  k8s_ok "stopped (TERM) while waiting (exit status $first_exit: \"$first_why\") and started again, the kubelet reuses its pending CSR $csr_k (same key, no second CSR)"
else
  k8s_not_ok "a restarted kubelet reuses its pending CSR" "CSRs for $node: $(kubelet_csr | tr '\n' ' ')"
fi

# rackgate's part, by hand.
t0="$(k8s_now_ms)"
out="$(k8s_kubectl_as "$a" certificate approve "$csr_k" 2>&1)"
if k8s_wait "$T" test -s "$nd/pki/kubelet-client-current.pem"; then
  k8s_ok "approved (as rackgate-approver): the kubelet writes kubelet-client-current.pem ($(( $(k8s_now_ms) - t0 )) ms)"
else
  k8s_not_ok "the kubelet writes kubelet-client-current.pem" "$out"
fi
pem="$nd/pki/kubelet-client-current.pem"
if [[ "$(openssl pkey -in "$pem" -pubout -outform DER 2>/dev/null | sha256sum)" == "$placed" ]] &&
   [[ "$(openssl x509 -in "$pem" -noout -pubkey 2>/dev/null | openssl pkey -pubin -outform DER | sha256sum)" == "$placed" ]] &&
   openssl verify -CAfile "$pki/signing-ca.crt" "$pem" >/dev/null 2>&1 &&
   [[ ! -e "$nd/pki/kubelet-client.key.tmp" ]] &&
   k8s_wait "$T" grep -q "client-certificate: $pem" "$nd/kubeconfig"; then
  k8s_ok "kubelet-client-current.pem holds the pre-placed key and a certificate for it from the signing CA; the .tmp key is gone; the kubeconfig names the pem"
else
  k8s_not_ok "kubelet-client-current.pem holds the pre-placed key" "$(ls -l "$nd/pki" 2>&1)"
fi

# Without a container runtime the kubelet stops by itself after the
# bootstrap; it is stopped by its pid otherwise.
kpid="$K8S_KUBELET_PID"
if k8s_wait "$T" k8s_log_grep "kubelet-$node" 'failed to run Kubelet'; then
  why="$(k8s_log_last "kubelet-$node" | grep -o 'failed to run Kubelet: [^:]*: [^:]*' | head -n1)"
else
  why="(still running: stopped by pid)"
fi
k8s_kubelet_stop
why="$why, exit status ${K8S_LAST_EXIT:-unknown}"
# shellcheck disable=SC2009 # (the whole command line, every process)
left="$(ps -eo pid=,args= | grep -F -- "$nd/" | grep -v grep || true)"
mounts_after="$(mount | grep -cF "$D" || true)"
if ! k8s_pid_alive "$kpid" && [[ -z "$left" ]] && [[ "$mounts_before" == 0 && "$mounts_after" == 0 ]]; then
  k8s_ok "the kubelet is gone ($why); no process, no mount left"
else
  k8s_not_ok "the kubelet leaves nothing behind" "processes: $left; mounts: $mounts_after"
fi
# ---- 7. with --rotate-certificates the pre-placed key is not used: the
# certificate manager bootstraps in the background with a new in-memory
# key and a generated CSR name (client-go util/certificate), and the kubelet
# goes on starting (and, with no runtime, exits).
node=kubelet-2 nd="$D/$node"
mkdir -p "$nd/pki"
openssl ecparam -name prime256v1 -genkey -noout -out "$nd/pki/kubelet-client.key.tmp"
placed2="$(openssl pkey -in "$nd/pki/kubelet-client.key.tmp" -pubout -outform DER | sha256sum)"
tmp_sum="$(sha256sum < "$nd/pki/kubelet-client.key.tmp")"
k8s_kubelet_start "$node" "$nd" --rotate-certificates
csr_r=""
k8s_wait "$T" kubelet_csr_seen && csr_r="$(kubelet_csr | head -n1)"
if [[ -n "$csr_r" ]]; then
  req_key="$(k8s_csr_request "$csr_r" | openssl req -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum)"
  if [[ "$req_key" != "$placed2" && "$csr_r" == csr-* ]] &&
     [[ "$(sha256sum < "$nd/pki/kubelet-client.key.tmp")" == "$tmp_sum" ]]; then
    k8s_ok "with --rotate-certificates the kubelet's CSR ($csr_r) carries a new key, not the pre-placed one (left as it was)"
  else
    k8s_not_ok "with --rotate-certificates the kubelet ignores the pre-placed key" "csr $csr_r"
  fi
else
  k8s_not_ok "with --rotate-certificates the kubelet creates a CSR" "$(k8s_log_last "kubelet-$node" | grep -v FLAG: | tail -n 8)"
fi
k8s_kubelet_stop

if [[ "$vlk_before" == yes ]]; then
  k8s_ok "# SKIP /var/lib/kubelet existed before the kubelet started: not checked"
elif [[ ! -e /var/lib/kubelet ]]; then
  k8s_ok "nothing of the kubelet's left outside its directory (the /var/lib/kubelet/device-plugins it made is removed)"
else
  k8s_not_ok "nothing of the kubelet's left outside its directory" "$(find /var/lib/kubelet 2>&1 | head -n 5)"
fi

K8S_DONE=1
(( K8S_TAP_FAILED == 0 ))
