#!/usr/bin/env bash
# bundle.sh — the self-contained agent (script/agent-bundle, docs/nodes.md):
# the initramfs fragment is a newc cpio under 10 MB compressed holding only
# its own prefix; every library any of its ELF files needs is inside, and the
# loader it names is the bundled one; in an empty root (chroot: no /lib, no
# /etc, no /proc, an empty environment) it runs and loads its device TCTI;
# and, with the lab's swtpm TCTI added to a copy (the product bundle carries
# only the device TCTI), it attests against a real rackgated from that
# empty root.
# Usage: bundle.sh FRAGMENT RACKGATED RACKGATECTL
set -euo pipefail

# The budget of docs/nodes.md: what an initramfs has room for.
MAX_COMPRESSED=$((10 * 1024 * 1024))
PREFIX=usr/lib/rackgate-agent
R_ATTESTED='step=attest machine=[0-9a-f]{16} ok hostname=node-b'
# tpm2-tss's words: the device TCTI loaded but found no device ("IO
# failure"), against a TCTI module that could not be loaded ("Functionality
# not supported").
R_DEVICE_TCTI_LOADED='tpm-failure reason=tpm_unavailable message="TCTI device:/dev/tpmrm0: tcti:IO failure"'

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FRAGMENT="$(realpath "${1:?usage: bundle.sh FRAGMENT RACKGATED RACKGATECTL}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"

for tool in cpio zstd readelf; do command -v "$tool" >/dev/null || lab_skip "$tool missing"; done
# An empty root needs chroot: root, or a user namespace that maps us to root.
# (Absolute paths: the command runs under `env -i`, with no PATH.)
CHROOT="$(PATH=$PATH:/usr/sbin:/sbin command -v chroot)" || lab_skip "chroot missing"
if [[ "$(id -u)" == 0 ]]; then
  IN_ROOT=("$CHROOT")
elif unshare -r true 2>/dev/null; then
  IN_ROOT=("$(command -v unshare)" -r "$CHROOT")
else
  lab_skip "neither root nor user namespaces: no empty root to run the bundle in"
fi
lab_skip_unless_tools
lab_init bundle

T="$LAB_DIR/tree"
mkdir -p "$T"
size="$(stat -c %s "$FRAGMENT")"
lab_check "the fragment is ${size} bytes compressed, under $MAX_COMPRESSED" test "$size" -lt "$MAX_COMPRESSED"
zstd -dc "$FRAGMENT" > "$LAB_DIR/fragment.cpio"
lab_check "it is a zstd-compressed newc cpio (cpio -t lists it)" \
  cpio -t -H newc --quiet -F "$LAB_DIR/fragment.cpio"
cpio -t -H newc --quiet -F "$LAB_DIR/fragment.cpio" > "$LAB_DIR/list"
# Its own names only: the prefix, the link, and the initramfs's units under
# usr/lib/systemd/system, each named rackgate-* (Ignition's drop-in directory
# and .requires directory hold only rackgate-named entries).
UNITS=usr/lib/systemd/system
lab_check "it holds only usr/, usr/lib, usr/bin/rackgate-agent, $PREFIX/... and rackgate's initramfs units" \
  bash -c "! grep -Ev '^(usr|usr/lib|usr/bin|usr/bin/rackgate-agent|$PREFIX|$PREFIX/.*|usr/lib/systemd|$UNITS|$UNITS/rackgate-[a-z-]*\\.service|$UNITS/[a-z-]*\\.(service\\.d|target\\.requires)|$UNITS/[a-z-]*\\.(service\\.d|target\\.requires)/(10-rackgate\\.conf|rackgate-[a-z-]*\\.service))\$' '$LAB_DIR/list'"
(cd "$T" && cpio -idm -H newc --quiet -F "$LAB_DIR/fragment.cpio")
lab_check "its files are root's (uid 0, gid 0) in the archive" \
  bash -c "cpio -tv -H newc --quiet -F '$LAB_DIR/fragment.cpio' | awk '\$3 != \"root\" || \$4 != \"root\" { bad = 1 } END { exit bad }'"

