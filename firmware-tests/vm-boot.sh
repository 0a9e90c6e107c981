#!/usr/bin/env bash
# vm-boot.sh — real firmware boots through rackgate (issue 30; vm-lib.sh):
# QEMU with OVMF (Secure Boot on, Microsoft's keys), shim, Debian's signed
# grub and kernel, TPMs backed by swtpm with lab EK certificates, and the
# self-contained agent in a busybox initramfs, against a real rackgated on
# 127.0.0.1 (the guests reach nothing else). Three machines, each with a
# blank ext4 disk. Parts, each reported as "(x) ...":
#   (a) observing: the three boot; each agent sends its TPM's EK, a quote
#       and the firmware's own event log (securityfs); the pool observes,
#       the agents wait (503 boot_policy_observing) and give up; the
#       appliance recorded the three boots; nothing secret on any disk;
#   (b) `policy propose` from those real boots (three alike, none odd):
#       PCRs 0-9 and 14 pinned, boot_files (grub.cfg, kernel, initramfs);
#       `policy accept`, nothing added by hand;
#   (c) the three boot again and join: in the initramfs the agent attests
#       and writes the attested config as Ignition's user config
#       (/usr/lib/ignition/user.ign), then the real Ignition applies it to
#       the disk (secrets included); kubelet's certificates signed by the
#       cluster CA on the disk (read from the host with debugfs); the agent
#       installed itself on the disk (/opt/rackgate-agent, its unit and
#       timer enabled) for later boots;
#   (d) a reboot of a joined machine: the agent installed on the disk (its
#       unit's command, chroot into the disk) attests again, keeps its
#       config and certificates byte for byte; vm-1's disk in joined
#       vm-2: vm-1's certificates removed, the disk's config refused
#       (config_of_another_machine);
#   (e) refusals, each by the rule rackgated names: Secure Boot off,
#       another kernel command line (grub's, PCR 8), and a new machine's
#       first boot with a tampered initramfs (boot_files naming
#       /initrd.img, and PCR 9's pin): Ignition never
#       runs, nothing secret reaches its disk;
#   (f) an appliance CA rotation (docs/operations.md §8, issue 44): after
#       `ca rotate --appliance prepare` vm-1 boots and the agent installed
#       on its disk takes the bundle into /etc/rackgate/ca.pem; after
#       `switch` and SIGHUP (the first CA alone no longer verifies the
#       serving certificate) vm-1 boots again and attests (exit 0).
# The initramfs is built as an operator would: the fragment fetched from
# rackgated (GET /v1/agent/initramfs), checked against the digest
# `rackgatectl pointer --kernel-args` printed and the appliance's .sha256,
# with the CA's part and the kernel arguments rackgatectl emitted.
# Usage: vm-boot.sh FRAGMENT RACKGATED RACKGATECTL
set -euo pipefail

RC_OK=0
RC_REFUSED=3
RC_GAVE_UP=4
R_OBSERVING='step=attest machine=[0-9a-f]{16} wait status=503 reason=boot_policy_observing'
R_JOINED='step=csr machine=[0-9a-f]{16} ok kubeconfig='
R_VIOLATION='step=attest machine=[0-9a-f]{16} refused status=403 reason=boot_policy_violation'
POOL=rack
MACHINES=(vm1 vm2 vm3)

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: vm-boot.sh FRAGMENT RACKGATED RACKGATECTL"
FRAGMENT="$(realpath "${1:?$USAGE}")"
RACKGATED="$(realpath "${2:?$USAGE}")"
RACKGATECTL="$(realpath "${3:?$USAGE}")"
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=vm-lib.sh
source "$HERE/vm-lib.sh"

lab_skip_unless_tools
vm_skip_unless_tools
lab_init vm-boot
T_ALL=$(date +%s%N)
rg_init "$RACKGATED" "$RACKGATECTL"
# The serving certificate names the address the guest dials too.
"$RACKGATECTL" init --state-dir "$RG_DIR/state" --renew-serving-cert --name localhost \
  --address 127.0.0.1 --address "$VM_APPLIANCE_IP" >/dev/null
