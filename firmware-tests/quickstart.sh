#!/usr/bin/env bash
# quickstart.sh — runs docs/quickstart.md so that it cannot rot: every
# ```sh block marked `<!-- quickstart -->`, in the doc's order, each in its
# own bash (-eu -o pipefail) in one working directory, and checks each
# output the doc shows after `<!-- quickstart: output -->` (`<...>` is any
# text, runs of spaces count as one, lines in order, others may come
# between). The block marked `<!-- quickstart: machine -->` is the
# machine's first boot: a swtpm machine boots with the pointer config the
# doc made, through the real Ignition and the real agent run as the shipped
# unit runs it (boot-lib.sh). It ends with the doc's machine `joined`.
#
# The doc is written for a Debian 12 host with the package installed; this
# test runs it against the build tree, as the current user, with nothing
# installed. The mapping, all of it:
#   - the appliance's paths /etc/rackgate/{rackgated.json,ek-roots,
#     ek-intermediates}, /var/lib/rackgate and /run/rackgate lie under a
#     temp dir ($ROOT); the appliance's address 10.12.0.2 is 127.0.0.1 and
#     its port 22623 a free port (text substitutions, before running a block
#     and on the outputs it should print). The machine's own paths
#     (/etc/rackgate/ca.pem in the templates) are not the appliance's and
#     stay.
#   - `sudo CMD` and `sudo -u rackgate CMD` run CMD as the current user;
#     `chown rackgate:rackgate` gives to the current user; `usermod -aG
#     rackgate-admin USER` does nothing (the current user runs rackgated).
#   - `apt install ./rackgate_*.deb` puts the built rackgated and
#     rackgatectl on PATH and applies systemd/rackgate.tmpfiles under
#     $ROOT, as the package's postinst does.
#   - `systemctl enable --now rackgated` runs rackgated as the built unit's
#     ExecStart= says (the config in /etc/rackgate/rackgated.json), in the
#     background, after making its RuntimeDirectory=, and returns once it is
#     ready (Type=notify).
#   - rackgatectl's default admin socket (/run/rackgate/admin.sock) is
#     $ROOT/run/rackgate/admin.sock (RACKGATE_ADMIN_SOCKET).
#   - the operator's files the doc starts from (its "You need") are made
#     here: tpm-roots/ and tpm-intermediates/ (the lab's EK CA),
#     cluster-ca.{crt,key} (openssl), node-1-ek.der (the machine's EK
#     certificate, as its vendor ships it).
# Usage: quickstart.sh QUICKSTART_MD RACKGATE_AGENT RACKGATED RACKGATECTL
#          RACKGATE_AGENT_UNIT RACKGATED_UNIT TMPFILES
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
USAGE="usage: quickstart.sh QUICKSTART_MD RACKGATE_AGENT RACKGATED RACKGATECTL RACKGATE_AGENT_UNIT RACKGATED_UNIT TMPFILES SYSCONFDIR"
DOC="$(realpath "${1:?$USAGE}")"
AGENT="$(realpath "${2:?$USAGE}")"
RACKGATED="$(realpath "${3:?$USAGE}")"
RACKGATECTL="$(realpath "${4:?$USAGE}")"
AGENT_UNIT="$(realpath "${5:?$USAGE}")"
RACKGATED_UNIT="$(realpath "${6:?$USAGE}")"
TMPFILES="$(realpath "${7:?$USAGE}")"
# The build's sysconfdir: /etc in the package (prefix /usr), which the doc
# shows; <prefix>/etc in a build under another prefix.
SYSCONFDIR="${8:?$USAGE}"
# The machine of the doc: its hostname, EK certificate file and address.
NODE=node-1
NODE_EK=node-1-ek.der
NODE_IP=10.12.1.17
# shellcheck source=lab.sh
source "$HERE/lab.sh"
# shellcheck source=../daemon/tests/appliance.sh
source "$HERE/../daemon/tests/appliance.sh"
# shellcheck source=boot-lib.sh
source "$HERE/boot-lib.sh"

lab_skip_unless_tools
boot_skip_unless_ignition
lab_init quickstart
lab_ca lab
boot_init "$AGENT" "$AGENT_UNIT"

ROOT="$LAB_DIR/root"   # the appliance's /
WORK="$LAB_DIR/work"   # the operator's directory
BIN="$LAB_DIR/bin"     # what the package puts on PATH
STEPS="$LAB_DIR/steps"
mkdir -p "$ROOT" "$WORK" "$BIN" "$STEPS"
PORT="$(lab_python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"

# ------------------------------------------------------------ the mapping ----

