#!/usr/bin/env bash
# Integration: `rackgatectl db migrate` end to end (docs/ha.md, "Moving an
# appliance from SQLite to PostgreSQL").
# An appliance on SQLite gets machines and pools; the migration is refused
# while rackgated runs (its admin socket answers; or, socket aside, it has the
# file open); stopped, the store is copied into a throwaway PostgreSQL
# (script/pg-lab run -- sets RACKGATE_TEST_POSTGRES), a dry run first, the
# URL's password never printed; rackgated started on the URL shows the same
# machines, pools and audit chain; a second migration is refused
# (target_not_empty). Strict arguments throughout.
#   migrate.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
command -v curl >/dev/null || lab_skip "curl missing"
lab_init migrate
rg_init "$RACKGATED" "$RACKGATECTL"
EK="$RACKGATE_SOURCE_DIR/attest/testdata/ek"
cp "$EK/swtpm-localca-root.pem" "$RG_DIR/roots/"
cp "$EK/swtpm-localca-issuer.pem" "$RG_DIR/intermediates/"
W="$LAB_DIR/out"; mkdir -p "$W"
C="$RG_CTL"
DB="$RG_DIR/state/rackgate.db"
S="$RG_DIR/admin.sock"
# jq-less JSON checks: jtrue FILE EXPR holds for `d`, the file's document.
jtrue() { lab_python -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }
# A URL nobody listens on, with a password that must never be printed.
FAKE_URL="postgresql://rackgate:never-printed-pw@127.0.0.1:1/rackgate"

# --- strict arguments (no database needed) ----------------------------------------
lab_expect 0 "" "db migrate --help" "$C" db migrate --help
lab_check "db migrate --help: synopsis and exit status" bash -c \
  "'$C' db migrate --help | grep -q '^Usage: rackgatectl db migrate --to URL' && '$C' db migrate --help | grep -q '^Exit status: 0'"
lab_expect 0 "" "db --help" "$C" db --help
lab_expect 2 "missing --to" "without --to: exit 2" "$C" db migrate --from "$DB"
lab_expect 2 "unknown option --bogus" "an unknown option: exit 2, named" "$C" db migrate --to "$FAKE_URL" --bogus
lab_expect 2 "unexpected argument 'surplus'|surplus" "an extra argument: exit 2" "$C" db migrate --to "$FAKE_URL" surplus
lab_expect 2 "--from PATH or --state-dir DIR, not both" "--from with --state-dir: exit 2" \
  "$C" db migrate --to "$FAKE_URL" --from "$DB" --state-dir "$RG_DIR/state"
lab_expect 2 "--to takes a postgresql:// URL, got 'mysql://u:\*\*\*@h/d'" \
  "--to of another database: exit 2, the password hidden" "$C" db migrate --to "mysql://u:pw1@h/d"
lab_expect 2 "unknown db command 'migrat'; did you mean 'migrate'" "a typo gets a suggestion" "$C" db migrat
lab_expect 2 "db_missing: .*--state-dir" "no store at --from: exit 2, names the flags" \
  "$C" db migrate --to "$FAKE_URL" --from "$W/nothing.db" --socket "$W/none.sock"

# --- an appliance on SQLite, with something in it --------------------------------------
rg_start
lab_check "pool put workers" rg_ctl pool put workers --token-required no
lab_check "enroll node-1" rg_ctl enroll --hostname node-1 --pool workers --ek-public "$EK/ek-rsa2048.pub" \
  --address InternalIP=10.0.0.1
lab_check "enroll node-2" rg_ctl enroll --hostname node-2 --pool default --ek-public "$EK/ek-ecc384.pub"
lab_check "revoke node-2" rg_ctl revoke node-2 --reason "migration test"
rg_ctl list --json > "$W/list-before.json"
rg_ctl pool show workers --json > "$W/pool-before.json"
rg_ctl audit verify --json > "$W/verify-before.json"
rg_ctl audit --limit 1000 --json > "$W/audit-before.json"
lab_check "the SQLite appliance has machines and an intact chain" jtrue "$W/verify-before.json" \
  'd["intact"] is True and d["rows"] >= 4'

# --- refused while rackgated runs: which check says so ----------------------------------
lab_expect 1 "daemon_running: rackgated answers on its admin socket .*systemctl stop rackgated" \
  "migrate while rackgated answers on the admin socket: refused" \
  "$C" db migrate --to "$FAKE_URL" --from "$DB" --socket "$S"
lab_expect 1 "db_in_use: .* is open in process $RG_PID .*systemctl stop rackgated" \
  "migrate while rackgated has the file open (socket elsewhere): refused, names the process" \
  "$C" db migrate --to "$FAKE_URL" --from "$DB" --socket "$W/none.sock"
rg_stop

if [[ -z "${RACKGATE_TEST_POSTGRES:-}" ]]; then
  echo "# RACKGATE_TEST_POSTGRES is unset (PostgreSQL 15 not installed): the copy itself is not checked"
  lab_finish
fi

