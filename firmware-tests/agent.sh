#!/usr/bin/env bash
# agent.sh — rackgate-agent, the node side, on swtpm machines against a real
# rackgated on loopback: an RSA-EK machine and a P-384-EK machine attest
# (ECC and RSA AKs); an unenrolled machine waits out 503s and gives up, or
# attests once an operator enrolls it; a revoked machine is refused; a
# rebooted machine attests again with a higher reset count; a wrong appliance
# CA, a missing TPM and bad flags end with their exit codes. The config and
# csr steps run against the same rackgated (pool templates from
# boot-lib.sh): files applied, a 503 on the CSR (no cluster CA yet) waited
# out, kubelet's PKI and kubeconfig, TPM-resident keys and a pool that
# requires them; an initramfs's two runs (--kernel-cmdline, several
# --config-out, --session-out then --session) with one attestation; a csr
# run with neither --apiserver nor --node-ip taking both from the appliance
# (the pool's apiserver setting, the enrolled addresses). Whole machines
# booting through the real Ignition as well: boot.sh.
# Usage: agent.sh RACKGATE_AGENT RACKGATED RACKGATECTL
set -euo pipefail

# Exit codes (agent/failure.h) and what stderr must say (extended
# regexes over the agent's one-line-per-step log).
RC_OK=0
RC_USAGE=2
RC_REFUSED=3
RC_UNREACHABLE=4
RC_TPM=5
R_ATTESTED='step=attest machine=[0-9a-f]{16} ok hostname='
R_NOT_ENROLLED='step=attest machine=[0-9a-f]{16} wait status=503 reason=machine_not_enrolled .*gave_up'
R_WAITING='wait status=503 reason=machine_not_enrolled .*retry_in='
R_REVOKED='step=attest machine=[0-9a-f]{16} refused status=403 reason=machine_revoked'
R_EVENTLOG='refused status=403 reason=eventlog_pcr_mismatch'
R_UNTRUSTED_CA='unreachable reason=appliance_untrusted .*gave_up'
R_NO_TPM='tpm-failure reason='

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: agent.sh RACKGATE_AGENT RACKGATED RACKGATECTL}")"
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
command -v curl >/dev/null || lab_skip "curl missing"
lab_init agent
rg_init "$RACKGATED" "$RACKGATECTL"
boot_init "$AGENT"
lab_ca lab
# Short waits: the wait-and-enroll case below should take seconds.
rg_config retry_after_seconds 1

lab_machine m1 lab   # attests with its RSA-2048 EK
lab_machine m2 lab   # attests with its P-384 EK
lab_machine m3 lab   # not enrolled at first
lab_machine m4 lab   # revoked
# (m6, below: no ECC EK certificate)
M1="$(lab_dir m1)"; M2="$(lab_dir m2)"; M3="$(lab_dir m3)"; M4="$(lab_dir m4)"
lab_pcr_extend m1
rg_trust lab
rg_start

