#!/usr/bin/env bash
# Integration: the agent bundle's memory and freshness on a real rackgated
# (docs/performance.md, "Memory per answer"; docs/nodes.md, "The bundle's
# cache"). 64 clients send GET /v1/agent/initramfs over TLS, read the
# answer's headers and then nothing more: rackgated's peak RSS grows by far
# less than one bundle per reader (issue 40: every answer held two private
# copies, 16 such readers took it from 89 to 334 MiB). Then the file is
# edited in place, same size, its mtime put back: the next GET serves the
# new bytes with the new digest as ETag.
#   bundle_memory.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
RACKGATED="$(realpath "$1")"; RACKGATECTL="$(realpath "$2")"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
for t in curl openssl; do command -v "$t" >/dev/null || lab_skip "$t missing"; done
[[ -r /proc/self/status ]] && grep -q '^VmHWM:' /proc/self/status || lab_skip "no VmHWM in /proc/PID/status"
lab_init bundle-memory

READERS=64
BUNDLE_BYTES=$((4 << 20))
# The bound: peak RSS growth with 64 readers under 4 bundles' worth (16 MiB).
# One private copy per reader would be 64 bundles (256 MiB), two 512 MiB;
# what each connection costs besides (MHD's connection pool, GnuTLS's
# record buffers) is tens of KiB, whatever the bundle's size.
MAX_GROWTH_BYTES=$((4 * BUNDLE_BYTES))

rg_init "$RACKGATED" "$RACKGATECTL"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bundle test EK root" \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
  -keyout "$RG_DIR/roots/root.key" -out "$RG_DIR/roots/root.pem" -days 30 2>/dev/null
rm -f "$RG_DIR/roots/root.key"
BUNDLE="$LAB_DIR/agent-initramfs.cpio.zst"
head -c "$BUNDLE_BYTES" /dev/urandom > "$BUNDLE"
rg_config agent_bundle "\"$BUNDLE\""
# Every reader comes from 127.0.0.1.
rg_config per_client_connections $((READERS * 2))
rg_config log_level '"warn"'
rg_start

served="$LAB_DIR/served"
lab_check "GET /v1/agent/initramfs: 200" test "$(rg_get /v1/agent/initramfs "$served")" == 200
lab_check "the served bytes are the file's" cmp -s "$served" "$BUNDLE"

# The readers: TLS handshake, the GET, the answer's headers (so the answer
# is queued), then nothing read. Prints the figures as KEY=VALUE (KiB).
readers="$LAB_DIR/readers.out"
lab_check_shown "$READERS readers that read only the headers each got 200" \
  lab_python - "$RG_PID" "$RG_PORT" "$RG_DIR/state/ca/ca.crt" "$READERS" "$RG_MAX_TIME" "$readers" <<'PY'
import socket, ssl, sys
pid, port, ca, n, timeout, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]

def status(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit(f"no {field} for {pid}")

ctx = ssl.create_default_context(cafile=ca)
before_rss, before_hwm = status("VmRSS"), status("VmHWM")
conns = []
for i in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=timeout), server_hostname="127.0.0.1")
    s.sendall(b"GET /v1/agent/initramfs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    conns.append(s)
for i, s in enumerate(conns):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit(f"reader {i}: connection closed before the headers")
        head += chunk
    line = head.split(b"\r\n", 1)[0]
    if not line.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"reader {i}: {line!r}")
after_rss, after_hwm = status("VmRSS"), status("VmHWM")
with open(out, "w") as f:
    f.write(f"before_rss={before_rss}\nbefore_hwm={before_hwm}\nafter_rss={after_rss}\nafter_hwm={after_hwm}\n")
for s in conns:
    s.close()
PY
if [[ -s "$readers" ]]; then
  # shellcheck disable=SC1090
  source "$readers"
  growth_kib=$(( after_hwm - before_hwm ))
  echo "# rackgated with $READERS readers of a $((BUNDLE_BYTES >> 20)) MiB bundle that read nothing:" \
    "VmRSS ${before_rss} -> ${after_rss} KiB, peak (VmHWM) ${before_hwm} -> ${after_hwm} KiB," \
    "growth ${growth_kib} KiB (bound $((MAX_GROWTH_BYTES >> 10)) KiB; one copy per reader: $((READERS * BUNDLE_BYTES >> 10)) KiB)"
  lab_check "peak RSS grew by ${growth_kib} KiB: under 4 bundles ($((MAX_GROWTH_BYTES >> 10)) KiB), not one per reader" \
    test "$growth_kib" -lt $((MAX_GROWTH_BYTES >> 10))
else
  lab_not_ok "no figures from the readers"
fi
lab_check "rackgated still answers after the readers left" test "$(rg_get /readyz /dev/null)" == 200

# Edited in place: same inode, same size, mtime put back (issue 40, item 10).
lab_python - "$BUNDLE" <<'PY'
import os, sys
p = sys.argv[1]
st = os.stat(p)
with open(p, "r+b") as f:
    f.write(os.urandom(st.st_size))
os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
after = os.stat(p)
assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)
PY
headers="$LAB_DIR/headers"
code="$(curl -sS -D "$headers" -o "$served" -w '%{http_code}' --cacert "$RG_DIR/state/ca/ca.crt" \
  --max-time "$RG_MAX_TIME" "$(rg_url /v1/agent/initramfs)" || echo 000)"
lab_check "after an in-place edit (same size, mtime put back): 200" test "$code" == 200
lab_check "the served bytes are the edited file's" cmp -s "$served" "$BUNDLE"
lab_check "its ETag is the edited file's SHA-256" \
  grep -qi "^etag: \"$(sha256sum "$BUNDLE" | cut -d' ' -f1)\"" "$headers"
lab_finish
