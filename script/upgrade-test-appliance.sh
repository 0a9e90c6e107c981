# script/upgrade-test-appliance.sh: the 'upgrade' test's body (one
# appliance, SQLite, a real apt and systemd); sourced by script/upgrade-test
# (read its header), in the test's own network namespace, with lab.sh
# loaded, lab_init done and OLD/NEW (both versions unpacked), old_debs,
# new_debs, version, old_version, arch and source_dir set.
# shellcheck shell=bash

# shellcheck source=../daemon/tests/appliance.sh
source "$source_dir/daemon/tests/appliance.sh"
# shellcheck source=../firmware-tests/boot-lib.sh
source "$source_dir/firmware-tests/boot-lib.sh"
RECEIVER="$build_dir/firmware-tests/rackgate-webhook-receiver"
GOLDEN_LOG="$source_dir/testdata/eventlogs/tpm2-tools_event-gce-ubuntu-2104-log.bin"
root="$cache/root"
STATE=/var/lib/rackgate
PORT=22623 HOOK_PORT=8099
: > "$LAB_DIR/mounts"

up_cleanup() {
  set +e
  local m
  nspawn_stop appliance >/dev/null 2>&1
  tac "$LAB_DIR/mounts" 2>/dev/null | while read -r m; do
    mountpoint -q "$m" && { umount "$m" 2>/dev/null || umount -l "$m"; }
  done
  : > "$LAB_DIR/mounts"
}
trap 'rc=$?; up_cleanup; (exit $rc); lab_cleanup' EXIT

up_overlay() {  # MERGED LOWER UPPER WORK
  mkdir -p "$1" "$3" "$4"
  mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4" "$1" || return 1
  echo "$1" >> "$LAB_DIR/mounts"
}
# up_run ROOT -- CMD...: CMD in ROOT, a container with no init, in a cgroup
# of its own (systemd/install_real_test.sh's rt_run), both versions'
# packages at /mnt/old and /mnt/new, in the network namespace of the
# host (the outer script's: the test's own reaches no mirror).
up_run() {
  local root="$1" dirs=() d rc=0; shift 2
  mapfile -t dirs < <(nspawn_cgroup_dirs "nspawn-build-$$")
  for d in "${dirs[@]}"; do mkdir -p "$d"; done
  (
    for d in "${dirs[@]}"; do echo "$BASHPID" > "$d/cgroup.procs"; done
    exec nsenter --net="$UPGRADE_TEST_HOST_NET" systemd-nspawn -q --register=no --keep-unit -D "$root" \
      --setenv=DEBIAN_FRONTEND=noninteractive --bind-ro="$old_debs:/mnt/old" --bind-ro="$new_debs:/mnt/new" "$@"
  ) </dev/null || rc=$?
  for d in "${dirs[@]}"; do find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true; done
  return $rc
}

