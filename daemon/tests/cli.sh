#!/usr/bin/env bash
# Integration: rackgatectl follows operators' habits (docs/cli.md), against a
# real rackgated. For EVERY command: an unknown option, an extra argument and
# a wrongly typed value are refused with exit 2 and a message naming them; the
# command works with --socket (and --json) AFTER its words; --json prints one
# JSON document; --help exits 0 with a synopsis, options and the exit status.
# Then: typos, errors that name the fix, JSON errors by line and column, and
# the bash completion against the parser and the help.
#   cli.sh RACKGATED RACKGATECTL COMPLETION
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"; COMPLETION="$(realpath "$3")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
command -v python3 >/dev/null || lab_skip "python3 missing"
lab_init cli
rg_init "$RACKGATED" "$RACKGATECTL"
EK="$RACKGATE_SOURCE_DIR/attest/testdata/ek"
TPM="$RACKGATE_SOURCE_DIR/attest/testdata/tpm"
LOGS="$RACKGATE_SOURCE_DIR/testdata/eventlogs"
cp "$EK/swtpm-localca-root.pem" "$RG_DIR/roots/"
cp "$EK/swtpm-localca-issuer.pem" "$RG_DIR/intermediates/"
rg_start
S="$RG_DIR/admin.sock"
C="$RG_CTL"
W="$LAB_DIR/cli"; mkdir -p "$W"

# Inputs of the commands that succeed below.
printf '{"version": 1, "require_separators": false}\n' > "$W/policy.json"
printf '{\n  "version": 1,\n  "require_separators": tru\n}\n' > "$W/bad.json"
printf '{"ignition": {"version": "3.3.0"}}\n' > "$W/public.ign"
head -c 32 /dev/zero > "$W/secret"
LOG="$LOGS/tpm2-tools_event-arch-linux.bin"

# expect_json DESC RC CMD...: CMD exits RC and prints one JSON document.
expect_json() {
  local desc="$1" want="$2"; shift 2
  local rc=0
  "$@" >"$W/out" 2>"$W/err" || rc=$?
  if [[ "$rc" == "$want" ]] && python3 -m json.tool "$W/out" >/dev/null 2>&1; then
    lab_ok "$desc"
  else
    lab_not_ok "$desc" "exit $rc (want $want); stdout: $(head -c 300 "$W/out"); stderr: $(head -c 300 "$W/err")"
  fi
}

# expect_out DESC RC ERE CMD...: CMD exits RC and its stdout matches ERE.
expect_out() {
  local desc="$1" want="$2" re="$3"; shift 3
  local rc=0
  "$@" >"$W/out" 2>"$W/err" || rc=$?
  if [[ "$rc" == "$want" ]] && grep -Eq -- "$re" "$W/out"; then
    lab_ok "$desc"
  else
    lab_not_ok "$desc" "exit $rc (want $want, stdout ~ /$re/); stdout: $(head -c 300 "$W/out"); stderr: $(head -c 300 "$W/err")"
  fi
}

