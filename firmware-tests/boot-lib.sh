# boot-lib.sh — whole simulated machines booting through a real rackgated:
# the real Ignition binary (fetch and files stages, into the machine's own
# root directory) follows the pool's pointer config to the public config,
# then rackgate-agent, on the machine's swtpm, attests, applies the attested
# config into that same root and writes kubelet's certificates there — the
# node's path of DESIGN.md, first boot to `joined`, with nothing stubbed.
# Shared by firmware-tests/boot.sh, firmware-tests/agent.sh, script/demo and
# daemon/tests/ignition.sh (boot_run_ignition).
#
# Source it after lab.sh and daemon/tests/appliance.sh, after lab_init and
# rg_init:
#
#   boot_skip_unless_ignition          # TAP skip without the Ignition binary
#   boot_init AGENT                    # templates in $BOOT_DIR
#   boot_pool workers                  # pool with both templates, token, pointer
#   boot_new_machine r1 10.0.0.11      # swtpm + the machine's address
#   boot_enroll r1 node-1 workers      # by its EK certificate (RSA unless told)
#   boot_machine r1 workers            # Ignition, then the agent; agent's exit code
#   boot_agent r1 attest               # the agent alone, these steps only
#   boot_unit r1                       # the shipped unit's command line (a later boot)
#
# Every function and variable here starts with boot_ / BOOT_. A machine's
# files live in $(lab_dir NAME): root/ (its disk as Ignition and the agent
# leave it), ignition.log, agent.log (every agent run, appended), ip.

if [[ -n "${BOOT_LIB_LOADED:-}" ]]; then return 0; fi
BOOT_LIB_LOADED=1

# Debian's ignition package installs the binary off PATH (LAB.md).
BOOT_IGNITION="${BOOT_IGNITION:-/usr/lib/dracut/modules.d/30ignition/ignition}"
# The kubeconfig the agent writes names an API server; nothing talks to it.
BOOT_APISERVER=https://api.lab:6443
BOOT_AGENT=""
BOOT_AGENT_UNIT=""
BOOT_DIR=""
# The agent uses libcurl, which honours https_proxy even for 127.0.0.1: a
# proxy in the caller's environment must not sit between a lab machine and
# the appliance on loopback.
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}"
export NO_PROXY="$no_proxy"

boot_skip_unless_ignition() {
  if [[ ! -x "$BOOT_IGNITION" ]]; then
    lab_skip "$BOOT_IGNITION missing (apt-get install ignition)"
  fi
  command -v ignition-validate >/dev/null 2>&1 || lab_skip "ignition-validate missing"
  command -v curl >/dev/null 2>&1 || lab_skip "curl missing"
}

# boot_init AGENT [UNIT]: where the agent is, and the built
# rackgate-agent.service whose command line machines run (default: beside
# the agent in the build tree, build/systemd/rackgate-agent.service);
# writes the templates.
boot_init() {
  BOOT_AGENT="$(realpath "$1")"
  BOOT_AGENT_UNIT="$(realpath "${2:-$(dirname "$BOOT_AGENT")/../systemd/rackgate-agent.service}")"
  BOOT_DIR="$LAB_DIR/boot"
  mkdir -p "$BOOT_DIR"
  boot_templates
}

