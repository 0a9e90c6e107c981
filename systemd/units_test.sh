#!/usr/bin/env bash
# systemd/units_test.sh: checks the configured units and snippets with
# systemd's own tools (meson test 'systemd units', suite unit).
#
#   units_test.sh --sbindir DIR --bindir DIR rackgated.service \
#                 rackgate-agent.service rackgate.sysusers rackgate.tmpfiles \
#                 rackgate-agent-renew.timer
#
# 1. The configured units name the installed binaries (@sbindir@/rackgated,
#    @bindir@/rackgate-agent) and have nothing left unsubstituted.
# 2. `systemd-analyze verify` accepts both units and the agent's timer, with
#    no message about them; the timer starts rackgate-agent.service, which
#    can run again (no RemainAfterExit=yes).
# 2b. The agent unit makes exactly /etc, /var/lib/kubelet and
#    /var/lib/rackgate-agent writable, the last two as StateDirectory=.
# 3. `systemd-analyze security --offline=true` rates rackgated.service at an
#    overall exposure of at most 2.0 (and the agent at most 2.5).
# 4. systemd-sysusers and systemd-tmpfiles accept the snippets (in a scratch
#    root, never the host's).
#
# Prints TAP (meson protocol 'tap'): one `ok`/`not ok` line per check, tool
# output as `#` lines, the plan at the end. Skips (`1..0 # SKIP`) when
# systemd-analyze is not installed (Debian package `systemd`).
set -euo pipefail

MAX_EXPOSURE=2.0        # rackgated.service
MAX_AGENT_EXPOSURE=2.5  # rackgate-agent.service: a regression guard only

sbindir= bindir=
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sbindir) sbindir=$2; shift 2 ;;
    --bindir) bindir=$2; shift 2 ;;
    *) files+=("$1"); shift ;;
  esac