AGENT_URL="$(rg_url "")"
AGENT_CA="$RG_DIR/state/ca/ca.crt"
# agent MACHINE [ARGS...]: the agent against $AGENT_URL (rackgated unless a
# check says otherwise), sending no event log unless told.
agent() {
  local m="$1"; shift
  "$AGENT" --tcti "$(lab_tcti "$m")" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 20)" "$@"
}
json_get() { lab_python -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(v)' "$1"; }
state_is() { test "$(rg_state "$1" 2>/dev/null)" == "$2"; }
# tpm_clean MACHINE: no transient object or session left behind (swtpm has
# three slots and no resource manager).
tpm_clean() { test -z "$(lab_tpm "$1" tpm2_getcap handles-transient)$(lab_tpm "$1" tpm2_getcap handles-loaded-session)"; }

# Addresses: the attested template names InternalIP, and the serving
# certificate's SANs must be enrolled ones.
rg_ctl enroll --hostname node-1 --pool default --ek-cert "$M1/ek-rsa.der" \
  --address InternalIP=10.0.0.11 --address ExternalIP=fd00::11 >/dev/null
rg_ctl enroll --hostname node-2 --pool default --ek-cert "$M2/ek-ecc384.der" --address InternalIP=10.0.0.12 >/dev/null
rg_ctl enroll --hostname node-4 --pool default --ek-cert "$M4/ek-rsa.der" >/dev/null
rg_ctl revoke node-4 --reason "agent lab test" >/dev/null

# --- attest ------------------------------------------------------------------

lab_expect "$RC_OK" "$R_ATTESTED" "RSA EK, ECC AK: attests" agent m1
lab_check "node-1 is attested" state_is node-1 attested
lab_check "no TPM objects or sessions left loaded" tpm_clean m1
lab_expect "$RC_OK" "$R_ATTESTED.* ek=rsa2048 ak=rsa " "RSA EK, RSA AK: attests" agent m1 --ak-alg rsa
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p384 ak=ecc " "P-384 EK (sha384 policy, PolicyOR): attests" \
  agent m2 --ek-alg ecc
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p384 ak=rsa " "P-384 EK, RSA AK: attests" agent m2 --ek-alg ecc --ak-alg rsa
lab_check "node-2 is attested" state_is node-2 attested
# The same TPM's RSA EK is a machine nobody enrolled: by default (RSA first)
# the agent waits, and gives up after --max-wait.
lab_expect "$RC_UNREACHABLE" "$R_NOT_ENROLLED" "m2's RSA EK is not enrolled: waits, gives up after --max-wait" \
  agent m2 --max-wait 2

# A rebooted machine (TPM reset, transient objects gone) attests again.
reset_before="$(rg_ctl show node-1 --json | json_get last_attestation.reset_count)"
swtpm_ioctl --tcp "127.0.0.1:$(cat "$M1/ctrlport")" -i >/dev/null
lab_tpm m1 tpm2_startup -c >/dev/null
lab_expect "$RC_OK" "$R_ATTESTED" "rebooted machine attests again" agent m1
reset_after="$(rg_ctl show node-1 --json | json_get last_attestation.reset_count)"
lab_check "its reset count went up ($reset_before -> $reset_after)" test "$reset_after" -gt "$reset_before"

# --- waiting, refusals, failures ----------------------------------------------

# Unenrolled: the agent waits (503, Retry-After 1 s plus jitter) until an
# operator enrolls the machine, then attests.
timeout "$(lab_seconds 60)" "$AGENT" --tcti "$(lab_tcti m3)" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" \
  --max-wait "$(lab_seconds 50)" 2>"$LAB_DIR/m3.err" &
m3_pid=$!
lab_check "unenrolled machine waits (503 machine_not_enrolled)" boot_wait_for "$LAB_DIR/m3.err" "$R_WAITING" 10
rg_ctl enroll --hostname node-3 --pool default --ek-cert "$M3/ek-rsa.der" >/dev/null
rc=0; wait "$m3_pid" || rc=$?
lab_check "... and attests once enrolled (exit $rc)" test "$rc" == "$RC_OK"
lab_check "node-3 is attested" state_is node-3 attested
grep -Eq "$R_ATTESTED" "$LAB_DIR/m3.err" || sed 's/^/#   /' "$LAB_DIR/m3.err"

lab_expect "$RC_REFUSED" "$R_REVOKED" "revoked machine is refused" agent m4
lab_check "node-4 stays revoked" state_is node-4 revoked
lab_check "nothing left loaded after a refusal either" tpm_clean m4

# A TPM without an ECC EK certificate: --ek-alg ecc falls back to the TCG
# low-range P-256 template (L-2: sha256, PolicySecret only) and sends no
# certificate. Enrolled by its EK public area, it is refused while the
# appliance requires certificates, and attests once it does not.
lab_machine m6 lab
M6="$(lab_dir m6)"
lab_tpm m6 tpm2_nvundefine -C p "$LAB_NV_EK_ECC384" >/dev/null
lab_ek_ecc256 m6
rg_ctl enroll --hostname node-6 --pool default --ek-public "$M6/ek-ecc256.pub" >/dev/null
lab_expect "$RC_REFUSED" "reason=ek_cert_missing" "no EK certificate while the appliance requires one: refused" \
  agent m6 --ek-alg ecc
# Online-only certificates (issue 41): the appliance names the EK's vendor
# URLs; the operator brings the certificate back (here made by the lab CA,
# in the JSON form Intel's service answers) and imports it; the agent,
# still sending only its EK public, attests with the certificate on record.
urls_name_node6() { rg_ctl ek-cert urls | grep -A2 '^node-6 ' | grep -q 'intel https://ekop.intel.com/ekcertservice/'; }
lab_check "ek-cert urls lists node-6 with its vendor URLs" urls_name_node6
tpm2_print -t TPM2B_PUBLIC -f pem "$M6/ek-ecc256.pub" > "$M6/ek-ecc256.pem" 2>/dev/null
printf 'extendedKeyUsage=2.23.133.8.1\nkeyUsage=critical,keyAgreement\nbasicConstraints=critical,CA:FALSE\n' > "$M6/ek.ext"
openssl x509 -new -subj "/CN=node-6 EK" -force_pubkey "$M6/ek-ecc256.pem" -CA "$(lab_ca_intermediate lab)" \
  -CAkey "$(lab_ca_intermediate_key lab)" -days 30 -set_serial 4242 -extfile "$M6/ek.ext" -outform der \
  -out "$M6/ek-ecc256.der" 2>/dev/null
printf '{"pubhash":"lab","certificate":"%s"}' \
  "$(base64 -w0 < "$M6/ek-ecc256.der" | tr '+/' '-_' | sed 's/=/%3D/g')" > "$M6/node-6.json"
import_says() { rg_ctl ek-cert import "$M6/node-6.json" | grep -q "$1"; }
lab_check "ek-cert import of Intel's JSON form puts it on record" import_says "node-6: EK certificate now on record"
lab_check "... and importing it again changes nothing" import_says "node-6: EK certificate already on record"
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p256\\(no-cert\\) " \
  "the agent sends no certificate: attests with the imported one while certificates are required" agent m6 --ek-alg ecc
rg_stop
rg_config require_ek_certificate false
rg_start
lab_expect "$RC_OK" "$R_ATTESTED.* ek=ecc-p256\\(no-cert\\) " "P-256 EK (L-2 template), no certificate: attests" \
  agent m6 --ek-alg ecc
lab_check "node-6 is attested" state_is node-6 attested

if [[ -r "$TESTDATA/eventlogs/tpm2-tools_event-gce-ubuntu-2104-log.bin" ]]; then
  lab_expect "$RC_REFUSED" "$R_EVENTLOG" "an event log that does not replay to the PCRs is refused" \
    agent m1 --eventlog "$TESTDATA/eventlogs/tpm2-tools_event-gce-ubuntu-2104-log.bin"
fi
lab_expect "$RC_OK" "note no event log at $LAB_DIR/none; sending none" "a missing event log file: none is sent" \
  agent m1 --eventlog "$LAB_DIR/none"

# TLS is verified against --ca only: another CA is a connection failure,
# retried with backoff until --max-wait.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=other -days 1 \
  -keyout "$LAB_DIR/other.key" -out "$LAB_DIR/other.crt" 2>/dev/null
lab_expect "$RC_UNREACHABLE" "$R_UNTRUSTED_CA" "an appliance not signed by --ca is never trusted" \
  agent m1 --ca "$LAB_DIR/other.crt" --max-wait 1
lab_expect "$RC_TPM" "$R_NO_TPM" "no TPM behind the TCTI: exit 5" \
  "$AGENT" --tcti "swtpm:host=127.0.0.1,port=$(lab_pick_ports | cut -d' ' -f1)" --url "$AGENT_URL" \
  --ca "$AGENT_CA" --eventlog ""
lab_expect "$RC_USAGE" "--url is required" "no --url: usage" "$AGENT" --ca "$AGENT_CA"
lab_expect "$RC_USAGE" "https" "plain http: usage" agent m1 --url "http://127.0.0.1:1"
lab_expect "$RC_USAGE" "unknown step" "unknown step: usage" agent m1 --steps attest,bogus
lab_expect "$RC_USAGE" "apiserver must be https" "csr with a plain-http --apiserver: usage" \
  agent m1 --steps csr --apiserver http://api.lab:6443
# In a signer-mode pool the kubeconfig needs the API server: refused once the
# agent knows the pool's mode (an approver-mode pool's agent needs none).
# The message names the fix: the pool's `apiserver` setting (issue 42).
lab_expect "$RC_REFUSED" "reason=apiserver_missing .*rackgatectl pool put default" \
  "csr without --apiserver in a signer-mode pool without an apiserver setting: refused, naming the setting" \
  agent m1 --steps csr
lab_expect "$RC_USAGE" "node-ip" "a --node-ip that is no address: usage" \
  agent m1 --steps csr --apiserver https://api.lab:6443 --node-ip 10.0.0.300
lab_check "--help exits 0" "$AGENT" --help

# --- several appliances (docs/agent.md, "Several appliances") ----------------
# Two rackgated on one SQLite are not supported, so: the one real appliance
# and dead URLs (nothing listens). The machine still attests, without a wait
# (a dead appliance is skipped at once); the start is random, so several
# runs with three dead URLs and one live one show the move line at least
# once. With only dead ones the agent gives up after --max-wait.
DEAD1="https://127.0.0.1:$(lab_pick_ports | cut -d' ' -f1)"
DEAD2="https://127.0.0.1:$(lab_pick_ports | cut -d' ' -f1)"
DEAD3="https://localhost:$(lab_pick_ports | cut -d' ' -f1)"
several_ok=yes several_moved=no
for _ in 1 2 3 4 5 6 7 8; do
  rc=0
  agent m1 --url "$DEAD1,$DEAD2" --url "$DEAD3" >/dev/null 2>"$LAB_DIR/several.err" || rc=$?
  if [[ "$rc" != "$RC_OK" ]] || grep -q "retry_in=" "$LAB_DIR/several.err"; then several_ok=no; cat "$LAB_DIR/several.err" >&2; fi
  if grep -Eq "note appliance https://[^ ]+ (\[[^]]+\] )?failed \(appliance_unreachable: [^)]*\); trying https://" \
       "$LAB_DIR/several.err"; then
    several_moved=yes
  fi
done
lab_check "dead appliances in the list: the machine attests every time, with no wait" test "$several_ok" == yes
lab_check "dead appliances in the list: one log line per move" test "$several_moved" == yes
rc=0
"$AGENT" --tcti "$(lab_tcti m1)" --url "$DEAD1" --url "$DEAD2" --ca "$AGENT_CA" --eventlog "" --max-wait 2 \
  >/dev/null 2>"$LAB_DIR/several.err" || rc=$?
lab_check "only dead appliances: exit 4 after --max-wait" test "$rc" == "$RC_UNREACHABLE"
lab_check "only dead appliances: each is tried before a wait" \
  grep -Eq "note appliance https://127\.0\.0\.1:[0-9]+ failed \(appliance_unreachable.*\); trying https://127\.0\.0\.1" \
  "$LAB_DIR/several.err"
lab_check "only dead appliances: the agent gives up after --max-wait" \
  grep -Eq "unreachable reason=appliance_unreachable .*gave_up" "$LAB_DIR/several.err"
lab_expect "$RC_USAGE" "too_many_urls|at most 16" "17 appliance URLs: usage" \
  agent m1 --url "$(for i in $(seq 1 17); do printf 'https://10.9.0.%d:1,' "$i"; done)"
# A DNS name is an appliance per address, each connected to directly while
# TLS still checks the name: localhost is 127.0.0.1 (rackgated, whose
# certificate names localhost) and, where /etc/hosts says so, ::1 (nothing).
localhost_ok=yes
for _ in 1 2 3 4; do
  "$AGENT" --tcti "$(lab_tcti m1)" --url "https://localhost:$RG_PORT" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 20)" \
    >/dev/null 2>"$LAB_DIR/several.err" || { localhost_ok=no; cat "$LAB_DIR/several.err" >&2; }