rg_config retry_after_seconds 1
# No PCR selection of the lab's own: an observing pool quotes grub's PCRs 8
# and 9 and shim's 14 too, and the accepted policy asks for what it pins.
# The appliance serves the build's fragment (docs/nodes.md).
rg_config agent_bundle "\"$FRAGMENT\""
lab_ca lab
# vm4 boots once, in (e): a new machine whose initramfs was tampered with.
for m in "${MACHINES[@]}" vm4; do lab_machine_create "$m" lab & done
wait
rg_trust lab
rg_start
rg_ctl ca generate --cluster --state-dir "$RG_DIR/state" >/dev/null
vm_pool_templates
rg_ctl pool put "$POOL" --public-template "$LAB_DIR/public.ign" --attested-template "$LAB_DIR/attested.ign" \
  --token-required no >/dev/null
n=1
for m in "${MACHINES[@]}"; do
  # Every guest is 10.0.2.15 behind its own user-mode network.
  rg_ctl enroll --hostname "vm-$n" --pool "$POOL" --ek-cert "$(lab_dir "$m")/ek-rsa.der" \
    --address "InternalIP=$VM_NODE_IP" >/dev/null
  vm_disk "$m"
  n=$((n + 1))
done
rg_ctl enroll --hostname vm-4 --pool "$POOL" --ek-cert "$(lab_dir vm4)/ek-rsa.der" \
  --address "InternalIP=$VM_NODE_IP" >/dev/null
vm_disk vm4
rg_ctl policy observe --pool "$POOL" --reason "lab: learn a real firmware boot" >/dev/null
# The fragment as a node fetches it, and its digest as the appliance serves it.
served_code="$(rg_get /v1/agent/initramfs "$LAB_DIR/served.cpio.zst")"
rg_get /v1/agent/initramfs.sha256 "$LAB_DIR/served.sha256" >/dev/null
# pointer reads the file the appliance is configured with (agent_bundle),
# as an operator runs it: its printed digest is then a check of the bytes
# served, not of themselves.
vm_init "$LAB_DIR/served.cpio.zst" "$FRAGMENT"
vm_media good
served_digest() {
  local want
  want="$(vm_py "$VM_DIR/kernel-args.json" 'print(d["agent_initramfs"]["sha256"])')"
  vm_served_digest "$served_code" "$LAB_DIR/served.cpio.zst" || return 1
  [[ "$(cut -d' ' -f1 "$LAB_DIR/served.sha256")" == "$want" ]] || { echo "served .sha256: $(cat "$LAB_DIR/served.sha256")"; return 1; }
  cmp -s "$LAB_DIR/served.cpio.zst" "$FRAGMENT" || { echo "served bytes are not the build's fragment"; return 1; }
}
lab_check_shown "the served fragment has the SHA-256 rackgatectl pointer --kernel-args printed, and .sha256 says so too" served_digest
lab_check_shown "rackgatectl's kernel arguments are on the boot's command line: $VM_KERNEL_ARGS" \
  grep -qF " $VM_KERNEL_ARGS" "$VM_DIR/good/grub.cfg"
ca_part() {
  zcat "$VM_DIR/ca.cpio.gz" | (cd "$LAB_DIR" && rm -rf ca-part && mkdir ca-part && cd ca-part && cpio -id --quiet) &&
    cmp -s "$LAB_DIR/ca-part/etc/rackgate/ca.pem" "$RG_DIR/state/ca/ca.crt" || { echo "no CA at /etc/rackgate/ca.pem"; return 1; }
  # The base part carries no CA of its own: the agent trusts rackgatectl's.
  if gzip -dc "$VM_DIR/base.cpio.gz" | cpio -t --quiet | grep ca.pem >/dev/null; then echo "the base part has a CA"; return 1; fi
}
lab_check_shown "rackgatectl's CA part holds the appliance CA at /etc/rackgate/ca.pem, the only CA in the initramfs" ca_part

