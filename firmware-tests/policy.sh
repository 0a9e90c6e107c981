#!/usr/bin/env bash
# policy.sh — boot policy from what the fleet really boots (issue 17):
# observe, propose, accept, on three swtpm machines booted from real event
# logs, through the real Ignition and the real agent run as the shipped
# rackgate-agent.service runs it (boot-lib.sh, boot_machine). Parts, each
# reported as "(x) ...":
#   (a) observing, no policy: every machine's identity is checked and its
#       boot kept; each agent waits (503 boot_policy_observing); the daemon
#       logs OBSERVE for all three; `policy show` lists 3 observed machines;
#       `status` opens with the WARNING line; /metrics shows the gauge;
#   (b) nothing secret was released while observing: every machine still
#       `enrolled`, no certificate, no attestation success audited, the
#       attested config never served, each disk holds the public config only;
#   (c) `policy propose` names the odd machine (another OS's boot) with
#       what differs, and not the two alike;
#   (d) `policy accept --proposal SHA` enforces it, audited (pool_policy);
#       the kernel command line it pins (the two alike's grub line) is
#       printed and audited as its SHA-256, never as text (issue 27, item 8):
#       not by propose, accept, show, audit, nor in rackgated's log;
#   (e) the same agent runs, still waiting, come back: the two alike attest
#       and join; the odd one is refused, 403 boot_policy_violation naming
#       the rule it breaks (pcrs:pcr_mismatch).
# Usage: policy.sh RACKGATE_AGENT RACKGATED RACKGATECTL [RACKGATE_AGENT_UNIT]
set -euo pipefail

# Agent exit codes (agent/failure.h) and log lines (docs/agent.md).
RC_OK=0
RC_REFUSED=3
R_OBSERVING='step=attest machine=[0-9a-f]{16} wait status=503 reason=boot_policy_observing .*retry_in='
R_JOINED='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_VIOLATION='step=attest machine=[0-9a-f]{16} refused status=403 reason=boot_policy_violation message=".*pcrs:pcr_mismatch'
# Two machines boot alike, one boots another OS (boot.sh's two logs).
GOLDEN_LOG=tpm2-tools_event-gce-ubuntu-2104-log.bin                     # GCE, Ubuntu 21.04
OTHER_LOG=go-attestation_coreos_36_shielded_vm_no_secure_boot_eventlog.bin  # GCE, Fedora CoreOS 36
POOL=fleet
# The audit rows of a machine that got something secret (docs/operations.md).
AUDIT_SUCCESS="attest config_served certificate_issued"
MACHINES=(a1 a2 odd)
declare -A HOST=([a1]=node-a1 [a2]=node-a2 [odd]=node-odd)
declare -A LOG=([a1]="$GOLDEN_LOG" [a2]="$GOLDEN_LOG" [odd]="$OTHER_LOG")
# The agents keep waiting through the whole observe phase and come back
# after accept: rackgated answers Retry-After 1 s (rg_config below), the
# agent gives up after BOOT_MAX_WAIT (seconds, times the lab's factor:
# lab.sh, "time").
export BOOT_MAX_WAIT=180

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: policy.sh RACKGATE_AGENT RACKGATED RACKGATECTL [RACKGATE_AGENT_UNIT]"
AGENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
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
lab_init policy
rg_init "$RACKGATED" "$RACKGATECTL"
# Waiting machines come back within seconds of the accept.
rg_config retry_after_seconds 1
lab_ca lab
boot_init "$AGENT" ${4:+"$4"}

