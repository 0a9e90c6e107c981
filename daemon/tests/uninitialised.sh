#!/usr/bin/env bash
# daemon/tests/uninitialised.sh: rackgated on a state directory nobody ran
# `rackgatectl init` on (a fresh package install) stops with exit 2 and the
# command to run, before anything else (an empty EK roots directory too),
# and creates nothing there; --check-config still checks the file alone.
#
#   uninitialised.sh RACKGATED
set -uo pipefail
rackgated=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rackgate-uninit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/state" "$tmp/ek-roots"
cat >"$tmp/config.json" <<JSON
{"state_dir": "$tmp/state", "ek_roots": ["$tmp/ek-roots"], "admin_socket": "$tmp/admin.sock"}
JSON

n=0 failed=0
result() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }

out=$("$rackgated" --config "$tmp/config.json" 2>&1); rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
[ $rc -eq 2 ]; result $? "exit 2 without a database (got $rc)"
printf '%s\n' "$out" | grep -qF "state directory $tmp/state has no database: run \`sudo -u rackgate rackgatectl init --state-dir $tmp/state\`"
result $? "the message names rackgatectl init and the state directory"
[ -z "$(ls -A "$tmp/state")" ]; result $? "nothing created in the state directory"
out=$("$rackgated" --config "$tmp/config.json" --check-config 2>&1)
printf '%s\n' "$out" | grep -q "no EK root certificate"; result $? "--check-config judges the file, not the state directory"
echo "1..$n"
exit $failed