done
lab_check "a name with several addresses: each address tried under the name's TLS identity" test "$localhost_ok" == yes

# --- config and csr, against the same rackgated -------------------------------

# The default pool gets the lab's public and attested templates
# (boot-lib.sh); no cluster CA exists yet: m1's agent meets the appliance
# without one, and the operator generates it while the agent waits.
rg_ctl pool put default --public-template "$BOOT_DIR/public.ign" --attested-template "$BOOT_DIR/attested.ign" >/dev/null
S="$LAB_DIR/nodes"
mkdir -p "$S/m1/root" "$S/m2"
mode_of() { stat -c %a "$1"; }
# same_text A B: both non-empty and equal (a missing file is never "equal").
same_text() { [[ -n "$1" && "$1" == "$2" ]]; }
count_of() { grep -Ec -- "$1" "$2" || true; }
spki_sha256() { openssl pkey -pubin -outform der 2>/dev/null | sha256sum | cut -d' ' -f1; }
# cert_field HOSTNAME KIND FIELD: from `rackgatectl certs --json`, the newest.
cert_field() {
  rg_ctl certs --hostname "$1" --json | lab_python -c 'import json, sys
cs = [c for c in json.load(sys.stdin)["certificates"] if c["kind"] == sys.argv[1]]
v = cs[0][sys.argv[2]]
print(json.dumps(v) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else v)' "$2" "$3"
}
R_SIGNER_WAIT='step=csr machine=[0-9a-f]{16} wait status=503 reason=signer_unavailable .*retry_in='
R_CSR_OK='step=csr machine=[0-9a-f]{16} ok kubeconfig='