py() { vm_py "$@"; }
# judge M RC ERE DESC: M's last boot, by the agent's exit status and its
# log line on the serial console.
judge() {
  local m="$1" want="$2" ere="$3" desc="$4" rc got
  rc="$(cat "$(lab_dir "$m")/boot.rc")"
  got="$(vm_agent_exit "$m")"
  echo "# $m: qemu ${rc}, $(cat "$(lab_dir "$m")/boot.ms") ms wall, agent exit ${got:-none}"
  # grep the file, not a pipe: under pipefail a grep -q that stops early
  # fails the pipeline when the writer gets SIGPIPE.
  if [[ "$rc" == 0 && "$got" == "$want" ]] && grep -aEq -- "$ere" "$(lab_dir "$m")/serial.boot"; then
    lab_ok "$desc"
  else
    lab_not_ok "$desc" "qemu $rc, agent exit ${got:-none} (want $want, /$ere/); console:"$'\n'"$(vm_serial "$m" | grep -v '^\s*$' | grep -v '^[A-Za-z0-9+/=]*$' | tail -n 15)"$'\n'"qemu: $(tail -n 3 "$(lab_dir "$m")/qemu.log")"
  fi
}
# boot M MEDIA KEYS: one boot; its QEMU exit status to $(lab_dir M)/boot.rc.
boot() {
  local rc=0
  vm_boot "$1" "$2" "$3" || rc=$?
  echo "$rc" > "$(lab_dir "$1")/boot.rc"
}
# boot_all MEDIA: the three machines at once (each QEMU one TCG thread).
boot_all() {
  local m pids=()
  for m in "${MACHINES[@]}"; do boot "$m" "$1" ms & pids+=($!); done
  wait "${pids[@]}" || true
}
boot_check() { boot "$1" "$2" "$3"; judge "$1" "$4" "$5" "$6"; }
# secret_free M: nothing of the attested config or the csr step on M's disk.
secret_free() {
  local f
  for f in /var/lib/kubelet/config.json /etc/rackgate/identity /var/lib/kubelet/kubeconfig /var/lib/kubelet/pki; do
    if vm_disk_has "$1" "$f"; then echo "$f on $1's disk"; return 1; fi
  done
}

# --- (a) observing ------------------------------------------------------------
echo "# (a) three real firmware boots into an observing pool"
t=$(date +%s%N)
boot_all good
echo "# (a) three boots at once: $(lab_ms_since "$t") ms wall"
n=1
for m in "${MACHINES[@]}"; do
  judge "$m" "$RC_GAVE_UP" "$R_OBSERVING" \
    "(a) vm-$n: OVMF + shim + grub + kernel, Secure Boot on: the agent in the initramfs attests, the pool observes (503)"
  lab_check_shown "(a) vm-$n: the initramfs read the firmware's event log from securityfs" \
    bash -c "tr -d '\\r' < '$(lab_dir "$m")/serial.boot' | grep -Eq 'RACKGATE-LAB: eventlog [1-9][0-9]{3,} bytes'"
  lab_check_shown "(a) vm-$n: nothing secret on its disk" secret_free "$m"
  n=$((n + 1))
done
rg_ctl policy show --pool "$POOL" --json > "$LAB_DIR/show.observe.json"
lab_check_shown "(a) the appliance recorded the three boots: policy show lists vm-1, vm-2, vm-3 observed" \
  py "$LAB_DIR/show.observe.json" '
hosts = sorted(m["hostname"] for m in d["machines"])
print("#", d["mode"], d.get("observed"), hosts)
sys.exit(0 if d["mode"] == "observe" and hosts == ["vm-1", "vm-2", "vm-3"] else 1)'

# --- (b) propose, accept ----------------------------------------------------------
echo "# (b) policy from the real boot"
rg_ctl policy propose --pool "$POOL" --json > "$LAB_DIR/propose.json" 2>"$LAB_DIR/propose.err" || true
rg_ctl policy propose --pool "$POOL" --output "$LAB_DIR/proposed.json" > "$LAB_DIR/propose.txt" 2>&1 || true
head -n 40 "$LAB_DIR/propose.txt" | sed 's/^/#   /'  # head reads the file: no SIGPIPE under pipefail
SHA="$(py "$LAB_DIR/propose.json" 'print(d["proposal_sha256"])' 2>/dev/null || echo '')"
lab_check_shown "(b) policy propose from the real logs has a proposal ($SHA): 3 machines, 1 platform, none odd" \
  py "$LAB_DIR/propose.json" '
