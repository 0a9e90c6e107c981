#!/usr/bin/env bash
# backup.sh — the backup and restore drill (docs/operations.md, "Backups and
# restore"), block by block as the runbook gives it, with lab paths:
#  1. a live appliance: three swtpm machines joined through rackgate-agent
#     (kubelet certificates issued), then a boot storm (bench/boot-storm,
#     software TPMs) attesting while `rackgatectl backup` runs;
#  2. the archive: mode 0600, its manifest names the store, the CAs, the
#     config and the EK anchors with their checksums, and the audit head;
#     restore refuses it with one byte damaged (backup_damaged) and onto the
#     live appliance (db_in_use);
#  3. the old appliance stopped, the archive restored into a fresh state
#     directory and config — a fresh "container": new directories and a new
#     rackgated process on them, on the same address; only the admin socket
#     moves into the fresh directory (a container has its own /run), and the
#     EK anchors the config names go under --rebase (the old appliance's are
#     still on this host). Onto a state directory that holds a CA, restore is
#     refused (restore_target_not_empty);
#  4. the restored rackgated: the audit chain verifies with the manifest's
#     head as its anchor, the three machines are still joined with the same
#     certificate serials, and each re-attests as on a reboot, keeping its
#     kubelet certificate on disk unchanged.
# Usage: backup.sh RACKGATE_AGENT RACKGATED RACKGATECTL AGENT_UNIT BOOT_STORM
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
AGENT="$(realpath "${1:?usage: backup.sh RACKGATE_AGENT RACKGATED RACKGATECTL AGENT_UNIT BOOT_STORM}")"
RACKGATED="$(realpath "$2")"
RACKGATECTL="$(realpath "$3")"
AGENT_UNIT="$(realpath "$4")"
STORM="$(realpath "$5")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=boot-lib.sh
source "$HERE/boot-lib.sh"

lab_skip_unless_tools
command -v curl >/dev/null || lab_skip "curl missing"
lab_init backup
T0="$(date +%s%N)"
rg_init "$RACKGATED" "$RACKGATECTL"
boot_init "$AGENT" "$AGENT_UNIT"
lab_ca lab
EKCA="$LAB_DIR/ekca"
rg_storm_config "$EKCA" 20
# The lab machines' CA beside the storm's.
rg_config ek_roots "[\"$RG_DIR/roots\", \"$EKCA/root.pem\"]"
rg_config ek_intermediates "[\"$RG_DIR/intermediates\", \"$EKCA/intermediate.pem\"]"
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
"$STORM" --url "https://127.0.0.1:$RG_PORT" --ca "$RG_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" \
  --socket "$RG_DIR/admin.sock" --ek-ca-dir "$EKCA" --machines 1 >"$LAB_DIR/ekca.out" 2>&1 || true
MACHINES=(r1 r2 r3)
boot_new_machines 10.0.0 "${MACHINES[@]}"
rg_trust lab
# A port picked now rather than at rg_init, seconds ago: the machines'
# manufacture gave another test time to take that one.
RG_PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
rg_config port "$RG_PORT"
rg_start
lab_check "rackgated runs on its own admin socket" test -S "$RG_DIR/admin.sock"
boot_pool workers --token-required no