# m1: software keys, every step. The client CSR meets a 503
# (signer_unavailable: no cluster CA yet); the agent waits Retry-After and
# starts again from the challenge, without fetching the config twice.
"$AGENT" --tcti "$(lab_tcti m1)" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 40)" \
  --steps attest,config,csr --config-out "$S/m1/config.ign" --apply-root "$S/m1/root" \
  --kubelet-dir "$S/m1/pki" --kubeconfig "$S/m1/kubeconfig" --apiserver https://api.lab:6443 \
  --node-ip 10.0.0.11 --node-ip fd00::11 </dev/null 2>"$S/m1.err" {LAB_STDOUT}>&- {LAB_STDERR}>&- &
m1_pid=$!
echo "$m1_pid" >> "$LAB_DIR/pids"
lab_check "no cluster CA yet: the client CSR waits (503 signer_unavailable)" boot_wait_for "$S/m1.err" "$R_SIGNER_WAIT" 30
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
rc=0; wait "$m1_pid" || rc=$?
if [[ "$rc" == "$RC_OK" ]] && grep -Eq "$R_CSR_OK" "$S/m1.err"; then
  lab_ok "config and csr steps (software keys): done once the operator generated the cluster CA"
else
  lab_not_ok "config and csr steps (software keys): exit $rc" "$(tail -n 5 "$S/m1.err")"
