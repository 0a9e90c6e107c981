# shellcheck shell=bash disable=SC2034
# (SC2034: the K8S_* globals are for the scripts that source this.)
# k8s-lib.sh — the Kubernetes lab: a real Kubernetes 1.20 control plane
# (etcd, kube-apiserver, kube-controller-manager with only the csrsigning
# and csrcleaner controllers) on 127.0.0.1, for tests of rackgate's approver
# mode. Source it from bash; it needs `script/k8s-lab build` once per
# machine (kube-apiserver, kube-controller-manager, kubelet), etcd, kubectl,
# openssl and curl. See README.md.
#
#   k8s_lab_bin                          # K8S_BIN, or fail: the caller skips
#   k8s_ok / k8s_not_ok / k8s_check / k8s_plan   # numbered TAP, plan last
#   k8s_lab_start DIR                    # PKI, etcd, apiserver, KCM, RBAC, kubeconfigs
#   k8s_lab_stop                         # every process by pid (also the EXIT trap)
#   k8s_lab_restart_apiserver            # same flags, same data, same port
#   k8s_kubectl ARGS...                  # kubectl as admin (system:masters)
#   k8s_node_csr NODE KEYFILE KUBECONFIG SIGNER [SAN...]   # prints the CSR object's name
#   k8s_wait_csr_condition NAME Approved|Denied|Failed TIMEOUT
#   k8s_wait_csr_issued NAME TIMEOUT
#   k8s_csr_certificate NAME > FILE
#   k8s_kubelet_start NODE NODEDIR [KUBELET ARGS...]        # the real kubelet, TLS bootstrap
#   k8s_kubelet_stop
#
# What k8s_lab_start leaves in DIR:
#   pki/ca.{crt,key}           the cluster CA: the API server's serving cert, client certs
#   pki/signing-ca.{crt,key}   the cluster signing CA: kube-controller-manager's csrsigning
#   pki/client-ca.crt          both: the API server's --client-ca-file (a kubelet's
#                              client certificate comes from the signing CA)
#   pki/sa.{key,pub}           the service-account key pair
#   admin.kubeconfig           user rackgate-lab-admin, group system:masters
#   approver.kubeconfig        user rackgate-approver (k8s-tests/rbac-approver.yaml)
#   bootstrap.kubeconfig       a bootstrap token, groups system:bootstrappers and
#                              system:bootstrappers:rackgate
#   kcm.kubeconfig             user system:kube-controller-manager
#   logs/{etcd,kube-apiserver,kube-controller-manager,kubelet-NODE}.log
#   pids                       "NAME PID" per process started (k8s_lab_stop reads it)
# and sets K8S_DIR, K8S_API_URL, K8S_API_PORT, K8S_ETCD_URL, K8S_KCM_PORT,
# K8S_TOKEN_ID, K8S_TOKEN (id.secret), K8S_START_MS (the start's wall time)
# and K8S_START_PHASES ("pki=MS etcd=MS kube-apiserver=MS ...").
#
# Waits are bounded and polled, never slept out: K8S_LAB_TIMEOUT seconds
# (default 120) for each component to answer, far above the few seconds
# they take on an idle 2-core machine (README.md, "Timings").

K8S_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_SRC_DIR="$(cd "$K8S_LIB_DIR/.." && pwd)"
K8S_LAB_TIMEOUT="${K8S_LAB_TIMEOUT:-120}"
K8S_SERVICE_CIDR=10.96.0.0/24
K8S_SIGNER_CLIENT_KUBELET=kubernetes.io/kube-apiserver-client-kubelet
K8S_SIGNER_SERVING=kubernetes.io/kubelet-serving
K8S_DIR="" K8S_BIN="" K8S_API_PORT="" K8S_API_URL="" K8S_ETCD_URL="" K8S_KCM_PORT=""
K8S_TOKEN_ID="" K8S_TOKEN="" K8S_START_MS="" K8S_KUBELET_PID="" K8S_KUBELET_NODE=""
K8S_APISERVER_ARGS=()
K8S_STDOUT="" K8S_STDERR=""

k8s_log() { echo "# k8s-lab: $*" >&2; }

