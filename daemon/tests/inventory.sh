#!/usr/bin/env bash
# Integration: enroll and import as an operator uses them (docs/inventory.md),
# rackgatectl against a real rackgated on loopback. Re-enroll keeps what it is
# not told to change (issue 15's data-loss case); CSV with quotes, a BOM and
# CRLF; true line numbers; duplicates refused before anything is stored; bad
# addresses; --dry-run stores nothing; the counts.
#   inventory.sh RACKGATED RACKGATECTL
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../../firmware-tests/lab.sh"
source "$HERE/appliance.sh"
lab_skip_unless_tools
command -v curl >/dev/null || lab_skip "curl missing"
lab_init inventory
trap lab_cleanup EXIT
rg_init "$1" "$2"
lab_ca lab

# Five EK certificates from three simulated TPMs (no swtpm needs to run: the
# daemon only checks the certificates against the lab's manufacturer CA).
lab_machine_create m1 lab
lab_machine_create m2 lab
lab_machine_create m3 lab
M1="$(lab_dir m1)"; M2="$(lab_dir m2)"; M3="$(lab_dir m3)"
rg_trust lab
rg_start
INV="$LAB_DIR/inventory"; mkdir -p "$INV"
cp "$M1/ek-rsa.der" "$INV/a.der"; cp "$M1/ek-ecc384.der" "$INV/b.der"
cp "$M2/ek-rsa.der" "$INV/c.der"; cp "$M2/ek-ecc384.der" "$INV/d.der"
cp "$M3/ek-rsa.der" "$INV/e.der"  # never enrolled