fi
lab_check "the 503 sent the agent back to the challenge (attested twice)" \
  test "$(count_of 'step=attest .* ok ' "$S/m1.err")" == 2
lab_check "... and the config was fetched and applied once" test "$(count_of 'step=config .* ok ' "$S/m1.err")" == 1
lab_check "node-1 is joined" state_is node-1 joined
DIGEST="$(sha256sum "$S/m1/config.ign" | cut -d' ' -f1)"
lab_check "config written exactly as served (its SHA-256 is the one rackgated audited)" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' audit --hostname node-1 --json --limit 100 | grep -q '$DIGEST'"
lab_check "config written with mode 0600" test "$(mode_of "$S/m1/config.ign")" == 600
if command -v ignition-validate >/dev/null; then
  lab_check "the written config passes ignition-validate" ignition-validate "$S/m1/config.ign"
fi
R1="$S/m1/root"
lab_check "file applied (plain data: URL, a per-machine value)" test "$(cat "$R1/etc/hostname")" == node-1
lab_check "file applied (base64 data: URL, marked secret) with mode 0600" \
  bash -c "grep -q registry.lab '$R1/var/lib/kubelet/config.json' && [[ \$(stat -c %a '$R1/var/lib/kubelet/config.json') == 600 ]]"
lab_check "file applied (base64 data: URL, mode 0755)" \
  bash -c "[[ \"\$(cat '$R1/usr/local/bin/hello')\" == \$'#!/bin/sh\necho hi' && \$(stat -c %a '$R1/usr/local/bin/hello') == 755 ]]"
lab_check "the public part is applied too (appliance CA)" cmp "$R1/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt"
lab_check "directory applied with mode 0700" test "$(mode_of "$R1/var/lib/rackgate")" == 700
lab_check "link applied" test "$(readlink "$R1/etc/hello")" == /usr/local/bin/hello
lab_check "unit written and enabled" \
  test "$(readlink "$R1/etc/systemd/system/multi-user.target.wants/kubelet.service")" == /etc/systemd/system/kubelet.service
P1="$S/m1/pki"
lab_check "client pair: kubelet-client-current.pem -> kubelet-client-<time>.pem" \
  bash -c "readlink '$P1/kubelet-client-current.pem' | grep -Eq '^kubelet-client-[0-9]{4}(-[0-9]{2}){5}\\.pem\$'"
lab_check "client pair mode 0600" test "$(mode_of "$(realpath "$P1/kubelet-client-current.pem")")" == 600
lab_check "client certificate subject O=system:nodes, CN=system:node:node-1" \
  test "$(openssl x509 -in "$P1/kubelet-client-current.pem" -noout -subject)" == "subject=O = system:nodes, CN = system:node:node-1"
lab_check "client certificate and key belong together" \
  same_text "$(openssl x509 -in "$P1/kubelet-client-current.pem" -noout -pubkey 2>/dev/null)" \
            "$(openssl pkey -in "$P1/kubelet-client-current.pem" -pubout 2>/dev/null)"
