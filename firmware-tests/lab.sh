# lab.sh — the swtpm lab: lab CAs, simulated machines (one swtpm each, with
# EK certificates from a lab CA) and the tpm2-tools steps the checks need.
#
# Source it from a bash test script that runs under `set -euo pipefail`:
#
#   source "$(dirname "$0")/lab.sh"
#   lab_skip_unless_tools          # TAP skip (1..0 # SKIP) without swtpm or tpm2-tools
#   lab_init quotes                # private temp dir, cleanup trap
#   lab_ca lab
#   lab_machine_create m1 lab; lab_machine_start m1
#   lab_ek_rsa m1; lab_ak m1 rsa rsassa "$(lab_dir m1)/ak"
#   lab_expect 0 "" "valid quote" "$RACKGATECTL" verify-quote ...
#   lab_finish
#
# Every function and variable here starts with lab_ / LAB_. Files of machine M
# live in $(lab_dir M); a CA's files in $(lab_ca_dir CA). The commands follow
# commands verified on Debian 12 (firmware-tests/README.md says what).
#
# swtpm has 3 transient object slots and no resource manager, so every helper
# that loads objects flushes them before it returns (lab_flush).

# Sourced only: a second sourcing is harmless.
if [[ -n "${LAB_SH_LOADED:-}" ]]; then return 0; fi
LAB_SH_LOADED=1

LAB_TOOLS=(swtpm swtpm_setup swtpm_localca swtpm_ioctl certtool openssl xxd
  tpm2_createek tpm2_createak tpm2_quote tpm2_checkquote tpm2_makecredential
  tpm2_activatecredential tpm2_startauthsession tpm2_policysecret tpm2_policyor
  tpm2_flushcontext tpm2_nvread tpm2_pcrextend tpm2_print tpm2_hash tpm2_sign
  tpm2_certify tpm2_readpublic)

# NV indices and persistent handles swtpm_setup 0.7 provisions.
LAB_NV_EK_RSA2048=0x01c00002
LAB_NV_EK_ECC384=0x01c00016
LAB_NV_PLATFORM_CERT=0x01c08000

# TCG EK Credential Profile policy digests, SHA-384 (high-range templates).
# PolicyA = PolicySecret(TPM_RH_ENDORSEMENT); PolicyC = PolicyAuthorizeNV
# (0x01c07f01). The P-384 EK's authPolicy is PolicyOR(PolicyA, PolicyC) =
# b26e7d28...f3f80e12, which is what swtpm_setup 0.7.1 and
# `tpm2_createek -G ecc384` put in the template.
LAB_POLICY_A_SHA384=8bbf2266537c171cb56e403c4dc1d4b64f432611dc386e6f532050c3278c930e143e8bb1133824ccb431053871c6db53
LAB_POLICY_C_SHA384=d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5b4947c2d73e63005eed2dc2b3593d165

# ---------------------------------------------------------------- time ----
#
# A loaded machine is slow, never wrong: no check may fail because the
# machine is busy. What the lab waits for, it polls for until a deadline
# (lab_wait); every deadline, --max-wait, timeout and lifetime that only
# has to be long enough is a time that is ample on an idle 2-core machine,
# multiplied by one factor, RACKGATE_TEST_TIME_FACTOR (default 4: a
# 2-core machine at load 10 passes; firmware-tests/README.md, "A busy
# machine"). A check of an expiry waits until the expiry has passed by the
# appliance's clock, however long the steps before it took; it never
# assumes a step is quick. The factor costs nothing when checks pass:
# polls end as soon as what they wait for happens.
LAB_TIME_FACTOR="${RACKGATE_TEST_TIME_FACTOR:-4}"
if ! [[ "$LAB_TIME_FACTOR" =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ "$LAB_TIME_FACTOR" =~ ^0+([.]0+)?$ ]]; then
  echo "Bail out! RACKGATE_TEST_TIME_FACTOR must be a positive number, not '$LAB_TIME_FACTOR'"
  exit 1