# The lab's URL with a password added: trust auth ignores it, and it must not
# appear in anything rackgatectl prints.
URL="$(lab_python - "$RACKGATE_TEST_POSTGRES" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
user = u.username or "rackgate"
host = u.netloc.split("@")[-1]
print(urllib.parse.urlunsplit((u.scheme, f"{user}:s3cret-pw@{host}", u.path, u.query, u.fragment)))
PY
)"
no_password() { ! grep -q 's3cret-pw' "$@"; }

# --- a dry run, then the copy --------------------------------------------------------
rc=0; "$C" db migrate --to "$URL" --state-dir "$RG_DIR/state" --socket "$S" --dry-run --json \
  > "$W/dry.json" 2> "$W/dry.err" || rc=$?
lab_check "dry run: exit 0 ($rc)" test "$rc" == 0
lab_check "dry run --json: every table counted, same head, dry_run" jtrue "$W/dry.json" \
  'd["dry_run"] is True and all(t["source_rows"] == t["target_rows"] for t in d["tables"]) and d["audit"]["head_hash"] == json.load(open("'"$W/verify-before.json"'"))["head_hash"]'
lab_check "dry run: the password is printed nowhere" no_password "$W/dry.json" "$W/dry.err"
lab_check "dry run: the target URL is shown with *** for the password" jtrue "$W/dry.json" \
  '":***@" in d["target"]'

rc=0; "$C" db migrate --to "$URL" --state-dir "$RG_DIR/state" --socket "$S" > "$W/copy.out" 2> "$W/copy.err" || rc=$?
lab_check "migrate: exit 0 ($rc; $(head -c 300 "$W/copy.err"))" test "$rc" == 0
lab_check "migrate: a summary table on stdout" grep -Eq '^TABLE +SOURCE +TARGET' "$W/copy.out"
lab_check "migrate: the audit head on stdout" grep -q "head $(lab_python -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%d:%s" % (d["head_id"], d["head_hash"]))' "$W/verify-before.json"), the same as the source's" "$W/copy.out"
lab_check "migrate: progress per table on stderr" grep -Eq '^copying audit: [0-9]+/[0-9]+$' "$W/copy.err"
lab_check "migrate: the password is printed nowhere" no_password "$W/copy.out" "$W/copy.err"

# --- a second migration into the same database: refused, nothing written ------------------
lab_expect 1 "target_not_empty: .*table [a-z_]+ holds [0-9]+ row" "a second migrate: refused target_not_empty" \
  "$C" db migrate --to "$URL" --state-dir "$RG_DIR/state" --socket "$S"
rc=0; "$C" db migrate --to "$URL" --state-dir "$RG_DIR/state" --socket "$S" --json > "$W/again.json" 2> "$W/again.err" || rc=$?
lab_check "a second migrate --json: exit 1, the reason on stderr, the password nowhere" bash -c \
  "test $rc == 1 && grep -q target_not_empty '$W/again.err' && ! grep -q s3cret-pw '$W/again.err' '$W/again.json'"

# --- rackgated on PostgreSQL: the same appliance -------------------------------------------
rg_config database "\"$RACKGATE_TEST_POSTGRES\""
rg_start
rg_ctl list --json > "$W/list-after.json"
rg_ctl pool show workers --json > "$W/pool-after.json"
rg_ctl audit verify --json > "$W/verify-after.json"
rg_ctl audit --limit 1000 --json > "$W/audit-after.json"
same_json() { lab_python -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])) == json.load(open(sys.argv[2])) else 1)' "$1" "$2"; }
lab_check "on PostgreSQL: the same machines" same_json "$W/list-before.json" "$W/list-after.json"
lab_check "on PostgreSQL: the same pool" same_json "$W/pool-before.json" "$W/pool-after.json"
lab_check "on PostgreSQL: the audit chain verifies from the same rows" jtrue "$W/verify-after.json" \
  'd["intact"] is True and d["rows"] >= json.load(open("'"$W/verify-before.json"'"))["rows"]'
lab_check "on PostgreSQL: the audit rows of SQLite, unchanged" lab_python - "$W/audit-before.json" "$W/audit-after.json" <<'PY'
import json, sys
def rows(p):
    d = json.load(open(p))
    return d["entries"] if isinstance(d, dict) and "entries" in d else d
before, after = rows(sys.argv[1]), rows(sys.argv[2])
sys.exit(0 if after[:len(before)] == before else 1)
PY
# New rows get ids past the copied ones (the sequences were moved): a
# machine id taken again would be refused.
lab_check "on PostgreSQL: delete node-2" rg_ctl delete node-2 --reason "migration test"
lab_check "on PostgreSQL: a new enrollment gets a fresh id" rg_ctl enroll --hostname node-3 --pool workers \
  --ek-public "$EK/ek-ecc384.pub"
lab_check "on PostgreSQL: the chain still verifies" bash -c "'$C' --socket '$S' audit verify --json | grep -q '\"intact\": *true'"
rg_stop

lab_finish