lab_check "client certificate verifies against the cluster CA (client auth)" \
  openssl verify -x509_strict -purpose sslclient -CAfile "$RG_DIR/state/cluster-ca/ca.crt" "$P1/kubelet-client-current.pem"
# The CSR itself never leaves the agent's memory: its shape is what
# rackgated's approver rules accepted (docs/csr.md: exact O and CN, no other
# subject attribute, no SANs, the client usages, a supported key) and what
# it recorded; its exact bytes (no extensions, no attributes) are
# agent/csr_test.cc's.
lab_check "rackgated vouched for the client CSR at once: no CSR refusal audited" \
  bash -c "! '$RG_CTL' --socket '$RG_DIR/admin.sock' audit --hostname node-1 --json --limit 1000 | grep -q csr_refused"
lab_check "rackgatectl certs: the client certificate's subject, no SANs, software key" \
  test "$(cert_field node-1 client subject)|$(cert_field node-1 client sans)|$(cert_field node-1 client tpm_resident)" \
    == "O=system:nodes, CN=system:node:node-1|[]|false"
lab_check "rackgatectl certs: the CSR's key is the key on disk" \
  test "$(cert_field node-1 client public_key_sha256)" \
    == "$(openssl pkey -in "$P1/kubelet-client-current.pem" -pubout 2>/dev/null | spki_sha256)"
lab_check "serving certificate SANs are the hostname and --node-ip" \
  bash -c "openssl x509 -in '$P1/kubelet-server-current.pem' -noout -ext subjectAltName | grep -q 'DNS:node-1, IP Address:10.0.0.11, IP Address:FD00:0:0:0:0:0:0:11'"
lab_check "serving certificate verifies against the cluster CA (server auth)" \
  openssl verify -x509_strict -purpose sslserver -CAfile "$RG_DIR/state/cluster-ca/ca.crt" "$P1/kubelet-server-current.pem"
lab_check "cluster CA written" cmp "$P1/ca.crt" "$RG_DIR/state/cluster-ca/ca.crt"
lab_check "kubeconfig names the apiserver and the client pair" \
  bash -c "grep -q 'server: \"https://api.lab:6443\"' '$S/m1/kubeconfig' && grep -q 'client-key: \"$P1/kubelet-client-current.pem\"' '$S/m1/kubeconfig'"

# m2: P-384 EK, RSA AK, in a pool that now requires TPM-resident client keys.
echo '{"require_tpm_key": true}' > "$S/tpm-only.json"
rg_ctl pool put default --settings "$S/tpm-only.json" >/dev/null
# The agent reads the requirement from GET /v1/machine and makes its client
# key in the TPM without being told (no --tpm-key). rackgated's refusal of a
# software key in such a pool is in daemon/tests/csr.sh. The serving key
# stays a file (kubelet's TLS server reads it from disk).
lab_expect "$RC_OK" "certificate=client key=tpm" "the pool asks for a TPM key: the agent makes one (P-384 EK, RSA AK)" \
  agent m2 --ek-alg ecc --ak-alg rsa --steps csr \
  --kubelet-dir "$S/m2/pki" --kubeconfig "$S/m2/kubeconfig" --apiserver https://api.lab:6443
P2="$S/m2/pki"
lab_check "node-2 is joined" state_is node-2 joined
lab_check "nothing left loaded after the TPM key's certify and sign" tpm_clean m2
lab_check "TPM key blobs saved with mode 0600" \
  bash -c "[[ \$(stat -c %a '$P2/kubelet-client-tpm.pub') == 600 && \$(stat -c %a '$P2/kubelet-client-tpm.priv') == 600 ]]"
lab_check "no private key on disk for the TPM-resident client key" \
  bash -c "! grep -q 'PRIVATE KEY' '$P2/kubelet-client-current.pem'"
# The TPM's public area the agent saved, converted offline (tpm2_print reads
# the file, not the TPM).
tpm2_print -t TPM2B_PUBLIC -f pem "$P2/kubelet-client-tpm.pub" > "$S/m2/tpm-key.pem" 2>/dev/null || true
lab_check "the client certificate carries the TPM key" \
  same_text "$(openssl x509 -in "$P2/kubelet-client-current.pem" -noout -pubkey 2>/dev/null)" "$(cat "$S/m2/tpm-key.pem")"