# py FILE CODE ARGS...: CODE with `d`, FILE's JSON; exits as CODE says.
py() {
  local file="$1" code="$2"; shift 2
  lab_python -c "import json, sys
d = json.load(open(sys.argv[1]))
$code" "$file" "$@"
}
state_is() { local s; s="$(rg_state "$1" 2>/dev/null || echo '?')"; [[ "$s" == "$2" ]] || { echo "$1 is $s, want $2"; return 1; }; }
# public_only NAME: Ignition's public files are in the machine's root and
# nothing the attested config or the csr step would have written.
public_only() {
  local R f; R="$(boot_root "$1")"
  cmp -s "$R/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt" || { echo "no appliance CA from Ignition"; return 1; }
  for f in var/lib/kubelet/config.json etc/rackgate/identity var/lib/kubelet/kubeconfig var/lib/kubelet/pki \
           var/lib/rackgate-agent/config-applied; do
    [[ ! -e "$R/$f" ]] || { echo "/$f exists"; return 1; }
  done
}
observed_in_log() {  # the daemon logged OBSERVE ... NOT ENFORCED for each machine
  local m
  for m in "${MACHINES[@]}"; do
    grep -q "OBSERVE pool $POOL: boot policy NOT ENFORCED for .*${HOST[$m]}" "$RG_DIR/rackgated.log" \
      || { echo "no OBSERVE line for ${HOST[$m]}"; grep OBSERVE "$RG_DIR/rackgated.log" | tail -n 3; return 1; }
  done
}
odd_untouched() { state_is node-odd enrolled && public_only odd; }
# status_reasons HOSTNAME RULE:REASON: `status --json` lists a failure of
# HOSTNAME with that policy rule among its reasons.
status_reasons() {
  rg_ctl status --json | lab_python -c 'import json, sys
fs = json.load(sys.stdin)["recent_failures"]
sys.exit(0 if any(f["hostname"] == sys.argv[1] and sys.argv[2] in f["reasons"] for f in fs) else 1)' "$1" "$2"
}

T_ALL=$(date +%s%N)
boot_new_machines 10.0.0 "${MACHINES[@]}"
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
# A new pool with no boot policy, observing from the start.
boot_pool "$POOL"
lab_check_shown "the pool observes its boot policy (rackgatectl policy observe)" \
  rg_ctl policy observe --pool "$POOL" --reason "lab: learn what the fleet boots"
for m in "${MACHINES[@]}"; do
  boot_replay_eventlog "$m" "$TESTDATA/eventlogs/${LOG[$m]}"
  boot_enroll "$m" "${HOST[$m]}" "$POOL"
done

# --- (a) observing -------------------------------------------------------------
echo "# (a) three machines boot into an observing pool with no policy: they wait"
t=$(date +%s%N)
# Ignition then the agent as the shipped unit runs it, each in the
# background: the same runs are judged after the accept in (e).
declare -A PID=()
for m in "${MACHINES[@]}"; do
  boot_machine "$m" "$POOL" >/dev/null 2>&1 & PID[$m]=$!
done
for m in "${MACHINES[@]}"; do
  lab_check_shown "(a) ${HOST[$m]}: Ignition ran, its agent waits: 503 boot_policy_observing" \
    boot_wait_for "$(lab_dir "$m")/agent.last" "$R_OBSERVING" 60
done
lab_check_shown "(a) rackgated logs OBSERVE ... NOT ENFORCED for all three" observed_in_log
rg_ctl policy show --pool "$POOL" --json > "$LAB_DIR/show.observe.json"
lab_check_shown "(a) rackgatectl policy show --json: observing, 3 machines observed, verdict none (no policy)" \
  py "$LAB_DIR/show.observe.json" '
hosts = sorted(m["hostname"] for m in d["machines"])
print("#", d["mode"], d.get("observed"), hosts, [m["verdict"] for m in d["machines"]])
sys.exit(0 if d["mode"] == "observe" and hosts == sorted(sys.argv[2:]) and d["observed"] == 3
         and d["verdicts"] == {"fail": 0, "none": 3, "pass": 0} and d["policy"] is None else 1)' \
    "${HOST[@]}"
rg_ctl status > "$LAB_DIR/status.observe.txt"
lab_check_shown "(a) rackgatectl status opens with: WARNING: pool $POOL is OBSERVING" \
  bash -c "head -n 1 '$LAB_DIR/status.observe.txt' | grep -q '^WARNING: pool $POOL is OBSERVING'"
code="$(rg_get /metrics "$LAB_DIR/metrics.observe.txt")"
lab_check_shown "(a) /metrics ($code): rackgate_pool_boot_policy_observing{pool=\"$POOL\"} 1" \
  grep -Eq "^rackgate_pool_boot_policy_observing\{pool=\"$POOL\"\} 1\$" "$LAB_DIR/metrics.observe.txt"
lab_check_shown "(a) /metrics: rackgate_boot_policy_observations_total{pool=\"$POOL\",verdict=\"none\"} counts them (>= 3)" \
  lab_python - "$LAB_DIR/metrics.observe.txt" "$POOL" <<'PY'
