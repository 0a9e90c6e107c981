#!/usr/bin/env bash
# systemd/install_real_test.sh: the Debian packages installed for real and
# the shipped units run by a real systemd, the appliance and a machine each
# in a container (meson test 'real install under systemd', suite slow;
# issue 32; docs/systemd.md, "Tests under a real systemd").
#
#   install_real_test.sh --source DIR --cache DIR|"" --debs DIR   ("": the machine's cache)
#
# 1. The packages: those in $RACKGATE_DEB_DIR when it holds both; else
#    those in DEBS (where the `package` test puts them, built earlier in the
#    same run) when no source file is newer than them; else script/package
#    builds them into DEBS (about 10 min on 2 cores).
# 2. The root: CACHE/root, Debian 12 by debootstrap from this machine's own
#    apt mirror (nspawn-lib.sh; shared with units_real_test.sh), and on it
#    a cached layer (CACHE/apt-layer, an overlayfs upper directory) with
#    apt's package lists, sudo, and the .debs the packages' dependencies
#    and curl need, downloaded but not installed (`apt-get install
#    --download-only`, the quickstart's own command), remade when the
#    packages' dependencies change. The containers then install offline:
#    the test's network reaches no mirror.
# 3. A network namespace for each container, joined by a veth pair: the
#    appliance at 10.12.0.2/16, the machine at 10.12.1.17/16, the addresses
#    docs/quickstart.md uses, so its blocks run unchanged.
# 4. The appliance: the root booted with systemd as PID 1
#    (systemd-nspawn --register=no --keep-unit -b, a cgroup of its own, an
#    overlayfs over the cached root: nothing of the cache is written),
#    a user `op` in group sudo, the operator's files of the doc's "You
#    need" in its home. Every block marked `<!-- quickstart -->`, in order,
#    run by `op` in a login shell in the container, unchanged; each output
#    the doc shows checked (firmware-tests/quickstart_blocks.py, as
#    firmware-tests/quickstart.sh does). Step 1 is the real `sudo apt
#    install ./rackgate_*.deb curl` (answered "y"), step 6 the real
#    `systemctl enable --now rackgated`.
# 5. The machine (the block marked `<!-- quickstart: machine -->`): its
#    image is the same root with the rackgate-agent package installed by
#    apt (in a container with no network), `/etc/machine-id`
#    "uninitialized" (a first boot, as OS images ship) and a vendor preset
#    that leaves the agent's units disabled (Debian's own default would
#    enable them: then nobody could tell that Ignition did). The block's
#    `coreos-installer install /dev/sda --ignition-file pointer.ign`
#    cannot run in a container (no disk, no installer in Debian): as on a
#    real first boot Ignition runs before the root boots, here the real
#    Ignition (Debian's package, on the host, in the machine's network
#    namespace: it fetches from 10.12.0.2 over the veth) applies the
#    pointer.ign the doc made to the machine's root (fetch and files
#    stages, as firmware-tests/boot-lib.sh runs them). Not inside the
#    booted container: there it would run after systemd had started and
#    applied the first boot's presets, too late, where an initramfs's
#    Ignition runs outside the root it writes (--root /sysroot), before
#    that root boots, as here. Then the root boots; systemd applies the
#    presets Ignition wrote (first boot) and starts the shipped
#    rackgate-agent.service itself. The TPM is a swtpm (the lab's EK CA,
#    trusted by the doc's own step 4) listening on the machine namespace's
#    loopback; a drop-in gives the agent its TCTI and address, as a site's
#    drop-in would (RACKGATE_AGENT_ARGS). Nothing else of the unit changes.
# 6. Checks: rackgated active (running) in the appliance, the machine
#    `joined` (the doc's step 11 output), the agent unit's run succeeded
#    (Result=success, exit 0, started by systemd at boot, enabled by
#    Ignition's preset), the attested config applied and the kubelet
#    certificates signed by the doc's cluster CA, and each unit's
#    `systemd-analyze security` exposure inside its container.
# 7. Everything it started stopped by PID (the containers by nspawn's PID,
#    then whatever is left in their cgroups; swtpm), also on failure (the
#    lab's EXIT trap); the overlays unmounted, the namespaces removed. It
#    checks that nothing is left and prints its wall time.
#
# TAP. Skips (`1..0 # SKIP`) unless root with debootstrap, systemd-nspawn,
# nsenter, ip, overlayfs, swtpm and tpm2-tools and Debian's ignition, or
# when the mirror does not answer.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: install_real_test.sh --source DIR --cache DIR|\"\" --debs DIR"
source_dir="" cache="" cache_given="" debs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --source) source_dir=$(realpath "$2"); shift 2 ;;
    --cache) cache=$2; cache_given=1; shift 2 ;;
    --debs) debs=$(realpath -m "$2"); shift 2 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