# rackgated marks a key TPM-resident only after it verified the TPM2_Certify:
# signed by the AK that attested, over the session's nonce, naming this key
# (docs/csr.md, CheckTpmKey).
lab_check "rackgatectl certs: tpm_resident true, for the TPM key" \
  test "$(cert_field node-2 client tpm_resident) $(cert_field node-2 client public_key_sha256)" \
    == "true $(spki_sha256 < "$S/m2/tpm-key.pem")"
lab_check "kubeconfig has no client-key with a TPM key" bash -c "! grep -q client-key '$S/m2/kubeconfig'"
# The saved blobs load under the SRK docs/agent.md describes.
lab_tpm m2 tpm2_createprimary -C o -g sha256 -G ecc256:null:aes128cfb \
  -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt' -c "$S/m2/srk.ctx" >/dev/null
lab_check "TPM key blobs load under the documented SRK" \
  lab_tpm m2 tpm2_load -C "$S/m2/srk.ctx" -u "$P2/kubelet-client-tpm.pub" -r "$P2/kubelet-client-tpm.priv" \
  -c "$S/m2/key.ctx"
lab_flush m2

# --- an initramfs's two runs: one attestation carried (issue 42) --------------
# As rackgate-initrd-attest.service and rackgate-initrd-install.service run
# it: the URL from the kernel command line, the config to whichever
# user.ign directory exists, the attestation carried to the csr run in a
# session file (the pool still requires TPM keys: the csr run reloads the
# carried AK under the EK for TPM2_Certify). The appliance sees one
# attestation.
lab_machine m7 lab
M7="$(lab_dir m7)"
rg_ctl enroll --hostname node-7 --pool default --ek-cert "$M7/ek-rsa.der" --address InternalIP=10.0.0.17 >/dev/null
mkdir -p "$S/m7/run"
printf 'BOOT_IMAGE=/vmlinuz ro ignition.firstboot "rackgate.url=%s" ignition.platform.id=metal\n' "$AGENT_URL" \
  > "$S/m7/cmdline"
initrd_agent() {
  "$AGENT" --tcti "$(lab_tcti m7)" --kernel-cmdline "$S/m7/cmdline" --ca "$AGENT_CA" --eventlog "" \
    --max-wait "$(lab_seconds 20)" "$@"
}
rc=0
initrd_agent --steps attest,config --config-out "$S/m7/usr/lib/ignition/user.ign" \
  --config-out "$S/m7/run/user.ign" --session-out "$S/m7/run/session" 2>"$S/m7/run1.err" || rc=$?
lab_check "initrd run 1 (--kernel-cmdline, attest,config, --session-out): ok, the missing user.ign directory skipped" \
  bash -c "[[ $rc == 0 ]] && grep -qF 'config-out skipped path=$S/m7/usr/lib/ignition/user.ign' '$S/m7/run1.err'"
grep -qF "written=$S/m7/run/session" "$S/m7/run1.err" || sed "s/^/#   /" "$S/m7/run1.err"
lab_check "... the config written to the other, the session with mode 0600" \
  test "$(mode_of "$S/m7/run/user.ign") $(mode_of "$S/m7/run/session")" == "600 600"
TOKEN7="$(lab_python -c 'import json,sys; print(json.load(sys.stdin)["token"]["token"])' < "$S/m7/run/session")"
rc=0
initrd_agent --steps csr --session "$S/m7/run/session" --kubelet-dir "$S/m7/pki" \
  --kubeconfig "$S/m7/kubeconfig" --apiserver https://api.lab:6443 2>"$S/m7/run2.err" || rc=$?
lab_check "initrd run 2 (csr, --session): ok with the carried attestation, no new one" \
  bash -c "[[ $rc == 0 ]] && grep -Eq 'step=attest machine=[0-9a-f]{16} ok carried=.* hostname=node-7 .*config_fetched=yes' '$S/m7/run2.err' && ! grep -Eq '$R_ATTESTED' '$S/m7/run2.err'"
grep -q "ok carried=" "$S/m7/run2.err" || sed 's/^/#   /' "$S/m7/run2.err"
lab_check "... the carried token is in neither run's log" \
  bash -c "[[ -n '$TOKEN7' ]] && ! grep -qF '$TOKEN7' '$S/m7/run1.err' '$S/m7/run2.err'"
attests_of() {
  rg_ctl audit --hostname "$1" --json --limit 1000 | lab_python -c 'import json,sys
print(sum(1 for e in json.load(sys.stdin)["entries"] if e.get("action") == "attest"))'
}
lab_check "the appliance saw one attestation of node-7 (audit)" test "$(attests_of node-7)" == 1
lab_check "... and issued its certificates (TPM client key certified by the carried AK)" \
  test "$(cert_field node-7 client tpm_resident)" == true