import re, sys
text, pool = open(sys.argv[1]).read(), sys.argv[2]
n = sum(float(v) for labels, v in re.findall(r'^rackgate_boot_policy_observations_total\{([^}]*)\} (\S+)$', text, re.M)
        if f'pool="{pool}"' in labels and 'verdict="none"' in labels)
print("# observations:", n)
sys.exit(0 if n >= 3 else 1)
PY
echo "# (a) observe: $(lab_ms_since "$t") ms"

# --- (b) nothing secret released ------------------------------------------------
echo "# (b) nothing secret was released while observing"
rg_ctl list --json > "$LAB_DIR/list.observe.json"
lab_check_shown "(b) rackgatectl list --json: all three still enrolled" \
  py "$LAB_DIR/list.observe.json" '
st = {m["hostname"]: m["state"] for m in d["machines"]}
print("#", st)
sys.exit(0 if sorted(st) == sorted(sys.argv[2:]) and set(st.values()) == {"enrolled"} else 1)' "${HOST[@]}"
rg_ctl certs --json > "$LAB_DIR/certs.observe.json"
lab_check_shown "(b) rackgatectl certs --json: no certificate issued" py "$LAB_DIR/certs.observe.json" '
sys.exit(0 if d["certificates"] == [] else 1)'
rg_ctl audit --json > "$LAB_DIR/audit.observe.json"
# An attestation success leaves an `attest` row, the attested config a
# `config_served` row, a certificate a `certificate_issued` row ((e) sees
# them appear once the policy is accepted); an observing pool has none.
lab_check_shown "(b) rackgatectl audit --json: no attest, config_served or certificate_issued row" \
  py "$LAB_DIR/audit.observe.json" '
bad = [e for e in d["entries"] if e.get("action") in sys.argv[2].split()]
print(*("# " + json.dumps(e) for e in bad), sep="\n")
sys.exit(1 if bad else 0)' "$AUDIT_SUCCESS"
lab_check_shown "(b) rackgated attested no machine (no \"attested HOST\" line in its log)" \
  bash -c "! grep -E '\\[protocol\\] attested ' '$RG_DIR/rackgated.log'"
lab_check_shown "(b) rackgated never served the attested config (no \"attested config ... served\" line)" \
  bash -c "! grep -E 'attested config .*served to' '$RG_DIR/rackgated.log'"
for m in "${MACHINES[@]}"; do
  lab_check_shown "(b) ${HOST[$m]}'s disk holds the public config only (Ignition's fetch): no secret, no kubelet credentials" \
    public_only "$m"
done

# --- (c) propose ------------------------------------------------------------------
echo "# (c) rackgatectl policy propose"
t=$(date +%s%N)
lab_check_shown "(c) rackgatectl policy propose prints the proposal" \
  bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' policy propose --pool $POOL --output '$LAB_DIR/proposed.json' \
    > '$LAB_DIR/propose.txt' 2>&1"
head -n 40 "$LAB_DIR/propose.txt" | sed 's/^/#   /'  # head reads the file: no SIGPIPE under pipefail
rg_ctl policy propose --pool "$POOL" --json > "$LAB_DIR/propose.json"
lab_check_shown "(c) propose --json: odd names node-odd only (PCR 4 differs); node-a1 and node-a2 agree on the proposed PCR 4" \
  py "$LAB_DIR/propose.json" '
odd = d["odd"]
print("# odd:", json.dumps(odd)[:600])
rules = {r["rule"]: r for r in d["rules"]}
pcr4 = rules["pcrs.sha256.4"]
print("# pcrs.sha256.4:", pcr4["proposed"], pcr4["agreeing"], "summary:", d["summary"])
ok = (len(odd) == 1 and odd[0]["hostname"] == "node-odd" and
      any(x["rule"] == "pcrs.sha256.4" for x in odd[0]["differences"]) and
      pcr4["proposed"] and pcr4["agreeing"] == ["node-a1", "node-a2"] and
      d["summary"] == {"machines": 3, "odd": 1, "platforms": 1, "unusable": 0})
sys.exit(0 if ok else 1)'
lab_check_shown "(c) the text names node-odd, not node-a1 nor node-a2, in its odd section" \
  lab_python - "$LAB_DIR/propose.txt" <<'PY'
