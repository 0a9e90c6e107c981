#!/usr/bin/env bash
# Integration: delete, rename and the audit chain against a real rackgated
# (docs/lifecycle.md, "Delete and rename"; docs/audit.md). A swtpm machine is
# enrolled under a typo, renamed, attested, refused delete and rename while
# active, revoked, deleted, and enrolled again with the same EK under another
# name; `audit verify` finds the chain intact, then finds a row edited with the
# sqlite3 shell (append-only trigger dropped, as an attacker with the file
# would) and, on a copy, a deleted middle row, online and offline.
#   audit.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
for t in curl sqlite3; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
lab_init audit
trap lab_cleanup EXIT
rg_init "$RACKGATED" "$RACKGATECTL"
lab_ca lab

new_machine() {  # NAME
  lab_machine "$1" lab; lab_ek_rsa "$1"; lab_pcr_extend "$1"; lab_ak "$1" rsa rsassa "$(lab_dir "$1")/ak"
}
new_machine m1; new_machine m2
rg_trust lab
rg_start
M1="$(lab_dir m1)"; M2="$(lab_dir m2)"
DB="$RG_DIR/state/rackgate.db"
# jq-less JSON checks: jtrue FILE EXPR holds for `d`, the file's document.
jtrue() { lab_python -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }
W="$LAB_DIR/out"; mkdir -p "$W"

lab_check "rackgated logs the audit chain's head at start" grep -q 'audit chain intact: .* head row .* hash [0-9a-f]\{64\}' "$RG_DIR/rackgated.log"

# --- a hostname typo, renamed ---------------------------------------------------
lab_check "enroll m1 as nod-1 (a typo)" rg_ctl enroll --hostname nod-1 --pool default --ek-cert "$M1/ek-rsa.der"
lab_check "enroll m2 as node-2" rg_ctl enroll --hostname node-2 --pool default --ek-cert "$M2/ek-rsa.der"
lab_expect 0 "" "rename nod-1 node-1" rg_ctl rename nod-1 node-1 --reason "typo in the inventory"
lab_check "node-1 is enrolled" test "$(rg_state node-1)" == enrolled
lab_expect 1 "hostname_unknown" "nod-1 is gone" rg_ctl show nod-1
lab_expect 1 "hostname_taken: 'node-1' is already the hostname of a enrolled machine" \
  "rename to a taken name names the holder" rg_ctl rename node-2 node-1
lab_expect 1 "hostname_invalid" "rename to an invalid name" rg_ctl rename node-2 Node_2
lab_expect 2 "give OLD and NEW" "rename with one name is unusable" rg_ctl rename node-2
rg_ctl rename node-2 node-2b --json > "$W/rename.json"
lab_check "rename --json prints the machine" jtrue "$W/rename.json" 'd["hostname"] == "node-2b" and d["renamed_from"] == "node-2"'

# --- an attested machine must be revoked (or reset) first ----------------------
st="$(attest m1 rsa "$M1/ak")"
lab_check "node-1 attests under its new name ($st)" test "$st" == 200
lab_expect 1 'machine_active: .*rackgatectl revoke node-1' "delete of an attested machine names the fix" \
  rg_ctl delete node-1
lab_expect 1 'machine_active: .*rackgatectl reset node-1' "rename of an attested machine names the fix" \
  rg_ctl rename node-1 node-1b
lab_check "revoke node-1" rg_ctl revoke node-1 --reason "moved to rack 7"
lab_expect 0 "" "delete node-1" rg_ctl delete node-1 --reason "moved to rack 7"
lab_expect 1 "hostname_unknown" "node-1 is gone" rg_ctl show node-1
lab_expect 1 "hostname_unknown" "delete of an unknown machine" rg_ctl delete node-1

# --- the same EK, enrolled again under another name ----------------------------
lab_check "enroll m1's EK again as node-7" rg_ctl enroll --hostname node-7 --pool default --ek-cert "$M1/ek-rsa.der"
st="$(attest m1 rsa "$M1/ak")"
lab_check "node-7 attests with that EK ($st)" test "$st" == 200
lab_check "node-7 is attested" test "$(rg_state node-7)" == attested

rg_ctl audit --json --limit 100 > "$W/audit.json"
lab_check "machine_renamed is audited with from and to" jtrue "$W/audit.json" \
  'any(e["action"] == "machine_renamed" and e["detail"] == {"from": "nod-1", "to": "node-1"} and e["why"] == "typo in the inventory" for e in d["entries"])'
lab_check "machine_deleted is audited with the EK hash and the state" jtrue "$W/audit.json" \
  'any(e["action"] == "machine_deleted" and e["hostname"] == "node-1" and e["detail"]["state"] == "revoked" and len(e["detail"]["ek_hash"]) == 64 for e in d["entries"])'

