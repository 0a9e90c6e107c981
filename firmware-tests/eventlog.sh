#!/usr/bin/env bash
# eventlog.sh — a real measured boot in the lab: a real TCG event log (GCE,
# Ubuntu 21.04) is replayed into a fresh swtpm with tpm2_pcrextend, then
# `rackgatectl eventlog replay`, `verify-quote` and `policy check` must agree
# with what the TPM quotes — and `policy check` must name the PCR once the TPM
# holds one extend the log does not record.
# Usage: eventlog.sh RACKGATECTL
set -euo pipefail

# Expected outcomes: exit codes and reasons on stderr (extended regexes).
# `policy check` prints every violation as "rackgatectl policy check:
# refused: RULE: REASON: MESSAGE", then "N violation(s)". The eventlog
# comparison (attest/eventlog.cc ComparePcrs) names the first bank and PCR
# that differs: "<bank> PCR <n> does not match the event log".
RC_PASS=0
RC_FAIL=1
RC_UNUSABLE=2
R_MISMATCH='eventlog_pcr_mismatch'
r_mismatch_at() { echo "refused: eventlog: ${R_MISMATCH}: $1 PCR $2 does not match the event log\$"; }
R_ONE_VIOLATION=': 1 violation$'
R_POLICY_MALFORMED=': policy_malformed: .*"version"'

# The log and what the lab TPM can replay of it: swtpm has sha1 and sha256
# banks (the log also has sha384, which is left alone).
LOG_NAME=tpm2-tools_event-gce-ubuntu-2104-log.bin
BANKS=(sha1 sha256)
PCRS=0,1,2,3,4,5,6,7,8,9,14   # every PCR this log extends
EXTENDS_PER_CALL=32           # PCR extends per tpm2_pcrextend call

RACKGATECTL="${1:?usage: eventlog.sh RACKGATECTL}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lab.sh
source "$HERE/lab.sh"

lab_skip_unless_tools
for t in tpm2_eventlog tpm2_pcrread; do
  command -v "$t" >/dev/null 2>&1 || lab_skip "$t not installed"
done
if [[ ! -x "$RACKGATECTL" ]]; then echo "not ok - rackgatectl not found at $RACKGATECTL"; echo "1..1"; exit 1; fi
TESTDATA="${RACKGATE_TESTDATA_DIR:-$HERE/../testdata}"
LOG="$TESTDATA/eventlogs/$LOG_NAME"
if [[ ! -r "$LOG" ]]; then echo "not ok - event log not found at $LOG"; echo "1..1"; exit 1; fi
lab_init eventlog
T0=$SECONDS

lab_ca lab
lab_machine m1 lab
lab_ek_rsa m1
D="$(lab_dir m1)"
lab_ak m1 rsa rsassa "$D/ak"
NONCE="$(openssl rand -hex 20)"
# The empty policy: only the eventlog check (log replays to the quote) runs.
# ({} alone is refused: "version" is required.)
echo '{"version": 1}' > "$D/policy.json"
echo '{}' > "$D/nopolicy.json"

# ------------------------------------------------------------ the log ----

# tpm2_eventlog (the real peer) lists every event with its digests, and ends
# with its own replay ("pcrs:"). Out of it: one line "PCR SHA1 SHA256" per
# event that extends (everything but EV_NO_ACTION), in log order, and the
# replayed values as JSON. A StartupLocality event (an EV_NO_ACTION whose
# data starts "StartupLocality\0") sets PCR 0's reset value to the locality
# instead of extending: TPM2_Startup at that locality would reproduce it,
# which this lab does not do, so with a non-zero locality PCR 0 is left out
# of the comparisons. This log has none.
tpm2_eventlog "$LOG" > "$D/events.yaml" 2>"$D/eventlog.err"
lab_python - "$D/events.yaml" "$LOG" "$D/extends.txt" "$D/peer.json" "$D/locality" <<'EOF'
import json, re, sys
yaml, log, out_extends, out_peer, out_locality = sys.argv[1:]
events, peer, cur, section, bank = [], {}, None, None, None
for line in open(yaml):
    line = line.rstrip("\n")
    if line == "events:":
        section = "events"; continue
    if line == "pcrs:":
        section = "pcrs"; continue
    if section == "events":
        m = re.match(r"^- EventNum: (\d+)$", line)
        if m:
            cur = {"num": int(m.group(1)), "digests": {}, "alg": None}
            events.append(cur); continue
        m = re.match(r"^  PCRIndex: (\d+)$", line)
        if m: cur["pcr"] = int(m.group(1)); continue
        m = re.match(r"^  EventType: (\S+)$", line)
        if m: cur["type"] = m.group(1); continue
        m = re.match(r"^  - AlgorithmId: (\S+)$", line)
        if m: cur["alg"] = m.group(1); continue
        m = re.match(r'^    Digest: "([0-9a-fA-F]+)"$', line)
        if m and cur["alg"]:
            cur["digests"][cur["alg"]] = m.group(1).lower(); cur["alg"] = None; continue
    elif section == "pcrs":
        m = re.match(r"^  (\w+):$", line)
        if m: bank = m.group(1); peer[bank] = {}; continue
        m = re.match(r"^    (\d+)\s*: 0x([0-9a-fA-F]+)$", line)
        if m: peer[bank][m.group(1)] = m.group(2).lower()