fi

# lab_seconds N: N seconds times the factor, rounded up to whole seconds.
lab_seconds() {
  awk -v n="$1" -v f="$LAB_TIME_FACTOR" 'BEGIN { v = n * f; i = int(v); if (i < v) i++; print i }'
}

# lab_wait SECONDS CMD...: runs CMD (quietly) until it succeeds, every 0.05 s
# and at most for SECONDS times the factor; fails when it never does.
lab_wait() {
  local deadline=$(( $(date +%s%N) + $(lab_seconds "$1") * 1000000000 )); shift
  until "$@" >/dev/null 2>&1; do
    (( $(date +%s%N) < deadline )) || return 1
    sleep 0.05
  done
}

# lab_sleep_until T: sleeps until the clock reads T (seconds since the
# epoch) or later; at once when it already does.
lab_sleep_until() {
  local now
  while now="$(date +%s)" && (( now < $1 )); do sleep $(( $1 - now )); done
}

LAB_DIR=""
LAB_NAME=""
LAB_PASSED=0
LAB_FAILED=0
LAB_REPRO_ROOT="${LAB_REPRO_ROOT:-/tmp/labrepro}"

# ---------------------------------------------------------------- tools ----

lab_have_tools() {
  local t
  for t in "${LAB_TOOLS[@]}"; do
    command -v "$t" >/dev/null 2>&1 || { echo "# missing tool: $t" >&2; return 1; }
  done
}

# The output is TAP (meson runs these scripts with protocol: 'tap'): `ok -`
# and `not ok -` lines, diagnostics as `#` lines, and a plan `1..N` at the
# end (lab_finish, or the cleanup of a script that aborted).

# lab_skip REASON: skips the whole script, as TAP says it (exit 0).
lab_skip() {
  echo "1..0 # SKIP $1"
  exit 0
}

# Skips the script when the lab cannot run on this machine.
lab_skip_unless_tools() {
  if ! lab_have_tools; then lab_skip "swtpm/tpm2-tools not installed"; fi
}

lab_python() {
  if [[ -x /usr/bin/python3 ]]; then /usr/bin/python3 "$@"; else python3 "$@"; fi
}

# -------------------------------------------------------- lifecycle, trap ----