# The pool templates every lab machine boots with (docs/ignition.md).
# Public: what a machine needs before it has proven anything — where the
# appliance is, its CA, and the agent's unit. Attested: a pull secret (the
# kind of file the public part must never carry), per-machine values, and a
# directory, an executable, a link and a unit, so that every kind of entry
# the agent applies is exercised. Both are validated by rackgated when
# stored (ignition-validate included).
boot_templates() {
  # The shipped unit itself (JSON-quoted into the template), and the
  # agent.env it reads (docs/systemd.md).
  local unit_json
  unit_json="$(lab_python -c 'import json, sys; print(json.dumps(open(sys.argv[1]).read()))' "$BOOT_AGENT_UNIT")" || return 1
  cat > "$BOOT_DIR/public.ign" <<IGN
{
  "ignition": {"version": "3.3.0"},
  "storage": {"files": [
    {"path": "/etc/rackgate/pool", "mode": 420, "contents": {"source": "data:,{{pool}}"}},
    {"path": "/etc/rackgate/appliance", "mode": 420, "contents": {"source": "data:,{{appliance.url}}"}},
    {"path": "/etc/rackgate/ca.pem", "mode": 420, "contents": {"source": "data:,{{appliance.ca_pem}}"}},
    {"path": "/etc/rackgate/agent.env", "mode": 420,
     "contents": {"source": "data:,RACKGATE_URL%3D{{appliance.url}}%0ARACKGATE_CA%3D%2Fetc%2Frackgate%2Fca.pem%0ARACKGATE_APISERVER%3D${BOOT_APISERVER//\//%2F}%0A"}}
  ]},
  "systemd": {"units": [
    {"name": "rackgate-agent.service", "enabled": true, "contents": $unit_json}
  ]}
}
IGN
  # The pull secret's contents: {"auths":{"registry.lab":{"auth":"bGFiOnNlY3JldA=="}}}
  cat > "$BOOT_DIR/attested.ign" <<'IGN'
{
  "ignition": {"version": "3.3.0"},
  "storage": {
    "directories": [{"path": "/var/lib/rackgate", "mode": 448}],
    "files": [
      {"path": "/var/lib/kubelet/config.json", "mode": 384, "rackgate": {"secret": true},
       "contents": {"source": "data:;base64,eyJhdXRocyI6eyJyZWdpc3RyeS5sYWIiOnsiYXV0aCI6ImJHRmlPbk5sWTNKbGRBPT0ifX19Cg=="}},
      {"path": "/etc/hostname", "mode": 420, "overwrite": true, "contents": {"source": "data:,{{hostname}}"}},
      {"path": "/etc/rackgate/identity", "mode": 420,
       "contents": {"source": "data:,{{hostname}} {{ek_hash}} {{address.InternalIP}}"}},
      {"path": "/usr/local/bin/hello", "mode": 493, "contents": {"source": "data:;base64,IyEvYmluL3NoCmVjaG8gaGkK"}}
    ],
    "links": [{"path": "/etc/hello", "target": "/usr/local/bin/hello"}]
  },
  "systemd": {"units": [
    {"name": "kubelet.service", "enabled": true,
     "contents": "[Unit]\nDescription=kubelet\nAfter=rackgate-agent.service\n[Service]\nExecStart=/usr/bin/kubelet --kubeconfig=/var/lib/kubelet/kubeconfig\n[Install]\nWantedBy=multi-user.target\n"}
  ]}
}
IGN
}

# boot_pool POOL [pool put ARGS...]: creates POOL with both templates. Its
# first provisioning token (the last line `pool put` prints for a new pool
# that needs one) goes to $BOOT_DIR/POOL.token and the pointer config
# machines of POOL boot with to $BOOT_DIR/POOL.pointer.ign.
boot_pool() {
  local pool="$1"; shift
  rg_ctl pool put "$pool" --public-template "$BOOT_DIR/public.ign" --attested-template "$BOOT_DIR/attested.ign" \
    "$@" > "$BOOT_DIR/$pool.put" || { sed 's/^/#   /' "$BOOT_DIR/$pool.put" >&2; return 1; }
  local token=(--no-token)
  if [[ " $* " != *" --token-required no "* ]]; then
    tail -n 1 "$BOOT_DIR/$pool.put" > "$BOOT_DIR/$pool.token"
    token=(--token-file "$BOOT_DIR/$pool.token")
  fi
  rg_ctl pointer --pool "$pool" --url "$(rg_url "")" --state-dir "$RG_DIR/state" "${token[@]}" \
    > "$BOOT_DIR/$pool.pointer.ign"
}