with open(out_extends, "w") as f:
    for e in events:
        if e.get("type") == "EV_NO_ACTION":
            continue
        if "sha1" not in e["digests"] or "sha256" not in e["digests"]:
            sys.exit(f"event {e['num']} lacks a sha1 or sha256 digest")
        f.write(f"{e['pcr']} {e['digests']['sha1']} {e['digests']['sha256']}\n")
json.dump({"pcrs": peer}, open(out_peer, "w"))
# StartupLocality: TCG PC Client PFP, EV_NO_ACTION data "StartupLocality\0"
# then one byte.
data = open(log, "rb").read()
i = data.find(b"StartupLocality\0")
open(out_locality, "w").write(str(data[i + 16]) if i >= 0 else "none")
EOF
NEXT="$(wc -l < "$D/extends.txt")"
LOCALITY="$(cat "$D/locality")"
echo "# $LOG_NAME: $NEXT extends (EV_NO_ACTION skipped), StartupLocality: $LOCALITY"
if [[ "$LOCALITY" != none && "$LOCALITY" != 0 ]]; then
  echo "# StartupLocality $LOCALITY: PCR 0 cannot be reproduced by tpm2_pcrextend; left out"
  PCRS="${PCRS#0,}"
fi
if (( NEXT > 0 )); then lab_ok "tpm2_eventlog lists $NEXT extends with sha1 and sha256 digests"; else lab_not_ok "tpm2_eventlog lists extends"; fi

# ------------------------------------------------------------- replay ----

