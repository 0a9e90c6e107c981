# systemd/nspawn-lib.sh: a Debian 12 root made once by debootstrap, and
# containers that boot it with systemd as PID 1 (systemd-nspawn), each in a
# cgroup of its own, stopped by their PIDs. Sourced by the tests that run the
# shipped units under a real systemd (units_real_test.sh,
# install_real_test.sh; docs/systemd.md, "Tests under a real systemd").
#
#   nspawn_cache_dir [DIR]        # DIR, or the machine's cache directory
#   nspawn_debian_root CACHE      # $CACHE/root, debootstrapped once
#   nspawn_boot NAME ROOT LOG [systemd-nspawn ARGS...]
#   nspawn_wait_running NAME SECS # prints the state: running or degraded
#   nspawn_in NAME CMD...         # CMD in all of the container's namespaces
#   nspawn_stop NAME              # SIGTERM (poweroff), then SIGKILL by PID
#
# On these machines plain `systemd-nspawn -b` fails for want of a system
# bus: containers run with --register=no --keep-unit, which keeps them in
# the cgroup they are started in; so each is started in a cgroup of its own
# (two containers in one cgroup would share nspawn's payload/supervisor
# cgroups). Every function and variable here starts with nspawn_/NSPAWN_.

# shellcheck shell=bash
if [[ -n "${NSPAWN_LIB_LOADED:-}" ]]; then return 0; fi
NSPAWN_LIB_LOADED=1

declare -A NSPAWN_PID=() NSPAWN_LEADER=() NSPAWN_CGROUPS=()

# The mirror of this machine's own apt entry (deb822 first, then the
# one-line format): never a host name written here.
nspawn_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] && awk '/^URIs:/ {print $2; exit}' "$f" && return 0
  done
  awk '$1 == "deb" && $2 !~ /^\[/ {print $2; exit} $1 == "deb" {print $3; exit}' /etc/apt/sources.list 2>/dev/null
}

# nspawn_cache_dir [DIR]: DIR when given, else the machine's cache of the
# Debian 12 root, kept outside any build tree so that every clone and build
# directory on the machine (CI's fresh clone too) debootstraps it once:
# $RACKGATE_DEBIAN_ROOT_CACHE, else $XDG_CACHE_HOME/rackgate-debian12-root,
# else ~/.cache/rackgate-debian12-root.
nspawn_cache_dir() {
  if [ -n "${1:-}" ]; then realpath -m "$1"; return; fi
  echo "${RACKGATE_DEBIAN_ROOT_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rackgate-debian12-root}"
}

# nspawn_debian_root CACHE: makes CACHE/root (Debian 12, minbase plus
# systemd and dbus, and the tss group the agent unit names) unless it is
# there. Fails with the reason on stdout (no mirror, debootstrap failed).
nspawn_debian_root() {
  local cache="$1" url root="$1/root"
  if [ -f "$root/etc/debian_version" ] && [ -x "$root/lib/systemd/systemd" ]; then return 0; fi
  url=$(nspawn_mirror)
  [ -n "$url" ] || { echo "no apt entry to take the mirror from"; return 1; }
  rm -rf "$cache/root.tmp"
  mkdir -p "$cache"
  echo "# debootstrap bookworm from $url into $cache (once)" >&2
  if ! debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$cache/root.tmp" "$url" \
      > "$cache/debootstrap.log" 2>&1; then
    tail -n 5 "$cache/debootstrap.log" | sed 's/^/#   /' >&2
    rm -rf "$cache/root.tmp"
    echo "debootstrap from $url failed (no mirror?)"
    return 1
  fi
  # The tpm2-tss group the agent unit's SupplementaryGroups= names.
  chroot "$cache/root.tmp" groupadd -f -r tss
  mv "$cache/root.tmp" "$root"
}

# nspawn_cgroup_dirs TAG: the cgroup directories a process of ours goes to,
# one per hierarchy systemd-nspawn looks at (the unified one on a pure
# cgroup v2 host; name=systemd and the unified one on a hybrid host),
# made under the cgroup we run in.
nspawn_cgroup_dirs() {
  local tag="$1" own
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    echo "/sys/fs/cgroup${own%/}/$tag"
    return
  fi
  if [ -d /sys/fs/cgroup/systemd ]; then
    own=$(sed -n 's/^[0-9]*:name=systemd://p' /proc/self/cgroup)
    echo "/sys/fs/cgroup/systemd${own%/}/$tag"
  fi
  if [ -d /sys/fs/cgroup/unified ]; then
    own=$(sed -n 's/^0:://p' /proc/self/cgroup)
    echo "/sys/fs/cgroup/unified${own%/}/$tag"
  fi
}