# map_text: the doc's text (stdin) as this test runs it (stdout).
map_text() {
  sed -e "s#/etc/rackgate/rackgated\.json#$ROOT/etc/rackgate/rackgated.json#g" \
      -e "s#/etc/rackgate/ek-roots#$ROOT/etc/rackgate/ek-roots#g" \
      -e "s#/etc/rackgate/ek-intermediates#$ROOT/etc/rackgate/ek-intermediates#g" \
      -e "s#/var/lib/rackgate#$ROOT/var/lib/rackgate#g" \
      -e "s#/run/rackgate#$ROOT/run/rackgate#g" \
      -e "s#10\.12\.0\.2#127.0.0.1#g" \
      -e "s#22623#$PORT#g"
}

# The fakes every block runs with (sourced first).
cat > "$LAB_DIR/fakes.sh" <<FAKES
export PATH="$BIN:\$PATH"
export RACKGATE_ADMIN_SOCKET="$ROOT/run/rackgate/admin.sock"
USER="\${USER:-\$(id -un)}"
qs_fail() { echo "quickstart.sh: \$*" >&2; return 2; }
sudo() {
  if [[ "\$1" == -u ]]; then
    [[ "\$2" == rackgate ]] || { qs_fail "sudo -u \$2: only the rackgate user is mapped"; return 2; }
    shift 2
  fi
  "\$@"
}
apt() {
  [[ "\$*" == "install ./rackgate_*.deb curl" ]] || { qs_fail "apt \$*: only 'apt install ./rackgate_*.deb curl' is mapped"; return 2; }
  ln -sf "$RACKGATED" "$BIN/rackgated"
  ln -sf "$RACKGATECTL" "$BIN/rackgatectl"
  # The postinst's systemd-tmpfiles --create: the package's directories.
  local type path mode rest
  while read -r type path mode rest; do
    [[ "\$type" == d ]] || continue
    mkdir -p "$ROOT\$path" && chmod "\$mode" "$ROOT\$path"
  done < <(grep -v '^#' "$TMPFILES")
}
usermod() {
  [[ "\$1" == -aG && "\$2" == rackgate-admin && -n "\${3:-}" ]] || { qs_fail "usermod \$*: only '-aG rackgate-admin USER' is mapped"; return 2; }
}
chown() {
  local a=() x
  for x in "\$@"; do [[ "\$x" == rackgate:rackgate ]] && x="\$(id -un):\$(id -gn)"; a+=("\$x"); done
  command chown "\${a[@]}"
}
systemctl() {
  [[ "\$*" == "enable --now rackgated" ]] || { qs_fail "systemctl \$*: only 'enable --now rackgated' is mapped"; return 2; }
  mkdir -p "$ROOT/run/rackgate"
  "$RACKGATED" --config "$ROOT/etc/rackgate/rackgated.json" </dev/null >>"$LAB_DIR/rackgated.log" 2>&1 &
  local pid=\$! deadline=\$(( \$(date +%s) + $(lab_seconds 10) ))
  echo "\$pid" >> "$LAB_DIR/pids"
  echo "\$pid" > "$LAB_DIR/rackgated.pid"
  while (( \$(date +%s) < deadline )); do
    curl -sf -o /dev/null --cacert "$ROOT/var/lib/rackgate/ca/ca.crt" "https://127.0.0.1:$PORT/readyz" && return 0
    kill -0 "\$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "rackgated did not become ready:" >&2; tail -n 20 "$LAB_DIR/rackgated.log" >&2; return 1
}
FAKES

# The operator's files of the doc's "You need".
fixtures() {
  mkdir -p "$WORK/tpm-roots" "$WORK/tpm-intermediates"
  cp "$(lab_ca_root lab)" "$WORK/tpm-roots/lab.pem"
  cp "$(lab_ca_intermediate lab)" "$WORK/tpm-intermediates/lab.pem"
  cp "$(boot_ek_cert m1)" "$WORK/$NODE_EK"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=kubernetes \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature \
    -keyout "$WORK/cluster-ca.key" -out "$WORK/cluster-ca.crt" 2>/dev/null
  chmod 600 "$WORK/cluster-ca.key"
}

# ------------------------------------------------------------ the doc -------

# The doc's blocks, and the checks of their outputs: quickstart_blocks.py
# (shared with systemd/install_real_test.sh, which runs them on a real
# Debian 12 under systemd).
extract() { lab_python "$HERE/quickstart_blocks.py" split "$DOC" "$STEPS"; }
expect_output() { lab_python "$HERE/quickstart_blocks.py" expect "$1" "$2"; }

# -------------------------------------------------------------- the run ----