print("#", d["summary"])
sys.exit(0 if d["summary"] == {"machines": 3, "odd": 0, "platforms": 1, "unusable": 0} else 1)'
lab_check_shown "(b) it pins PCRs 0-9 and 14, requires Secure Boot, grub's kernel command line and the files grub read (boot_files: grub.cfg, vmlinuz, initrd.img)" \
  py "$LAB_DIR/proposed.json" '
pcrs = d.get("pcrs", {}).get("sha256", {})
print("# pcrs:", sorted(pcrs, key=int), "keys:", sorted(d))
files = d.get("boot_files", {}).get("allowed", [])
sys.exit(0 if sorted(pcrs, key=int) == [str(n) for n in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 14)]
         and d.get("kernel_cmdline", {}).get("exact") and d.get("require_secure_boot") and len(files) == 3 else 1)'
# The console carried vm-1's firmware log: its replay is what the proposal
# pinned for grub's PCRs (8: its commands; 9: the files it read).
vm_eventlog vm1 "$LAB_DIR/vm1.eventlog.bin"
"$RACKGATECTL" eventlog replay "$LAB_DIR/vm1.eventlog.bin" --json > "$LAB_DIR/vm1.replay.json"
lab_check_shown "(b) the console carried the firmware log; its PCRs 8, 9 and 14 are the ones proposed" \
  py "$LAB_DIR/vm1.replay.json" '
r = d["pcrs"]["sha256"]
p = json.load(open(sys.argv[2]))["pcrs"]["sha256"]
sys.exit(0 if all(r[n].lower() == p[n].lower() for n in ("8", "9", "14")) else 1)' "$LAB_DIR/proposed.json"
lab_check_shown "(b) policy accept --proposal SHA" \
  rg_ctl policy accept --pool "$POOL" --proposal "$SHA" --reason "lab: the real firmware boot"