done
if [ -z "$sbindir" ] || [ -z "$bindir" ] || [ ${#files[@]} -ne 5 ]; then
  echo "usage: $0 --sbindir DIR --bindir DIR rackgated.service rackgate-agent.service SYSUSERS TMPFILES TIMER" >&2
  exit 2
fi
daemon_unit=${files[0]} agent_unit=${files[1]} sysusers=${files[2]} tmpfiles=${files[3]} agent_timer=${files[4]}

if ! command -v systemd-analyze >/dev/null; then
  echo "1..0 # SKIP systemd-analyze not found (apt-get install systemd)"
  exit 0
fi
echo "# $(systemd-analyze --version | head -n1)"

failures=0 checks=0
fail() { checks=$((checks + 1)); echo "not ok $checks - $*"; failures=$((failures + 1)); }
pass() { checks=$((checks + 1)); echo "ok $checks - $*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rackgate-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# --- 1. substitution -------------------------------------------------------
for f in "$daemon_unit" "$agent_unit"; do
  if left=$(grep -n '@[A-Za-z_]*@' "$f"); then
    printf '%s\n' "$left" | sed 's/^/#   /'
    fail "$(basename "$f"): unsubstituted @VAR@"
  fi
done
exec_of() { sed -n 's/^ExecStart=[-+!@:]*\([^ ]*\).*/\1/p' "$1"; }
[ "$(exec_of "$daemon_unit")" = "$sbindir/rackgated" ] &&
  pass "rackgated.service runs $sbindir/rackgated" ||
  fail "rackgated.service: ExecStart runs '$(exec_of "$daemon_unit")', not $sbindir/rackgated"
[ "$(exec_of "$agent_unit")" = "$bindir/rackgate-agent" ] &&
  pass "rackgate-agent.service runs $bindir/rackgate-agent" ||
  fail "rackgate-agent.service: ExecStart runs '$(exec_of "$agent_unit")', not $bindir/rackgate-agent"

# --- 2. systemd-analyze verify ---------------------------------------------
# verify refuses a unit whose ExecStart= is not an executable file, and the
# configured paths are where `meson install` will put the binaries, not
# where they are now. So verify copies whose ExecStart= points at stand-ins
# in a scratch directory: symlinks to true(1), named like the real binaries.
# Stand-ins rather than the build tree's binaries because verify only asks
# "is this an executable file?" (it never runs it), and so that this test
# neither waits for rackgated to build nor depends on the agent being built
# at all. Step 1 checked that the real paths are the installed ones (every
# Exec*= line that runs our binaries is rewritten: ExecReload= runs
# rackgated --check-config).
# Everything else (kill in ExecReload=, the unit's other settings) is
# checked as written.
mkdir -p "$tmp/units" "$tmp/stand-ins"
true_bin=$(type -P true)
ln -s "$true_bin" "$tmp/stand-ins/rackgated"
ln -s "$true_bin" "$tmp/stand-ins/rackgate-agent"
sed "s#^\(Exec[A-Za-z]*=[-+!@:]*\)$sbindir/rackgated\b#\1$tmp/stand-ins/rackgated#" \
  "$daemon_unit" >"$tmp/units/rackgated.service"
sed "s#^\(Exec[A-Za-z]*=[-+!@:]*\)$bindir/rackgate-agent\b#\1$tmp/stand-ins/rackgate-agent#" \
  "$agent_unit" >"$tmp/units/rackgate-agent.service"
cp "$agent_timer" "$tmp/units/rackgate-agent-renew.timer"

# verify's exit status catches what makes a unit unloadable (a missing
# binary, a bad [Unit] reference); an unknown key or a value systemd cannot
# parse is only a warning ("Unknown key 'Foo' in section [Service],
# ignoring."), which would silently drop a hardening setting. So any message
# that names one of our units (or their scratch path) fails the test too;
# messages about the host's own units (network-online.target, kubelet.service
# not installed here, ...) do not. --recursive-errors=no: only our units
# count. --man=no: no man-db needed.
set +e
verify_out=$(cd "$tmp" && systemd-analyze verify --man=no --recursive-errors=no \
  "$tmp/units/rackgated.service" "$tmp/units/rackgate-agent.service" \
  "$tmp/units/rackgate-agent-renew.timer" 2>&1)
verify_rc=$?
set -e
[ -n "$verify_out" ] && printf '%s\n' "$verify_out" | sed 's/^/#   verify: /'
ours=$(printf '%s\n' "$verify_out" | grep -E "rackgated\.service|rackgate-agent\.service|rackgate-agent-renew\.timer|$tmp" || true)
if [ $verify_rc -ne 0 ]; then
  fail "systemd-analyze verify exited $verify_rc"
elif [ -n "$ours" ]; then
  fail "systemd-analyze verify complained about our units"
else
  pass "systemd-analyze verify rackgated.service rackgate-agent.service rackgate-agent-renew.timer"
fi
# The timer starts the agent's own unit, and that unit can be started again
# (a oneshot with RemainAfterExit=yes would stay active and never rerun).
if [ "$(sed -n 's/^Unit=//p' "$agent_timer")" != rackgate-agent.service ]; then
  fail "rackgate-agent-renew.timer does not start rackgate-agent.service"
elif grep -qiE '^RemainAfterExit=(yes|true|1|on)' "$agent_unit"; then
  fail "rackgate-agent.service has RemainAfterExit=yes: its timer could never run it again"
else
  pass "rackgate-agent-renew.timer reruns rackgate-agent.service"
fi
# verify loads a timer without judging its time spans ("OnBootSec=6hh" is
# only logged as ignored when a manager loads it): each is parsed here.
bad_spans=""
while IFS='=' read -r key value; do
  systemd-analyze timespan "$value" >/dev/null 2>&1 || bad_spans+=" $key=$value"
done < <(grep -E '^(On[A-Za-z]*Sec|RandomizedDelaySec|AccuracySec)=' "$agent_timer")
if [ -n "$bad_spans" ]; then
  fail "rackgate-agent-renew.timer: not a time span:$bad_spans"
else
  pass "rackgate-agent-renew.timer's time spans parse"
fi
# The unit runs the whole path (issue 14): attest, config, csr.
if grep -qE '^ExecStart=.* --steps attest,config,csr .*--apiserver \$\{RACKGATE_APISERVER\}' "$agent_unit"; then
  pass "rackgate-agent.service runs every step (attest,config,csr)"
else
  fail "rackgate-agent.service does not run --steps attest,config,csr with --apiserver \${RACKGATE_APISERVER}"
fi

# --- 2b. what the agent may write ------------------------------------------
# Every directory the agent writes with the unit's flags and its defaults
# (--kubelet-dir /var/lib/kubelet/pki, --kubeconfig /var/lib/kubelet/
# kubeconfig, the stamp in /var/lib/rackgate-agent, the config in /etc) is
# writable whether or not it exists before the first start: /etc by
# ReadWritePaths=, the /var/lib ones by StateDirectory= (issue 32: a
# "-/var/lib/kubelet" was dropped on a node without it, and the agent's
# mkdir met a read-only /var/lib). Nothing else is.
rw=$(sed -n 's/^ReadWritePaths=//p' "$agent_unit" | tr '\n' ' ')
state=$(sed -n 's/^StateDirectory=//p' "$agent_unit" | tr '\n' ' ')
if [ "$rw" = "/etc " ] && [ "$state" = "rackgate-agent kubelet " ] &&
    grep -qx 'ProtectSystem=strict' "$agent_unit"; then
  pass "rackgate-agent.service writes /etc, /var/lib/kubelet and /var/lib/rackgate-agent, all made before the sandbox"
else
  fail "rackgate-agent.service: ReadWritePaths='$rw' StateDirectory='$state' (want '/etc' and 'rackgate-agent kubelet' under ProtectSystem=strict)"
fi

# --- 3. exposure -------------------------------------------------------------
# --offline=true reads the unit file itself (no running manager, no loaded
# unit); given a path, it finds the unit without --root.
exposure() {  # UNIT_FILE MAX
  local unit=$1 max=$2 out rc score
  set +e
  out=$(cd "$tmp" && systemd-analyze security --offline=true --no-pager "$unit" 2>&1)
  rc=$?
  set -e
  score=$(printf '%s\n' "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' | tail -n1)
  if [ -z "$score" ]; then
    printf '%s\n' "$out" | sed 's/^/#   /'
    fail "$(basename "$unit"): no exposure level in systemd-analyze security's output (exit $rc)"
    return
  fi
  # The settings that cost something, for whoever has to lower the score.
  printf '%s\n' "$out" | grep '✗' | sed 's/  */ /g; s/^/#   /' || true
  echo "# exposure $(basename "$unit"): $score (at most $max)"
  if awk -v s="$score" -v m="$max" 'BEGIN { exit !(s + 0 <= m + 0) }'; then
    pass "$(basename "$unit") exposure $score <= $max"
  else
    fail "$(basename "$unit") exposure $score > $max"
  fi
}
exposure "$tmp/units/rackgated.service" "$MAX_EXPOSURE"
exposure "$tmp/units/rackgate-agent.service" "$MAX_AGENT_EXPOSURE"

# --- 4. sysusers.d and tmpfiles.d ------------------------------------------
# Applied to a scratch root: creates rackgate and rackgate-admin in its
# /etc/passwd and /etc/group, then the directories with those owners.
root="$tmp/root"
mkdir -p "$root/etc"
set +e
su_out=$(systemd-sysusers --root="$root" "$(realpath "$sysusers")" 2>&1); su_rc=$?
set -e
[ -n "$su_out" ] && printf '%s\n' "$su_out" | sed 's/^/#   sysusers: /'
if [ $su_rc -ne 0 ] || printf '%s\n' "$su_out" | grep -qiE 'fail|ignor|invalid|unknown'; then
  fail "systemd-sysusers refused rackgate.sysusers (exit $su_rc)"
elif ! grep -q '^rackgate:' "$root/etc/passwd" || ! grep -q '^rackgate-admin:' "$root/etc/group"; then
  fail "systemd-sysusers did not create rackgate and rackgate-admin"
else
  pass "systemd-sysusers rackgate.sysusers"
fi
if [ "$(id -u)" -ne 0 ]; then
  # Creating directories owned by rackgate needs root (chown).
  echo "# note: not root: systemd-tmpfiles --create of rackgate.tmpfiles not tried"
else
  set +e
  tf_out=$(systemd-tmpfiles --root="$root" --create "$(realpath "$tmpfiles")" 2>&1); tf_rc=$?
  set -e
  [ -n "$tf_out" ] && printf '%s\n' "$tf_out" | sed 's/^/#   tmpfiles: /'
  if [ $tf_rc -ne 0 ] || [ -n "$tf_out" ]; then
    fail "systemd-tmpfiles refused rackgate.tmpfiles (exit $tf_rc)"
  elif [ "$(stat -c '%a %u' "$root/var/lib/rackgate" 2>&1)" != "700 $(awk -F: '$1 == "rackgate" { print $3 }' "$root/etc/passwd")" ]; then
    # The uid is the scratch root's rackgate, which tmpfiles --root resolves.
    fail "systemd-tmpfiles: /var/lib/rackgate is $(stat -c '%a %u' "$root/var/lib/rackgate" 2>&1), not 700 rackgate"
  else
    pass "systemd-tmpfiles --create rackgate.tmpfiles"
  fi
fi

echo "1..$checks"
if [ $failures -ne 0 ]; then
  echo "# $failures check(s) failed"
  exit 1
fi
echo "# all checks passed"