# k8s_lab_bin: K8S_BIN, the directory script/k8s-lab built; fails (and says
# so) when the binaries are not built.
k8s_lab_bin() {
  K8S_BIN="$("$K8S_SRC_DIR/script/k8s-lab" bin 2>/dev/null)"
}

k8s_lab_tools() {
  local t
  for t in etcd kubectl openssl curl; do
    command -v "$t" >/dev/null 2>&1 || { k8s_log "$t missing (etcd-server, kubectl, openssl, curl)"; return 1; }
  done
}

# TAP: k8s_ok DESC, k8s_not_ok DESC [DIAGNOSTICS], k8s_check DESC CMD...
# (ok when CMD succeeds), k8s_plan (the plan, printed last: also right when
# a script stops early).
K8S_TAP_N=0 K8S_TAP_FAILED=0
k8s_ok() { K8S_TAP_N=$((K8S_TAP_N + 1)); echo "ok $K8S_TAP_N - ${1//$'\n'/ }"; }
k8s_not_ok() {
  K8S_TAP_N=$((K8S_TAP_N + 1)) K8S_TAP_FAILED=$((K8S_TAP_FAILED + 1))
  echo "not ok $K8S_TAP_N - ${1//$'\n'/ }"
  if [[ -n "${2:-}" ]]; then printf '%s\n' "$2" | sed 's/^/#   /'; fi
  return 0
}
k8s_check() {
  local desc="$1" out; shift
  if out="$("$@" 2>&1)"; then k8s_ok "$desc"; else k8s_not_ok "$desc" "$out"; return 1; fi
}
k8s_plan() { echo "1..$K8S_TAP_N"; }

k8s_now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# k8s_wait SECONDS CMD...: polls CMD every 0.2 s until it succeeds; fails
# after SECONDS.
k8s_wait() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}

# A free TCP port on 127.0.0.1 (nothing answers it), below Linux's
# ephemeral range so that no client's source port takes it between the
# check and the bind; a collision with another lab is retried by the caller
# (script/pg-lab's way).
k8s_free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

k8s_pid_alive() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

# k8s_kill_pid PID: TERM, then KILL after 15 s; only a process whose command
# line names the lab's directory (so never a process this lab did not start,
# even if the pid was reused). K8S_LAST_EXIT: its exit status (a process
# that had already exited: the status it exited with; 143: TERM).
k8s_kill_pid() {
  local pid="$1"
  K8S_LAST_EXIT=""
  [[ -n "$pid" && -n "$K8S_DIR" ]] || return 0
  if ! k8s_pid_alive "$pid"; then
    # Exited already (a zombie until this shell, its parent, waits).
    K8S_LAST_EXIT=0
    wait "$pid" 2>/dev/null || K8S_LAST_EXIT=$?
    return 0
  fi
  [[ -r "/proc/$pid/cmdline" ]] || return 0
  [[ "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" == *"$K8S_DIR/"* ]] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 150); do
    k8s_pid_alive "$pid" || break
    sleep 0.1
  done
  if k8s_pid_alive "$pid"; then
    k8s_log "pid $pid did not stop on TERM in 15 s: KILL"
    kill -KILL "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do k8s_pid_alive "$pid" || break; sleep 0.1; done
  fi
  K8S_LAST_EXIT=0
  wait "$pid" 2>/dev/null || K8S_LAST_EXIT=$?
}

# k8s_spawn NAME CMD...: starts CMD in the background, its output to
# logs/NAME.log (appended), its pid in K8S_PID and in DIR/pids.
k8s_spawn() {
  local name="$1"; shift
  echo "=== $(date -u +%FT%TZ) $*" >> "$K8S_DIR/logs/$name.log"
  # Not the copies of the test's stdout and stderr: a TAP reader waits for
  # every holder of its pipe.
  "$@" </dev/null >>"$K8S_DIR/logs/$name.log" 2>&1 {K8S_STDOUT}>&- {K8S_STDERR}>&- &
  K8S_PID=$!
  echo "$name $K8S_PID" >> "$K8S_DIR/pids"
}