# nspawn_boot NAME ROOT LOG [ARGS...]: boots ROOT with systemd as PID 1 in
# its own cgroup (nspawn-NAME-<our pid>), the console read-only into LOG,
# ARGS passed to systemd-nspawn. Returns once the container's PID 1 is
# systemd (NSPAWN_LEADER[NAME]); fails when it never becomes so.
nspawn_boot() {
  local name="$1" root="$2" log="$3"; shift 3
  local dirs=() d leader=""
  mapfile -t dirs < <(nspawn_cgroup_dirs "nspawn-$name-$$")
  for d in "${dirs[@]}"; do mkdir -p "$d" || return 1; done
  NSPAWN_CGROUPS[$name]="${dirs[*]}"
  (
    for d in "${dirs[@]}"; do echo "$BASHPID" > "$d/cgroup.procs"; done
    exec systemd-nspawn --register=no --keep-unit -b -D "$root" --console=read-only "$@"
  ) </dev/null > "$log" 2>&1 &
  NSPAWN_PID[$name]=$!
  # The container's PID 1 as the host sees it: nspawn's child once it has
  # become systemd (before that it is nspawn's own intermediate process).
  for _ in $(seq 1 600); do
    leader=$(pgrep -x -P "${NSPAWN_PID[$name]}" systemd | head -n1 || true)
    [ -n "$leader" ] && break
    kill -0 "${NSPAWN_PID[$name]}" 2>/dev/null || break
    sleep 0.1
  done
  NSPAWN_LEADER[$name]=$leader
  [ -n "$leader" ]
}

nspawn_in() {
  local name="$1"; shift
  nsenter -t "${NSPAWN_LEADER[$name]}" -a "$@"
}

# nspawn_wait_running NAME SECONDS: waits until the container's manager
# answers (its private socket comes a moment after PID 1 starts), then
# until boot is over (every start job done, oneshots included); prints the
# state it ended in. Fails unless running or degraded.
nspawn_wait_running() {
  local name="$1" deadline state="" left
  deadline=$(( $(date +%s) + $2 ))
  while [ -z "$state" ] && [ "$(date +%s)" -lt "$deadline" ]; do
    left=$(( deadline - $(date +%s) )); [ "$left" -gt 0 ] || left=1
    state=$(timeout "$left" nsenter -t "${NSPAWN_LEADER[$name]}" -a systemctl is-system-running --wait 2>/dev/null || true)
    [ -n "$state" ] || sleep 0.2
  done
  echo "${state:-no answer}"
  [ "$state" = running ] || [ "$state" = degraded ]
}

# nspawn_cgroup_pids NAME: every process still in the container's cgroups.
nspawn_cgroup_pids() {
  local d
  for d in ${NSPAWN_CGROUPS[$1]:-}; do
    [ -d "$d" ] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done | sort -u
}

# nspawn_stop NAME: SIGTERM to systemd-nspawn (it asks the container's
# systemd to power off), SIGKILL after $NSPAWN_STOP_SECONDS (default 30);
# then SIGKILL to any process left in its cgroups, by PID, and the cgroups
# removed. Fails when a process or a cgroup of it is left. Safe to call
# twice.
nspawn_stop() {
  local name="$1" pid="${NSPAWN_PID[$1]:-}" p rc=0 d
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 $(( ${NSPAWN_STOP_SECONDS:-30} * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  NSPAWN_PID[$name]=""
  for p in $(nspawn_cgroup_pids "$name"); do kill -KILL "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do [ -z "$(nspawn_cgroup_pids "$name")" ] && break; sleep 0.1; done
  [ -z "$(nspawn_cgroup_pids "$name")" ] || rc=1
  for d in ${NSPAWN_CGROUPS[$name]:-}; do
    [ -d "$d" ] && { find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || rc=1; }
    [ -d "$d" ] && rc=1
  done
  [ $rc -eq 0 ] && NSPAWN_CGROUPS[$name]=""
  return $rc
}