# The query's parameters (docs/protocol.md, "Admin API: query parameters"):
# a hostname is sent percent-encoded and taken whole; a malformed number is
# refused, never taken for the default.
rg_ctl audit --json --hostname 'node-7&limit=1' > "$W/odd-host.json"
lab_check "audit --hostname with & and = is one hostname" jtrue "$W/odd-host.json" 'd["entries"] == []'
code="$(curl -sS -o "$W/bad-limit.json" -w '%{http_code}' --max-time "$RG_MAX_TIME" \
  --unix-socket "$RG_DIR/admin.sock" 'http://localhost/v1/admin/audit?limit=abc' || echo 000)"
lab_check "GET /v1/admin/audit?limit=abc is 400 ($code)" test "$code" == 400
lab_check "... field_invalid, naming limit" jtrue "$W/bad-limit.json" \
  'd["error"]["reason"] == "field_invalid" and "limit" in d["error"]["message"]'

# --- the audit chain ---------------------------------------------------------------
lab_expect 0 "" "audit verify: intact" rg_ctl audit verify
rg_ctl audit verify > "$W/verify.txt"
lab_check "audit verify prints rows and head" grep -Eq '^chain intact: [0-9]+ rows, head [0-9a-f]{64}$' "$W/verify.txt"
rg_ctl audit verify --json > "$W/verify.json"
lab_check "audit verify --json: intact" jtrue "$W/verify.json" 'd["intact"] is True and d["rows"] >= 9 and len(d["head_hash"]) == 64'
lab_expect 0 "" "audit verify --database (offline, read-only): intact" rg_ctl audit verify --database "$DB"
ANCHOR="$(lab_python -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%d:%s" % (d["head_id"], d["head_hash"]))' "$W/verify.json")"
lab_expect 0 "" "audit verify --anchor of the head: intact" rg_ctl audit verify --anchor "$ANCHOR"
lab_expect 2 "--anchor must be ID:HASH" "a malformed anchor is unusable" rg_ctl audit verify --anchor 12:abc
lab_expect 2 "extra" "audit verify with an extra argument is unusable" rg_ctl audit verify extra
lab_expect 2 "db_error" "audit verify --database of a missing file" rg_ctl audit verify --database "$LAB_DIR/none.db"

sqlite3 "$DB" ".backup '$W/copy.db'"
sqlite3 "$DB" ".backup '$W/cut.db'"
DELETED_ID="$(lab_python -c 'import json,sys; print([e["id"] for e in json.load(open(sys.argv[1]))["entries"] if e["action"] == "machine_deleted"][0])' "$W/audit.json")"
sqlite3 "$DB" "DROP TRIGGER audit_no_update; UPDATE audit SET why = 'nothing happened' WHERE id = $DELETED_ID;"
lab_expect 1 "audit_chain_broken: row $DELETED_ID was edited" "audit verify finds the row edited with sqlite3" \
  rg_ctl audit verify
rg_ctl audit verify --json > "$W/broken.json" 2>/dev/null || true
lab_check "audit verify --json names the row and the problem" jtrue "$W/broken.json" \
  "d['intact'] is False and d['bad_row_id'] == $DELETED_ID and d['problem'] == 'hash_mismatch'"
lab_expect 1 "audit_chain_broken: row $DELETED_ID was edited" "offline verify finds it too" \
  rg_ctl audit verify --database "$DB"
lab_check "rackgated logs the broken chain" grep -q "audit verify by .*: the audit chain is broken: row $DELETED_ID" "$RG_DIR/rackgated.log"

MIDDLE=5
sqlite3 "$W/copy.db" "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id = $MIDDLE;"
lab_expect 1 "audit_chain_broken: row $((MIDDLE + 1)) does not chain to row $((MIDDLE - 1)): rows $MIDDLE..$MIDDLE were deleted" \
  "offline verify finds a deleted middle row" rg_ctl audit verify --database "$W/copy.db"

HEAD_ID="${ANCHOR%%:*}"
sqlite3 "$W/cut.db" "DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE id > $((HEAD_ID - 2));"
lab_expect 0 "" "the newest rows cut off: the chain alone still verifies" rg_ctl audit verify --database "$W/cut.db"
lab_expect 1 "audit_chain_broken: row $HEAD_ID, whose hash was kept outside, is gone" \
  "the newest rows cut off: the anchor shows it" rg_ctl audit verify --database "$W/cut.db" --anchor "$ANCHOR"

rg_stop
lab_expect 1 "audit_chain_broken" "offline verify with rackgated down" rg_ctl audit verify --database "$DB"
lab_finish