# k8s_log_last NAME: logs/NAME.log since NAME's last start.
k8s_log_last() { awk '/^=== / { buf = "" } { buf = buf $0 "\n" } END { printf "%s", buf }' "$K8S_DIR/logs/$1.log"; }
# k8s_log_grep NAME REGEX: the log since NAME's last start has REGEX (grep -E).
# (grep without -q: under pipefail an early exit would fail the pipe.)
k8s_log_grep() { k8s_log_last "$1" | grep -E -- "$2" >/dev/null; }

k8s_pid_of() { awk -v n="$1" '$1 == n { p = $2 } END { print p }' "$K8S_DIR/pids"; }

# k8s_await NAME PID SECONDS CMD...: polls CMD until it succeeds; fails
# early when the process PID has exited.
k8s_await() {
  local name="$1" pid="$2" deadline=$(( $(date +%s) + $3 )); shift 3
  until "$@" >/dev/null 2>&1; do
    if ! k8s_pid_alive "$pid"; then
      k8s_log "$name (pid $pid) exited; the end of logs/$name.log:"
      tail -n 15 "$K8S_DIR/logs/$name.log" | sed 's/^/#   /' >&2
      return 1
    fi
    if (( $(date +%s) >= deadline )); then
      k8s_log "$name (pid $pid) not ready after $3 s; the end of logs/$name.log:"
      tail -n 15 "$K8S_DIR/logs/$name.log" | sed 's/^/#   /' >&2
      return 1
    fi
    sleep 0.2
  done
}

# Whether the last start of NAME failed to bind its port (then retried).
k8s_bind_failed() { tail -n 40 "$K8S_DIR/logs/$1.log" | grep -iE 'address already in use|bind: ' >/dev/null; }

# ---------------------------------------------------------------- PKI