import sys
text = open(sys.argv[1]).read()
# The text lists the odd machines before the proposed policy: only that part.
head = text.split("proposed policy (sha256")[0]
lines = [l for l in head.splitlines() if "node-odd" in l]
print("# lines naming node-odd:", lines[:4])
sys.exit(0 if lines and "node-a1" not in head and "node-a2" not in head else 1)
PY
SHA="$(boot_json "$LAB_DIR/propose.json" proposal_sha256 2>/dev/null || echo '')"
lab_check_shown "(c) propose --json has a proposal_sha256 ($SHA), the one the text shows" \
  bash -c "[[ '$SHA' =~ ^[0-9a-f]{64}\$ ]] && grep -q -- '--proposal $SHA' '$LAB_DIR/propose.txt'"
lab_check_shown "(c) the proposed policy pins the sha256 PCRs the two alike share (PCR 0-9 and 14 rules)" \
  py "$LAB_DIR/proposed.json" '
pcrs = d.get("pcrs", {}).get("sha256", {})
print("# pcrs:", sorted(pcrs))
sys.exit(0 if {"0", "4", "7"} <= set(pcrs) else 1)'
lab_check_shown "(c) propose changed nothing: the pool still observes, no policy" \
  bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' policy show --pool $POOL | grep -q 'OBSERVING'"
echo "# (c) propose: $(lab_ms_since "$t") ms"

# --- (d) accept -------------------------------------------------------------------
echo "# (d) rackgatectl policy accept --proposal $SHA"
t=$(date +%s%N)
lab_check_shown "(d) rackgatectl policy accept --pool $POOL --proposal SHA succeeds" \
  bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' policy accept --pool $POOL --proposal $SHA \
    --reason 'lab: the two alike' > '$LAB_DIR/accept.txt' 2>&1"
sed 's/^/#   /' "$LAB_DIR/accept.txt" | head -n 12
rg_ctl policy show --pool "$POOL" --json > "$LAB_DIR/show.enforce.json"
lab_check_shown "(d) policy show --json: enforcing, the accepted policy in force" py "$LAB_DIR/show.enforce.json" '
print("#", d["mode"])
sys.exit(0 if d["mode"] == "enforce" and d.get("policy") else 1)'
lab_check_shown "(d) policy show says enforcing" \
  bash -c "'$RACKGATECTL' --socket '$RG_DIR/admin.sock' policy show --pool $POOL | grep -q 'enforcing its boot policy'"
rg_ctl audit --json > "$LAB_DIR/audit.accept.json"
lab_check_shown "(d) rackgatectl audit --json: a pool_policy row" py "$LAB_DIR/audit.accept.json" '
rows = [e for e in d["entries"] if e.get("action") == "pool_policy"]
print("#", json.dumps(rows[-1])[:400] if rows else "none")
sys.exit(0 if rows else 1)'
# The command line the accepted policy pins: only the file --output wrote
# holds its text.
CMDLINE="$(py "$LAB_DIR/proposed.json" 'print(d.get("kernel_cmdline", {}).get("exact", ""), end="")')"
CMDLINE_SHA="sha256:$(printf '%s' "$CMDLINE" | sha256sum | cut -d' ' -f1)"
lab_check_shown "(d) the policy pins the two alike's kernel command line (grub's, PCR 8)" \
  bash -c "[[ -n \"\$1\" ]] || { echo 'no kernel_cmdline.exact in proposed.json'; exit 1; }" _ "$CMDLINE"
lab_check_shown "(d) policy accept prints it as its digest: + kernel_cmdline.exact $CMDLINE_SHA" \
  grep -qxF "+ kernel_cmdline.exact $CMDLINE_SHA" "$LAB_DIR/accept.txt"
lab_check_shown "(d) the pool_policy audit row's diff has the digest" \
  grep -qF "+ kernel_cmdline.exact $CMDLINE_SHA" "$LAB_DIR/audit.accept.json"
rg_ctl audit > "$LAB_DIR/audit.accept.txt"
rg_ctl policy show --pool "$POOL" > "$LAB_DIR/show.enforce.txt"
rg_ctl policy propose --pool "$POOL" > "$LAB_DIR/propose.after.txt"
for f in propose.txt propose.json accept.txt audit.accept.json audit.accept.txt show.enforce.json show.enforce.txt \
         propose.after.txt rackgated.log; do
  file="$LAB_DIR/$f"; [[ "$f" == rackgated.log ]] && file="$RG_DIR/rackgated.log"
  lab_check_shown "(d) the kernel command line's text is not in $f" \
    bash -c 'out="$(grep -nF -- "$1" "$2" | cut -c 1-200)"; [[ -z "$out" ]] || { echo "$out"; exit 1; }' _ "$CMDLINE" "$file"