# The matrix, one command a line:
#   WORDS | ARGS that work | exit status of ARGS | JSON: yes, no (prints no
#   document) or help (checked once its help offers --json) | TYPED: a flag
#   with a badly typed value, and the message's ERE, or -
# Rows run in order: the first ones make what the later ones use.
MATRIX="
pool put      | workers --token-required no --policy $W/policy.json | 0 | yes | --token-required maybe~takes yes or no, got 'maybe'
pool show     | workers                                             | 0 | yes | -
pool diff     | workers --public-template $W/public.ign             | 1 | help | -
token rotate  | --pool workers --grace 0                            | 0 | yes | --grace 5x~--grace takes a duration .* got '5x'
enroll        | --hostname node-1 --pool workers --ek-public $EK/ek-rsa2048.pub | 0 | yes | -
list          | --pool workers                                      | 0 | yes | -
show          | node-1                                              | 0 | yes | -
revoke        | node-1 --reason cli-test                            | 0 | yes | -
reset         | node-1 --reason cli-test --unrevoke                 | 0 | yes | -
approve       | node-1 --reason cli-test                            | 1 | no  | -
pool remove-template | workers public                               | 0 | yes | -
audit         | --hostname node-1                                   | 0 | yes | --limit abc~--limit takes a whole number, got 'abc'
status        |                                                     | 0 | yes | -
certs         | --hostname node-1                                   | 0 | yes | --limit 1x~--limit takes a whole number, got '1x'
events        | --pending                                           | 0 | yes | --limit -~--limit takes a whole number, got '-'
csr list      | --all                                               | 0 | yes | -
csr approve   | 424242 --reason cli-test                            | 1 | no  | -
csr deny      | 424242 --reason cli-test                            | 1 | no  | -
import        | $W/missing.csv                                      | 2 | no  | -
init          | --state-dir $W/state2                               | 0 | help | -
pointer       | --pool workers --no-token --url https://127.0.0.1:1 --state-dir $RG_DIR/state | 0 | help | -
ca generate   | --cluster --state-dir $W/ca1                        | 0 | yes | --days ten~--days takes a whole number, got 'ten'
ca import     | --cluster $W/ca1/cluster-ca/ca.crt $W/ca1/cluster-ca/ca.key --state-dir $W/ca2 | 0 | yes | -
ca rotate     | --appliance status --state-dir $RG_DIR/state         | 0 | yes | -
ca bundle     | --appliance --state-dir $RG_DIR/state                | 0 | yes | -
verify-quote  | --ak-public $TPM/ak_rsa.pub --message $TPM/q_rsa.msg --signature $TPM/q_rsa.sig --pcrs $TPM/q_rsa.pcrs --nonce 00112233445566778899aabbccddeeff | 0 | yes | -
makecredential | --ek-public $TPM/ek_rsa.pub --name $TPM/ak_rsa.name --secret $W/secret --output $W/cred | 0 | yes | -
ek verify     | --roots $EK/swtpm-localca-root.pem --intermediates $EK/swtpm-localca-issuer.pem --cert $EK/ek-rsa2048.der --ek-public $EK/ek-rsa2048.pub | 0 | yes | --at soon~--at takes a whole number, got 'soon'
ek roots      | --roots $EK/swtpm-localca-root.pem --intermediates $EK/swtpm-localca-issuer.pem --leaves $EK/ek-rsa2048.der | 0 | yes | --at soon~--at takes a whole number, got 'soon'
eventlog replay | $LOG                                              | 0 | yes | -
eventlog show | $LOG                                                | 0 | yes | -
policy check  | --policy $W/policy.json --eventlog $LOG              | 0 | yes | -
"
mkdir -p "$W/ca1" "$W/ca2"