# k8s_pki_ca NAME CN: a self-signed ECDSA P-256 CA, pki/NAME.{crt,key}.
k8s_pki_ca() {
  local p="$K8S_DIR/pki/$1"
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$p.key" -out "$p.crt" -days 30 -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

# k8s_pki_cert NAME SUBJECT EXTS [CA]: an ECDSA P-256 key and a certificate
# for it from CA (default ca), pki/NAME.{crt,key}. EXTS: x509v3 lines.
k8s_pki_cert() {
  local p="$K8S_DIR/pki/$1" ca="$K8S_DIR/pki/${4:-ca}"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$p.key" -out "$p.csr" -subj "$2" 2>/dev/null &&
  printf '%s\n' "$3" > "$p.ext" &&
  openssl x509 -req -in "$p.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial \
    -days 30 -extfile "$p.ext" -out "$p.crt" 2>/dev/null
}

k8s_pki() {
  mkdir -p "$K8S_DIR/pki"
  chmod 0700 "$K8S_DIR/pki"
  k8s_pki_ca ca "rackgate-lab cluster CA" &&
  k8s_pki_ca signing-ca "rackgate-lab cluster signing CA" &&
  cat "$K8S_DIR/pki/ca.crt" "$K8S_DIR/pki/signing-ca.crt" > "$K8S_DIR/pki/client-ca.crt" &&
  k8s_pki_cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" &&
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth" &&
  k8s_pki_cert admin "/O=system:masters/CN=rackgate-lab-admin" "$client" &&
  k8s_pki_cert approver "/CN=rackgate-approver" "$client" &&
  k8s_pki_cert kcm "/CN=system:kube-controller-manager" "$client" &&
  openssl genrsa -out "$K8S_DIR/pki/sa.key" 2048 2>/dev/null &&
  openssl rsa -in "$K8S_DIR/pki/sa.key" -pubout -out "$K8S_DIR/pki/sa.pub" 2>/dev/null
}

# k8s_kubeconfig FILE USER [CERTNAME | token:TOKEN]: a kubeconfig for
# K8S_API_URL trusting the cluster CA, with a client cert (pki/CERTNAME) or
# a bearer token.
k8s_kubeconfig() {
  local file="$1" user="$2" cred="${3:-}" auth
  if [[ "$cred" == token:* ]]; then
    auth="    token: ${cred#token:}"
  else
    auth="    client-certificate-data: $(base64 -w0 < "$K8S_DIR/pki/$cred.crt")
    client-key-data: $(base64 -w0 < "$K8S_DIR/pki/$cred.key")"
  fi
  cat > "$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: rackgate-lab
  cluster:
    server: $K8S_API_URL
    certificate-authority-data: $(base64 -w0 < "$K8S_DIR/pki/ca.crt")
users:
- name: $user
  user:
$auth
contexts:
- name: $user@rackgate-lab
  context:
    cluster: rackgate-lab
    user: $user
current-context: $user@rackgate-lab
EOF
  chmod 0600 "$file"
}

# k8s_kubectl_as KUBECONFIG ARGS...: kubectl as KUBECONFIG's user; its
# discovery cache in DIR, not in ~/.kube.
k8s_kubectl_as() {
  local kc="$1"; shift
  kubectl --kubeconfig "$kc" --cache-dir "$K8S_DIR/kubectl-cache" --request-timeout=30s "$@"
}
# k8s_kubectl ARGS...: kubectl as the lab's admin (group system:masters).
k8s_kubectl() { k8s_kubectl_as "$K8S_DIR/admin.kubeconfig" "$@"; }

# ---------------------------------------------------------------- processes

k8s_etcd_healthy() { [[ "$(curl -sf --max-time 2 "$K8S_ETCD_URL/health")" == *'"health":"true"'* ]]; }

k8s_start_etcd() {
  local cport pport
  for _ in 1 2 3 4 5 6; do
    cport="$(k8s_free_port)" && pport="$(k8s_free_port)" || return 1
    [[ "$cport" != "$pport" ]] || continue
    K8S_ETCD_URL="http://127.0.0.1:$cport"
    k8s_spawn etcd etcd --name rackgate-lab --data-dir "$K8S_DIR/etcd" \
      --listen-client-urls "$K8S_ETCD_URL" --advertise-client-urls "$K8S_ETCD_URL" \
      --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
      --initial-cluster "rackgate-lab=http://127.0.0.1:$pport" --initial-cluster-state new \
      --unsafe-no-fsync --logger zap --log-level warn
    k8s_await etcd "$K8S_PID" "$K8S_LAB_TIMEOUT" k8s_etcd_healthy && return 0
    k8s_pid_alive "$K8S_PID" && return 1
    k8s_bind_failed etcd || return 1
    k8s_log "etcd: port taken, retrying"
  done
  return 1
}

k8s_apiserver_ready() {
  [[ "$(curl -s --max-time 5 --cacert "$K8S_DIR/pki/ca.crt" --cert "$K8S_DIR/pki/admin.crt" \
        --key "$K8S_DIR/pki/admin.key" "$K8S_API_URL/readyz")" == ok ]]
}

# The API server's command line (K8S_APISERVER_ARGS) for port K8S_API_PORT.
k8s_apiserver_args() {
  local p="$K8S_DIR/pki"
  # shellcheck disable=SC2054 # (Node,RBAC: one flag's value)
  K8S_APISERVER_ARGS=(
    "$K8S_BIN/kube-apiserver"
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1
    --secure-port="$K8S_API_PORT" --insecure-port=0
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key"
    --client-ca-file="$p/client-ca.crt"
    --authorization-mode=Node,RBAC
    --enable-bootstrap-token-auth
    --enable-admission-plugins=NodeRestriction
    --service-account-issuer=https://kubernetes.default.svc
    --service-account-key-file="$p/sa.pub"
    --service-account-signing-key-file="$p/sa.key"
    --etcd-servers="$K8S_ETCD_URL"
    --service-cluster-ip-range="$K8S_SERVICE_CIDR"
    --allow-privileged=false
    --cert-dir="$K8S_DIR/apiserver"
    --profiling=false
    --request-timeout=10s
    --v=1
  )
}

k8s_start_apiserver() {
  for _ in 1 2 3 4 5 6; do
    K8S_API_PORT="$(k8s_free_port)" || return 1
    K8S_API_URL="https://127.0.0.1:$K8S_API_PORT"
    k8s_apiserver_args
    k8s_spawn kube-apiserver "${K8S_APISERVER_ARGS[@]}"
    k8s_await kube-apiserver "$K8S_PID" "$K8S_LAB_TIMEOUT" k8s_apiserver_ready && return 0
    k8s_pid_alive "$K8S_PID" && return 1
    k8s_bind_failed kube-apiserver || return 1
    k8s_log "kube-apiserver: port taken, retrying"
  done
  return 1
}

# k8s_lab_restart_apiserver [--kill]: stops the API server by pid (TERM, a
# graceful stop; --kill: SIGKILL, a crash) and starts it again with the
# same command line (the same port, etcd and certificates); waits until
# /readyz answers. A graceful stop waits for open watches (kube-controller-
# manager's) up to the server's shutdown timeout, which 1.20 takes from
# --request-timeout: 10 s here (60 s by default).
k8s_lab_restart_apiserver() {
  local pid
  pid="$(k8s_pid_of kube-apiserver)"
  if [[ "${1:-}" == --kill ]] && k8s_pid_alive "$pid"; then
    kill -KILL "$pid" 2>/dev/null
    k8s_wait 10 eval '! k8s_pid_alive '"$pid"
    # 137, the KILL: not a failure of this function (callers run set -e).
    wait "$pid" 2>/dev/null || true
  fi
  k8s_kill_pid "$pid"
  k8s_pid_alive "$pid" && { k8s_log "kube-apiserver (pid $pid) did not stop"; return 1; }
  k8s_spawn kube-apiserver "${K8S_APISERVER_ARGS[@]}"
  k8s_await kube-apiserver "$K8S_PID" "$K8S_LAB_TIMEOUT" k8s_apiserver_ready
}

k8s_kcm_healthy() { [[ "$(curl -sk --max-time 5 "https://127.0.0.1:$K8S_KCM_PORT/healthz")" == ok ]]; }

k8s_start_kcm() {
  local p="$K8S_DIR/pki"
  for _ in 1 2 3 4 5 6; do
    K8S_KCM_PORT="$(k8s_free_port)" || return 1
    # Only csrsigning and csrcleaner: no csrapproving (rackgate approves),
    # no service-account token controller (no --service-account-private-key-file).
    k8s_spawn kube-controller-manager "$K8S_BIN/kube-controller-manager" \
      --kubeconfig="$K8S_DIR/kcm.kubeconfig" \
      --controllers=csrsigning,csrcleaner \
      --cluster-signing-cert-file="$p/signing-ca.crt" --cluster-signing-key-file="$p/signing-ca.key" \
      --leader-elect=false --use-service-account-credentials=false \
      --port=0 --bind-address=127.0.0.1 --secure-port="$K8S_KCM_PORT" \
      --cert-dir="$K8S_DIR/kcm" --profiling=false --v=2
    k8s_await kube-controller-manager "$K8S_PID" "$K8S_LAB_TIMEOUT" k8s_kcm_healthy && return 0
    k8s_pid_alive "$K8S_PID" && return 1
    k8s_bind_failed kube-controller-manager || return 1
    k8s_log "kube-controller-manager: port taken, retrying"
  done
  return 1
}

# ---------------------------------------------------------------- objects

# The lab's objects: the bootstrap token, the bootstrappers' binding, what
# kube-controller-manager's csrsigning and csrcleaner controllers need (a
# lab role: sign and status, no approve), and rbac-approver.yaml as an
# operator applies it. No auto-approval ClusterRole is bound.
k8s_objects() {
  local secret
  secret="$(tr -dc 'a-z0-9' < /dev/urandom | head -c 16)"
  K8S_TOKEN_ID="$(tr -dc 'a-z0-9' < /dev/urandom | head -c 6)"
  K8S_TOKEN="$K8S_TOKEN_ID.$secret"
  k8s_kubectl apply -f - >/dev/null <<EOF || return 1
apiVersion: v1
kind: Secret
metadata:
  name: bootstrap-token-$K8S_TOKEN_ID
  namespace: kube-system
type: bootstrap.kubernetes.io/token
stringData:
  description: rackgate lab bootstrap token
  token-id: "$K8S_TOKEN_ID"
  token-secret: "$secret"
  usage-bootstrap-authentication: "true"
  auth-extra-groups: system:bootstrappers:rackgate
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rackgate-lab:node-bootstrapper
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:node-bootstrapper
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: system:bootstrappers
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: rackgate-lab:csrsigning
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [get, list, watch, delete]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/status]
  verbs: [update]
- apiGroups: [certificates.k8s.io]
  resources: [signers]
  verbs: [sign]
  resourceNames:
  - kubernetes.io/kube-apiserver-client
  - kubernetes.io/kube-apiserver-client-kubelet
  - kubernetes.io/kubelet-serving
  - kubernetes.io/legacy-unknown
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: rackgate-lab:csrsigning
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: rackgate-lab:csrsigning
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: system:kube-controller-manager
EOF
  k8s_kubectl apply -f "$K8S_LIB_DIR/rbac-approver.yaml" >/dev/null
}

# k8s_can_i KUBECONFIG VERB GROUP RESOURCE [NAME]: whether KUBECONFIG's
# user may (a SelfSubjectAccessReview; `kubectl auth can-i` cannot name a
# signer, whose name has a slash).
k8s_can_i() {
  [[ "$(k8s_kubectl_as "$1" create -o jsonpath='{.status.allowed}' -f - 2>/dev/null <<EOF
apiVersion: authorization.k8s.io/v1
kind: SelfSubjectAccessReview
spec:
  resourceAttributes:
    verb: $2
    group: "$3"
    resource: $4
    name: "${5:-}"
EOF
)" == true ]]
}

# ---------------------------------------------------------------- the lab

# k8s_lab_start DIR: the whole control plane, ready, and the kubeconfigs.
# Installs k8s_lab_stop as the EXIT trap (and exits on HUP, INT, TERM, so
# that it runs); a caller's own cleanup goes in K8S_ON_EXIT (a command run
# after the processes are stopped).
k8s_lab_start() {
  local t0
  t0="$(k8s_now_ms)"
  K8S_DIR="$(mkdir -p "$1" && cd "$1" && pwd)" || return 1
  k8s_lab_bin || { k8s_log "not built: script/k8s-lab build"; return 1; }
  k8s_lab_tools || return 1
  mkdir -p "$K8S_DIR/logs" "$K8S_DIR/apiserver" "$K8S_DIR/kcm"
  : >> "$K8S_DIR/pids"
  # The EXIT trap may run while a command's output is redirected (a signal
  # arrives during `k8s_wait CMD`, whose output goes to /dev/null): it
  # writes to these copies of the script's own stdout and stderr.
  exec {K8S_STDOUT}>&1 {K8S_STDERR}>&2
  trap k8s_lab_exit EXIT
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
  K8S_START_PHASES="" K8S_PHASE_T="$t0"
  k8s_pki || { k8s_log "openssl failed"; return 1; }
  k8s_phase pki
  k8s_start_etcd || { k8s_log "etcd did not start"; return 1; }
  k8s_phase etcd
  k8s_start_apiserver || { k8s_log "kube-apiserver did not start"; return 1; }
  k8s_phase kube-apiserver
  k8s_kubeconfig "$K8S_DIR/admin.kubeconfig" rackgate-lab-admin admin
  k8s_kubeconfig "$K8S_DIR/approver.kubeconfig" rackgate-approver approver
  k8s_kubeconfig "$K8S_DIR/kcm.kubeconfig" system:kube-controller-manager kcm
  k8s_objects || { k8s_log "creating the lab's objects failed"; return 1; }
  k8s_kubeconfig "$K8S_DIR/bootstrap.kubeconfig" "system:bootstrap:$K8S_TOKEN_ID" "token:$K8S_TOKEN"
  k8s_phase objects
  k8s_start_kcm || { k8s_log "kube-controller-manager did not start"; return 1; }
  k8s_phase kube-controller-manager
  # The token authenticator reads the Secret through an informer, RBAC
  # through another: ready when the token may create CSRs and the approver
  # may approve.
  k8s_wait "$K8S_LAB_TIMEOUT" k8s_can_i "$K8S_DIR/bootstrap.kubeconfig" create certificates.k8s.io certificatesigningrequests ||
    { k8s_log "the bootstrap token cannot create CSRs"; return 1; }
  k8s_wait "$K8S_LAB_TIMEOUT" k8s_can_i "$K8S_DIR/approver.kubeconfig" approve certificates.k8s.io signers "$K8S_SIGNER_CLIENT_KUBELET" ||
    { k8s_log "rackgate-approver cannot approve"; return 1; }
  k8s_phase rbac
  K8S_START_MS=$(( $(k8s_now_ms) - t0 ))
}

# k8s_lab_stop: stops every process the lab started, by pid: kubelets,
# kube-controller-manager, kube-apiserver (with no client left it stops at
# once), etcd.
# Appends "NAME=MS" (since the last phase) to K8S_START_PHASES.
k8s_phase() {
  local now; now="$(k8s_now_ms)"
  K8S_START_PHASES="${K8S_START_PHASES:+$K8S_START_PHASES }$1=$((now - K8S_PHASE_T))"
  K8S_PHASE_T="$now"
}

k8s_lab_stop() {
  [[ -n "$K8S_DIR" && -f "$K8S_DIR/pids" ]] || return 0
  local role name pid
  for role in 'kubelet-*' kube-controller-manager kube-apiserver etcd '*'; do
    while read -r name pid; do
      # shellcheck disable=SC2053
      [[ "$name" == $role ]] && k8s_kill_pid "$pid"
    done < <(tac "$K8S_DIR/pids")
  done
}

k8s_lab_exit() {
  local rc=$?
  trap - EXIT
  set +e
  k8s_lab_exit_inner 1>&"${K8S_STDOUT:-1}" 2>&"${K8S_STDERR:-2}"
  exit "$rc"
}

k8s_lab_exit_inner() {
  k8s_lab_stop
  k8s_var_lib_kubelet_cleanup
  if [[ -n "${K8S_ON_EXIT:-}" ]]; then eval "$K8S_ON_EXIT"; fi
}

# ---------------------------------------------------------------- CSRs

# k8s_node_csr NODE KEYFILE KUBECONFIG SIGNER [SAN...]: a CSR for
# CN=system:node:NODE, O=system:nodes with KEYFILE's key (an ECDSA P-256
# key is made when KEYFILE does not exist), created as KUBECONFIG's user
# (a bootstrap token, or a node's client certificate), for SIGNER:
# kubernetes.io/kube-apiserver-client-kubelet (usages digital signature,
# key encipherment, client auth, as the kubelet asks) or
# kubernetes.io/kubelet-serving (server auth, SANs such as DNS:node-1
# IP:10.0.0.1). Prints the CSR object's name (generated: NODE-xxxxx, or
# $K8S_CSR_NAME when set).
k8s_node_csr() {
  local node="$1" key="$2" kc="$3" signer="$4" san="" usage pem meta="generateName: $1-"
  shift 4
  # K8S_CSR_NAME: this name instead of a generated one.
  [[ -z "${K8S_CSR_NAME:-}" ]] || meta="name: $K8S_CSR_NAME"
  [[ -f "$key" ]] || openssl ecparam -name prime256v1 -genkey -noout -out "$key" || return 1
  if (( $# )); then san="$(IFS=,; echo "$*")"; fi
  case "$signer" in
    "$K8S_SIGNER_SERVING") usage="server auth" ;;
    *) usage="client auth" ;;
  esac
  pem="$(openssl req -new -key "$key" -subj "/O=system:nodes/CN=system:node:$node" \
           ${san:+-addext "subjectAltName=$san"} 2>/dev/null)" || return 1
  k8s_kubectl_as "$kc" create -o jsonpath='{.metadata.name}' -f - <<EOF
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  $meta
spec:
  signerName: $signer
  request: $(printf '%s\n' "$pem" | base64 -w0)
  usages: [digital signature, key encipherment, $usage]
EOF
}

# The types of NAME's conditions, space-separated.
k8s_csr_conditions() { k8s_kubectl get csr "$1" -o jsonpath='{.status.conditions[*].type}'; }

# k8s_wait_csr_condition NAME Approved|Denied|Failed TIMEOUT
k8s_wait_csr_condition() {
  local name="$1" want="$2" deadline=$(( $(date +%s) + $3 ))
  until [[ " $(k8s_csr_conditions "$name" 2>/dev/null) " == *" $want "* ]]; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}

# k8s_wait_csr_issued NAME TIMEOUT: the signer wrote status.certificate.
k8s_wait_csr_issued() {
  local name="$1" deadline=$(( $(date +%s) + $2 ))
  until [[ -n "$(k8s_kubectl get csr "$name" -o jsonpath='{.status.certificate}' 2>/dev/null)" ]]; do
    (( $(date +%s) < deadline )) || return 1
    sleep 0.2
  done
}

# k8s_csr_certificate NAME: the issued certificate (PEM) on stdout.
k8s_csr_certificate() {
  local b64
  b64="$(k8s_kubectl get csr "$1" -o jsonpath='{.status.certificate}')" && [[ -n "$b64" ]] &&
    printf '%s' "$b64" | base64 -d
}

# k8s_csr_request NAME: the CSR's PKCS#10 request (PEM) on stdout.
k8s_csr_request() {
  k8s_kubectl get csr "$1" -o jsonpath='{.spec.request}' | base64 -d
}

# ---------------------------------------------------------------- the kubelet

# k8s_kubelet_start NODE NODEDIR [ARGS...]: the real kubelet 1.20, as
# harmless to the host as it can be made (README.md, "The real kubelet"):
# root and cert dirs in NODEDIR, the bootstrap kubeconfig, a kubeconfig it
# writes (NODEDIR/kubeconfig), a container runtime socket that does not
# exist, no read-only port, no healthz port, its port free. ARGS are
# added (e.g. --rotate-certificates). The pid is K8S_KUBELET_PID; the log
# logs/kubelet-NODE.log. Without a runtime the kubelet exits by itself
# (status 255) a few seconds after it got its client certificate.
#
# The one thing it does outside NODEDIR: once bootstrapped, its device
# manager makes /var/lib/kubelet/device-plugins (a path 1.20 hard-codes).
# When /var/lib/kubelet did not exist before, k8s_kubelet_stop removes the
# two directories again if they are empty.
k8s_kubelet_start() {
  local node="$1" nd
  nd="$(mkdir -p "$2" && cd "$2" && pwd)" || return 1
  shift 2
  mkdir -p "$nd/root" "$nd/pki"
  K8S_KUBELET_NODE="$node"
  [[ -e /var/lib/kubelet ]] || : > "$K8S_DIR/var-lib-kubelet.absent"
  k8s_spawn "kubelet-$node" "$K8S_BIN/kubelet" \
    --root-dir="$nd/root" --cert-dir="$nd/pki" \
    --bootstrap-kubeconfig="$K8S_DIR/bootstrap.kubeconfig" --kubeconfig="$nd/kubeconfig" \
    --container-runtime=remote --container-runtime-endpoint="unix://$nd/nonexistent.sock" \
    --image-service-endpoint="unix://$nd/nonexistent.sock" \
    --fail-swap-on=false --cgroups-per-qos=false --enforce-node-allocatable="" \
    --hostname-override="$node" --node-ip=127.0.0.1 \
    --read-only-port=0 --port="$(k8s_free_port)" --healthz-port=0 \
    --address=127.0.0.1 --anonymous-auth=false \
    --v=2 "$@"
  K8S_KUBELET_PID="$K8S_PID"
}

# k8s_kubelet_stop: the kubelet by its pid (TERM, then KILL), and
# /var/lib/kubelet{/device-plugins,} if the kubelet made them (empty).
k8s_kubelet_stop() {
  K8S_LAST_EXIT=""
  if [[ -n "$K8S_KUBELET_PID" ]]; then
    k8s_kill_pid "$K8S_KUBELET_PID"
    K8S_KUBELET_PID=""
  fi
  k8s_var_lib_kubelet_cleanup
}

k8s_var_lib_kubelet_cleanup() {
  [[ -n "$K8S_DIR" && -f "$K8S_DIR/var-lib-kubelet.absent" ]] || return 0
  # Only while no other kubelet of this machine runs.
  pgrep -x kubelet >/dev/null 2>&1 && return 0
  # Either may be missing (a kubelet that stopped before its device
  # manager): not a failure (callers run set -e).
  rmdir /var/lib/kubelet/device-plugins 2>/dev/null || true
  rmdir /var/lib/kubelet 2>/dev/null || true
  rm -f "$K8S_DIR/var-lib-kubelet.absent"
  return 0
}