# lab_init NAME: makes the test's private temp dir and installs the cleanup
# trap that stops every swtpm this test started and removes the dir.
# LAB_KEEP=1 keeps the dir for debugging. LAB_RUN_TAG (bench/meson.build
# sets it) goes into the dir's name, so that bench/left_running.sh can find
# whatever a run's scripts left behind, and nobody else's.
lab_init() {
  LAB_NAME="$1"
  LAB_DIR="$(mktemp -d "${TMPDIR:-/tmp}/rackgate-lab.${LAB_RUN_TAG:+$LAB_RUN_TAG.}${LAB_NAME}.XXXXXX")"
  mkdir -p "$LAB_DIR/ca" "$LAB_DIR/m"
  : > "$LAB_DIR/pids"
  # One line per TAP result, for the plan: also counts results printed from
  # subshells and background jobs, whose counter updates are lost.
  : > "$LAB_DIR/tap"
  # The cleanup may run from a signal trap while a command's output is
  # redirected: it writes to these copies of the script's own stdout/stderr.
  exec {LAB_STDOUT}>&1 {LAB_STDERR}>&2
  trap lab_cleanup EXIT
  trap 'lab_not_ok "lab script failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
  trap 'exit 129' HUP
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Stops one swtpm by the pid recorded when we started it, only if that pid is
# still a swtpm serving a state dir of ours (a recycled pid is left alone).
lab_kill_pid() {
  local pid="$1" i
  [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 0
  # Only processes this lab started: a swtpm, a rackgated, an Ignition
  # (under timeout), a rackgate-agent (boot-lib.sh), a
  # rackgate-webhook-receiver (life.sh), a QEMU (vm-lib.sh) or an nginx
  # (bench/config_serving.sh: its master's title is "nginx: master process
  # /usr/sbin/nginx -c DIR/..."), whose command line names the lab's
  # directory.
  if ! tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
      grep -Eq -- "(swtpm|rackgated|rackgate-agent|rackgate-webhook-receiver|ignition|qemu-system-x86_64|nginx).*$LAB_DIR/"; then
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 1 50); do
    lab_pid_gone "$pid" && return 0
    sleep 0.02
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# Gone or a zombie (a daemonized swtpm is reparented to PID 1, which may not
# reap it in a container).
lab_pid_gone() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 0
  [[ -z "$state" || "$state" == Z ]]
}

lab_cleanup() {
  local rc=$?
  trap - EXIT
  set +e
  lab_cleanup_inner "$rc" 1>&"${LAB_STDOUT:-1}" 2>&"${LAB_STDERR:-2}"
  exit "$rc"
}

lab_cleanup_inner() {
  local rc="$1"
  if [[ "$rc" != 0 && "$rc" != 77 && "${LAB_FINISHED:-0}" != 1 ]]; then
    lab_not_ok "$LAB_NAME aborted (exit $rc) before its checks finished"
    local log
    for log in "$LAB_DIR"/m/*/tpm.log; do
      [[ -s "$log" ]] || continue
      echo "# last tpm2-tools output of $(basename "$(dirname "$log")"):"
      tail -n 8 "$log" | sed 's/^/#   /'
    done
    lab_plan
  fi
  if [[ -n "$LAB_DIR" && -d "$LAB_DIR" ]]; then
    local pid
    while read -r pid; do lab_kill_pid "$pid"; done < "$LAB_DIR/pids"
    if [[ "${LAB_KEEP:-0}" == 1 ]]; then
      echo "# LAB_KEEP=1: kept $LAB_DIR" >&2
    else
      rm -rf "$LAB_DIR"
    fi
  fi
}

# ------------------------------------------------------------------ CAs ----

lab_ca_dir() { echo "$LAB_DIR/ca/$1"; }
# The "manufacturer" root to trust, and the intermediate that signs EK certs.
# Both exist once the first machine of the CA has been created.
lab_ca_root() { echo "$LAB_DIR/ca/$1/state/swtpm-localca-rootca-cert.pem"; }
lab_ca_intermediate() { echo "$LAB_DIR/ca/$1/state/issuercert.pem"; }
lab_ca_intermediate_key() { echo "$LAB_DIR/ca/$1/state/signkey.pem"; }

# lab_ek_extfile FILE: the extensions swtpm gives an EK certificate (the EK
# EKU, a critical TPM SubjectAltName), as an `openssl x509 -extfile`, for lab
# EK certificates made over a key of the test's choosing.
lab_ek_extfile() {
  cat > "$1" <<'EOF'
basicConstraints = critical,CA:FALSE
keyUsage = critical,keyEncipherment
extendedKeyUsage = 2.23.133.8.1
subjectAltName = critical,dirName:tpm_dn
# (openssl's config strips a leading "N." from a field name, hence 0./1./2.)
[tpm_dn]
0.2.23.133.2.1 = id:00001014
1.2.23.133.2.2 = swtpm
2.2.23.133.2.3 = id:20191023
EOF
}

# lab_ca NAME: a lab manufacturer CA (swtpm_localca), created lazily by the
# first swtpm_setup that uses it.
lab_ca() {
  local d; d="$(lab_ca_dir "$1")"
  mkdir -p "$d/state"
  printf 'statedir = %s\nsigningkey = %s/signkey.pem\nissuercert = %s/issuercert.pem\ncertserial = %s/certserial\n' \
    "$d/state" "$d/state" "$d/state" "$d/state" > "$d/localca.conf"
  printf -- '--platform-manufacturer Lab\n--platform-version 2.1\n--platform-model swtpm-lab\n' \
    > "$d/localca.options"
  printf 'create_certs_tool = /usr/bin/swtpm_localca\ncreate_certs_tool_config = %s/localca.conf\ncreate_certs_tool_options = %s/localca.options\nactive_pcr_banks = sha256\n' \
    "$d" "$d" > "$d/swtpm_setup.conf"
}

# ------------------------------------------------------------- machines ----

lab_dir() { echo "$LAB_DIR/m/$1"; }
lab_port() { cat "$LAB_DIR/m/$1/port"; }
lab_tcti() { echo "swtpm:host=127.0.0.1,port=$(lab_port "$1")"; }

# lab_machine_create NAME CA: manufactures a TPM with swtpm_setup: RSA-2048
# and ECC P-384 EKs with certificates, a platform certificate, sha1+sha256
# banks. EK certs (DER) are also copied to ek-rsa.der / ek-ecc384.der.
lab_machine_create() {
  local name="$1" ca="$2" m
  m="$(lab_dir "$name")"
  mkdir -p "$m/state" "$m/ekcerts"
  echo "$ca" > "$m/ca"
  if ! swtpm_setup --tpm2 --tpmstate "$m/state" --config "$(lab_ca_dir "$ca")/swtpm_setup.conf" \
      --create-ek-cert --create-platform-cert --pcr-banks sha1,sha256 \
      --write-ek-cert-files "$m/ekcerts" --logfile "$m/setup.log" >/dev/null 2>&1; then
    echo "# swtpm_setup failed for $name:" >&2
    sed 's/^/#   /' "$m/setup.log" >&2 || true
    return 1
  fi
  cp "$m/ekcerts/ek-rsa2048.crt" "$m/ek-rsa.der"
  cp "$m/ekcerts/ek-secp384r1.crt" "$m/ek-ecc384.der"
}

# A free loopback port pair P, P+1 (the swtpm TCTI expects the control port
# right after the server port). The kernel picks P; P+1 must be bindable too.
lab_pick_ports() {
  lab_python - <<'EOF'
import socket
for _ in range(200):
    a = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    a.bind(("127.0.0.1", 0))
    port = a.getsockname()[1]
    b = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        if port < 65535:
            b.bind(("127.0.0.1", port + 1))
            print(port, port + 1)
            break
    except OSError:
        pass
    finally:
        a.close()
        b.close()
else:
    raise SystemExit("no free port pair")
EOF
}

# lab_machine_start NAME: starts the machine's swtpm on a free loopback port
# pair. Another process may grab a port between the pick and swtpm's bind, so
# it retries with new ports; swtpm exits non-zero before daemonizing when
# bind fails.
lab_machine_start() {
  local name="$1" m ports port ctrl pid
  m="$(lab_dir "$name")"
  for _ in $(seq 1 20); do
    ports="$(lab_pick_ports)"
    port="${ports% *}"; ctrl="${ports#* }"
    rm -f "$m/swtpm.pid"
    if swtpm socket --tpm2 \
        --server "type=tcp,port=$port,bindaddr=127.0.0.1" \
        --ctrl "type=tcp,port=$ctrl,bindaddr=127.0.0.1" \
        --tpmstate "dir=$m/state" --flags not-need-init,startup-clear \
        --pid "file=$m/swtpm.pid" --log "file=$m/swtpm.log" --daemon \
        </dev/null >/dev/null 2>>"$m/swtpm.err" {LAB_STDOUT}>&- {LAB_STDERR}>&-; then
      # The daemon may write its pid file after the parent returned.
      if ! lab_wait 2 test -s "$m/swtpm.pid"; then
        echo "# swtpm for $name wrote no pid file" >&2
        return 1
      fi
      pid="$(cat "$m/swtpm.pid")"
      echo "$pid" >> "$LAB_DIR/pids"
      echo "$port" > "$m/port"
      echo "$ctrl" > "$m/ctrlport"
      lab_wait 5 swtpm_ioctl --tcp "127.0.0.1:$ctrl" -g && return 0
      echo "# swtpm for $name does not answer on its control port" >&2
      return 1
    fi
    sleep 0.0$((RANDOM % 9 + 1))
  done
  echo "# could not start swtpm for $name:" >&2
  sed 's/^/#   /' "$m/swtpm.err" >&2 || true
  return 1
}

lab_machine_stop() {
  local m; m="$(lab_dir "$1")"
  [[ -s "$m/swtpm.pid" ]] && lab_kill_pid "$(cat "$m/swtpm.pid")"
  rm -f "$m/swtpm.pid" "$m/port" "$m/ctrlport"
}

# lab_machine NAME CA: create and start.
lab_machine() { lab_machine_create "$1" "$2" && lab_machine_start "$1"; }

# lab_tpm NAME CMD...: runs a tpm2-tools command against the machine. Its
# stderr goes to the machine's tpm.log (shown by lab_tpm_log).
lab_tpm() {
  local name="$1"; shift
  local m; m="$(lab_dir "$name")"
  echo "+ $*" >> "$m/tpm.log"
  TPM2TOOLS_TCTI="$(lab_tcti "$name")" "$@" 2>>"$m/tpm.log"
}
lab_tpm_log() { tail -n "${2:-20}" "$(lab_dir "$1")/tpm.log" | sed 's/^/#   /' >&2; }

# Flushes every transient object and loaded session of the machine.
lab_flush() {
  lab_tpm "$1" tpm2_flushcontext -t >/dev/null || true
  lab_tpm "$1" tpm2_flushcontext -l >/dev/null || true
}

# --------------------------------------------------------- EKs and AKs ----

# lab_ek_rsa NAME: the RSA-2048 EK (TCG low-range template, the one
# swtpm_setup certifies at NV 0x01c00002) as ek-rsa.ctx and ek-rsa.pub
# (TPM2B_PUBLIC); its certificate as ek-rsa.der, read back from NV.
lab_ek_rsa() {
  local name="$1" m; m="$(lab_dir "$name")"
  lab_tpm "$name" tpm2_createek -G rsa -c "$m/ek-rsa.ctx" -u "$m/ek-rsa.pub" -f tss >/dev/null \
    || { lab_flush "$name"; return 1; }
  lab_flush "$name"
  lab_tpm "$name" tpm2_nvread "$LAB_NV_EK_RSA2048" -C o -o "$m/ek-rsa.der" >/dev/null
}

# lab_ek_ecc384 NAME: the P-384 EK swtpm_setup 0.7 certifies at NV 0x01c00016
# (and persists at 0x81010016). TCG EK profile high-range template: ECC
# NIST P-384, nameAlg sha384, attributes fixedTPM|fixedParent|
# sensitiveDataOrigin|userWithAuth|adminWithPolicy|restricted|decrypt
# (0x000300f2), authPolicy PolicyOR(PolicyA, PolicyC) in sha384, symmetric
# AES-256-CFB, scheme and KDF NULL, unique x and y empty. tpm2-tools 5.4's
# `tpm2_createek -G ecc384` uses exactly this template.
lab_ek_ecc384() {
  local name="$1" m; m="$(lab_dir "$name")"
  lab_tpm "$name" tpm2_createek -G ecc384 -c "$m/ek-ecc384.ctx" -u "$m/ek-ecc384.pub" -f tss >/dev/null \
    || { lab_flush "$name"; return 1; }
  lab_flush "$name"
  lab_tpm "$name" tpm2_nvread "$LAB_NV_EK_ECC384" -C o -o "$m/ek-ecc384.der" >/dev/null
}

# lab_ek_ecc256 NAME: the TCG low-range ECC P-256 EK (sha256, PolicyA,
# AES-128-CFB, unique x and y 32 zero bytes). swtpm_setup certifies none.
lab_ek_ecc256() {
  local name="$1" m; m="$(lab_dir "$name")"
  lab_tpm "$name" tpm2_createek -G ecc -c "$m/ek-ecc256.ctx" -u "$m/ek-ecc256.pub" -f tss >/dev/null \
    || { lab_flush "$name"; return 1; }
  lab_flush "$name"
}

# lab_ek_matches_cert NAME rsa|ecc384: the EK public area's key equals the
# certificate's SubjectPublicKeyInfo.
lab_ek_matches_cert() {
  local m; m="$(lab_dir "$1")"
  cmp -s <(openssl x509 -inform der -in "$m/ek-$2.der" -noout -pubkey) \
         <(tpm2_print -t TPM2B_PUBLIC -f pem "$m/ek-$2.pub" 2>/dev/null)
}

# lab_platform_cert NAME OUT.der: the platform certificate swtpm_setup wrote.
lab_platform_cert() {
  lab_tpm "$1" tpm2_nvread "$LAB_NV_PLATFORM_CERT" -C o -o "$2" >/dev/null
}

# lab_ak NAME EK KIND PREFIX: an AK under the machine's EK (rsa|ecc384) of
# KIND rsassa|rsapss (RSA-2048) or ecdsa (P-256), sha256 signatures. Writes
# PREFIX.ctx, PREFIX.pub (TPM2B_PUBLIC), PREFIX.name, PREFIX.kind.
lab_ak() {
  local name="$1" ek="$2" kind="$3" prefix="$4" m alg
  m="$(lab_dir "$name")"
  case "$kind" in
    rsassa|rsapss) alg=rsa ;;
    ecdsa) alg=ecc ;;
    *) echo "# lab_ak: unknown AK kind $kind" >&2; return 1 ;;
  esac
  lab_tpm "$name" tpm2_createak -C "$m/ek-$ek.ctx" -c "$prefix.ctx" -G "$alg" -g sha256 -s "$kind" \
    -u "$prefix.pub" -f tss -n "$prefix.name" >/dev/null || { lab_flush "$name"; return 1; }
  lab_flush "$name"
  echo "$kind" > "$prefix.kind"
}

# lab_pcr_extend NAME: a believable, non-zero state for PCRs 0-9 in both banks.
lab_pcr_extend() {
  local name="$1" i s1 s256
  for i in 0 1 2 3 4 5 6 7 8 9; do
    s1="$(printf 'lab pcr %s %s' "$name" "$i" | openssl dgst -sha1 -r | cut -d' ' -f1)"
    s256="$(printf 'lab pcr %s %s' "$name" "$i" | openssl dgst -sha256 -r | cut -d' ' -f1)"
    lab_tpm "$name" tpm2_pcrextend "$i:sha1=$s1,sha256=$s256" >/dev/null
  done
}

# lab_quote NAME AKPREFIX NONCEHEX PCRLIST OUTPREFIX [serialized|values]:
# tpm2_quote -m OUT.msg -s OUT.sig -o OUT.pcrs with sha256 signatures.
# tpm2-tools 5.4 picks RSASSA for any RSA key unless told, so an RSAPSS AK
# needs --scheme rsapss.
lab_quote() {
  local name="$1" ak="$2" nonce="$3" list="$4" out="$5" fmt="${6:-serialized}" kind
  local -a extra=()
  kind="$(cat "$ak.kind")"
  [[ "$kind" == rsapss ]] && extra+=(--scheme rsapss)
  [[ "$fmt" == values ]] && extra+=(-F values)
  lab_tpm "$name" tpm2_quote -c "$ak.ctx" -l "$list" -q "$nonce" -g sha256 \
    -m "$out.msg" -s "$out.sig" -o "$out.pcrs" "${extra[@]}" >/dev/null \
    || { lab_flush "$name"; return 1; }
  lab_flush "$name"
}

# lab_makecredential EKPUB AKNAME SECRET OUT: tpm2-tools' software
# MakeCredential (no TPM). Takes the EK as TPM2B_PUBLIC, so it uses the EK's
# own curve and nameAlg (works for P-384; `-G ecc` would force P-256).
lab_makecredential() {
  tpm2_makecredential -T none -u "$1" -s "$3" -n "$(xxd -p -c 256 "$2")" -o "$4" >/dev/null 2>&1
}

# lab_activate NAME EK AKPREFIX CRED OUT: TPM2_ActivateCredential with the
# EK's admin policy: a policy session in the EK's nameAlg, PolicySecret
# (endorsement), and for the P-384 EK PolicyOR(PolicyA, PolicyC) in sha384.
# Returns non-zero when the TPM refuses the credential.
lab_activate() {
  local name="$1" ek="$2" ak="$3" cred="$4" out="$5" m rc=0
  m="$(lab_dir "$name")"
  rm -f "$out"
  if [[ "$ek" == ecc384 ]]; then
    echo "$LAB_POLICY_A_SHA384" | xxd -r -p > "$m/policyA.sha384"
    echo "$LAB_POLICY_C_SHA384" | xxd -r -p > "$m/policyC.sha384"
    lab_tpm "$name" tpm2_startauthsession --policy-session -g sha384 -S "$m/ek-session.ctx" >/dev/null &&
    lab_tpm "$name" tpm2_policysecret -S "$m/ek-session.ctx" -c e >/dev/null &&
    lab_tpm "$name" tpm2_policyor -S "$m/ek-session.ctx" -l "sha384:$m/policyA.sha384,$m/policyC.sha384" >/dev/null ||
      { lab_flush "$name"; return 2; }
  else
    lab_tpm "$name" tpm2_startauthsession --policy-session -g sha256 -S "$m/ek-session.ctx" >/dev/null &&
    lab_tpm "$name" tpm2_policysecret -S "$m/ek-session.ctx" -c e >/dev/null ||
      { lab_flush "$name"; return 2; }
  fi
  lab_tpm "$name" tpm2_activatecredential -c "$ak.ctx" -C "$m/ek-$ek.ctx" -i "$cred" -o "$out" \
    -P "session:$m/ek-session.ctx" >/dev/null || rc=1
  lab_flush "$name"
  return "$rc"
}

# ------------------------------------------------------------ file edits ----

# lab_flip_bit IN OFFSET OUT [BIT]: copy of IN with one bit flipped. A
# negative OFFSET counts from the end (-1 = last byte).
lab_flip_bit() {
  local in="$1" off="$2" out="$3" bit="${4:-0}" size byte
  size="$(stat -c %s "$in")"
  (( off < 0 )) && off=$(( size + off ))
  cp "$in" "$out"
  byte="$(od -An -tu1 -j "$off" -N1 "$in" | tr -d ' ')"
  byte=$(( byte ^ (1 << bit) ))
  printf '%b' "$(printf '\\%03o' "$byte")" | dd of="$out" bs=1 seek="$off" conv=notrunc status=none
}

# lab_set_bytes FILE OFFSET HEX: overwrite bytes in place.
lab_set_bytes() {
  echo "$3" | xxd -r -p | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# ---------------------------------------------------------------- checks ----

# A description stays on its TAP line: newlines become spaces.
lab_ok() { LAB_PASSED=$((LAB_PASSED + 1)); echo "ok - ${1//$'\n'/ }"; lab_tap_record; }
lab_not_ok() {
  LAB_FAILED=$((LAB_FAILED + 1))
  echo "not ok - ${1//$'\n'/ }"
  lab_tap_record
  [[ -n "${2:-}" ]] && printf '%s\n' "$2" | sed 's/^/#   /'
  return 0
}
lab_tap_record() {
  if [[ -n "$LAB_DIR" && -f "$LAB_DIR/tap" ]]; then echo >> "$LAB_DIR/tap"; fi
}
# The TAP plan: how many results this script printed.
lab_plan() {
  if [[ -n "$LAB_DIR" && -f "$LAB_DIR/tap" ]]; then
    echo "1..$(wc -l < "$LAB_DIR/tap")"
  else
    echo "1..$((LAB_PASSED + LAB_FAILED))"
  fi
}

# lab_check DESC CMD...: ok when CMD succeeds.
lab_check() {
  local desc="$1"; shift
  if "$@" >/dev/null 2>&1; then lab_ok "$desc"; else lab_not_ok "$desc"; fi
}

# lab_check_shown DESC CMD...: lab_check that shows the last 12 lines CMD
# printed when it fails.
lab_check_shown() {
  local desc="$1" out; shift
  if out="$("$@" 2>&1)"; then lab_ok "$desc"; else lab_not_ok "$desc" "$(printf '%s\n' "$out" | tail -n 12)"; fi
}

# lab_ms_since T: milliseconds since T, a `date +%s%N` reading.
lab_ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

# lab_check_fails DESC CMD...: ok when CMD fails.
lab_check_fails() {
  local desc="$1"; shift
  if "$@" >/dev/null 2>&1; then lab_not_ok "$desc" "succeeded, expected failure"; else lab_ok "$desc"; fi
}

# Keeps the inputs of a failed check under $LAB_REPRO_ROOT/<test>/<n>/ with a
# cmd.sh that reruns it on the copies.
lab_keep_repro() {
  local desc="$1"; shift
  local dir arg i=0
  dir="$LAB_REPRO_ROOT/$LAB_NAME/$(printf '%02d' "$LAB_FAILED")-$(echo "$desc" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-60)"
  rm -rf "$dir"; mkdir -p "$dir"
  local -a cmd=()
  for arg in "$@"; do
    if [[ -f "$arg" && "$i" -gt 0 ]]; then
      cp "$arg" "$dir/$(basename "$arg")"
      cmd+=("$dir/$(basename "$arg")")
    else
      cmd+=("$arg")
    fi
    i=$((i + 1))
  done
  { echo "# $desc"; printf '%q ' "${cmd[@]}"; echo; } > "$dir/cmd.sh"
  echo "$dir"
}

# lab_expect RC REASON_ERE DESC CMD...: ok when CMD exits with RC and, when
# REASON_ERE is not empty, its stderr matches the extended regex. On failure
# prints the exit code and stderr, and keeps the inputs for the lead.
lab_expect() {
  local want="$1" reason="$2" desc="$3"; shift 3
  local rc=0 err out
  err="$(mktemp "$LAB_DIR/stderr.XXXXXX")"; out="$(mktemp "$LAB_DIR/stdout.XXXXXX")"
  "$@" >"$out" 2>"$err" || rc=$?
  if [[ "$rc" == "$want" ]] && { [[ -z "$reason" ]] || grep -Eq -- "$reason" "$err"; }; then
    lab_ok "$desc"
  else
    local why="exit $rc (want $want${reason:+, stderr ~ /$reason/})"
    why+=$'\n'"stderr: $(head -c 600 "$err")"
    lab_not_ok "$desc" "$why"$'\n'"repro: $(lab_keep_repro "$desc" "$@")"
  fi
  rm -f "$err" "$out"
}

# lab_expect_refused DESC CMD...: ok when CMD exits 1 or 2 with a reason on
# stderr (for input a command may call either invalid or unusable).
lab_expect_refused() {
  local desc="$1"; shift
  local rc=0 err
  err="$(mktemp "$LAB_DIR/stderr.XXXXXX")"
  "$@" >/dev/null 2>"$err" || rc=$?
  if [[ "$rc" == 1 || "$rc" == 2 ]] && [[ -s "$err" ]]; then
    lab_ok "$desc"
  else
    lab_not_ok "$desc" "exit $rc (want 1 or 2 with a reason); stderr: $(head -c 600 "$err")"$'\n'"repro: $(lab_keep_repro "$desc" "$@")"
  fi
  rm -f "$err"
}

# Prints the summary line and the TAP plan, and exits 1 when any check failed.
lab_finish() {
  LAB_FINISHED=1
  echo "# $LAB_NAME: $LAB_PASSED passed, $LAB_FAILED failed"
  lab_plan
  if (( LAB_FAILED > 0 )); then exit 1; fi
  exit 0
}