# Every NEEDED of every ELF file is a file of the bundle's lib/.
needs_met() {
  local f n ok=0
  for f in "$T/$PREFIX/rackgate-agent" "$T/$PREFIX"/lib/*; do
    while read -r n; do
      [[ -f "$T/$PREFIX/lib/$n" ]] || { echo "$(basename "$f") needs $n"; ok=1; }
    done < <(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done
  return "$ok"
}
lab_check_shown "every library any file of it needs is in it ($(ls "$T/$PREFIX/lib" | wc -l) files in lib/)" needs_met
lab_check "the agent's loader is the bundled one" \
  bash -c "readelf -l '$T/$PREFIX/rackgate-agent' | grep -qF '[Requesting program interpreter: /$PREFIX/lib/ld-linux-x86-64.so.2]'"
lab_check "tpm2-tss's device TCTI is bundled (tctildr dlopens it)" test -f "$T/$PREFIX/lib/libtss2-tcti-device.so.0"
lab_check "nothing of it names a library path outside the bundle" \
  bash -c "! readelf -d '$T/$PREFIX/rackgate-agent' '$T/$PREFIX'/lib/*.so* 2>/dev/null | grep -E 'R(UN)?PATH' | grep -vE '\\[(\\\$ORIGIN(/lib)?(:/$PREFIX/lib)?)\\]'"

# The empty root: the fragment and nothing else (no /proc either).
run_empty() { env -i "${IN_ROOT[@]}" "$T" "$@"; }
lab_expect 0 "" "in an empty root with an empty environment: rackgate-agent --version" \
  bash -c "$(printf '%q ' env -i "${IN_ROOT[@]}" "$T" /usr/bin/rackgate-agent --version) | grep -q '^rackgate-agent '"
mkdir -p "$T/etc"
# A CA file that exists (the TPM opens before any connection); no /dev, so
# the device TCTI finds no TPM: proof it was found and loaded from lib/.
rg_init "$RACKGATED" "$RACKGATECTL"
cp "$RG_DIR/state/ca/ca.crt" "$T/etc/ca.pem"
lab_expect 5 "$R_DEVICE_TCTI_LOADED" "in the empty root, with no /dev: the bundled device TCTI loads and finds no TPM" \
  run_empty /usr/bin/rackgate-agent --url https://127.0.0.1:1 --ca /etc/ca.pem

# A whole attestation from the empty root: a copy with the lab's swtpm TCTI
# (lab only; the product talks to /dev/tpmrm0), against a real rackgated.
lab_ca lab
lab_machine mb lab
rg_trust lab
rg_config agent_bundle "\"$FRAGMENT\""
rg_start

# rackgated serves it on its public port, no token (docs/nodes.md).
served="$LAB_DIR/served.cpio.zst"
lab_check "GET /v1/agent/initramfs: 200, no token" test "$(rg_get /v1/agent/initramfs "$served")" == 200
lab_check "the served fragment is the built one, byte for byte" cmp -s "$served" "$FRAGMENT"
lab_check "the served fragment unpacks (zstd -d | cpio -t)" \
  bash -c "zstd -dc '$served' | cpio -t -H newc --quiet | grep -qx usr/lib/rackgate-agent/rackgate-agent"
lab_check "GET /v1/agent/initramfs.sha256: 200" test "$(rg_get /v1/agent/initramfs.sha256 "$LAB_DIR/served.sha256")" == 200
lab_check "its digest is the fragment's SHA-256 (sha256sum -c)" \
  bash -c "cd '$LAB_DIR' && sed 's/agent-initramfs.cpio.zst\$/served.cpio.zst/' served.sha256 | sha256sum -c --quiet"
rg_ctl enroll --hostname node-b --pool default --ek-cert "$(lab_dir mb)/ek-rsa.der" >/dev/null
swtpm_tcti="$(ldconfig -p | sed -n 's/^\tlibtss2-tcti-swtpm.so.0 (libc6,x86-64[^)]*) => \(.*\)$/\1/p' | head -n1)"
if [[ -n "$swtpm_tcti" ]]; then
  cp -L "$swtpm_tcti" "$T/$PREFIX/lib/"
  lab_expect 0 "$R_ATTESTED" "from the empty root, the bundled agent attests against rackgated (swtpm TCTI added)" \
    run_empty /usr/bin/rackgate-agent --url "$(rg_url "")" --ca /etc/ca.pem --tcti "$(lab_tcti mb)" \
    --eventlog "" --max-wait "$(lab_seconds 20)"
  lab_check "node-b is attested" test "$(rg_state node-b)" == attested
else
  lab_ok "# SKIP libtss2-tcti-swtpm.so.0 not installed: no attestation from the empty root"
fi
lab_finish