T1=$(date +%s%N)
args=()
replay_ok=1
flush_extends() {
  if (( ${#args[@]} == 0 )); then return 0; fi
  lab_tpm m1 tpm2_pcrextend "${args[@]}" >/dev/null || replay_ok=0
  args=()
}
while read -r pcr s1 s256; do
  args+=("$pcr:sha1=$s1,sha256=$s256")
  if (( ${#args[@]} >= EXTENDS_PER_CALL )); then flush_extends; fi
done < "$D/extends.txt"
flush_extends
echo "# replayed $NEXT extends in $(( ($(date +%s%N) - T1) / 1000000 )) ms"
if (( replay_ok )); then lab_ok "$NEXT extends replayed into a fresh swtpm"; else lab_not_ok "replay with tpm2_pcrextend" "$(tail -n 5 "$D/tpm.log")"; fi

# ------------------------------------------------------------ helpers ----


# pcrs_json OUT: the machine's PCRs (both banks, $PCRS) from tpm2_pcrread, as
# {"pcrs": {"sha1": {"0": hex...}, ...}}.
pcrs_json() {
  lab_tpm m1 tpm2_pcrread "sha1:$PCRS+sha256:$PCRS" > "$1.yaml" || return 1
  lab_python - "$1.yaml" "$1" <<'EOF'
import json, re, sys
out, bank = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"^  (\w+):$", line)
    if m: bank = m.group(1); out[bank] = {}; continue
    m = re.match(r"^    (\d+)\s*: 0x([0-9a-fA-F]+)$", line)
    if m: out[bank][m.group(1)] = m.group(2).lower()
json.dump({"pcrs": out}, open(sys.argv[2], "w"))
EOF
}

# quote_json PREFIX: the values of a serialized `tpm2_quote -o` file (layout
# in README.md) as {"pcrs": {bank: {pcr: hex}}}, written to PREFIX.json.
quote_json() {
  lab_python - "$1.pcrs" "$1.json" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
names = {0x0004: "sha1", 0x000b: "sha256", 0x000c: "sha384", 0x000d: "sha512"}
(nbanks,) = struct.unpack_from("<I", b, 0)
sel = []
for k in range(nbanks):
    alg, size = struct.unpack_from("<HB", b, 4 + 8 * k)
    bits = b[4 + 8 * k + 3: 4 + 8 * k + 3 + size]
    for i in range(8 * size):
        if bits[i // 8] >> (i % 8) & 1:
            sel.append((names[alg], i))
(nlists,) = struct.unpack_from("<I", b, 132)
values = []
for k in range(nlists):
    off = 136 + 532 * k
    (count,) = struct.unpack_from("<I", b, off)
    for j in range(count):
        (size,) = struct.unpack_from("<H", b, off + 4 + 66 * j)
        values.append(b[off + 6 + 66 * j: off + 6 + 66 * j + size].hex())
if len(values) != len(sel):
    sys.exit(f"{len(values)} values for {len(sel)} selected PCRs")
out = {}
for (bank, pcr), v in zip(sel, values):
    out.setdefault(bank, {})[str(pcr)] = v
json.dump({"pcrs": out}, open(sys.argv[2], "w"))
EOF
}

# same_pcrs A.json B.json BANKS PCRS: the two agree on every listed PCR (a
# PCR absent from one of them counts as a difference). Prints differences.
same_pcrs() {
  lab_python - "$@" <<'EOF'
import json, sys
a, b = (json.load(open(p))["pcrs"] for p in sys.argv[1:3])
diff = []
for bank in sys.argv[3].split(","):
    for pcr in sys.argv[4].split(","):
        x, y = a.get(bank, {}).get(pcr), b.get(bank, {}).get(pcr)
        if x is None or x != y:
            diff.append(f"{bank} PCR {pcr}: {x} vs {y}")
print("\n".join(diff))
sys.exit(1 if diff else 0)
EOF
}

# check_same DESC A.json B.json BANKS PCRS
check_same() {
  local desc="$1" out; shift
  if out="$(same_pcrs "$@" 2>&1)"; then lab_ok "$desc"; else lab_not_ok "$desc" "$out"; fi
}

vq() { # vq PREFIX NONCE [args...]
  local q="$1" nonce="$2"; shift 2
  "$RACKGATECTL" verify-quote --ak-public "$D/ak.pub" --message "$q.msg" --signature "$q.sig" \
    --pcrs "$q.pcrs" --nonce "$nonce" "$@"
}
pc() { # pc PREFIX: policy check of the log against quote PREFIX, empty policy
  "$RACKGATECTL" policy check --policy "$D/policy.json" --eventlog "$LOG" \
    --pcrs "$1.pcrs" --message "$1.msg"
}

# quote_both TAG: quotes of each bank over $PCRS to $D/q-TAG-BANK, checked
# with verify-quote and decoded to .json.
quote_both() {
  local tag="$1" bank q
  for bank in "${BANKS[@]}"; do
    q="$D/q-$tag-$bank"
    if lab_quote m1 "$D/ak" "$NONCE" "$bank:$PCRS" "$q"; then
      lab_expect 0 "" "$tag: $bank:$PCRS quote verifies" vq "$q" "$NONCE" --pcr-list "$bank:$PCRS"
      quote_json "$q" || lab_not_ok "$tag: decode $bank quote values"
    else
      lab_not_ok "$tag: tpm2_quote $bank:$PCRS" "$(tail -n 5 "$D/tpm.log")"
    fi
  done
}

# ---------------------------------------------- log and quote agree ----

if "$RACKGATECTL" eventlog replay "$LOG" --json > "$D/replay.json" 2>"$D/replay.err"; then
  lab_ok "rackgatectl eventlog replay --json"
else
  lab_not_ok "rackgatectl eventlog replay --json" "$(head -c 600 "$D/replay.err")"
fi
check_same "rackgatectl replay equals tpm2_eventlog's own replay (sha1, sha256, sha384)" \
  "$D/replay.json" "$D/peer.json" sha1,sha256,sha384 "$PCRS"
pcrs_json "$D/pcrread.json" || lab_not_ok "tpm2_pcrread"
check_same "rackgatectl replay equals tpm2_pcrread after the replay (sha1, sha256)" \
  "$D/replay.json" "$D/pcrread.json" sha1,sha256 "$PCRS"

quote_both replayed
lab_expect "$RC_UNUSABLE" "$R_POLICY_MALFORMED" "policy {} without \"version\" is refused as malformed" \
  "$RACKGATECTL" policy check --policy "$D/nopolicy.json" --eventlog "$LOG" \
  --pcrs "$D/q-replayed-sha256.pcrs" --message "$D/q-replayed-sha256.msg"
for bank in "${BANKS[@]}"; do
  q="$D/q-replayed-$bank"
  check_same "replayed: quoted $bank values equal rackgatectl's replay" \
    "$D/replay.json" "$q.json" "$bank" "$PCRS"
  check_same "replayed: quoted $bank values equal tpm2_pcrread" \
    "$D/pcrread.json" "$q.json" "$bank" "$PCRS"
  lab_expect "$RC_PASS" "" "replayed: policy check of log and $bank quote passes" pc "$q"
done

# A PCR the log never extends (10) is at its reset value in the TPM too.
q="$D/q-pcr10"
if lab_quote m1 "$D/ak" "$NONCE" "sha256:$PCRS,10" "$q"; then
  lab_expect "$RC_PASS" "" "replayed: quote also over PCR 10 (not in the log, at reset) passes" pc "$q"
else
  lab_not_ok "tpm2_quote sha256:$PCRS,10"
fi

# ------------------------------- an extend the quote does not cover ----

lab_tpm m1 tpm2_pcrextend \
  "16:sha1=$(printf 'not in the log' | openssl dgst -sha1 -r | cut -d' ' -f1),sha256=$(printf 'not in the log' | openssl dgst -sha256 -r | cut -d' ' -f1)" \
  >/dev/null || lab_not_ok "tpm2_pcrextend 16"
quote_both pcr16
for bank in "${BANKS[@]}"; do
  q="$D/q-pcr16-$bank"
  check_same "after extending PCR 16: quoted $bank values are unchanged" \
    "$D/q-replayed-$bank.json" "$q.json" "$bank" "$PCRS"
  lab_expect "$RC_PASS" "" "after extending PCR 16: policy check over $bank:$PCRS still passes" pc "$q"
done
# ...but a quote that covers PCR 16 shows an extend the log does not record.
q="$D/q-pcr16-covered"
if lab_quote m1 "$D/ak" "$NONCE" "sha256:$PCRS,16" "$q"; then
  lab_expect 0 "" "after extending PCR 16: quote over sha256:$PCRS,16 verifies" \
    vq "$q" "$NONCE" --pcr-list "sha256:$PCRS,16"
  lab_expect "$RC_FAIL" "$(r_mismatch_at sha256 16)" \
    "after extending PCR 16: policy check over sha256:$PCRS,16 names sha256 PCR 16" pc "$q"
else
  lab_not_ok "tpm2_quote sha256:$PCRS,16"
fi

# ------------------------------------ one extend the log lacks: PCR 7 ----

lab_tpm m1 tpm2_pcrextend \
  "7:sha1=$(printf 'rogue' | openssl dgst -sha1 -r | cut -d' ' -f1),sha256=$(printf 'rogue' | openssl dgst -sha256 -r | cut -d' ' -f1)" \
  >/dev/null || lab_not_ok "tpm2_pcrextend 7"
quote_both pcr7
OTHERS="${PCRS/7,/}"
for bank in "${BANKS[@]}"; do
  q="$D/q-pcr7-$bank"
  check_same "after extending PCR 7: quoted $bank PCRs other than 7 still equal the replay" \
    "$D/replay.json" "$q.json" "$bank" "$OTHERS"
  if same_pcrs "$D/replay.json" "$q.json" "$bank" 7 >/dev/null 2>&1; then
    lab_not_ok "after extending PCR 7: quoted $bank PCR 7 differs from the replay"
  else
    lab_ok "after extending PCR 7: quoted $bank PCR 7 differs from the replay"
  fi
  lab_expect "$RC_FAIL" "$(r_mismatch_at "$bank" 7)" \
    "after extending PCR 7: policy check over $bank refuses, naming $bank PCR 7" pc "$q"
  # Exactly one violation: the log mismatch (the policy has no rules).
  lab_expect "$RC_FAIL" "$R_ONE_VIOLATION" "after extending PCR 7: policy check over $bank reports 1 violation" pc "$q"
done

echo "# eventlog: $((SECONDS - T0)) s"
lab_finish