json_get() { lab_python -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[int(k)] if isinstance(v, list) else v[k]
print(v)' "$1"; }
# serials HOSTNAME: the serials of the certificates the appliance lists for it, sorted.
serials() {
  rg_ctl certs --hostname "$1" --json | lab_python -c 'import json,sys
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "serial": yield x
            else: yield from walk(x)
    elif isinstance(v, list):
        for x in v: yield from walk(x)
print(" ".join(sorted(walk(json.load(sys.stdin)))))'
}
# agent NAME: the machine's boot: attest, config (applied once), kubelet
# certificates (kept while valid).
agent() {
  local m R; m="$(lab_dir "$1")"; R="$m/root"
  mkdir -p "$R"
  boot_spawn "$AGENT" --tcti "$(lab_tcti "$1")" --url "$(rg_url "")" --ca "$RG_DIR/state/ca/ca.crt" --eventlog "" \
    --max-wait "$(lab_seconds 30)" --steps attest,config,csr --apply-root "$R" --kubelet-dir "$R/pki" --kubeconfig "$R/kubeconfig" \
    --apiserver "$BOOT_APISERVER" --node-ip "$(boot_ip "$1")" 2>>"$m/agent.log" >/dev/null
}
kubelet_cert() { sha256sum "$(lab_dir "$1")/root/pki/kubelet-client-current.pem" 2>/dev/null | cut -d' ' -f1 || true; }

# The runbook's commands (docs/operations.md §7, its sh blocks): each
# rackgatectl line names a command and flags this rackgatectl takes, so the
# steps below and the page cannot drift apart.
runbook_commands_parse() {
  "$RACKGATECTL" completion table > "$LAB_DIR/commands.tsv"
  lab_python - "$HERE/../docs/operations.md" "$LAB_DIR/commands.tsv" <<'PY'
import re, sys
doc, table = sys.argv[1:]
flags = {}
for line in open(table):
    words, _, f = line.rstrip("\n").partition("\t")
    flags[words] = set(f.split()) | {"--json", "--socket", "--help"}
text = open(doc).read()
section = text[text.index("## 7. Backups and restore"):]
end = section.find("\n## ", 5)
section = section if end < 0 else section[:end]
blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
lines = "\n".join(blocks).replace("\\\n", " ").split("\n")
seen = 0
for line in lines:
    m = re.search(r"(?:^|\s)rackgatectl\s+(.*)", line)
    if not m:
        continue
    words = m.group(1).split("#")[0].split()
    cmd = " ".join(words[:2]) if " ".join(words[:2]) in flags else words[0]
    assert cmd in flags, f"unknown command in the runbook: {line.strip()}"
    used = {w for w in words if w.startswith("--")}
    assert used <= flags[cmd], f"{cmd}: {used - flags[cmd]} not taken, in: {line.strip()}"
    seen += 1
assert seen >= 5, f"only {seen} rackgatectl lines in the runbook"
print(seen)
PY
}
lab_check_shown "the runbook's rackgatectl lines name commands and flags rackgatectl takes" runbook_commands_parse

# --- 1. a live appliance ------------------------------------------------------
i=1
for m in "${MACHINES[@]}"; do
  boot_enroll "$m" "node-$i" workers
  lab_check_shown "node-$i joins through rackgate-agent" agent "$m"
  i=$((i + 1))
done
declare -A SERIAL_BEFORE CERT_BEFORE
for i in 1 2 3; do
  SERIAL_BEFORE[$i]="$(serials "node-$i")"
  CERT_BEFORE[$i]="$(kubelet_cert "r$i")"
done
lab_check "each has a kubelet client certificate (${SERIAL_BEFORE[1]})" \
  test -n "${SERIAL_BEFORE[1]}" -a -n "${SERIAL_BEFORE[2]}" -a -n "${SERIAL_BEFORE[3]}" -a -n "${CERT_BEFORE[1]}"

# The storm: machines attesting, fetching configs and signing CSRs while the
# backup runs.
STORM_N=60
ACKS="$LAB_DIR/acks"
"$STORM" --url "https://127.0.0.1:$RG_PORT" --ca "$RG_DIR/state/ca/ca.crt" --rackgatectl "$RG_CTL" \
  --socket "$RG_DIR/admin.sock" --ek-ca-dir "$EKCA" --machines "$STORM_N" --concurrency 20 \
  --deadline "$(lab_seconds 120)" --ack-log "$ACKS" --workdir "$LAB_DIR/storm" >"$LAB_DIR/storm.out" 2>&1 &
storm=$!
echo "$storm" >> "$LAB_DIR/pids"
acked() { [[ -s "$ACKS" ]] && (( $(wc -l < "$ACKS") >= 30 )); }
lab_check "the storm is under way (30 steps acknowledged)" lab_wait 60 acked

# Block 1 of the runbook: the backup, rackgated running.
ARCHIVE="$LAB_DIR/backups/rackgate-backup.tar"
mkdir -p "$LAB_DIR/backups"
t_backup="$(date +%s%N)"
lab_check_shown "rackgatectl backup during the storm" \
  "$RG_CTL" backup --out "$ARCHIVE" --config "$RG_DIR/config.json"
backup_ms="$(lab_ms_since "$t_backup")"
acks_at_backup="$(wc -l < "$ACKS")"
rc=0; wait "$storm" || rc=$?
lab_check_shown "the storm ends with every machine joined (exit $rc)" grep -Eq "ok=$STORM_N failed=0" "$LAB_DIR/storm.out"
lab_check "the storm acknowledged more after the backup ($acks_at_backup -> $(wc -l < "$ACKS") steps)" \
  test "$(wc -l < "$ACKS")" -gt "$acks_at_backup"

# --- 2. the archive -------------------------------------------------------------
lab_check "the archive is mode 0600" test "$(stat -c %a "$ARCHIVE")" == 600
tar -xOf "$ARCHIVE" rackgate-backup/manifest.json > "$LAB_DIR/manifest.json"
HEAD_ID="$(json_get audit.head_id < "$LAB_DIR/manifest.json")"
HEAD_HASH="$(json_get audit.head_hash < "$LAB_DIR/manifest.json")"
lab_check "the manifest names the audit head ($HEAD_ID:${HEAD_HASH:0:12}...)" test "$HEAD_ID" -gt 0
has_files() {
  lab_python - "$LAB_DIR/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
names = {f["name"] for f in m["files"]}
want = {"store/rackgate.db", "state/ca/ca.crt", "state/ca/ca.key", "state/tls/server.crt", "state/tls/server.key",
        "state/cluster-ca/ca.crt", "state/cluster-ca/ca.key", "config/rackgated.json"}
assert want <= names, want - names
assert any(n.startswith("named/") for n in names), "no EK anchor"
assert all(len(f["sha256"]) == 64 and f["size"] >= 0 for f in m["files"])
assert m["store"]["kind"] == "sqlite" and m["format"] == "rackgate-backup"
PY
}
lab_check_shown "the manifest lists the store, both CAs, the serving key, the config and the EK anchors" has_files

lab_flip_bit "$ARCHIVE" $(( $(stat -c %s "$ARCHIVE") / 2 )) "$LAB_DIR/damaged.tar"
lab_expect 1 "backup_damaged" "one byte damaged: refused, nothing written" \
  "$RG_CTL" restore --from "$LAB_DIR/damaged.tar" --state-dir "$LAB_DIR/nowhere/state" \
  --config-out "$LAB_DIR/nowhere/config.json" --rebase "$LAB_DIR/nowhere/root"
lab_check "... and nothing was written" test ! -e "$LAB_DIR/nowhere"
# Block 2 of the runbook: a check of the archive, restored into scratch
# directories beside the live appliance.
lab_check_shown "runbook step 2: a scratch restore beside the live appliance checks every checksum" \
  "$RG_CTL" restore --from "$ARCHIVE" --state-dir "$LAB_DIR/drill/state" \
  --config-out "$LAB_DIR/drill/rackgated.json" --rebase "$LAB_DIR/drill/root"
lab_expect 1 "db_in_use" "restore --force onto the live appliance: refused" \
  "$RG_CTL" restore --from "$ARCHIVE" --config-out "$RG_DIR/config.json" --force

# --- 3. a fresh appliance -----------------------------------------------------------
rg_stop
OLD_STATE="$RG_DIR/state"
FRESH="$LAB_DIR/fresh"
mkdir -p "$LAB_DIR/used/state/ca"
cp "$OLD_STATE/ca/ca.crt" "$LAB_DIR/used/state/ca/"
lab_expect 1 "restore_target_not_empty" "onto a state directory that holds a CA: refused" \
  "$RG_CTL" restore --from "$ARCHIVE" --state-dir "$LAB_DIR/used/state" --config-out "$LAB_DIR/used/config.json"
lab_check "... and nothing was written" test ! -e "$LAB_DIR/used/config.json"
# Block 3 of the runbook: the restore.
t_restore="$(date +%s%N)"
restore_rc=0
"$RG_CTL" restore --from "$ARCHIVE" --state-dir "$FRESH/state" --config-out "$FRESH/config.json" \
  --rebase "$FRESH/root" >"$LAB_DIR/restore.out" 2>"$LAB_DIR/restore.err" || restore_rc=$?
restore_ms="$(lab_ms_since "$t_restore")"
lab_check_shown "rackgatectl restore into a fresh state directory and config (exit $restore_rc)" \
  test "$restore_rc" == 0
lab_check_shown "restore prints the audit head it restored, the manifest's" \
  grep -F "audit chain head restored: $HEAD_ID:$HEAD_HASH" "$LAB_DIR/restore.out"
lab_check "restore wrote the CA key mode 0600" test "$(stat -c %a "$FRESH/state/ca/ca.key")" == 600
OLD_DIR="$RG_DIR"
RG_DIR="$FRESH"
rg_config admin_socket "\"$FRESH/admin.sock\""
lab_check "the restored config names the fresh state directory" \
  test "$(json_get state_dir < "$FRESH/config.json")" == "$FRESH/state"
lab_check_shown "a new rackgated starts on the restored state" rg_start

# --- 4. the restored appliance ------------------------------------------------------------
lab_check_shown "the audit chain verifies, anchored at the manifest's head" \
  rg_ctl audit verify --anchor "$HEAD_ID:$HEAD_HASH"
lab_check "the restore is the next audit row (backup_restored)" \
  grep -q '"backup_restored"' <(rg_ctl audit --limit 20 --json)
for i in 1 2 3; do
  lab_check "node-$i is still joined" test "$(rg_state "node-$i")" == joined
  lab_check "node-$i keeps its certificate serial (${SERIAL_BEFORE[$i]})" test "$(serials "node-$i")" == "${SERIAL_BEFORE[$i]}"
  lab_check_shown "node-$i re-attests to the restored appliance (a reboot)" agent "r$i"
  lab_check "node-$i keeps its kubelet certificate on disk" test "$(kubelet_cert "r$i")" == "${CERT_BEFORE[$i]}"
done
machines() { rg_ctl list --json | lab_python -c 'import json,sys; v=json.load(sys.stdin)
print(len(v["machines"] if isinstance(v, dict) else v))'; }
lab_check "the storm's machines came back too ($(machines) machines: 3 + $STORM_N)" test "$(machines)" == $((3 + STORM_N))
echo "# backup restore: storm $STORM_N machines, backup ${backup_ms} ms, restore ${restore_ms} ms, wall $(lab_ms_since "$T0") ms"
RG_DIR="$OLD_DIR"
lab_finish