# --- (c) join ------------------------------------------------------------------------
echo "# (c) the three boot again and join"
t=$(date +%s%N)
boot_all good
echo "# (c) three boots at once: $(lab_ms_since "$t") ms wall"
CLUSTER_CA="$RG_DIR/state/cluster-ca/ca.crt"
# joined_disk M HOSTNAME: what the agent wrote on M's disk, read from the host.
joined_disk() {
  local m="$1" host="$2" d="$LAB_DIR/disk-$1"
  mkdir -p "$d"
  vm_disk_cat "$m" /var/lib/kubelet/pki/kubelet-client-current.pem > "$d/client.pem"
  openssl verify -CAfile "$CLUSTER_CA" "$d/client.pem" >/dev/null || { echo "client certificate does not verify"; return 1; }
  openssl x509 -in "$d/client.pem" -noout -subject | grep "CN *= *system:node:$host" >/dev/null || { echo "not system:node:$host"; return 1; }
  vm_disk_cat "$m" /var/lib/kubelet/pki/kubelet-server-current.pem > "$d/server.pem"
  openssl verify -CAfile "$CLUSTER_CA" "$d/server.pem" >/dev/null || { echo "serving certificate does not verify"; return 1; }
  vm_disk_cat "$m" /var/lib/kubelet/config.json | grep registry.lab >/dev/null || { echo "no pull secret"; return 1; }
  [[ "$(vm_disk_cat "$m" /etc/rackgate/identity)" == "$host $VM_NODE_IP" ]] || { echo "identity: $(vm_disk_cat "$m" /etc/rackgate/identity)"; return 1; }
  vm_disk_has "$m" /var/lib/kubelet/kubeconfig || { echo "no kubeconfig"; return 1; }
  # The secret file as Ignition writes it: mode 0600 from the template.
  PATH=$PATH:/usr/sbin debugfs -R "stat /var/lib/kubelet/config.json" "$(lab_dir "$m")/disk.img" 2>/dev/null |
    grep -E 'Mode: +0600' >/dev/null || { echo "the pull secret is not mode 0600"; return 1; }
}
# by_ignition M: the attested files were written by the real Ignition (its
# result file on the disk, "ignition exit=0" on the console), not by the
# agent (which applied nothing: no applied= on its config line).
by_ignition() {
  grep -a 'RACKGATE-LAB: ignition exit=0' "$(lab_dir "$1")/serial.boot" >/dev/null || { echo "no ignition exit=0"; return 1; }
  vm_disk_cat "$1" /etc/.ignition-result.json | grep '"provisioningDate"' >/dev/null || { echo "no /etc/.ignition-result.json"; return 1; }
  if grep -a 'step=config .* applied=' "$(lab_dir "$1")/serial.boot" >/dev/null; then echo "the agent applied the config"; return 1; fi
}
# installed M: what --install-root wrote on M's disk, read from the host.
installed() {
  local m="$1" f
  grep -a 'step=install ok root=/sysroot' "$(lab_dir "$m")/serial.boot" >/dev/null || { echo "no step=install ok"; return 1; }
  for f in /opt/rackgate-agent/rackgate-agent /opt/rackgate-agent/lib/ld-linux-x86-64.so.2 \
           /opt/rackgate-agent/lib/libtss2-tcti-device.so.0 /etc/rackgate/ca.pem; do
    vm_disk_has "$m" "$f" || { echo "no $f"; return 1; }
  done
  vm_disk_cat "$m" /etc/systemd/system/rackgate-agent.service |
    grep -x 'ExecStart=/opt/rackgate-agent/lib/ld-linux-x86-64.so.2 /opt/rackgate-agent/rackgate-agent .* --steps attest,csr .*' >/dev/null ||
    { echo "the unit does not run /opt/rackgate-agent"; return 1; }
  vm_disk_cat "$m" /etc/systemd/system/rackgate-agent-renew.timer | grep '^OnUnitInactiveSec=' >/dev/null || { echo "no timer"; return 1; }
  for f in multi-user.target.wants/rackgate-agent.service timers.target.wants/rackgate-agent-renew.timer; do
    PATH=$PATH:/usr/sbin:/sbin debugfs -R "stat /etc/systemd/system/$f" "$(lab_dir "$m")/disk.img" 2>/dev/null |
      grep 'Fast link dest: "/etc/systemd/system/' >/dev/null || { echo "$f is not enabled"; return 1; }
  done
  vm_disk_cat "$m" /etc/rackgate/agent.env | grep -x "RACKGATE_URL=https://$VM_APPLIANCE_IP:22623" >/dev/null || { echo "agent.env: no URL"; return 1; }
  vm_disk_cat "$m" /etc/rackgate/ca.pem | cmp -s - "$RG_DIR/state/ca/ca.crt" || { echo "not the appliance CA"; return 1; }
  # The disk's config is vm-N's: later boots check it names the machine
  # they attest as (--config-root=/, docs/agent.md "A disk in another machine").
  vm_disk_cat "$m" /var/lib/rackgate-agent/config-applied | grep -E "^applied_at=[0-9]+ hostname=$2\$" >/dev/null ||
    { echo "no config stamp naming $2"; return 1; }
  vm_disk_cat "$m" /etc/rackgate/agent.env | grep -E '^RACKGATE_AGENT_ARGS=.*--config-root=/( |$)' >/dev/null ||
    { echo "agent.env: no --config-root=/"; return 1; }
}
n=1
for m in "${MACHINES[@]}"; do
  judge "$m" "$RC_OK" "$R_JOINED" "(c) vm-$n: attested, config applied, kubelet certificates issued"
  lab_check "(c) vm-$n is joined" test "$(rg_state "vm-$n")" == joined
  lab_check_shown "(c) vm-$n's disk (debugfs from the host): kubelet certificates for system:node:vm-$n signed by the cluster CA, the pull secret, its identity" \
    joined_disk "$m" "vm-$n"
  lab_check_shown "(c) vm-$n: the attested files were written by the real Ignition in the initramfs, not by the agent" \
    by_ignition "$m"
  lab_check_shown "(c) vm-$n: the agent installed itself on the disk for later boots (/opt/rackgate-agent, unit and timer enabled, agent.env)" \
    installed "$m" "vm-$n"
  n=$((n + 1))
done

# --- (d) reboot ------------------------------------------------------------------------
echo "# (d) vm-1 reboots"
disk_digest() { local f; for f in /var/lib/kubelet/pki/kubelet-client-current.pem /var/lib/kubelet/pki/kubelet-server-current.pem /var/lib/kubelet/config.json; do vm_disk_cat "$1" "$f" | sha256sum; done; }
before="$(disk_digest vm1)"
reset_before="$(rg_ctl show vm-1 --json | py /dev/stdin 'print(d["last_attestation"]["reset_count"])')"
boot_check vm1 good ms "$RC_OK" "step=attest machine=[0-9a-f]{16} ok hostname=vm-1" \
  "(d) a joined machine reboots: attests again, exit 0"