# The unit the doc starts runs the config the doc writes (the doc's /etc is
# the build's sysconfdir: the same path in the package).
if grep -Fxq "$(grep '^ExecStart=' "$RACKGATED_UNIT" | sed 's/ --config .*//') --config $SYSCONFDIR/rackgate/rackgated.json" "$RACKGATED_UNIT"; then
  lab_ok "rackgated.service runs rackgated --config /etc/rackgate/rackgated.json (here $SYSCONFDIR), the file the quickstart writes"
else
  lab_not_ok "rackgated.service runs rackgated --config $SYSCONFDIR/rackgate/rackgated.json" "$(grep '^ExecStart=' "$RACKGATED_UNIT")"
fi

if ! err="$(extract 2>&1)"; then
  lab_not_ok "docs/quickstart.md splits into quickstart blocks" "$err"
  lab_finish
fi
kinds=("$STEPS"/*.kind)
lab_ok "docs/quickstart.md: ${#kinds[@]} quickstart blocks"

# Every program the appliance's blocks run is on a fresh Debian 12 (a
# debootstrap root with sudo), or comes with the packages, or an earlier
# block's `apt install` names it (issue 32: step 6's curl was none of these).
tools_named() { lab_python "$HERE/quickstart_blocks.py" tools "$STEPS"; }
if unnamed="$(tools_named)"; then
  lab_ok "the quickstart installs every tool its blocks run that a fresh Debian 12 lacks"
else
  lab_not_ok "the quickstart installs every tool its blocks run that a fresh Debian 12 lacks" "$unnamed"
fi

boot_new_machine m1 "$NODE_IP"
fixtures

for kind_file in "$STEPS"/*.kind; do
  n="${kind_file%.kind}"
  title="$(cat "$n.title")"
  first="$(head -n 1 "$n.sh")"
  if [[ "$(cat "$kind_file")" == machine ]]; then
    # The machine's first boot with the pointer config the block names.
    if ! grep -q 'pointer\.ign' "$n.sh"; then
      lab_not_ok "$title: the machine boots with pointer.ign" "the block does not name pointer.ign: $first"
      break
    fi
    rc=0
    boot_run_ignition "$(boot_root m1)" "$(lab_dir m1)/ign" "$WORK/pointer.ign" "$(lab_dir m1)/ignition.log" || rc=100
    (( rc == 0 )) && { boot_unit m1 2>/dev/null || rc=$?; }
    if (( rc == 0 )); then
      lab_ok "$title: the machine booted with pointer.ign: Ignition, then rackgate-agent.service (attest, config, CSRs)"
    else
      lab_not_ok "$title: the machine boots with pointer.ign (exit $rc; 100 is Ignition)" \
        "$(tail -n 8 "$(lab_dir m1)/ignition.log" 2>/dev/null; tail -n 8 "$(lab_dir m1)/agent.log" 2>/dev/null)"
      break
    fi
    continue
  fi
  { echo "source '$LAB_DIR/fakes.sh'"; map_text < "$n.sh"; } > "$n.run"
  rc=0
  (cd "$WORK" && bash -eu -o pipefail "$n.run" </dev/null >"$n.out" 2>&1) || rc=$?
  if (( rc != 0 )); then
    lab_not_ok "$title: $first" "exit $rc; the output:"$'\n'"$(tail -n 15 "$n.out")"
    if [[ -f "$LAB_DIR/rackgated.log" ]]; then tail -n 10 "$LAB_DIR/rackgated.log" | sed 's/^/#   rackgated: /'; fi
    break
  fi
  lab_ok "$title: $first"
  if [[ -s "$n.expect" ]]; then
    map_text < "$n.expect" > "$n.expect.mapped"
    if why="$(expect_output "$n.expect.mapped" "$n.out")"; then
      lab_ok "$title: the output the doc shows"
    else
      lab_not_ok "$title: the output the doc shows" "$why"$'\n'"the output:"$'\n'"$(head -n 20 "$n.out")"
    fi
  fi
done

# The kubelet certificates the machine got are signed by the cluster CA
# the doc imported.
for kind in client server; do
  pem="$(boot_root m1)/var/lib/kubelet/pki/kubelet-$kind-current.pem"
  if out="$(openssl verify -CAfile "$WORK/cluster-ca.crt" "$pem" 2>&1)"; then
    lab_ok "the machine's kubelet $kind certificate is signed by the cluster CA of step 5"
  else
    lab_not_ok "the machine's kubelet $kind certificate is signed by the cluster CA of step 5" "$out"
  fi
done

# Where the doc ends: the machine is joined.
state="$(RACKGATE_ADMIN_SOCKET="$ROOT/run/rackgate/admin.sock" "$RACKGATECTL" show "$NODE" --json 2>/dev/null |
  lab_python -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null || echo '?')"
if [[ "$state" == joined ]]; then
  lab_ok "$NODE is joined"
else
  lab_not_ok "$NODE is joined" "state: $state"
fi
lab_finish