# --- the root's apt layer: both versions' dependencies, downloaded -------------------
# Kept beside install_real_test.sh's (its own key): the container installs
# offline, the test's namespace reaches no mirror.
layer="$cache/apt-layer-upgrade"
old_srv="rackgate_${old_version}_$arch.deb" old_agent="rackgate-agent_${old_version}_$arch.deb"
new_srv="rackgate_${version}_$arch.deb"
layer_key=$( { nspawn_mirror; for d in "$old_debs/$old_srv" "$old_debs/$old_agent" "$new_debs/$new_srv"; do
  dpkg-deb -f "$d" Depends Recommends; done; echo "sudo curl"; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$layer/key" 2>/dev/null)" != "$layer_key" ]; then
  layer_started=$(date +%s)
  rm -rf "$layer" "$layer.tmp"
  # The download needs the mirror: from the host's namespace (our own has
  # no route), by nsenter into the outer script's.
  if up_overlay "$layer.tmp/mnt" "$root" "$layer.tmp/upper" "$layer.tmp/work" &&
     out=$(up_run "$layer.tmp/mnt" -- sh -ec "
       apt-get update -q
       apt-get install -y -q --no-install-recommends sudo
       apt-get install -y -q --download-only /mnt/old/$old_srv curl
       apt-get install -y -q --download-only /mnt/new/$new_srv" 2>&1); then
    umount "$layer.tmp/mnt"
    mkdir -p "$layer"
    mv "$layer.tmp/upper" "$layer/upper"
    rm -rf "$layer.tmp"
    echo "$layer_key" > "$layer/key"
    lab_ok "the apt layer: lists, sudo, both versions' dependencies downloaded ($(( $(date +%s) - layer_started )) s)"
  else
    umount "$layer.tmp/mnt" 2>/dev/null || true
    rm -rf "$layer.tmp"
    lab_not_ok "apt-get update and the downloads in the root (the mirror?)" "$(printf '%s\n' "${out:-}" | tail -n 10)"
    lab_finish
  fi
else
  lab_ok "the apt layer is cached for both versions' dependencies ($layer)"
fi

# --- the appliance: the old package, as installed by an operator -----------------------
lab_ca lab
boot_new_machines 10.0.0 j1 j2 u1 r1 e1 p1 c1
A="$LAB_DIR/ct"
up_overlay "$A/root" "$layer/upper:$root" "$A/upper" "$A/work"
AR="$A/root"
echo rackgate > "$AR/etc/hostname"
mkdir -p "$AR/root/old" "$AR/root/upgrade"
cp "$old_debs/$old_srv" "$AR/root/old/"
# The operator answers apt's "Do you want to continue?" (0.2.0 brings new
# dependencies: libarchive13 for `rackgatectl backup`): the lab says yes as
# they would, the runbook's command stays as an operator types it.
echo 'APT::Get::Assume-Yes "true";' > "$AR/etc/apt/apt.conf.d/90rackgate-lab-operator-says-yes"
cp "$new_debs/$new_srv" "$AR/root/upgrade/"
boot_started=$(date +%s)
nspawn_boot appliance "$AR" "$A/console.log" --machine=rackgate
if state=$(nspawn_wait_running appliance "$(lab_seconds 60)"); then
  lab_ok "the appliance: Debian 12 booted with systemd as PID 1 ($state in $(( $(date +%s) - boot_started )) s)"
else
  lab_not_ok "the appliance's systemd did not come up ($state)" "$(tail -n 20 "$A/console.log")"
  lab_finish
fi
in_ct() { nspawn_in appliance "$@"; }

# The operator's steps (docs/quickstart.md's, with the lab's names): the
# package, the state directory, the EK roots, the config (discovery on, a
# webhook whose receiver is down), the cluster CA, the unit.
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$LAB_DIR/webhook.secret"
setup() {
  in_ct env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "/root/old/$old_srv" curl || return 1
  in_ct runuser -u rackgate -- rackgatectl init --state-dir "$STATE" --name localhost --address 127.0.0.1 || return 1
  cp "$(lab_ca_root lab)" "$AR/etc/rackgate/ek-roots/lab.pem"
  cp "$(lab_ca_intermediate lab)" "$AR/etc/rackgate/ek-intermediates/lab.pem"
  install -m 0640 "$LAB_DIR/webhook.secret" "$AR/etc/rackgate/webhook.secret"
  in_ct chgrp rackgate /etc/rackgate/webhook.secret || return 1
  cat > "$AR/etc/rackgate/rackgated.json" <<JSON
{
  "state_dir": "$STATE",
  "listen_addresses": ["127.0.0.1"],
  "port": $PORT,
  "admin_socket": "/run/rackgate/admin.sock",
  "ek_roots": ["/etc/rackgate/ek-roots"],
  "ek_intermediates": ["/etc/rackgate/ek-intermediates"],
  "retry_after_seconds": 1,
  "discovery": true,
  "webhooks": [{"url": "http://127.0.0.1:$HOOK_PORT/hook", "secret_file": "/etc/rackgate/webhook.secret"}]
}
JSON
  in_ct runuser -u rackgate -- rackgatectl ca generate --cluster --state-dir "$STATE" || return 1
  in_ct systemctl enable --now rackgated
}
if out=$(setup 2>&1); then
  lab_ok "rackgate $old_version installed with apt, initialised, configured and started by systemd"
else
  lab_not_ok "the old appliance's setup" "$(printf '%s\n' "$out" | tail -n 15)"
  in_ct journalctl -u rackgated --no-pager -o cat 2>/dev/null | tail -n 10 | sed 's/^/#   rackgated: /'
  lab_finish
fi

# The lab's view of it (daemon/tests/appliance.sh): the old rackgatectl on
# the host, through the admin socket inside the container.
RG_DIR="$LAB_DIR/appliance" RG_PORT=$PORT RG_CTL="$OLD/usr/bin/rackgatectl"
mkdir -p "$RG_DIR"
ln -s "$AR$STATE" "$RG_DIR/state"
ln -s "/proc/${NSPAWN_LEADER[appliance]}/root/run/rackgate/admin.sock" "$RG_DIR/admin.sock"
if lab_wait 30 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$RG_DIR/state/ca/ca.crt' $(rg_url /readyz))\" = 200 ]"; then
  lab_ok "rackgated $old_version is ready ($(in_ct rackgated --version))"
else
  lab_not_ok "rackgated $old_version is ready" "$(in_ct journalctl -u rackgated --no-pager -o cat | tail -n 10)"
  lab_finish
fi

# --- the fleet: every state, driven by the old agent ---------------------------------
boot_init "$OLD/usr/bin/rackgate-agent" "$OLD/lib/systemd/system/rackgate-agent.service"
"$RG_CTL" eventlog replay "$GOLDEN_LOG" --json > "$BOOT_DIR/golden.pcrs.json"
lab_python - "$BOOT_DIR/golden.pcrs.json" > "$BOOT_DIR/pinned.policy.json" <<'PY'
import json, sys
pcrs = json.load(open(sys.argv[1]))["pcrs"]["sha256"]
print(json.dumps({"version": 1, "comment": "upgrade test: the GCE Ubuntu 21.04 boot",
                  "pcrs": {"sha256": {str(i): pcrs[str(i)] for i in range(8)}}, "require_separators": True}))
PY
echo '{"csr_approval": {"client": "manual"}}' > "$BOOT_DIR/manual.settings.json"
populate() {
  boot_pool rack && boot_pool pinned --policy "$BOOT_DIR/pinned.policy.json" &&
    boot_pool manual --settings "$BOOT_DIR/manual.settings.json" || return 1
  local m
  for m in j1 j2 r1 e1; do boot_enroll "$m" "node-$m" rack || return 1; done
  boot_enroll u1 node-u1 pinned && boot_enroll c1 node-c1 manual || return 1
  boot_replay_eventlog u1 "$GOLDEN_LOG" || return 1
  # First boots: the real Ignition with the pool's pointer config writes
  # the appliance's URL, its CA and the agent's unit into each root.
  for m in j1 j2 r1 p1; do boot_ignition "$m" rack || return 1; done
  boot_ignition u1 pinned && boot_ignition c1 manual
}
lab_check_shown "pools rack, pinned (a boot policy), manual (client CSRs wait for an operator); 6 machines enrolled; Ignition's first boot on 6 (not node-e1)" populate

# Joined: j1, j2, r1, u1 together; the pending machine (p1, discovery) and
# the one whose CSR waits (c1) give up waiting after a few seconds.
declare -A run_rc=()
BOOT_MAX_WAIT=2 boot_agent p1 attest 2>/dev/null & p1_pid=$!
BOOT_MAX_WAIT=2 boot_agent c1 attest,config,csr 2>/dev/null & c1_pid=$!
for m in j1 j2 r1 u1; do boot_agent "$m" attest,config,csr 2>/dev/null & run_rc[$m]=$!; done
for m in j1 j2 r1 u1; do
  rc=0; wait "${run_rc[$m]}" || rc=$?
  if [ $rc = 0 ] && grep -Eq 'step=csr machine=[0-9a-f]{16} ok kubeconfig=' "$(lab_dir "$m")/agent.last"; then
    lab_ok "node-$m joins with the old agent (exit 0, kubelet certificates)"
  else
    lab_not_ok "node-$m joins with the old agent" "exit $rc; $(tail -n 4 "$(lab_dir "$m")/agent.last")"
  fi
done
wait "$p1_pid" || true; wait "$c1_pid" || true
# Untrusted: a PCR the pool's policy pins extended behind the log's back.
lab_tpm u1 tpm2_pcrextend "4:sha256=$(printf rootkit | openssl dgst -sha256 -r | cut -d' ' -f1)" >/dev/null
lab_expect 3 'refused status=403 reason=eventlog_pcr_mismatch' "node-u1's next boot is refused (a PCR behind the event log's back): untrusted" \
  boot_agent u1 attest
lab_check_shown "node-r1 revoked by the operator" rg_ctl revoke node-r1 --reason "upgrade test: a stolen machine"

# The states, as the old appliance reports them.
rg_ctl list --json > "$LAB_DIR/list.json"
lab_python - "$LAB_DIR/list.json" > "$LAB_DIR/states.txt" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["machines"]:
    print(m["hostname"], m["state"], json.dumps(m.get("trust")).replace(" ", ""))
PY
sed 's/^/# machine: /' "$LAB_DIR/states.txt"
pending_host=$(awk '$2 == "pending" {print $1; exit}' "$LAB_DIR/states.txt")
waiting_csr=$(rg_ctl csr list --json | lab_python -c 'import json,sys
r = [c for c in json.load(sys.stdin)["csrs"] if c.get("hostname") == "node-c1"]
print(r[0]["id"] if r else "")' 2>/dev/null || true)
state_of() { awk -v h="$1" '$1 == h {print $2}' "$LAB_DIR/states.txt"; }
lab_check_shown "before: node-j1, node-j2 joined; node-r1 revoked; node-e1 enrolled; node-u1 untrusted; a pending machine; node-c1's client CSR waiting" \
  bash -c "[ '$(state_of node-j1) $(state_of node-j2) $(state_of node-r1) $(state_of node-e1)' = 'joined joined revoked enrolled' ] &&
    grep -q '^node-u1 .*untrusted' '$LAB_DIR/states.txt' && [ -n '$pending_host' ] && [ -n '$waiting_csr' ] ||
    { cat '$LAB_DIR/states.txt'; echo 'pending: $pending_host, waiting CSR: $waiting_csr'; false; }"

# --- before: what the operator and the fleet see -----------------------------------------
hosts() { awk '{print $1}' "$LAB_DIR/states.txt"; }
# snapshot DIR: every listing the admin API gives (the old rackgatectl
# renders both sides alike), and an online copy of the database.
snapshot() {
  local d="$1" h p
  mkdir -p "$d"
  rg_ctl list --json > "$d/list.json" &&
    rg_ctl certs --limit 100000 --json > "$d/certs.json" &&
    rg_ctl csr list --all --json > "$d/csrs.json" &&
    rg_ctl events --pending --limit 10000 --json > "$d/events.json" &&
    rg_ctl audit --limit 10000 --json > "$d/audit.json" || return 1
  for p in rack pinned manual; do rg_ctl pool show "$p" --json > "$d/pool-$p.json" || return 1; done
  for h in $(hosts); do rg_ctl show "$h" --json > "$d/show-$h.json" || return 1; done
  sqlite3 "$AR$STATE/rackgate.db" ".backup '$d/rackgate.db'"
}
lab_check_shown "before: machines, certificates, CSRs, pools, pending events, audit and an online copy of the database" \
  snapshot "$LAB_DIR/before"
rg_ctl audit verify --json > "$LAB_DIR/before/verify.json"
anchor=$(lab_python -c 'import json,sys; v=json.load(open(sys.argv[1])); print("%d:%s" % (v["head_id"], v["head_hash"]))' \
  "$LAB_DIR/before/verify.json")
pending_before=$(lab_python -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["events"]))' "$LAB_DIR/before/events.json")
lab_check_shown "before: the audit chain verifies (head $anchor); $pending_before events wait for the webhook that is down" \
  test "$pending_before" -gt 0

# --- the upgrade: docs/operations.md §10's blocks, in order, in the container --------------
STEPS="$LAB_DIR/steps"
mkdir -p "$STEPS"
if ! err=$(lab_python "$source_dir/firmware-tests/quickstart_blocks.py" split "$source_dir/docs/operations.md" "$STEPS" upgrade 2>&1); then
  lab_not_ok "docs/operations.md splits into upgrade blocks" "$err"
  lab_finish
fi
mkdir -p "$AR/root/upgrade/.blocks"
cp "$STEPS"/*.sh "$AR/root/upgrade/.blocks/"
pid_before=$(in_ct systemctl show -P MainPID rackgated.service)
upgrade_started=$(date +%s)
for kind_file in "$STEPS"/*.kind; do
  n="${kind_file%.kind}"; nn=$(basename "$n")
  title="$(cat "$n.title")"; first="$(head -n 1 "$n.sh")"
  rc=0
  timeout "$(lab_seconds 300)" nsenter -t "${NSPAWN_LEADER[appliance]}" -a \
    bash -lc "cd /root/upgrade && bash -eu -o pipefail .blocks/$nn.sh" </dev/null >"$n.out" 2>&1 || rc=$?
  if [ $rc -ne 0 ]; then
    lab_not_ok "$title: $first" "exit $rc; the output:"$'\n'"$(tail -n 15 "$n.out")"
    in_ct journalctl -u rackgated --no-pager -o cat 2>/dev/null | tail -n 10 | sed 's/^/#   rackgated: /'
    lab_finish
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
upgrade_seconds=$(( $(date +%s) - upgrade_started ))
got=$(in_ct dpkg-query -W -f '${Version}' rackgate)
lab_check_shown "dpkg says rackgate $got, rackgated says '$(in_ct rackgated --version)' ($upgrade_seconds s for the runbook's blocks)" \
  bash -c "[ '$got' = '$version' ] && [ '$(in_ct rackgated --version)' = 'rackgated $version' ]"
got=$(in_ct systemctl show -p ActiveState,SubState,MainPID rackgated.service | sort | tr '\n' ' ')
lab_check_shown "rackgated.service restarted by the package (MainPID $pid_before before) and running ($got)" \
  bash -c "echo '$got' | grep -q 'ActiveState=active MainPID=[1-9][0-9]* SubState=running' && ! echo '$got' | grep -q 'MainPID=$pid_before '"
lab_check_shown "rackgated $version is ready" \
  lab_wait 30 bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' --cacert '$RG_DIR/state/ca/ca.crt' $(rg_url /readyz))\" = 200 ]"

# --- after: everything kept ------------------------------------------------------------------
after_at=$(date +%s)
lab_check_shown "after: the same listings and an online copy of the migrated database" snapshot "$LAB_DIR/after"
# compare.py BEFORE AFTER: prints what differs and the figures.
cat > "$LAB_DIR/compare.py" <<'PY'
import collections, json, os, sqlite3, sys
before, after, what = sys.argv[1:4]

def load(d, f):
    return json.load(open(os.path.join(d, f)))

def drop(v, keys):
    if isinstance(v, dict):
        return {k: drop(x, keys) for k, x in v.items() if k not in keys}
    if isinstance(v, list):
        return [drop(x, keys) for x in v]
    return v

# kept(B, A): everything B says, A says alike; A may say more (a field a
# release adds is not a change of what was there).
def kept(b, a):
    if isinstance(b, dict):
        return isinstance(a, dict) and all(k in a and kept(v, a[k]) for k, v in b.items())
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(kept(x, y) for x, y in zip(b, a))
    return b == a

# Ages are counted from now; deliveries' attempts go on while the webhook is down.
VOLATILE = {"age_seconds", "age", "deliveries", "now"}
if what == "listings":
    bad, files = [], 0
    for f in sorted(os.listdir(before)):
        if not f.endswith(".json") or f in ("audit.json", "verify.json"):
            continue
        files += 1
        b, a = drop(load(before, f), VOLATILE), drop(load(after, f), VOLATILE)
        if not kept(b, a):
            bad.append(f)
            print(f"# {f} differs:\n#   before {json.dumps(b)[:600]}\n#   after  {json.dumps(a)[:600]}")
    # The audit log: every row before is there after, unchanged, in order.
    b, a = load(before, "audit.json")["entries"], load(after, "audit.json")["entries"]
    if not kept(b, a[:len(b)]):
        bad.append("audit.json")
        print("# audit: the rows before are not the first rows after")
    print(f"# listings compared: {files} files, {len(b)} audit rows before, {len(a)} after")
    sys.exit(1 if bad else 0)
if what == "rows":
    b, a = sqlite3.connect(before), sqlite3.connect(after)
    tables = [r[0] for r in b.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    kept = total = purged = 0
    now = int(sys.argv[4])
    bad = []
    for t in tables:
        cols = [r[1] for r in b.execute(f'PRAGMA table_info("{t}")')]
        acols = {r[1] for r in a.execute(f'PRAGMA table_info("{t}")')}
        if not acols:
            bad.append(f"{t}: gone"); continue
        missing = [c for c in cols if c not in acols]
        if missing:
            bad.append(f"{t}: columns gone {missing}"); continue
        sel = "SELECT " + ", ".join(f'"{c}"' for c in cols) + f' FROM "{t}"'
        rb, ra = collections.Counter(b.execute(sel)), collections.Counter(a.execute(sel))
        n = sum(rb.values()); total += n
        expired = 0
        if t in ("event_deliveries", "schema_version", "rackgate_schema"):
            # Attempts go on while the webhook is down; the schema's version moves.
            gone = n - sum(ra.values()) if sum(ra.values()) < n else 0
            note = "by count"
        else:
            lost = rb - ra
            if "expires_at" in cols:
                # Expired sessions and tokens are purged every minute, by
                # design (the after snapshot's time is the bound).
                at = cols.index("expires_at")
                old = collections.Counter({r: k for r, k in lost.items() if r[at] is not None and r[at] <= now})
                expired = sum(old.values())
                lost -= old
            gone = sum(lost.values())
            note = "row for row" + (f", {expired} expired and purged" if expired else "")
        purged += expired
        kept += n - gone - expired
        if gone:
            bad.append(f"{t}: {gone} row(s) before not after")
        print(f"# table {t}: {n} rows before, {sum(ra.values())} after ({note}{', NOT KEPT' if gone else ''})")
    print(f"# rows kept: {kept} of {total} in {len(tables)} tables" + (f" ({purged} expired sessions or tokens purged)" if purged else ""))
    for x in bad:
        print(f"# {x}")
    sys.exit(1 if bad else 0)
PY
lab_python "$LAB_DIR/compare.py" "$LAB_DIR/before" "$LAB_DIR/after" listings > "$LAB_DIR/listings.txt" 2>&1 && list_rc=0 || list_rc=$?
cat "$LAB_DIR/listings.txt"
lab_check "after: every machine's state and trust, every certificate, CSR, pool and its tokens, pending event: as before (the admin API's listings say the same); the audit rows before are the first rows after" \
  test "$list_rc" = 0
lab_python "$LAB_DIR/compare.py" "$LAB_DIR/before/rackgate.db" "$LAB_DIR/after/rackgate.db" rows "$after_at" > "$LAB_DIR/rows.txt" 2>&1 && rows_rc=0 || rows_rc=$?
cat "$LAB_DIR/rows.txt"
rows_figure=$(sed -n 's/^# rows kept: //p' "$LAB_DIR/rows.txt")
lab_check_shown "after: every row of every table of the $old_version database kept over its columns (${rows_figure:-?})" test "$rows_rc" = 0
sv() { sqlite3 "$1" 'PRAGMA user_version' 2>/dev/null; }
echo "# SQLite schema: user_version $(sv "$LAB_DIR/before/rackgate.db") before, $(sv "$LAB_DIR/after/rackgate.db") after"
lab_check_shown "the audit chain verifies across the upgrade, with the head kept before as its anchor ($anchor)" \
  rg_ctl audit verify --anchor "$anchor"

# --- the webhook comes up: every event that waited is delivered --------------------------------
"$RECEIVER" --port "$HOOK_PORT" --secret-file "$LAB_DIR/webhook.secret" --out "$LAB_DIR/webhooks.jsonl" \
  </dev/null >>"$LAB_DIR/receiver.log" 2>&1 {LAB_STDOUT}>&- {LAB_STDERR}>&- &
echo "$!" >> "$LAB_DIR/pids"
# Each delivery is retried after 5 s doubled per failure (docs/events.md):
# the last one is due at the latest next_attempt_at the appliance shows.
last_due=$(rg_ctl events --pending --limit 10000 --json | lab_python -c 'import json,sys
print(max([d.get("next_attempt_at", 0) for e in json.load(sys.stdin)["events"] for d in e.get("deliveries", [])] or [0]))')
wait_s=$(( last_due - $(date +%s) + 20 )); [ "$wait_s" -gt 20 ] || wait_s=20
echo "# the receiver is up; the last delivery is due in $(( last_due - $(date +%s) )) s (retry backoff)"
delivered_all() {
  [ "$(rg_ctl events --pending --limit 10000 --json | lab_python -c 'import json,sys; print(len(json.load(sys.stdin)["events"]))')" = 0 ]
}
deliver_started=$(date +%s)
if lab_wait "$wait_s" delivered_all; then
  lab_ok "every event that waited is delivered once the webhook is up ($pending_before events, $(( $(date +%s) - deliver_started )) s)"
else
  lab_not_ok "every event that waited is delivered once the webhook is up" "$(rg_ctl events --pending | head -n 10)"
fi
lab_check_shown "the receiver got each of them, its HMAC checked (ids as before the upgrade)" lab_python - \
  "$LAB_DIR/before/events.json" "$LAB_DIR/webhooks.jsonl" <<'PY'
import json, sys
want = {e["id"] for e in json.load(open(sys.argv[1]))["events"]}
got = set()
for line in open(sys.argv[2]):
    e = json.loads(line)
    got.add(e.get("body", e).get("id"))
missing = want - got
print(f"# {len(want)} events before, {len(got & want)} delivered, types: "
      + ", ".join(sorted({json.loads(l).get('body', {}).get('type', '?') for l in open(sys.argv[2])})))
sys.exit(1 if missing else 0)
PY

# --- the fleet after: old agents re-attest, the waiting ones go on --------------------------------
sum_of() { cat "$(boot_root "$1")/var/lib/kubelet/pki/kubelet-client-current.pem" \
  "$(boot_root "$1")/var/lib/kubelet/pki/kubelet-server-current.pem" | sha256sum | cut -d' ' -f1; }
j1_sum=$(sum_of j1) j2_sum=$(sum_of j2)
boot_reboot j1
lab_expect 0 'step=csr machine=[0-9a-f]{16} ok certificate=client kept ' \
  "node-j1 reboots and re-attests with the old agent ($old_version) against rackgated $version, keeping its certificates" \
  boot_agent j1 attest,config,csr
lab_check_shown "node-j1: the same certificates and keys, byte for byte; still joined" \
  bash -c "[ '$(sum_of j1)' = '$j1_sum' ] && [ \"\$('$RG_CTL' --socket '$RG_DIR/admin.sock' show node-j1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])')\" = joined ]"
if [ -x "$NEW/usr/bin/rackgate-agent" ]; then
  BOOT_AGENT="$NEW/usr/bin/rackgate-agent"
  boot_reboot j2
  lab_expect 0 'step=csr machine=[0-9a-f]{16} ok certificate=client kept ' \
    "node-j2 reboots and re-attests with the new agent ($version, from the package), keeping its certificates" \
    boot_agent j2 attest,config,csr
  lab_check_shown "node-j2: the same certificates and keys" test "$(sum_of j2)" = "$j2_sum"
  BOOT_AGENT="$OLD/usr/bin/rackgate-agent"
fi
lab_expect 3 'refused status=403 reason=machine_revoked' "node-r1 is still refused: revoked" boot_agent r1 attest
# An enrolled machine's first boot after the upgrade, with the pool's
# pointer config made before it: the provisioning token still opens it.
lab_expect 0 'step=csr machine=[0-9a-f]{16} ok kubeconfig=' \
  "node-e1 (enrolled before the upgrade) boots for the first time: Ignition with the pointer config and its token from before, then the old agent: joined" \
  eval 'boot_ignition e1 rack && boot_agent e1 attest,config,csr'
lab_check_shown "the pending machine approved after the upgrade ($pending_host -> node-p1)" \
  rg_ctl approve "$pending_host" --hostname node-p1 --pool rack --address InternalIP=10.0.0.16 --reason "upgrade test"
lab_expect 0 'step=csr machine=[0-9a-f]{16} ok kubeconfig=' "node-p1 (discovered before the upgrade) joins with the old agent" \
  boot_agent p1 attest,config,csr
lab_check_shown "node-c1's client CSR (waiting since before the upgrade) approved" \
  rg_ctl csr approve "$waiting_csr" --reason "upgrade test"
# The agent keeps its key only while it waits, so its next run submits a
# new one: that CSR waits too, is approved, and the same run joins.
BOOT_MAX_WAIT=60 boot_agent c1 attest,config,csr 2>/dev/null & c1_pid=$!
csr_waits() {
  rg_ctl csr list --json | lab_python -c 'import json,sys
ids = [c["id"] for c in json.load(sys.stdin)["csrs"] if c["hostname"] == "node-c1" and c["state"] == "waiting" and str(c["id"]) != sys.argv[1]]
print(ids[0]) if ids else sys.exit(1)' "$waiting_csr"
}
new_csr=""
lab_wait 60 csr_waits && new_csr=$(csr_waits)
if [ -n "$new_csr" ] && rg_ctl csr approve "$new_csr" --reason "upgrade test" >/dev/null; then
  lab_ok "node-c1's next run (the old agent) waits with a new CSR ($new_csr, its new key); approved"
else
  lab_not_ok "node-c1's next run waits with a new CSR" "$(rg_ctl csr list --all 2>&1 | tail -n 5)"
fi
rc=0; wait "$c1_pid" || rc=$?
lab_check_shown "node-c1 joins with the old agent (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -Eq 'step=csr machine=[0-9a-f]{16} ok kubeconfig=' '$(lab_dir c1)/agent.last'"

rg_ctl list --json > "$LAB_DIR/list-end.json"
end_states=$(lab_python -c 'import json,sys
print(" ".join("%s=%s%s" % (m["hostname"], m["state"], "/untrusted" if m.get("trust") == "untrusted" else "")
               for m in sorted(json.load(open(sys.argv[1]))["machines"], key=lambda m: m["hostname"])))' "$LAB_DIR/list-end.json")
lab_check_shown "at the end: $end_states" test "$end_states" = \
  "node-c1=joined node-e1=joined node-j1=joined node-j2=joined node-p1=joined node-r1=revoked node-u1=joined/untrusted"
machines=$(lab_python -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["machines"]))' "$LAB_DIR/list.json")
echo "# figures: $machines machines; states before: $(awk '{print $2}' "$LAB_DIR/states.txt" | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}')untrusted 1, waiting CSRs 1, events undelivered $pending_before"
echo "# figures: rows kept ${rows_figure:-?}; runbook blocks $upgrade_seconds s; agent used: the old one ($old_version) throughout, the new one ($version) for node-j2's re-attestation"

# --- stop ----------------------------------------------------------------------------------------------
stop_ok=1
nspawn_stop appliance || stop_ok=0
lab_check "the appliance's container stopped by PID, nothing left in its cgroups" test "$stop_ok" = 1
echo "# wall time $(( $(date +%s) - started )) s"
lab_finish