# boot_new_machine NAME IP: manufactures and starts the machine's swtpm;
# IP is the address it will be enrolled with and put in its serving
# certificate.
boot_new_machine() {
  lab_machine "$1" lab || return 1
  echo "$2" > "$(lab_dir "$1")/ip"
}

# boot_new_machines IP_PREFIX NAME...: several at once. swtpm_setup takes
# about a second, mostly key generation, and swtpm_localca serialises its CA
# with flock: manufacturing in parallel is safe and the rack is ready in
# about the time of one. NAME gets IP_PREFIX.<n>, n counting from 11.
boot_new_machines() {
  local prefix="$1"; shift
  local name n=11 pids=() rc=0 pid
  for name in "$@"; do
    lab_machine_create "$name" lab & pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  (( rc == 0 )) || return 1
  for name in "$@"; do
    lab_machine_start "$name" || return 1
    echo "$prefix.$n" > "$(lab_dir "$name")/ip"
    n=$((n + 1))
  done
}

boot_ip() { cat "$(lab_dir "$1")/ip"; }
boot_root() { echo "$(lab_dir "$1")/root"; }

# boot_ek_cert NAME [rsa|ecc384]: the EK certificate the vendor shipped.
boot_ek_cert() { echo "$(lab_dir "$1")/ek-${2:-rsa}.der"; }