trim() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; echo "${s%"${s##*[![:space:]]}"}"; }
while IFS='|' read -r words args rc json typed; do
  words="$(trim "$words")"; [[ -n "$words" ]] || continue
  args="$(trim "$args")"; rc="$(trim "$rc")"; json="$(trim "$json")"; typed="$(trim "$typed")"
  read -ra W_ <<<"$words"; read -ra A_ <<<"$args"
  # --help: exit 0, the shape of docs/cli.md.
  expect_out "$words --help: exit 0, synopsis" 0 "^Usage: rackgatectl $words" "$C" "${W_[@]}" --help
  expect_out "$words --help: options and exit status" 0 "^Exit status: 0" "$C" "${W_[@]}" --help
  lab_expect 0 "" "help $words" "$C" help "${W_[@]}"
  # Works with --socket (and --json) after the command words and arguments;
  # with --json, stdout is one JSON document.
  if [[ "$json" == help ]] && "$C" "${W_[@]}" --help | grep -q -- '--json'; then json=yes; fi
  if [[ "$json" == yes ]]; then
    expect_json "$words ... --socket PATH --json (last): exit $rc, one JSON document" "$rc" \
      "$C" "${W_[@]}" "${A_[@]}" --socket "$S" --json
  else
    lab_expect "$rc" "" "$words ... --socket PATH (last): exit $rc" "$C" "${W_[@]}" "${A_[@]}" --socket "$S"
  fi
  # Unknown option, extra argument, wrong type: exit 2 and a message.
  lab_expect 2 "unknown option --bogus-flag" "$words --bogus-flag: exit 2, named" \
    "$C" "${W_[@]}" "${A_[@]}" --bogus-flag --socket "$S"
  lab_expect 2 "unknown option -x" "$words -x: exit 2, named" "$C" "${W_[@]}" "${A_[@]}" -x --socket "$S"
  lab_expect 2 "unexpected argument 'surplus'|give one|expected exactly one" "$words ... surplus: exit 2" \
    "$C" "${W_[@]}" "${A_[@]}" surplus --socket "$S"
  lab_expect 2 "Run 'rackgatectl $words --help' for usage" "$words: a usage error points to its help" \
    "$C" "${W_[@]}" "${A_[@]}" --bogus-flag --socket "$S"
  if [[ "$typed" != - ]]; then
    read -ra T_ <<<"${typed%%~*}"
    lab_expect 2 "${typed#*~}" "$words ${typed%%~*}: exit 2, names the flag" \
      "$C" "${W_[@]}" "${A_[@]}" "${T_[@]}" --socket "$S"
  fi
done <<<"$MATRIX"

# --- ek-cert (issue 41): online-only EK certificates -----------------------------------
for sub in urls import; do
  expect_out "ek-cert $sub --help: synopsis" 0 "^Usage: rackgatectl ek-cert $sub" "$C" ek-cert "$sub" --help
  expect_out "ek-cert $sub --help: exit status" 0 "^Exit status: 0" "$C" ek-cert "$sub" --help
  lab_expect 2 "unknown option --bogus-flag" "ek-cert $sub --bogus-flag: exit 2, named" \
    "$C" ek-cert "$sub" --bogus-flag --socket "$S"
done
lab_expect 2 "unknown ek-cert command 'url'; did you mean 'urls'" "ek-cert url: did you mean" "$C" ek-cert url
expect_out "ek-cert urls of an EK public file: Intel's and AMD's URLs" 0 \
  "^  intel https://ekop.intel.com/ekcertservice/[A-Za-z0-9_-]+%3D$" "$C" ek-cert urls "$EK/ek-rsa2048.pub"
expect_out "ek-cert urls --vendor amd: AMD's only" 0 "^  amd   https://ftpm.amd.com/pki/aia/[0-9A-F]{32}$" \
  "$C" ek-cert urls --vendor amd "$EK/ek-rsa2048.pub"
lab_expect 2 "--vendor takes intel or amd" "ek-cert urls --vendor ibm: exit 2" "$C" ek-cert urls --vendor ibm "$EK/ek-rsa2048.pub"
# Intel's EK certificate service answer (base64url DER in "certificate"), and
# the NV form (DER, then the index's 0xFF padding): ek verify takes both.
printf '{"pubhash":"x","certificate":"%s"}' "$(base64 -w0 "$EK/ek-rsa2048.der" | tr '+/' '-_')" > "$W/intel-answer.json"
{ cat "$EK/ek-rsa2048.der"; head -c 300 /dev/zero | tr '\0' '\377'; } > "$W/ek-nv-read.bin"
for f in intel-answer.json ek-nv-read.bin; do
  expect_out "ek verify --cert $f: the certificate inside verifies" 0 "^ek certificate ok" \
    "$C" ek verify --roots "$EK/swtpm-localca-root.pem" --intermediates "$EK/swtpm-localca-issuer.pem" --cert "$W/$f"
done
expect_out "ek-cert urls with no file: node-1 (enrolled by EK public) is listed" 0 "^node-1 " \
  "$C" ek-cert urls --socket "$S"
expect_json "ek-cert urls --json: one JSON document" 0 "$C" ek-cert urls --socket "$S" --json
expect_out "ek-cert import: node-1's certificate goes on record" 0 "ek-rsa2048.der: node-1: EK certificate now on record" \
  "$C" ek-cert import "$EK/ek-rsa2048.der" --socket "$S"
expect_json "ek-cert import again --json: one JSON document, unchanged" 0 \
  "$C" ek-cert import "$EK/ek-rsa2048.der" --socket "$S" --json
lab_check "... whose outcome is unchanged" grep -q '"outcome": "unchanged"' "$W/out"
lab_expect 1 "ek_cert_machine_unknown" "ek-cert import of an EK no machine has: refused, exit 1" \
  "$C" ek-cert import "$EK/ek-secp384r1.der" --socket "$S"
lab_expect 2 "" "ek-cert import of a file that is not there: exit 2" "$C" ek-cert import "$W/missing.der" --socket "$S"
lab_expect 2 "give the certificate files" "ek-cert import without files: exit 2" "$C" ek-cert import --socket "$S"
expect_out "ek roots: the swtpm root accepts the one leaf" 0 "accepts 1 of 1 leaves" \
  "$C" ek roots --roots "$EK/swtpm-localca-root.pem" --intermediates "$EK/swtpm-localca-issuer.pem" \
  --leaves "$EK/ek-rsa2048.der"
ROOT_SHA="$(openssl x509 -in "$EK/swtpm-localca-root.pem" -outform der | sha256sum | cut -d' ' -f1)"
expect_out "ek verify names the anchor the path ended at" 0 "^  anchor: .*\\(sha256 $ROOT_SHA\\)$" \
  "$C" ek verify --roots "$EK/swtpm-localca-root.pem" --intermediates "$EK/swtpm-localca-issuer.pem" \
  --allow "$ROOT_SHA:sha1" --cert "$EK/ek-rsa2048.der"
expect_out "ek roots lists the relaxation --allow grants" 0 "^  relaxations: sha1$" \
  "$C" ek roots --roots "$EK/swtpm-localca-root.pem" --allow "$ROOT_SHA:sha1"
lab_expect 2 "ek_trust_store_invalid" "ek roots --allow for no anchor: exit 2, named" \
  "$C" ek roots --roots "$EK/swtpm-localca-root.pem" --allow "$(printf 'ab%.0s' $(seq 32)):sha1"

# --- typos, global flags, help forms ------------------------------------------------
lab_expect 2 "unknown command 'lsit'; did you mean 'list'\?" "a typo'd command: did you mean" "$C" lsit
lab_check "a typo'd command does not print the whole usage" bash -c "! '$C' lsit 2>&1 | grep -q verify-quote"
lab_expect 2 "did you mean --hostname\?" "enroll --hostnme: did you mean --hostname" \
  "$C" enroll --hostnme n --pool p --socket "$S"
lab_expect 2 "unknown option -o; did you mean --json\?" "list -o json: refused, --json suggested" "$C" list -o json --socket "$S"
lab_expect 2 "unknown pool command 'putt'; did you mean 'put'\?" "pool putt: did you mean put" "$C" pool putt
lab_expect 2 "unexpected argument 'extra'" "list extra: refused" "$C" list extra --socket "$S"
expect_json "--json --socket S before the command" 0 "$C" --json --socket "$S" list
expect_json "--socket=S and --json after the command" 0 "$C" list --socket="$S" --json
expect_out "ek --help lists verify, not ek verify's help" 0 "^  verify " "$C" ek --help
lab_check "ek --help is ek's own help" bash -c "! '$C' ek --help | grep -q '^Usage: rackgatectl ek verify'"
expect_out "--help before the command" 0 "^Usage: rackgatectl pool put" "$C" --help pool put
expect_out "--version" 0 "^rackgatectl " "$C" --version
expect_json "--version --json" 0 "$C" --version --json

# --- errors that name the fix ---------------------------------------------------------
lab_expect 2 "not running or its admin socket is elsewhere.*systemctl status rackgated.*--socket" \
  "no socket: names systemctl status and --socket" "$C" list --socket "$W/none.sock"
python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$W/dead.sock"
lab_expect 2 "rackgated is not running.*systemctl start rackgated" "a socket nobody listens on: not running" \
  "$C" list --socket "$W/dead.sock"
if [[ "$(id -u)" == 0 ]] && command -v setpriv >/dev/null; then
  mkdir -m 0700 "$W/private"
  python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.close()' "$W/private/admin.sock"
  lab_expect 2 "permission denied on .*rackgate-admin group.*usermod -aG rackgate-admin" \
    "no permission: names the rackgate-admin group" \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$C" list --socket "$W/private/admin.sock"
else
  lab_expect 2 "permission denied on .*rackgate-admin group" "no permission: names the rackgate-admin group" \
    bash -c "mkdir -m 0700 '$W/private' && '$C' list --socket '$W/private/none/admin.sock'"
fi
lab_expect 2 "$W/bad.json:3:[0-9]+: " "bad JSON: FILE:LINE:COLUMN" "$C" pool put workers --settings "$W/bad.json" --socket "$S"
lab_expect 2 "$W/bad.json:3:[0-9]+: " "bad JSON policy (offline): FILE:LINE:COLUMN" \
  "$C" policy check --policy "$W/bad.json" --eventlog "$LOG"
lab_expect 2 "looks like a certificate.*use --ek-cert" "a certificate given to --ek-public: use --ek-cert" \
  "$C" enroll --hostname node-2 --pool workers --ek-public "$EK/ek-rsa2048.der" --socket "$S"
# A refusal by rackgatectl itself prints what the admin API's do (docs/cli.md,
# "Exit status"; issue 27, item 9).
lab_expect 1 "^rackgatectl: refused: ca_exists: " "ca generate into a CA: exit 1, rackgatectl: refused: ca_exists" \
  "$C" ca generate --cluster --state-dir "$W/ca1"
mkdir -p "$W/ca3"
lab_expect 2 "^rackgatectl ca: error: file_unreadable: " "ca import of files that do not exist: exit 2 (unusable input), not refused" \
  "$C" ca import --cluster "$W/none.crt" "$W/none.key" --state-dir "$W/ca3"

# --- tables that fit long names ---------------------------------------------------------
LONG=node-with-a-hostname-much-longer-than-any-column-width.rack12.example.com
lab_check "enroll a machine with a long hostname" \
  "$C" enroll --hostname "$LONG" --pool workers --ek-public "$EK/ek-ecc384.pub" --socket "$S"
lab_check "list: the columns after a long hostname stay aligned" python3 - "$C" "$S" <<'PY'
import subprocess, sys
out = subprocess.run([sys.argv[1], "list", "--socket", sys.argv[2]], capture_output=True, text=True, check=True).stdout
lines = out.splitlines()
col = lines[0].index("POOL")
assert all(len(l) > col and l[col - 2:col] == "  " and l[col] != " " for l in lines[1:]), out
PY

expect_out "pool show without NAME: a table of every pool" 0 "^POOL +TOKEN +TOKENS" "$C" pool show --socket "$S"

# --- the completion knows every command and flag the parser and help do ----------------
lab_check "the installed completion is the generated one" cmp "$COMPLETION" <("$C" completion bash)
lab_check "bash -n accepts the completion" bash -n "$COMPLETION"
lab_check "every command of --help is in the completion" python3 - "$C" "$COMPLETION" <<'PY'
import re, subprocess, sys
help_text = subprocess.run([sys.argv[1], "--help"], capture_output=True, text=True).stdout
comp = open(sys.argv[2]).read()
tops = re.search(r'compgen -W "([^"]*)"', comp).group(1).split()
missing = []
for line in help_text.splitlines():
    m = re.match(r"  ([a-z][a-z, |-]*?)(  |$)", line)
    if not m:
        continue
    parts = [p.strip() for p in m.group(1).split(",")]
    for p in parts:
        cmd = p.split()[0].split("|")[0] if p else ""
        if cmd and cmd not in tops:
            missing.append(cmd)
assert not missing, missing
PY
while IFS=$'\t' read -r words flags; do
  read -ra W_ <<<"$words"
  for f in $flags; do
    lab_check "completion: $words $f is known to the parser" \
      bash -c "! '$C' $words $f --socket '$W/none.sock' 2>&1 | grep -q 'unknown option'"
    lab_check "completion: $words $f is in its help" bash -c "'$C' $words --help | grep -qE -- '$f([^a-z-]|\$)'"
  done
  lab_check "completion: $words --help lists only flags the completion offers" python3 - "$C" "$words" "$flags" <<'PY'
import re, subprocess, sys
out = subprocess.run([sys.argv[1], *sys.argv[2].split(), "--help"], capture_output=True, text=True).stdout
opts = out.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0] if "\nOptions:\n" in out else ""
listed = set(re.findall(r"^  (--[a-z-]+)", opts, re.M)) - {"--json", "--socket", "--help"}
assert listed <= set(sys.argv[3].split()), listed - set(sys.argv[3].split())
PY
done < <("$C" completion table)

rg_stop
lab_finish