done
[ -n "$source_dir" ] && [ -n "$cache_given" ] && [ -n "$debs" ] || { echo "$USAGE" >&2; exit 2; }

# shellcheck source=../firmware-tests/lab.sh
source "$source_dir/firmware-tests/lab.sh"
# shellcheck source=nspawn-lib.sh
source "$HERE/nspawn-lib.sh"
cache=$(nspawn_cache_dir "$cache")

[ "$(id -u)" = 0 ] || lab_skip "needs root (debootstrap, systemd-nspawn, network namespaces)"
for t in debootstrap systemd-nspawn nsenter ip mount; do
  command -v "$t" >/dev/null || lab_skip "$t not found (apt-get install --no-install-recommends debootstrap systemd-container iproute2)"
done
grep -qw overlay /proc/filesystems || lab_skip "no overlayfs"
lab_skip_unless_tools
IGNITION=/usr/lib/dracut/modules.d/30ignition/ignition
[ -x "$IGNITION" ] || lab_skip "$IGNITION missing (apt-get install ignition)"

started=$(date +%s)
# The root first: no mirror is a skip, before any result.
if ! why=$(nspawn_debian_root "$cache"); then lab_skip "$why"; fi
root="$cache/root"
lab_init real-install
lab_ca lab

# Names of this run's network namespaces and veth ends (at most 15 bytes).
NS_A="rgqa$$" NS_M="rgqm$$"
APPLIANCE_IP=10.12.0.2 MACHINE_IP=10.12.1.17 NODE=node-1
# The machine's swtpm, on its namespace's loopback.
TPM_PORT=2321
QS_DIR=/usr/local/share/rackgate-quickstart   # the blocks, in the appliance
: > "$LAB_DIR/mounts"
netns_made=()

# ------------------------------------------------------------ cleanup ----
rt_cleanup() {
  set +e
  local name m
  for name in machine appliance; do nspawn_stop "$name" >/dev/null 2>&1; done
  [ -n "${swtpm_pid:-}" ] && lab_kill_pid "$swtpm_pid"
  for name in "${netns_made[@]}"; do ip netns del "$name" 2>/dev/null; done
  netns_made=()
  # Last mounted first; lazily when busy, so that removing the lab's
  # directory never walks into a mounted root.
  tac "$LAB_DIR/mounts" 2>/dev/null | while read -r m; do
    mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done
  : > "$LAB_DIR/mounts"
}
trap 'rc=$?; rt_cleanup; (exit $rc); lab_cleanup' EXIT

# rt_overlay MERGED LOWER UPPER WORK: an overlayfs, recorded for the cleanup.
rt_overlay() {
  mkdir -p "$1" "$3" "$4"
  mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$1" || return 1
  echo "$1" >> "$LAB_DIR/mounts"
}

# rt_run ROOT [systemd-nspawn ARGS...] -- CMD...: CMD in ROOT, in a
# container with no init (image building), in a cgroup of its own.
rt_run() {
  local root="$1" dirs=() d; shift
  local args=()
  while [ "$1" != -- ]; do args+=("$1"); shift; done
  shift
  mapfile -t dirs < <(nspawn_cgroup_dirs "nspawn-build-$$")
  for d in "${dirs[@]}"; do mkdir -p "$d"; done
  local rc=0
  (
    for d in "${dirs[@]}"; do echo "$BASHPID" > "$d/cgroup.procs"; done
    exec systemd-nspawn -q --register=no --keep-unit -D "$root" --setenv=DEBIAN_FRONTEND=noninteractive \
      "${args[@]}" "$@"
  ) </dev/null || rc=$?
  for d in "${dirs[@]}"; do find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
  return $rc
}

