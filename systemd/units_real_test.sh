#!/usr/bin/env bash
# systemd/units_real_test.sh: the configured rackgate-agent.service's sandbox
# under a real systemd (meson test 'agent unit sandbox under real systemd',
# suite slow).
#
#   units_real_test.sh CACHE_DIR rackgate-agent.service
#
# systemd-analyze only reads a unit; the lab runs the unit's ExecStart= line
# outside systemd. Neither sees what the sandbox does to the agent's writes
# (issue 32: on a node without /var/lib/kubelet the agent's mkdir met a
# read-only /var/lib, exit 6). So: a Debian 12 root (debootstrap, minbase
# plus systemd, made once into CACHE_DIR; the mirror is the one this
# machine's apt uses), booted with systemd as PID 1 in a container
# (systemd-nspawn --register=no --keep-unit -b --volatile=overlay: the
# cached root is never written), and the shipped unit started by that
# systemd with only its ExecStart= replaced by a stand-in that makes the
# agent's writes with its default flags:
#   1. /var/lib/kubelet/pki/... (--kubelet-dir, --kubeconfig), on a root
#      without /var/lib/kubelet; /etc (the attested config); the stamp in
#      /var/lib/rackgate-agent: all succeed, the unit ends inactive, success;
#   2. a write under /opt and one under /usr/local (outside what
#      docs/systemd.md allows): Read-only file system, the unit fails.
# Not the agent itself (its libraries are not in the root): the question is
# what the unit lets a process write, and the stand-in runs under exactly
# the unit's sandbox (user, capabilities, namespaces, system call filter).
#
# TAP. Skips (`1..0 # SKIP`) unless root with debootstrap and systemd-nspawn
# (Debian packages debootstrap and systemd-container), or when the mirror
# does not answer. Stops the container by its PID on every way out.
set -euo pipefail

cache=${1?usage: units_real_test.sh CACHE_DIR|"" rackgate-agent.service}
unit=${2:?usage: units_real_test.sh CACHE_DIR rackgate-agent.service}
unit=$(realpath "$unit")

skip() { echo "1..0 # SKIP $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, systemd-nspawn)"
for t in debootstrap systemd-nspawn nsenter; do
  command -v "$t" >/dev/null || skip "$t not found (apt-get install --no-install-recommends debootstrap systemd-container)"
done

checks=0 failures=0
pass() { checks=$((checks + 1)); echo "ok $checks - $*"; }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "not ok $checks - $*"; }
started=$(date +%s)

# --- the root, made once ---------------------------------------------------
# shellcheck source=nspawn-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/nspawn-lib.sh"
cache=$(nspawn_cache_dir "$cache")
if ! why=$(nspawn_debian_root "$cache"); then skip "$why"; fi
root=$cache/root

# --- the container -----------------------------------------------------------
scratch=$(mktemp -d "${TMPDIR:-/tmp}/rackgate-real-systemd.XXXXXX")
trap 'nspawn_stop sandbox >/dev/null 2>&1; rm -rf "$scratch"' EXIT

# The unit as shipped but for ExecStart= (the stand-in). Its TPM device
# dependency stays: in a container systemd supports no device units, so
# it starts at once ("Starting of dev-tpmrm0.device unsupported").
stand_in() {  # NAME SCRIPT
  sed -e "s#^ExecStart=.*#ExecStart=/usr/local/sbin/$1.sh#" "$unit" \
    > "$scratch/$1.service"
  printf '#!/bin/sh\nset -e\n%s\n' "$2" > "$scratch/$1.sh"
  chmod 0755 "$scratch/$1.sh"
}
stand_in rg-writes 'mkdir -p /var/lib/kubelet/pki
echo client > /var/lib/kubelet/pki/kubelet-client.pem
echo kubeconfig > /var/lib/kubelet/kubeconfig
mkdir -p /etc/kubernetes && echo secret > /etc/kubernetes/pull-secret
echo "applied_at=0 hostname=node-1" > /var/lib/rackgate-agent/config-applied'
stand_in rg-opt 'mkdir -p /opt/site && echo x > /opt/site/file'
stand_in rg-usr 'echo x > /usr/local/bin/tool'
: > "$scratch/agent.env"

binds=(--bind-ro="$scratch/agent.env:/etc/rackgate/agent.env")
for n in rg-writes rg-opt rg-usr; do
  binds+=(--bind-ro="$scratch/$n.service:/etc/systemd/system/$n.service"
          --bind-ro="$scratch/$n.sh:/usr/local/sbin/$n.sh")
done
state="no container"
if nspawn_boot sandbox "$root" "$scratch/console.log" --volatile=overlay "${binds[@]}"; then
  state=$(nspawn_wait_running sandbox 90 || true)
fi
in_ct() { nspawn_in sandbox "$@"; }
if [ "$state" = running ] || [ "$state" = degraded ]; then
  pass "a Debian 12 root boots with systemd as PID 1 in systemd-nspawn ($state, $(in_ct systemctl --version | head -n1))"
else
  fail "the container's systemd did not come up (state '$state')"
  tail -n 20 "$scratch/console.log" | sed 's/^/#   /'
  echo "1..$checks"
  exit 1
fi

# --- 1. the agent's writes -----------------------------------------------------
if in_ct test ! -e /var/lib/kubelet; then
  pass "the root has no /var/lib/kubelet (a node image before kubelet ran)"
else
  fail "the root has /var/lib/kubelet already: the test would not show the bug"
fi
if in_ct systemctl start rg-writes.service 2>/dev/null &&
    [ "$(in_ct systemctl show -P Result rg-writes.service)" = success ]; then
  pass "the unit's sandbox lets it write /var/lib/kubelet/pki, /var/lib/kubelet/kubeconfig, /etc/kubernetes and its stamp"
else
  fail "the unit's sandbox refused the agent's own writes"
  in_ct journalctl -u rg-writes.service --no-pager -o cat 2>/dev/null | tail -n 6 | sed 's/^/#   /'
fi
mode=$(in_ct stat -c '%a %U' /var/lib/kubelet 2>/dev/null || true)
[ "$mode" = "700 root" ] && pass "/var/lib/kubelet is made by StateDirectory= (root, 0700)" ||
  fail "/var/lib/kubelet is '$mode', not '700 root'"

# --- 2. nothing more ---------------------------------------------------------------
for n in rg-opt rg-usr; do
  in_ct systemctl start "$n.service" >/dev/null 2>&1 || true
  why=$(in_ct journalctl -u "$n.service" --no-pager -o cat 2>/dev/null | grep -m1 'Read-only file system' || true)
  if [ "$(in_ct systemctl show -P Result "$n.service")" = exit-code ] && [ -n "$why" ]; then
    pass "$n: a write outside what docs/systemd.md allows fails: $why"
  else
    fail "$n: a write outside /etc, /var/lib/kubelet and /var/lib/rackgate-agent was not refused"
  fi
done

if nspawn_stop sandbox && [ -z "$(pgrep -f -- "$scratch" || true)" ]; then
  pass "the container is stopped (by its PID), nothing of it left in its cgroup"
else
  fail "processes of the container are still running"
fi
echo "# wall time $(( $(date +%s) - started )) s"
echo "1..$checks"
[ "$failures" -eq 0 ]