reset_after="$(rg_ctl show vm-1 --json | py /dev/stdin 'print(d["last_attestation"]["reset_count"])')"
lab_check "(d) a fresh attestation was recorded (reset count $reset_before -> $reset_after)" test "$reset_after" -gt "$reset_before"
lab_check "(d) its certificates and config are kept byte for byte" test "$(disk_digest vm1)" == "$before"
lab_check "(d) vm-1 is still joined" test "$(rg_state vm-1)" == joined
lab_check_shown "(d) the agent that ran was the disk's: the installed unit's command in the real root" \
  grep -aq '^RACKGATE-LAB: agent from the disk: /opt/rackgate-agent/lib/ld-linux-x86-64.so.2 /opt/rackgate-agent/rackgate-agent ' \
  "$(lab_dir vm1)/serial.boot"

# --- (d) a disk moved between two joined machines -------------------------------------
# vm-1's disk in vm-2's chassis (vm-2's TPM): the installed agent attests
# as vm-2, removes vm-1's kubelet certificates (never kept: vm-2's kubelet
# would act as vm-1) and stops, because the disk's config is vm-1's
# (docs/agent.md, "A disk in another machine"). vm-2's own disk is put back.
echo "# (d) vm-1's disk boots in vm-2"
D2="$(lab_dir vm2)"
mv "$D2/disk.img" "$D2/disk.own"
cp --sparse=always "$(lab_dir vm1)/disk.img" "$D2/disk.img"
boot_check vm2 good ms "$RC_REFUSED" \
  "step=config machine=[0-9a-f]{16} refused reason=config_of_another_machine message=\"this disk's config was applied for vm-1; the appliance identified this machine \(its TPM\) as vm-2" \
  "(d) vm-1's disk in vm-2: the agent attests as vm-2 and refuses the disk's config (config_of_another_machine), exit 3"
# moved_clean: vm-1's certificates gone from the moved disk, the console says so.
moved_clean() {
  grep -aq 'certificate=client removed issued_to="system:node:vm-1" this_machine="system:node:vm-2"' "$D2/serial.boot" ||
    { echo "no client removal line"; return 1; }
  grep -aq 'certificate=serving removed issued_to="system:node:vm-1"' "$D2/serial.boot" ||
    { echo "no serving removal line"; return 1; }
  if vm_disk_has vm2 /var/lib/kubelet/pki/kubelet-client-current.pem; then echo "client certificate kept"; return 1; fi
  if vm_disk_has vm2 /var/lib/kubelet/pki/kubelet-server-current.pem; then echo "serving certificate kept"; return 1; fi
}
lab_check_shown "(d) vm-1's kubelet certificates are removed from the moved disk, the console says so" moved_clean
rg_ctl show vm-2 --json > "$LAB_DIR/vm-2.json"
lab_check_shown "(d) vm-2's report names the refusal and the removal" py "$LAB_DIR/vm-2.json" '
r = d["last_report"]
assert r["reason"] == "config_of_another_machine", r
assert "client_certificate_of_another_machine_removed" in r["done"], r'
lab_check "(d) vm-2 is still joined" test "$(rg_state vm-2)" == joined
mv "$D2/disk.own" "$D2/disk.img"