# ------------------------------------------------------------ packages ----
version=$(sed -n "s/^ *version: '\([^']*\)',.*/\1/p" "$source_dir/meson.build" | head -n1)
arch=$(dpkg --print-architecture)
server_deb=rackgate_${version}_$arch.deb
agent_deb=rackgate-agent_${version}_$arch.deb

# Fresh: no file script/package would copy (what git tracks and new files
# not ignored; outside git, all but build trees) is newer than the package.
debs_fresh() {
  [ -f "$1/$server_deb" ] && [ -f "$1/$agent_deb" ] || return 1
  local newer
  if git -C "$source_dir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    newer=$(cd "$source_dir" && git ls-files -z --cached --others --exclude-standard |
      xargs -0 -r sh -c 'for f; do [ -e "$f" ] && [ "$f" -nt "$0" ] && echo "$f"; done' "$1/$server_deb" 2>/dev/null | head -n 3)
  else
    newer=$(find "$source_dir" \( -path "$source_dir/build*" -o -path "$source_dir/.git" \) -prune -o \
      -type f -newer "$1/$server_deb" -print | head -n 3)
  fi
  [ -z "$newer" ] || { echo "# $1: older than $(echo "$newer" | tr '\n' ' ')" >&2; return 1; }
}
package_started=$(date +%s)
if [ -n "${RACKGATE_DEB_DIR:-}" ] && [ -f "$RACKGATE_DEB_DIR/$server_deb" ] && [ -f "$RACKGATE_DEB_DIR/$agent_deb" ]; then
  debs=$(realpath "$RACKGATE_DEB_DIR")
  lab_ok "packages $version from \$RACKGATE_DEB_DIR ($debs)"
elif debs_fresh "$debs"; then
  lab_ok "packages $version in $debs, newer than every source file (the package test built them)"
elif out=$("$source_dir/script/package" "$debs" 2>&1); then
  lab_ok "script/package built rackgate and rackgate-agent $version in $(( $(date +%s) - package_started )) s"
else
  lab_not_ok "script/package failed" "$(printf '%s\n' "$out" | tail -n 30)"
  lab_finish
fi

# ------------------------------------------------------------ the root, its apt layer ----