lab_check "... node-7 is joined" state_is node-7 joined
lab_check "... the session file is gone once read" test ! -e "$S/m7/run/session"
lab_check "... nothing left loaded in m7's TPM" tpm_clean m7
lab_expect "$RC_OK" "note session=$S/m7/run/session not_used reason=session_missing" \
  "--session with no file: attests afresh, saying why" initrd_agent --session "$S/m7/run/session"
# A carried token the appliance does not know: 401 on the csr step, then a
# fresh attestation, once.
initrd_agent --steps attest --session-out "$S/m7/run/session" 2>/dev/null
lab_python -c 'import json,sys
d = json.load(open(sys.argv[1])); d["token"]["token"] = "unknown-token-" + "A" * 30
open(sys.argv[1], "w").write(json.dumps(d))' "$S/m7/run/session"
lab_expect "$RC_OK" "status=401 reason=token_unknown .*carried_session=given_up: attesting afresh" \
  "a carried token refused (401): attests afresh once and finishes" \
  initrd_agent --steps csr --session "$S/m7/run/session" --kubelet-dir "$S/m7/pki" \
  --kubeconfig "$S/m7/kubeconfig" --apiserver https://api.lab:6443
lab_flush m7
# A carried AK the TPM will not load (its private blob damaged): the csr run
# of a TPM-key pool gives the session up and attests afresh, once.
lab_machine m8 lab
rg_ctl enroll --hostname node-8 --pool default --ek-cert "$(lab_dir m8)/ek-rsa.der" --address InternalIP=10.0.0.18 >/dev/null
"$AGENT" --tcti "$(lab_tcti m8)" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 20)" \
  --steps attest --session-out "$S/m8.session" 2>/dev/null
lab_python -c 'import base64,json,sys
d = json.load(open(sys.argv[1])); p = bytearray(base64.b64decode(d["ak_private"])); p[-1] ^= 1
d["ak_private"] = base64.b64encode(bytes(p)).decode(); open(sys.argv[1], "w").write(json.dumps(d))' "$S/m8.session"
lab_expect "$RC_OK" "tpm-failure reason=carried_ak_unusable .*carried_session=given_up: attesting afresh" \
  "a carried AK that does not load: attests afresh once and finishes (TPM key certified by the new AK)" \
  "$AGENT" --tcti "$(lab_tcti m8)" --url "$AGENT_URL" --ca "$AGENT_CA" --eventlog "" --max-wait "$(lab_seconds 20)" \
  --steps csr --session "$S/m8.session" --kubelet-dir "$S/m8/pki" --kubeconfig "$S/m8/kubeconfig" \
  --apiserver https://api.lab:6443
lab_check "... node-8 is joined" state_is node-8 joined
lab_check "... nothing left loaded in m8's TPM" tpm_clean m8
lab_flush m8

# --- the API server and node addresses from the appliance (issue 42) --------
# An initramfs unit has no --apiserver or --node-ip to pass: the pool's
# `apiserver` setting and the machine's enrolled IP addresses come in
# GET /v1/machine's answer (docs/agent.md, "Where the API server and node
# addresses come from"). node-3 attested above, with no address enrolled yet.
echo '{"apiserver": "https://api.pool.lab:6443"}' > "$S/apiserver.json"
rg_ctl pool put default --settings "$S/apiserver.json" >/dev/null
rg_ctl enroll --hostname node-3 --pool default --ek-cert "$M3/ek-rsa.der" --address InternalIP=10.0.0.13 >/dev/null
lab_expect "$RC_OK" "$R_CSR_OK.* apiserver=https://api\.pool\.lab:6443 from=pool" \
  "no --apiserver, no --node-ip: the csr step takes the pool's API server from the appliance" \
  agent m3 --steps attest,csr --kubelet-dir "$S/m3/pki" --kubeconfig "$S/m3/kubeconfig"
lab_check "... the kubeconfig names the pool's API server" grep -q 'server: "https://api.pool.lab:6443"' "$S/m3/kubeconfig"
lab_check "... the serving certificate carries the enrolled address" \
  bash -c "openssl x509 -in '$S/m3/pki/kubelet-server-current.pem' -noout -ext subjectAltName | grep -q 'DNS:node-3, IP Address:10.0.0.13'"

lab_finish
