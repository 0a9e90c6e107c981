#!/usr/bin/env bash
# systemd/initrd_units_test.sh: checks the initramfs's own units (systemd/initrd,
# docs/nodes.md "The first boot as units") with systemd's own tools, and
# their place in the agent bundle (meson test 'initrd units', suite unit).
#
#   initrd_units_test.sh UNIT_DIR [FRAGMENT]
#
# 1. `systemd-analyze verify` accepts both units and Ignition's first stage
#    with the drop-in (a stand-in for Ignition's unit), with no message
#    about them.
# 2. The order the boot depends on: the attestation before
#    ignition-fetch-offline, which requires it; the install after
#    ignition-files, before ignition-complete.target, which requires it;
#    both only in an initramfs, on a first boot, with rackgate.url=.
# 3. The fragment (when given) carries the tree under usr/lib/systemd/system,
#    the .requires link as a link.
# Prints TAP; skips without systemd-analyze.
set -euo pipefail
dir=$1 fragment=${2:-}
if ! command -v systemd-analyze >/dev/null; then
  echo "1..0 # SKIP systemd-analyze not found (apt-get install systemd)"
  exit 0
fi
checks=0 failures=0
pass() { checks=$((checks + 1)); echo "ok $checks - $*"; }
fail() { checks=$((checks + 1)); echo "not ok $checks - $*"; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rackgate-initrd-units.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

attest=$dir/rackgate-initrd-attest.service install=$dir/rackgate-initrd-install.service
dropin=$dir/ignition-fetch-offline.service.d/10-rackgate.conf

# --- 1. verify, with stand-ins for the agent and Ignition's stages ---------
mkdir -p "$tmp/u" "$tmp/s"
cp -R "$dir/." "$tmp/u/"
ln -s "$(type -P true)" "$tmp/s/rackgate-agent"
sed -i "s#/usr/bin/rackgate-agent#$tmp/s/rackgate-agent#" "$tmp/u/"*.service
for stage in ignition-fetch-offline ignition-files; do
  printf '[Unit]\nDescription=stand-in for %s\nDefaultDependencies=no\n[Service]\nType=oneshot\nExecStart=/bin/true\n' \
    "$stage" > "$tmp/u/$stage.service"
done
printf '[Unit]\nDescription=stand-in\n' > "$tmp/u/ignition-complete.target"
set +e
out=$(cd "$tmp" && SYSTEMD_UNIT_PATH="$tmp/u:" systemd-analyze verify --man=no --recursive-errors=no \
  "$tmp/u/rackgate-initrd-attest.service" "$tmp/u/rackgate-initrd-install.service" \
  "$tmp/u/ignition-fetch-offline.service" 2>&1)
rc=$?
set -e
[ -z "$out" ] || printf '%s\n' "$out" | sed 's/^/#   verify: /'
ours=$(printf '%s\n' "$out" | grep -E "rackgate-initrd|10-rackgate|$tmp" || true)
check "systemd-analyze verify: both units and the drop-in (exit $rc)" test $rc -eq 0 -a -z "$ours"

# --- 2. the order -------------------------------------------------------------
has() { grep -qxF "$2" "$1"; }
for u in "$attest" "$install"; do
  n=$(basename "$u")
  check "$n: only in an initramfs" has "$u" "ConditionPathExists=/etc/initrd-release"
  check "$n: only on a first boot" has "$u" "ConditionKernelCommandLine=ignition.firstboot"
  check "$n: only with rackgate.url=" has "$u" "ConditionKernelCommandLine=rackgate.url"
  check "$n: a failure stops the boot" has "$u" "OnFailure=emergency.target"
done
check "attest: before ignition-fetch-offline" has "$attest" "Before=ignition-fetch-offline.service"
check "attest: after the network" grep -q '^After=network-online.target' "$attest"
check "drop-in: ignition-fetch-offline requires the attestation" has "$dropin" "Requires=rackgate-initrd-attest.service"
check "drop-in: and waits for it" has "$dropin" "After=rackgate-initrd-attest.service"
check "install: after ignition-files" grep -q '^After=.*ignition-files.service' "$install"
check "install: before ignition-complete.target" has "$install" "Before=ignition-complete.target"
check "install: ignition-complete.target requires it" \
  test "$(readlink "$dir/ignition-complete.target.requires/rackgate-initrd-install.service")" = ../rackgate-initrd-install.service
check "attest: writes both user.ign paths and the session" \
  grep -q -- '--config-out /usr/lib/ignition/user.ign --config-out /run/ignition/user.ign' "$attest"
check "attest: /usr made writable in its own mount namespace only (systemd 256 mounts it read-only)" \
  bash -c "grep -qx 'MountFlags=slave' '$attest' && grep -qxF \"ExecStartPre=-sh -c '[ -w /usr ] || mount -o remount,rw /usr'\" '$attest'"
check "install: removes the config's copy and the session from /run (they survive the switch-root)" \
  grep -qx 'ExecStartPost=rm -f /run/ignition/user.ign /run/rackgate/initrd-session' "$install"
check "install: the /usr copy best effort (read-only under systemd 256; gone at the switch-root)" \
  grep -qx 'ExecStartPost=-rm -f /usr/lib/ignition/user.ign' "$install"
check "install: takes the session, installs into /sysroot" \
  grep -q -- '--session /run/rackgate/initrd-session' "$install"

# --- 3. in the fragment -------------------------------------------------------
if [ -n "$fragment" ]; then
  listing=$(zstd -dc "$fragment" | cpio -itv --quiet 2>/dev/null)
  for f in rackgate-initrd-attest.service rackgate-initrd-install.service \
           ignition-fetch-offline.service.d/10-rackgate.conf; do
    check "fragment: usr/lib/systemd/system/$f" grep -qE "^-rw-r--r-- .* usr/lib/systemd/system/$f\$" <<<"$listing"
  done
  check "fragment: the .requires link" grep -qE \
    '^l.* usr/lib/systemd/system/ignition-complete.target.requires/rackgate-initrd-install.service -> ../rackgate-initrd-install.service$' <<<"$listing"
fi
echo "1..$checks"
[ $failures -eq 0 ]