# --- (e) refusals --------------------------------------------------------------------
# Each refused boot is judged by the agent's line (403
# boot_policy_violation, exit 3) and by the rules rackgated logged for it
# (one "policy violation" line a rule, naming what differs).
echo "# (e) what the policy refuses"
# The rules rackgated logged for HOST after log line N: one "policy
# violation HOST" line a rule.
violations() { tail -n "+$(( $2 + 1 ))" "$RG_DIR/rackgated.log" | grep -E "policy violation $1 "; }
# violations_since HOST N ERE: one of them matches ERE.
violations_since() { violations "$1" "$2" | grep -E -- "$3" >/dev/null; }
# only_since HOST N ERE: every one of them matches ERE (and there is one).
only_since() {
  local lines
  lines="$(violations "$1" "$2")" || return 1
  ! grep -Evq -- "$3" <<<"$lines"
}
REFUSAL_MARK=0
# refusal M HOST MEDIA KEYS ERE DESC
refusal() {
  local m="$1" host="$2" media="$3" keys="$4" ere="$5" desc="$6" mark
  mark="$(wc -l < "$RG_DIR/rackgated.log")"
  REFUSAL_MARK="$mark"
  boot_check "$m" "$media" "$keys" "$RC_REFUSED" "$R_VIOLATION" "$desc: refused (403 boot_policy_violation, on the console)"
  lab_check_shown "$desc: rackgated names the rule ($ere)" violations_since "$host" "$mark" "$ere"
  echo "# rules rackgated logged:"
  violations "$host" "$mark" > "$LAB_DIR/rules.txt" || true
  head -n 8 "$LAB_DIR/rules.txt" | sed 's/^.*: /#   /'  # head reads the file: no SIGPIPE under pipefail
}
# Secure Boot off (no keys enrolled): PCR 7 tells, and shim then boots
# grub, and grub the kernel, without the EFI stub handing the kernel the
# firmware's log (none in securityfs: eventlog_missing).
refusal vm1 vm-1 good nokeys "secure_boot secure_boot_" "(e) Secure Boot off"
vm_media cmdline "rackgate.extra=1"
refusal vm1 vm-1 cmdline ms "kernel_cmdline kernel_cmdline_mismatch" "(e) another kernel command line"
# A new machine's first boot with four bytes more in the initramfs (zeros
# after the last archive, which the kernel skips): grub measures the file it
# loaded into PCR 9.
cp "$VM_DIR/good/initrd.img" "$LAB_DIR/tampered.img"
printf '\0\0\0\0' >> "$LAB_DIR/tampered.img"
vm_media tampered "" "$LAB_DIR/tampered.img"
refusal vm4 vm-4 tampered ms "boot_files boot_file_not_allowed .*/initrd\\.img" "(e) a new machine, a tampered initramfs"
lab_check_shown "(e) a tampered initramfs breaks only boot_files (naming /initrd.img) and PCR 9's pin" \
  only_since vm-4 "$REFUSAL_MARK" "boot_files boot_file_not_allowed .*/initrd\\.img|pcrs pcr_mismatch \\(sha256 PCR 9 "
refused_first_boot() {
  if grep -a 'RACKGATE-LAB: ignition exit' "$(lab_dir vm4)/serial.boot" >/dev/null; then echo "Ignition ran"; return 1; fi
  secret_free vm4
}
lab_check_shown "(e) the refused first boot: Ignition never ran, nothing secret on vm-4's disk" refused_first_boot
rg_ctl status --json > "$LAB_DIR/status.json"
lab_check_shown "(e) the appliance's record: vm-4's failure, boot_policy_violation, the boot_files rule" \
  py "$LAB_DIR/status.json" '
f = [x for x in d["recent_failures"] if x["hostname"] == "vm-4"]
print("#", f[:1])
sys.exit(0 if f and f[0]["reason"] == "boot_policy_violation" and "boot_files:boot_file_not_allowed" in f[0]["reasons"] else 1)'
lab_check "(e) vm-4 stays enrolled" test "$(rg_state vm-4)" == enrolled
rg_ctl show vm-1 --json > "$LAB_DIR/show.vm1.json" || true

