#!/usr/bin/env bash
# systemd/dracut_module_test.sh: the dracut module 50rackgate
# (systemd/dracut/50rackgate/module-setup.sh) installs exactly what the
# fragment carries, plus the CA when given (meson test 'dracut module',
# suite unit). dracut's own functions (inst_multiple, inst_simple, dfatal,
# require_binaries) are stand-ins that record what they were asked; the
# module's own work (unpacking the fragment into $initdir) is real. The
# firmware lab boots the other way, the fragment appended to a
# dracut-built initramfs (firmware-tests/vm-systemd.sh).
#
#   dracut_module_test.sh MODULE_SETUP FRAGMENT
# Prints TAP.
set -euo pipefail
module=$1 fragment=$2
checks=0 failures=0
pass() { checks=$((checks + 1)); echo "ok $checks - $*"; }
fail() { checks=$((checks + 1)); echo "not ok $checks - $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rackgate-dracut.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run_module() {  # FUNCTION [VAR=VALUE...]: runs the module's FUNCTION with stand-ins
  local fn=$1; shift
  env "$@" initdir="$tmp/initdir" bash -c '
    asked="$0.asked"
    inst_multiple() { echo "inst_multiple $*" >>"$asked"; }
    inst_simple() { echo "inst_simple $*" >>"$asked"; mkdir -p "$initdir$(dirname "$2")"; cp "$1" "$initdir$2"; }
    dfatal() { echo "dfatal $*" >>"$asked"; }
    require_binaries() { local b; for b in "$@"; do command -v "$b" >/dev/null || return 1; done; }
    . "$1"; '"$fn" "$tmp/run" "$module"
}

set +e; run_module check RACKGATE_AGENT_BUNDLE="$fragment"; rc=$?; set -e
check "check: only when asked for (255) with a bundle (got $rc)" test $rc -eq 255
set +e; run_module check RACKGATE_AGENT_BUNDLE="$tmp/none"; rc=$?; set -e
check "check: not without a bundle (1, got $rc)" test $rc -eq 1
check "depends: systemd, network and Ignition's module" \
  test "$(run_module depends)" = "systemd network ignition"

printf -- '-----BEGIN CERTIFICATE-----\nMA==\n-----END CERTIFICATE-----\n' > "$tmp/ca.pem"
mkdir -p "$tmp/initdir"
run_module install RACKGATE_AGENT_BUNDLE="$fragment" RACKGATE_CA="$tmp/ca.pem"
(cd "$tmp/initdir" && find . -mindepth 1 | sed 's#^\./##' | LC_ALL=C sort) > "$tmp/installed"
{ zstd -dc "$fragment" | cpio -t --quiet; printf '%s\n' etc etc/rackgate etc/rackgate/ca.pem; } |
  LC_ALL=C sort > "$tmp/expected"
if diff "$tmp/expected" "$tmp/installed" > "$tmp/diff"; then
  pass "install: the fragment's $(wc -l < "$tmp/expected") entries and the CA, nothing else"
else
  sed 's/^/#   /' "$tmp/diff"; fail "install: differs from the fragment"
fi
check "install: the agent is executable" test -x "$tmp/initdir/usr/lib/rackgate-agent/rackgate-agent"
check "install: the .requires link is a link" \
  test -L "$tmp/initdir/usr/lib/systemd/system/ignition-complete.target.requires/rackgate-initrd-install.service"
check "install: the units' sh, mkdir, rm and mount" grep -qx "inst_multiple sh mkdir rm mount" "$tmp/run.asked"
check "install: the CA as /etc/rackgate/ca.pem" cmp -s "$tmp/ca.pem" "$tmp/initdir/etc/rackgate/ca.pem"
rm -rf "$tmp/initdir" "$tmp/run.asked"; mkdir -p "$tmp/initdir"
printf 'not zstd' > "$tmp/bad.zst"
set +e; run_module install RACKGATE_AGENT_BUNDLE="$tmp/bad.zst" 2>/dev/null; rc=$?; set -e
check "install: a damaged bundle fails, with dracut's dfatal (exit $rc)" \
  bash -c "[ $rc -ne 0 ] && grep -q '^dfatal rackgate: cannot unpack' '$tmp/run.asked'"
echo "1..$checks"
[ $failures -eq 0 ]