# boot_enroll NAME HOSTNAME POOL [rsa|ecc384] [enroll ARGS...]: the operator
# enrolls the machine by its EK certificate, with its address.
boot_enroll() {
  local name="$1" host="$2" pool="$3" ek="${4:-rsa}"
  shift $(( $# < 4 ? $# : 4 ))
  rg_ctl enroll --hostname "$host" --pool "$pool" --ek-cert "$(boot_ek_cert "$name" "$ek")" \
    --address "InternalIP=$(boot_ip "$name")" "$@" >/dev/null
}

# boot_inventory_row NAME HOSTNAME POOL [rsa|ecc384]: one line of the CSV
# `rackgatectl import` takes (the inventory a vendor ships with a rack).
boot_inventory_row() {
  echo "$2,$3,$(boot_ek_cert "$1" "${4:-rsa}"),InternalIP=$(boot_ip "$1")"
}

# boot_ignition NAME POOL: the machine's first boot: a blank disk (root),
# the real Ignition's fetch stage with the pool's pointer config (the
# `file` platform reads it from $IGNITION_CONFIG_FILE), then its files
# stage into the root. SELinux relabelling is stubbed out (LAB.md). Output
# in $(lab_dir NAME)/ignition.log; fails with Ignition.
boot_ignition() {
  local m; m="$(lab_dir "$1")"
  boot_run_ignition "$m/root" "$m/ign" "$BOOT_DIR/$2.pointer.ign" "$m/ignition.log"
}

# boot_run_ignition ROOT WORK POINTER LOG: the real Ignition's fetch and
# files stages with POINTER as its config, into a fresh ROOT (LAB.md: no
# reboot, disks or systemd); WORK holds its state; its output goes to LOG.
boot_run_ignition() {
  local root="$1" R="$2" pointer="$3" log="$4"
  rm -rf "$root" "$R"
  mkdir -p "$root/etc/selinux" "$R/run" "$R/bin"
  printf 'SELINUX=disabled\nSELINUXTYPE=targeted\n' > "$root/etc/selinux/config"
  printf '#!/bin/sh\ncat >/dev/null\n' > "$R/bin/setfiles"; chmod +x "$R/bin/setfiles"
  local C=(--platform file --log-to-stdout --root "$root" --config-cache "$R/run/ignition.json"
           --state-file "$R/run/state" --neednet "$R/run/neednet")
  # Always under timeout: Ignition retries 5xx and connection errors forever.
  local limit; limit="$(lab_seconds 60)"
  boot_spawn env IGNITION_CONFIG_FILE="$pointer" PATH="$R/bin:$PATH" \
    timeout "$limit" "$BOOT_IGNITION" "${C[@]}" --stage fetch --fetch-timeout "$(lab_seconds 10)s" >"$log" 2>&1 ||
    return 1
  boot_spawn env PATH="$R/bin:$PATH" timeout "$limit" "$BOOT_IGNITION" "${C[@]}" --stage files >>"$log" 2>&1
}

# boot_spawn CMD...: runs CMD (its output where the caller redirects this
# call) with its pid in the lab's list, so that the lab's cleanup stops it
# when the script ends first (lab.sh, lab_kill_pid: Ignition, the agent);
# returns its exit code. No stdin, and not the lab's copies of the script's
# output, which would keep a test harness waiting.
boot_spawn() {
  local pid rc=0
  "$@" </dev/null {LAB_STDOUT}>&- {LAB_STDERR}>&- &
  pid=$!
  echo "$pid" >> "$LAB_DIR/pids"
  wait "$pid" || rc=$?
  return "$rc"
}

# boot_agent NAME STEPS [AGENT ARGS...]: rackgate-agent as the machine's
# unit runs it after Ignition: the appliance URL and CA are the ones the
# public config wrote into the root, the root is the machine's `/`, kubelet's
# files go where kubelet keeps them inside it. The machine's TPM is its
# swtpm; its event log ($(lab_dir NAME)/eventlog, when one was replayed)
# goes along, none otherwise. STEPS as --steps. $BOOT_MAX_WAIT (default
# 30 s, times the lab's time factor: lab.sh, "time") bounds the waiting.
# The agent's stderr is appended to $(lab_dir NAME)/agent.log and repeated
# on stderr once it has exited; returns its exit code.
boot_agent() {
  local name="$1" steps="$2"; shift 2
  local m R url args=() rc=0
  m="$(lab_dir "$name")"; R="$m/root"
  url="$(cat "$R/etc/rackgate/appliance" 2>/dev/null)" || url="$(rg_url "")"
  args=(--tcti "$(lab_tcti "$name")" --url "$url" --ca "$R/etc/rackgate/ca.pem"
        --max-wait "$(lab_seconds "${BOOT_MAX_WAIT:-30}")" --steps "$steps")
  if [[ -s "$m/eventlog" ]]; then args+=(--eventlog "$(cat "$m/eventlog")"); else args+=(--eventlog ""); fi
  [[ "$steps" == *config* ]] && args+=(--apply-root "$R")
  [[ "$steps" == *csr* ]] && args+=(--kubelet-dir "$R/var/lib/kubelet/pki" --kubeconfig "$R/var/lib/kubelet/kubeconfig"
                                   --apiserver "$BOOT_APISERVER" --node-ip "$(boot_ip "$name")")
  boot_spawn "$BOOT_AGENT" "${args[@]}" "$@" >/dev/null 2>"$m/agent.last" || rc=$?
  cat "$m/agent.last" >> "$m/agent.log"
  cat "$m/agent.last" >&2
  return "$rc"
}

# boot_unit_argv ENVFILE EXTRA: prints, one per line, the command line
# systemd would run for $BOOT_AGENT_UNIT's ExecStart= with the variables of
# ENVFILE (KEY=VALUE lines, as EnvironmentFile= reads them), EXTRA appended
# to RACKGATE_AGENT_ARGS: ${VAR} is one argument, $VAR is split on
# whitespace (systemd.service(5), "Command lines"). The binary is the one
# under test. Fails on anything else in the line (quotes, specifiers), so
# that a unit this cannot read exactly is never approximated.
boot_unit_argv() {
  lab_python - "$BOOT_AGENT_UNIT" "$1" "$2" "$BOOT_AGENT" <<'PY'
import re, sys
unit, envfile, extra, agent = sys.argv[1:]
env = {}
for line in open(envfile):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    k, v = line.split("=", 1)
    env[k.strip()] = v.strip()
env["RACKGATE_AGENT_ARGS"] = (env.get("RACKGATE_AGENT_ARGS", "") + " " + extra).strip()
execs = [l[len("ExecStart="):].rstrip("\n") for l in open(unit) if l.startswith("ExecStart=")]
if len(execs) != 1:
    sys.exit("want exactly one ExecStart= in %s" % unit)
words = execs[0].split()
if not words[0].endswith("/rackgate-agent"):
    sys.exit("ExecStart= runs %s" % words[0])
print(agent)
for w in words[1:]:
    m = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", w)
    if m:
        print(env.get(m.group(1), ""))
        continue
    m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", w)
    if m:
        for part in env.get(m.group(1), "").split():
            print(part)
        continue
    if re.search(r"[$%\x22\x27\\]", w):
        sys.exit("cannot read %r as systemd would" % w)
    print(w)
PY
}

# boot_unit NAME [AGENT ARGS...]: the machine runs its rackgate-agent.service,
# exactly the shipped unit's ExecStart= with the agent.env the public config
# wrote into its root. The lab's only additions go through
# RACKGATE_AGENT_ARGS, as a site's would: the swtpm TCTI, the event log
# (none unless replayed), --max-wait, the root's paths in place of / (the
# appliance CA, --apply-root, kubelet's directory and kubeconfig; the
# agent takes the last of a repeated flag), the machine's address, then
# ARGS. The argument vector is kept in $(lab_dir NAME)/unit.argv, one a
# line. Output and exit code as boot_agent's.
boot_unit() {
  local name="$1"; shift
  local m R extra rc=0 argv=()
  m="$(lab_dir "$name")"; R="$m/root"
  extra="--tcti $(lab_tcti "$name") --max-wait $(lab_seconds "${BOOT_MAX_WAIT:-30}")"
  if [[ -s "$m/eventlog" ]]; then extra+=" --eventlog $(cat "$m/eventlog")"; else extra+=" --eventlog="; fi
  extra+=" --ca $R/etc/rackgate/ca.pem --apply-root $R --kubelet-dir $R/var/lib/kubelet/pki"
  extra+=" --kubeconfig $R/var/lib/kubelet/kubeconfig --node-ip $(boot_ip "$name") $*"
  mapfile -t argv < <(boot_unit_argv "$R/etc/rackgate/agent.env" "$extra") || true
  if (( ${#argv[@]} < 2 )); then echo "boot_unit: cannot build the unit's command line" >"$m/agent.last"; cat "$m/agent.last" >&2; return 1; fi
  printf '%s\n' "${argv[@]}" > "$m/unit.argv"  # one argument a line
  boot_spawn "${argv[@]}" >/dev/null 2>"$m/agent.last" || rc=$?
  cat "$m/agent.last" >> "$m/agent.log"
  cat "$m/agent.last" >&2
  return "$rc"
}

# boot_machine NAME POOL [AGENT ARGS...]: a whole first boot — Ignition, then
# the agent as the shipped unit runs it (boot_unit). Returns Ignition's
# failure as 100, else the agent's exit code.
boot_machine() {
  local name="$1" pool="$2"; shift 2
  boot_ignition "$name" "$pool" || return 100
  boot_unit "$name" "$@"
}

# boot_reboot NAME: a reboot: the OS shuts the TPM down orderly
# (TPM2_Shutdown(CLEAR), as Linux does on its way down), the TPM is reset
# (resetCount goes up, PCRs and transient objects are gone) and firmware
# starts it again. Without the orderly shutdown every reboot would count as
# a failed authorization for the TPM's dictionary-attack protection (the EK
# is DA-protected), and a few reboots would lock the TPM out
# (TPM_RC_LOCKOUT at ActivateCredential), as a real TPM does after power
# losses.
boot_reboot() {
  local m; m="$(lab_dir "$1")"
  lab_tpm "$1" tpm2_shutdown -c >/dev/null &&
    swtpm_ioctl --tcp "127.0.0.1:$(cat "$m/ctrlport")" -i >/dev/null &&
    lab_tpm "$1" tpm2_startup -c >/dev/null
}

# boot_replay_eventlog NAME LOG: a measured boot. Every extend of the real
# TCG event log LOG (EV_NO_ACTION extends nothing) goes into the machine's
# PCRs with tpm2_pcrextend, in log order, for the banks swtpm has (sha1,
# sha256) that the log carries; the agent will send LOG. 32 extends per
# call (firmware-tests/eventlog.sh measured it: the GCE log's 111 extends
# take well under a second). A log with a StartupLocality event cannot be
# reproduced this way (PCR 0 would need TPM2_Startup at that locality): such
# a log is refused here rather than replayed wrongly.
boot_replay_eventlog() {
  local name="$1" log="$2" m line
  m="$(lab_dir "$name")"
  tpm2_eventlog "$log" > "$m/events.yaml" 2>"$m/eventlog.err" || { sed 's/^/#   /' "$m/eventlog.err" >&2; return 1; }
  lab_python - "$m/events.yaml" "$log" > "$m/extends.txt" <<'PY' || return 1
import re, sys
yaml, log = sys.argv[1:]
if b"StartupLocality\0" in open(log, "rb").read():
    sys.exit("# the log sets a StartupLocality: not reproducible with tpm2_pcrextend")
events, cur, alg = [], None, None
for line in open(yaml):
    line = line.rstrip("\n")
    if line == "pcrs:":
        break
    m = re.match(r"^- EventNum: \d+$", line)
    if m:
        cur = {"digests": {}}; events.append(cur); continue
    if cur is None:
        continue
    m = re.match(r"^  PCRIndex: (\d+)$", line)
    if m: cur["pcr"] = m.group(1); continue
    m = re.match(r"^  EventType: (\S+)$", line)
    if m: cur["type"] = m.group(1); continue
    m = re.match(r"^  - AlgorithmId: (\S+)$", line)
    if m: alg = m.group(1); continue
    m = re.match(r'^    Digest: "([0-9a-fA-F]+)"$', line)
    if m and alg:
        cur["digests"][alg] = m.group(1).lower(); alg = None
for e in events:
    if e.get("type") == "EV_NO_ACTION":
        continue
    banks = [f"{b}={e['digests'][b]}" for b in ("sha1", "sha256") if b in e["digests"]]
    if banks:
        print(f"{e['pcr']}:{','.join(banks)}")
PY
  local batch=()
  while read -r line; do
    batch+=("$line")
    if (( ${#batch[@]} >= 32 )); then lab_tpm "$name" tpm2_pcrextend "${batch[@]}" >/dev/null || return 1; batch=(); fi
  done < "$m/extends.txt"
  if (( ${#batch[@]} > 0 )); then lab_tpm "$name" tpm2_pcrextend "${batch[@]}" >/dev/null || return 1; fi
  echo "$log" > "$m/eventlog"
}

# boot_wait_for FILE ERE [SECONDS]: until FILE has a line matching ERE
# (default 30 s, times the lab's factor); fails when it never does.
boot_wait_for() { lab_wait "${3:-30}" grep -Eq -- "$2" "$1"; }

# boot_json FILE KEY.PATH: one value of a JSON file ("-" for stdin).
boot_json() {
  lab_python -c 'import json,sys
v = json.load(sys.stdin if sys.argv[1] == "-" else open(sys.argv[1]))
for k in sys.argv[2].split("."): v = v[int(k)] if isinstance(v, list) else v[k]
print(v if not isinstance(v, (dict, list)) else json.dumps(v))' "$1" "$2"
}