# --- (f) an appliance CA rotation ------------------------------------------------------
# docs/operations.md §8 on the real firmware boot: prepare, vm-1 boots during
# the overlap and its installed agent writes the bundle into the disk's
# /etc/rackgate/ca.pem; switch (forced: vm-2 and vm-3 stay off) and reload;
# vm-1 boots again and attests through the serving certificate of the next
# CA, which its old ca.pem alone would refuse. Last: everything before it
# (vm-4's first boot among them) trusts the first CA alone.
echo "# (f) vm-1 boots across an appliance CA switch"
STATE="$RG_DIR/state"
R_CA_REPLACED="step=attest machine=[0-9a-f]{16} note ca_file=[^ ]*ca\\.pem replaced with the appliance's CA bundle \\(2 certificates\\)"
R_ATTESTED="step=attest machine=[0-9a-f]{16} ok hostname=vm-1"
cp "$STATE/ca/ca.crt" "$LAB_DIR/first-ca.crt"
lab_check_shown "(f) ca rotate --appliance prepare" "$RACKGATECTL" ca rotate --appliance prepare --state-dir "$STATE"
cp "$STATE/ca/next.crt" "$LAB_DIR/next-ca.crt"
PREPARED_AT="$("$RACKGATECTL" ca rotate --appliance status --state-dir "$STATE" --json | py /dev/stdin 'print(d["prepared_at"])')"
# rackgated reads the stage within 2 s (docs/operations.md §8): wait for the
# clock to pass that bound rather than assume the boot is slower.
lab_sleep_until "$((PREPARED_AT + 3))"
# certs_of FILE: FILE's certificates in order, one line each (base64 of the
# DER, however the PEM was wrapped).
certs_of() { lab_python -c '
import re, sys
for b in re.findall(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", open(sys.argv[1]).read(), re.S):
    print("".join(b.split()))' "$1"; }
# disk_ca_is M FILE...: the disk's /etc/rackgate/ca.pem holds exactly FILE's certificates.
disk_ca_is() {
  local m="$1" f want="" got; shift
  vm_disk_cat "$m" /etc/rackgate/ca.pem > "$LAB_DIR/disk-ca.pem"
  got="$(certs_of "$LAB_DIR/disk-ca.pem")"
  for f in "$@"; do want+="$(certs_of "$f")"$'\n'; done
  [[ "$got" == "${want%$'\n'}" ]] || { echo "the disk's ca.pem has $(grep -c 'BEGIN CERT' "$LAB_DIR/disk-ca.pem") certificates, not those of $*"; return 1; }
}
boot_check vm1 good ms "$RC_OK" "$R_CA_REPLACED" \
  "(f) during the overlap vm-1 boots; the agent installed on its disk attests and takes the bundle (exit 0)"
lab_check_shown "(f) ... and attested ok" grep -aEq "$R_ATTESTED" "$(lab_dir vm1)/serial.boot"
lab_check_shown "(f) vm-1's disk: /etc/rackgate/ca.pem is the current then the next CA" \
  disk_ca_is vm1 "$LAB_DIR/first-ca.crt" "$LAB_DIR/next-ca.crt"
reloads="$(grep -c 'reload: TLS certificate reloaded' "$RG_DIR/rackgated.log" || true)"
lab_check_shown "(f) ca rotate --appliance switch --force (vm-2 and vm-3 have not attested since)" \
  "$RACKGATECTL" ca rotate --appliance switch --force --state-dir "$STATE"
kill -HUP "$RG_PID"
reloaded() { (( $(grep -c 'reload: TLS certificate reloaded' "$RG_DIR/rackgated.log" || true) > reloads )); }
lab_check "(f) rackgated reloads its serving certificate (SIGHUP)" lab_wait 10 reloaded
serves_next_only() {
  curl -sSf -o /dev/null --max-time "$RG_MAX_TIME" --cacert "$LAB_DIR/next-ca.crt" "$(rg_url /readyz)" || { echo "not under the next CA"; return 1; }
  if curl -sSf -o /dev/null --max-time "$RG_MAX_TIME" --cacert "$LAB_DIR/first-ca.crt" "$(rg_url /readyz)" 2>/dev/null; then
    echo "the first CA alone still verifies it"; return 1
  fi
}
lab_check_shown "(f) rackgated serves under the next CA: the first CA alone no longer verifies it" serves_next_only
boot_check vm1 good ms "$RC_OK" "$R_ATTESTED" \
  "(f) after the switch vm-1 boots: its agent attests through the new serving certificate with the bundle (exit 0)"
lab_check "(f) vm-1 is still joined" test "$(rg_state vm-1)" == joined
lab_check_shown "(f) the bundle is unchanged on vm-1's disk" \
  disk_ca_is vm1 "$LAB_DIR/first-ca.crt" "$LAB_DIR/next-ca.crt"

echo "# vm-boot: $(lab_ms_since "$T_ALL") ms in all"
lab_finish