# The apt layer: lists, sudo, and every .deb the quickstart's install and
# the agent's need, for the packages' current dependencies.
layer="$cache/apt-layer"
layer_key=$( { nspawn_mirror; for d in "$server_deb" "$agent_deb"; do
  dpkg-deb -f "$debs/$d" Depends Recommends; done; echo "sudo curl"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$layer/key" 2>/dev/null)" != "$layer_key" ]; then
  layer_started=$(date +%s)
  rm -rf "$layer" "$layer.tmp"
  rt_overlay "$layer.tmp/mnt" "$root" "$layer.tmp/upper" "$layer.tmp/work"
  if out=$(rt_run "$layer.tmp/mnt" --bind-ro="$debs:/mnt/debs" -- sh -ec "
      apt-get update -q
      apt-get install -y -q --no-install-recommends sudo
      apt-get install -y -q --download-only /mnt/debs/$server_deb /mnt/debs/$agent_deb curl" 2>&1); then
    umount "$layer.tmp/mnt"
    mkdir -p "$layer"
    mv "$layer.tmp/upper" "$layer/upper"
    rm -rf "$layer.tmp"
    echo "$layer_key" > "$layer/key"
    lab_ok "the apt layer: lists, sudo, the packages' dependencies downloaded ($(( $(date +%s) - layer_started )) s, $(du -sh "$layer/upper" | cut -f1))"
  else
    umount "$layer.tmp/mnt" 2>/dev/null || true
    rm -rf "$layer.tmp"
    lab_not_ok "apt-get update and the downloads in the root (the mirror?)" "$(printf '%s\n' "$out" | tail -n 10)"
    lab_finish
  fi
else
  lab_ok "the apt layer is cached for these packages' dependencies ($layer)"
fi

# ------------------------------------------------------------ network ----
ip netns add "$NS_A"; netns_made+=("$NS_A")
ip netns add "$NS_M"; netns_made+=("$NS_M")
ip link add "${NS_A}v" type veth peer name "${NS_M}v"
ip link set "${NS_A}v" netns "$NS_A"
ip link set "${NS_M}v" netns "$NS_M"
ip -n "$NS_A" addr add "$APPLIANCE_IP/16" dev "${NS_A}v"
ip -n "$NS_M" addr add "$MACHINE_IP/16" dev "${NS_M}v"
for ns in "$NS_A" "$NS_M"; do ip -n "$ns" link set lo up; ip -n "$ns" link set "${ns}v" up; done
# The route only; Ignition's fetch below is the proof that packets pass.
if ip -n "$NS_M" route get "$APPLIANCE_IP" | grep -q "dev ${NS_M}v"; then
  lab_ok "network namespaces $NS_A ($APPLIANCE_IP) and $NS_M ($MACHINE_IP), joined by a veth pair"
else
  lab_not_ok "the machine's namespace reaches $APPLIANCE_IP"
  lab_finish
fi

# ------------------------------------------------------------ the machine's TPM ----
lab_machine_create m1 lab
M="$(lab_dir m1)"
ip netns exec "$NS_M" swtpm socket --tpm2 \
  --server "type=tcp,port=$TPM_PORT,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$((TPM_PORT + 1)),bindaddr=127.0.0.1" \
  --tpmstate "dir=$M/state" --flags not-need-init,startup-clear \
  --pid "file=$M/swtpm.pid" --log "file=$M/swtpm.log" --daemon </dev/null >/dev/null 2>"$M/swtpm.err"
lab_wait 5 test -s "$M/swtpm.pid"
swtpm_pid=$(cat "$M/swtpm.pid")
echo "$swtpm_pid" >> "$LAB_DIR/pids"
lab_ok "the machine's TPM: swtpm with an EK certificate of the lab's CA, on 127.0.0.1:$TPM_PORT in $NS_M"

# ------------------------------------------------------------ the appliance ----
A="$LAB_DIR/ct/appliance"
rt_overlay "$A/root" "$layer/upper:$root" "$A/upper" "$A/work"
AR="$A/root"
echo rackgate > "$AR/etc/hostname"
printf '127.0.1.1\trackgate\n' >> "$AR/etc/hosts"
# The operator: a user who may use sudo. The installer's sudo asks for the
# user's password; the test has no terminal to type it in.
chroot "$AR" useradd -m -s /bin/bash -G sudo op
echo 'op ALL=(ALL:ALL) NOPASSWD: ALL' > "$AR/etc/sudoers.d/op"
chmod 0440 "$AR/etc/sudoers.d/op"
# The doc's "You need", in the directory its commands run from.
W="$AR/home/op"
mkdir -p "$W/tpm-roots" "$W/tpm-intermediates"
cp "$(lab_ca_root lab)" "$W/tpm-roots/lab.pem"
cp "$(lab_ca_intermediate lab)" "$W/tpm-intermediates/lab.pem"
cp "$M/ek-rsa.der" "$W/node-1-ek.der"
cp "$debs/$server_deb" "$W/"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=kubernetes \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
  -keyout "$W/cluster-ca.key" -out "$W/cluster-ca.crt" 2>/dev/null
chmod 600 "$W/cluster-ca.key"
chroot "$AR" chown -R op:op /home/op

STEPS="$LAB_DIR/steps"
mkdir -p "$STEPS"
if ! err=$(lab_python "$source_dir/firmware-tests/quickstart_blocks.py" split "$source_dir/docs/quickstart.md" "$STEPS" 2>&1); then
  lab_not_ok "docs/quickstart.md splits into quickstart blocks" "$err"
  lab_finish
fi
mkdir -p "$AR$QS_DIR"
cp "$STEPS"/*.sh "$AR$QS_DIR/"
chmod 0755 "$AR$QS_DIR"; chmod 0644 "$AR$QS_DIR"/*.sh

boot_started=$(date +%s)
nspawn_boot appliance "$AR" "$A/console.log" --machine=rackgate --network-namespace-path="/run/netns/$NS_A"
if state=$(nspawn_wait_running appliance "$(lab_seconds 60)"); then
  lab_ok "the appliance: Debian 12 booted with systemd as PID 1 ($state in $(( $(date +%s) - boot_started )) s, $(nspawn_in appliance systemctl --version | head -n1))"
else
  lab_not_ok "the appliance's systemd did not come up ($state)" "$(tail -n 20 "$A/console.log")"
  lab_finish
fi

# ------------------------------------------------------------ the machine's image ----
MC="$LAB_DIR/ct/machine"
rt_overlay "$MC/root" "$layer/upper:$root" "$MC/upper" "$MC/work"
MR="$MC/root"
echo localhost > "$MR/etc/hostname"
# A first boot: systemd applies the presets (Ignition's among them).
echo uninitialized > "$MR/etc/machine-id"
mkdir -p "$MR/etc/systemd/system-preset"
cat > "$MR/etc/systemd/system-preset/90-image.preset" <<'EOF'
# The image's vendor preset: the agent runs where the machine's Ignition
# config enables it (Fedora CoreOS ships `disable *`).
disable rackgate-agent.service
disable rackgate-agent-renew.timer
EOF
if out=$(rt_run "$MR" --private-network --bind-ro="$debs:/mnt/debs" -- \
    apt-get install -y -q "/mnt/debs/$agent_deb" 2>&1); then
  lab_ok "the machine's image: rackgate-agent $version installed with apt (no network: from the apt layer)"
else
  lab_not_ok "apt-get install ./$agent_deb in the machine's image" "$(printf '%s\n' "$out" | tail -n 15)"
  lab_finish
fi
# The site's drop-in: the TPM (a swtpm over TCP here, /dev/tpmrm0 on
# hardware) and the machine's address for its serving certificate.
mkdir -p "$MR/etc/systemd/system/rackgate-agent.service.d"
cat > "$MR/etc/systemd/system/rackgate-agent.service.d/10-site.conf" <<EOF
[Service]
Environment="RACKGATE_AGENT_ARGS=--tcti swtpm:host=127.0.0.1,port=$TPM_PORT --node-ip $MACHINE_IP"
EOF

# ------------------------------------------------------------ the doc, in order ----
# rt_block N: block N run by `op` in a login shell in the appliance, in its
# home; apt's question answered "y".
rt_block() {
  printf 'y\n' | timeout "$(lab_seconds 120)" nsenter -t "${NSPAWN_LEADER[appliance]}" -a \
    runuser -l op -c "bash -eu -o pipefail $QS_DIR/$1.sh"
}

# rt_machine_boot: the doc's machine block: Ignition with pointer.ign
# into the machine's root, in its namespace; then the root boots.
rt_machine_boot() {
  local I="$MC/ignition" C
  mkdir -p "$I/run" "$I/bin" "$MR/etc/selinux"
  [ -e "$MR/etc/selinux/config" ] || printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' > "$MR/etc/selinux/config"
  printf '#!/bin/sh\ncat >/dev/null\n' > "$I/bin/setfiles"; chmod +x "$I/bin/setfiles"
  cp "$W/pointer.ign" "$I/pointer.ign"
  C=(--platform file --log-to-stdout --root "$MR" --config-cache "$I/run/ignition.json"
     --state-file "$I/run/state" --neednet "$I/run/neednet")
  ip netns exec "$NS_M" env IGNITION_CONFIG_FILE="$I/pointer.ign" PATH="$I/bin:$PATH" \
    timeout "$(lab_seconds 60)" "$IGNITION" "${C[@]}" --stage fetch --fetch-timeout "$(lab_seconds 10)s" \
    </dev/null >"$MC/ignition.log" 2>&1 || return 100
  ip netns exec "$NS_M" env PATH="$I/bin:$PATH" timeout "$(lab_seconds 60)" "$IGNITION" "${C[@]}" --stage files \
    </dev/null >>"$MC/ignition.log" 2>&1 || return 100
  nspawn_boot machine "$MR" "$MC/console.log" --machine=node --network-namespace-path="/run/netns/$NS_M" || return 101
  # Boot is over once every start job is done: the agent's oneshot too.
  nspawn_wait_running machine "$(lab_seconds 120)" > "$MC/state" || return 102
}

for kind_file in "$STEPS"/*.kind; do
  n="${kind_file%.kind}"; nn=$(basename "$n")
  title="$(cat "$n.title")"
  first="$(head -n 1 "$n.sh")"
  if [ "$(cat "$kind_file")" = machine ]; then
    if ! grep -q 'pointer\.ign' "$n.sh"; then
      lab_not_ok "$title: the machine boots with pointer.ign" "the block does not name pointer.ign: $first"
      break
    fi
    rc=0; boot_started=$(date +%s)
    rt_machine_boot || rc=$?
    if [ $rc -eq 0 ]; then
      lab_ok "$title: Ignition applied pointer.ign over the network, the machine booted ($(cat "$MC/state"), $(( $(date +%s) - boot_started )) s)"
    else
      lab_not_ok "$title: the machine boots with pointer.ign (exit $rc: 100 Ignition, 101 boot, 102 boot not over)" \
        "$(tail -n 8 "$MC/ignition.log" 2>/dev/null; tail -n 12 "$MC/console.log" 2>/dev/null)"
      nspawn_in machine journalctl -u rackgate-agent --no-pager -o cat 2>/dev/null | tail -n 10 | sed 's/^/#   agent: /'
      break
    fi
    continue
  fi
  rc=0
  rt_block "$nn" >"$n.out" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    lab_not_ok "$title: $first" "exit $rc; the output:"$'\n'"$(tail -n 15 "$n.out")"
    nspawn_in appliance journalctl -u rackgated --no-pager -o cat 2>/dev/null | tail -n 10 | sed 's/^/#   rackgated: /'
    break
  fi
  lab_ok "$title: $first"
  if [ -s "$n.expect" ]; then
    if why=$(lab_python "$source_dir/firmware-tests/quickstart_blocks.py" expect "$n.expect" "$n.out"); then
      lab_ok "$title: the output the doc shows"
    else
      lab_not_ok "$title: the output the doc shows" "$why"$'\n'"the output:"$'\n'"$(head -n 20 "$n.out")"
    fi
  fi
done

# ------------------------------------------------------------ checks ----
if [ -n "${NSPAWN_LEADER[machine]:-}" ]; then
  # rackgated, run by the appliance's systemd.
  got=$(nspawn_in appliance systemctl show -p ActiveState,SubState,NRestarts rackgated.service | sort | tr '\n' ' ')
  if [ "$got" = "ActiveState=active NRestarts=0 SubState=running " ]; then
    lab_ok "rackgated.service: active (running), never restarted ($got)"
  else
    lab_not_ok "rackgated.service active (running)" "$got"
  fi
  # The machine's state, as the operator asks for it.
  state=$(nspawn_in appliance runuser -l op -c "rackgatectl show $NODE --json" 2>/dev/null |
    lab_python -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null || echo '?')
  [ "$state" = joined ] && lab_ok "rackgatectl show $NODE: joined" || lab_not_ok "rackgatectl show $NODE: joined" "state: $state"

  # The agent: the shipped unit, started by the machine's systemd at boot.
  got=$(nspawn_in machine systemctl show -p Result,ActiveState,ExecMainStatus,ExecMainCode,UnitFileState \
    rackgate-agent.service | sort | tr '\n' ' ')
  # ExecMainCode=1: CLD_EXITED.
  if [ "$got" = "ActiveState=inactive ExecMainCode=1 ExecMainStatus=0 Result=success UnitFileState=enabled " ]; then
    lab_ok "rackgate-agent.service ran at boot and succeeded ($got)"
  else
    lab_not_ok "rackgate-agent.service ran at boot and succeeded" "$got"$'\n'"$(nspawn_in machine journalctl -u rackgate-agent --no-pager -o cat | tail -n 12)"
  fi
  # Part of the boot, not started later: multi-user.target, which wants
  # it (so is ordered after it), was reached after its run ended.
  ran_end=$(nspawn_in machine systemctl show -P ExecMainExitTimestampMonotonic rackgate-agent.service)
  target_at=$(nspawn_in machine systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)
  if [ "${ran_end:-0}" -gt 0 ] && [ "${target_at:-0}" -ge "$ran_end" ]; then
    lab_ok "its run was part of the boot: ended at $((ran_end / 1000)) ms, multi-user.target reached at $((target_at / 1000)) ms"
  else
    lab_not_ok "its run was part of the boot" "ended at ${ran_end:-?} us, multi-user.target at ${target_at:-?} us"
  fi
  unit_path=$(nspawn_in machine systemctl show -P FragmentPath rackgate-agent.service)
  dropins=$(nspawn_in machine systemctl show -P DropInPaths rackgate-agent.service)
  if [ "$unit_path" = /lib/systemd/system/rackgate-agent.service ] &&
     [ "$dropins" = /etc/systemd/system/rackgate-agent.service.d/10-site.conf ] &&
     cmp -s "$MR/lib/systemd/system/rackgate-agent.service" <(dpkg-deb --fsys-tarfile "$debs/$agent_deb" | tar -xOf - ./lib/systemd/system/rackgate-agent.service); then
    lab_ok "the unit is the package's ($unit_path), only the site's drop-in beside it"
  else
    lab_not_ok "the unit is the package's" "fragment $unit_path, drop-ins: $dropins"
  fi
  if grep -qx 'enable rackgate-agent.service' "$MR/etc/systemd/system-preset/20-ignition.preset" 2>/dev/null &&
     [ -L "$MR/etc/systemd/system/multi-user.target.wants/rackgate-agent.service" ]; then
    lab_ok "Ignition enabled it (its preset, applied by systemd at first boot)"
  else
    lab_not_ok "Ignition enabled rackgate-agent.service" "$(cat "$MR/etc/systemd/system-preset/20-ignition.preset" 2>&1)"
  fi
  # The journal has the agent's own lines, under the unit.
  lines=$(nspawn_in machine journalctl -u rackgate-agent.service --no-pager -o cat _COMM=rackgate-agent | wc -l)
  [ "$lines" -gt 0 ] && lab_ok "the agent's output is in the machine's journal under its unit ($lines lines)" ||
    lab_not_ok "the agent's output is in the machine's journal"

  # What the agent wrote, through its sandbox.
  host=$(cat "$MR/etc/hostname")
  mode=$(stat -c '%a' "$MR/var/lib/kubelet/config.json" 2>/dev/null || echo none)
  if [ "$host" = "$NODE" ] && [ "$mode" = 600 ] && [ -s "$MR/var/lib/rackgate-agent/config-applied" ]; then
    lab_ok "the attested config applied: /etc/hostname $host, /var/lib/kubelet/config.json 0600, the first-boot stamp"
  else
    lab_not_ok "the attested config applied" "hostname '$host', config.json mode $mode"
  fi
  for kind in client server; do
    if out=$(openssl verify -CAfile "$W/cluster-ca.crt" "$MR/var/lib/kubelet/pki/kubelet-$kind-current.pem" 2>&1); then
      lab_ok "the machine's kubelet $kind certificate is signed by the cluster CA of step 5"
    else
      lab_not_ok "the machine's kubelet $kind certificate is signed by the cluster CA of step 5" "$out"
    fi
  done

  # Each unit's sandbox as its own systemd sees it.
  for pair in "machine rackgate-agent.service 2.5" "appliance rackgated.service 2.0"; do
    set -- $pair
    exposure=$(nspawn_in "$1" systemd-analyze security "$2" 2>/dev/null |
      sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
    if [ -n "$exposure" ] && awk -v e="$exposure" -v max="$3" 'BEGIN { exit !(e <= max) }'; then
      lab_ok "systemd-analyze security $2 in the $1's container: $exposure (at most $3)"
    else
      lab_not_ok "systemd-analyze security $2 in the $1's container: '$exposure' (at most $3)"
    fi
  done
fi

# ------------------------------------------------------------ stop ----
stop_ok=1
for name in machine appliance; do nspawn_stop "$name" || stop_ok=0; done
lab_kill_pid "$swtpm_pid"
lab_pid_gone "$swtpm_pid" || stop_ok=0
for ns in "${netns_made[@]}"; do ip netns del "$ns" || stop_ok=0; done
netns_made=()
if [ $stop_ok = 1 ] && [ -z "$(pgrep -f -- "$LAB_DIR" || true)" ] && ! ip netns list | grep -qE "^($NS_A|$NS_M)\b"; then
  lab_ok "both containers stopped by PID (nothing left in their cgroups), swtpm stopped, the namespaces removed (wall time $(( $(date +%s) - started )) s)"
else
  lab_not_ok "everything stopped" "$(pgrep -af -- "$LAB_DIR"; ip netns list)"
fi
echo "# wall time $(( $(date +%s) - started )) s"
lab_finish