# jq-like checks with Python: jcheck FILE EXPR (EXPR over `j`, the file's JSON).
jcheck() { lab_python -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2"; }
# out_has DESC ERE CMD...: CMD exits 0 and its stdout matches ERE.
out_has() {
  local desc="$1" ere="$2"; shift 2
  local out; out="$("$@" 2>&1)" && grep -Eq -- "$ere" <<<"$out" && { lab_ok "$desc"; return; }
  lab_not_ok "$desc" "output: $(head -c 600 <<<"$out")"
}
show_json() { rg_ctl show "$1" --json > "$LAB_DIR/show.json"; }

# --- enroll keeps what it is not told to change ---------------------------------

lab_check "enroll node-1 with addresses and template values" \
  rg_ctl enroll --hostname node-1 --pool default --ek-cert "$INV/a.der" \
    --address InternalIP=10.0.0.5 --var rack=r1 --var role=db
out_has "re-enroll with nothing to change says unchanged" '^node-1: unchanged$' \
  rg_ctl enroll --hostname node-1 --ek-cert "$INV/a.der"
show_json node-1
lab_check "issue 15: re-enroll without --address keeps the addresses" \
  jcheck "$LAB_DIR/show.json" '{"kind":"InternalIP","value":"10.0.0.5"} in j["addresses"]'
lab_check "issue 15: re-enroll without --var keeps the template values" \
  jcheck "$LAB_DIR/show.json" 'j["vars"] == {"rack":"r1","role":"db"} and j["pool"] == "default"'
out_has "a new --address is added and the answer says so" \
  '^node-1: addresses \+InternalIP=10\.0\.0\.6; vars unchanged$' \
  rg_ctl enroll --hostname node-1 --ek-cert "$INV/a.der" --address InternalIP=10.0.0.6
show_json node-1
lab_check "both addresses are there" jcheck "$LAB_DIR/show.json" \
  '[a["value"] for a in j["addresses"] if a["kind"] == "InternalIP"] == ["10.0.0.5", "10.0.0.6"]'
out_has "--replace-addresses replaces the list" 'addresses \+InternalIP=10\.0\.0\.7 -InternalIP=10\.0\.0\.5 -InternalIP=10\.0\.0\.6' \
  rg_ctl enroll --hostname node-1 --ek-cert "$INV/a.der" --replace-addresses --address InternalIP=10.0.0.7
out_has "--var merges and --unset-var removes one" '^node-1: addresses unchanged; vars ~rack -role$|^node-1: vars ~rack -role; addresses unchanged$' \
  rg_ctl enroll --hostname node-1 --ek-cert "$INV/a.der" --var rack=r9 --unset-var role
show_json node-1
lab_check "the values are merged" jcheck "$LAB_DIR/show.json" 'j["vars"] == {"rack":"r9"}'
rg_ctl enroll --hostname node-1 --ek-cert "$INV/a.der" --json > "$LAB_DIR/enroll.json"
lab_check "--json carries the outcome and the changes" \
  jcheck "$LAB_DIR/enroll.json" 'j["outcome"] == "unchanged" and j["changes"] == [] and j["hostname"] == "node-1"'

lab_expect 1 'ek_in_use.*enrolled as node-1 \(state enrolled\).*rackgatectl delete node-1.*rackgatectl rename node-1 node-9' \
  "ek_in_use names the holder and the fix" rg_ctl enroll --hostname node-9 --pool default --ek-cert "$INV/a.der"
lab_expect 1 'field_invalid.*InternalIP=10\.0\.0\.300.*IPv4 or IPv6' "an address that is no IP is refused and named" \
  rg_ctl enroll --hostname node-9 --pool default --ek-cert "$INV/d.der" --address InternalIP=10.0.0.300
lab_expect 1 'field_missing.*needs a pool' "a new machine without --pool is refused" \
  rg_ctl enroll --hostname node-9 --ek-cert "$INV/d.der"
lab_check_fails "neither refusal enrolled node-9" rg_ctl show node-9

# --- import: CSV with a BOM, CRLF and quoted fields ---------------------------------

# Columns in another order than documented (the header names them); a quoted
# value holding a comma and a doubled quote; a quoted address list.
printf '\xef\xbb\xbfpool,hostname,addresses,ek_certificate,vars\r\n' > "$INV/good.csv"
printf 'default,node-2,"InternalIP=10.0.1.2;InternalDNS=node-2.rack.example",b.der,"rack=r2;note=a,b ""x"""\r\n' >> "$INV/good.csv"
printf 'default,node-3,InternalIP=10.0.1.3,c.der,rack=r3\r\n' >> "$INV/good.csv"
rg_ctl list --json > "$LAB_DIR/list.before"
out_has "--dry-run reports the counts" '^dry run, nothing stored: created 2, updated 0, unchanged 0$' \
  rg_ctl import --dry-run "$INV/good.csv"
rg_ctl list --json > "$LAB_DIR/list.after"
lab_check "--dry-run leaves the machine list unchanged" cmp -s "$LAB_DIR/list.before" "$LAB_DIR/list.after"
out_has "import counts what it created" '^created 2, updated 0, unchanged 0$' rg_ctl import "$INV/good.csv"
show_json node-2
lab_check "a quoted field keeps its comma and quote" jcheck "$LAB_DIR/show.json" \
  'j["vars"] == {"rack":"r2","note":"a,b \"x\""} and len(j["addresses"]) == 2'
out_has "the same inventory again is unchanged" '^created 0, updated 0, unchanged 2$' rg_ctl import "$INV/good.csv"
rg_ctl import --json "$INV/good.csv" > "$LAB_DIR/import.json"
lab_check "--json gives each row's outcome and line" jcheck "$LAB_DIR/import.json" \
  '[(r["where"], r["hostname"], r["outcome"]) for r in j["rows"]] == [("line 2","node-2","unchanged"),("line 3","node-3","unchanged")]'

# An import row is the machine's desired state: node-3's address is the row's.
printf 'hostname,pool,ek_certificate,addresses\nnode-3,default,c.der,InternalIP=10.0.1.33\nnode-4,default,d.der,\n' > "$INV/update.csv"
rg_ctl import "$INV/update.csv" > "$LAB_DIR/update.out" 2>&1 || true
lab_check "an updated row is listed with its changes" \
  grep -Eq '^line 2 node-3: addresses \+InternalIP=10\.0\.1\.33 -InternalIP=10\.0\.1\.3$' "$LAB_DIR/update.out"
lab_check "the counts of a mixed import" grep -q '^created 1, updated 1, unchanged 0$' "$LAB_DIR/update.out"
show_json node-3
lab_check "a file without a vars column keeps the machine's vars" jcheck "$LAB_DIR/show.json" 'j["vars"] == {"rack":"r3"}'

# --- true line numbers, duplicates, bad addresses: nothing stored ------------------

rg_ctl list --json > "$LAB_DIR/list.before"
# Line 2's quoted field runs over two lines: the next row starts on line 4.
printf 'hostname,pool,ek_certificate,addresses,vars\nnode-2,default,b.der,,"note=two\nlines"\nnode-3,default,c.der,InternalIP=10.0.0.300,\n' > "$INV/lines.csv"
lab_expect 1 'line 4 \(node-3\).*InternalIP=10\.0\.0\.300' "a bad address is refused with its physical line" \
  rg_ctl import "$INV/lines.csv"
printf 'hostname,pool,ek_certificate,addresses\nnode-7,default,d.der,\nnode-7,default,a.der,\n' > "$INV/dup.csv"
lab_expect 1 'import_duplicate.*line 2 and line 3 both enroll hostname node-7' \
  "a hostname twice in the file is import_duplicate, naming both lines" rg_ctl import "$INV/dup.csv"
lab_check_fails "a duplicated hostname is never reported as ek_conflict" \
  bash -c "'$RG_CTL' --socket '$RG_DIR/admin.sock' import '$INV/dup.csv' 2>&1 | grep -q ek_conflict"
printf 'hostname,pool,ek_certificate,addresses\nnode-2,default,b.der,\nnode-8,default,b.der,\n' > "$INV/dupek.csv"
lab_expect 1 'import_duplicate.*line 2 \(node-2\) and line 3 \(node-8\) carry the same EK' \
  "an EK twice in the file is import_duplicate" rg_ctl import "$INV/dupek.csv"
printf 'hostname,pool,ek_certificate,addresses\nnode-1,default,e.der,\n' > "$INV/conflict.csv"
lab_expect 1 'ek_conflict.*line 2 \(node-1\)' "the same hostname with another EK is ek_conflict" \
  rg_ctl import "$INV/conflict.csv"
printf 'hostname,pool,ek_certificate,addresses\nnode-5,default,a.der,InternalIP=10.0.0.1,extra\n' > "$INV/cols.csv"
lab_expect 2 'line 2 \(node-5\): 5 fields, but the header names 4' "a row with a stray comma names its line" \
  rg_ctl import "$INV/cols.csv"
cat > "$INV/bad.json" <<'JSON'
{"machines": [
  {"hostname": "node-4", "pool": "default", "ek_certificate": "d.der"},
  {"hostname": "node-3", "pool": "default", "ek_certificate": "c.der",
   "addresses": ["InternalDNS=bad_name"]}
]}
JSON
lab_expect 1 'row 1 \(line 3\) \(node-3\).*InternalDNS=bad_name.*DNS name' "a JSON row is named by index and line" \
  rg_ctl import "$INV/bad.json"
rg_ctl list --json > "$LAB_DIR/list.after"
lab_check "no refused import stored anything" cmp -s "$LAB_DIR/list.before" "$LAB_DIR/list.after"

lab_finish