done
rg_ctl status > "$LAB_DIR/status.enforce.txt"
lab_check_shown "(d) rackgatectl status no longer warns about $POOL" \
  bash -c "! grep -q 'WARNING: pool $POOL is OBSERVING' '$LAB_DIR/status.enforce.txt'"

# --- (e) judged -------------------------------------------------------------------
echo "# (e) the waiting agents come back and are judged"
declare -A RC=()
for m in "${MACHINES[@]}"; do
  RC[$m]=0; wait "${PID[$m]}" || RC[$m]=$?
done
echo "# (e) judged: $(lab_ms_since "$t") ms after the accept"
lab_check_shown "(e) rackgated could use the accepted policy (no 'boot policy ... is unusable' in its log)" \
  bash -c "! grep -m 3 'is unusable' '$RG_DIR/rackgated.log'"
for m in a1 a2; do
  lab_check_shown "(e) ${HOST[$m]}: the same agent run attests and joins (exit ${RC[$m]})" \
    bash -c "[[ ${RC[$m]} == $RC_OK ]] && grep -Eq '$R_JOINED' '$(lab_dir "$m")/agent.last' || { tail -n 4 '$(lab_dir "$m")/agent.last'; exit 1; }"
  lab_check_shown "(e) ${HOST[$m]} is joined" state_is "${HOST[$m]}" joined
done
lab_check_shown "(e) node-odd is refused (exit ${RC[odd]}): 403 boot_policy_violation, pcrs:pcr_mismatch" \
  bash -c "[[ ${RC[odd]} == $RC_REFUSED ]] && grep -Eq '$R_VIOLATION' '$(lab_dir odd)/agent.last' || { tail -n 4 '$(lab_dir odd)/agent.last'; exit 1; }"
lab_check_shown "(e) node-odd stays enrolled, its disk the public config only" odd_untouched
lab_check_shown "(e) rackgatectl status lists node-odd's failure with the rule (pcrs:pcr_mismatch)" \
  status_reasons node-odd pcrs:pcr_mismatch
rg_ctl show node-odd --json > "$LAB_DIR/odd.json"
lab_check_shown "(e) rackgatectl show node-odd --json names boot_policy_violation" \
  grep -q boot_policy_violation "$LAB_DIR/odd.json"
rg_ctl certs --json > "$LAB_DIR/certs.enforce.json"
lab_check_shown "(e) rackgatectl certs: a client and a serving certificate for each alike machine, none for node-odd" \
  py "$LAB_DIR/certs.enforce.json" '
got = sorted((c["hostname"], c["kind"]) for c in d["certificates"])
print("#", got)
sys.exit(0 if [h for h, _ in got] == ["node-a1", "node-a1", "node-a2", "node-a2"] else 1)'

rg_ctl audit --json > "$LAB_DIR/audit.enforce.json"
lab_check_shown "(e) rackgatectl audit: attest, config_served and certificate_issued rows for node-a1 and node-a2, none for node-odd" \
  py "$LAB_DIR/audit.enforce.json" '
want = set(sys.argv[2].split())
got = {}
for e in d["entries"]:
    if e.get("action") in want:
        got.setdefault(e.get("hostname"), set()).add(e["action"])
print("#", {h: sorted(a) for h, a in got.items()})
sys.exit(0 if got == {"node-a1": want, "node-a2": want} else 1)' "$AUDIT_SUCCESS"
lab_check_shown "(e) rackgated served the attested config to node-a1 and node-a2 only" \
  bash -c "grep -q 'attested config .*served to node-a1 ' '$RG_DIR/rackgated.log' &&
           grep -q 'attested config .*served to node-a2 ' '$RG_DIR/rackgated.log' &&
           ! grep -q 'attested config .*served to node-odd ' '$RG_DIR/rackgated.log'"

rg_stop
echo "# policy.sh total: $(lab_ms_since "$T_ALL") ms"
lab_finish
