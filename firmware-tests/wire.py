#!/usr/bin/env python3
"""wire.py: builds and reads the attestation protocol's JSON bodies
(docs/protocol.md) for lab and integration tests that drive rackgated with
tpm2-tools as the client. Standard library only.

  wire.py challenge --ek-public EK.pub --ak-public AK.pub [--ek-cert EK.der]
  wire.py evidence --session ID --secret FILE --quote Q.msg --signature Q.sig
                   --pcr-values Q.pcrs --selection sha256:0,1 [--event-log FILE]
  wire.py get FILE KEY [--b64-out OUT]   print a field (or decode base64 to OUT)
  wire.py set FILE KEY JSON_VALUE        rewrite one field (for refusal tests)
"""
import argparse
import base64
import json
import sys

DIGEST_SIZE = {"sha1": 20, "sha256": 32, "sha384": 48, "sha512": 64}


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def parse_selection(text):
    out = []
    for part in text.split("+"):
        bank, pcrs = part.split(":")
        out.append((bank, sorted({int(p) for p in pcrs.split(",")})))
    return out


def pcr_values(path, selection):
    """Reads a `tpm2_quote -F values` file: digests in selection order."""
    with open(path, "rb") as f:
        data = f.read()
    out, off = {}, 0
    for bank, pcrs in selection:
        size = DIGEST_SIZE[bank]
        for pcr in pcrs:
            out.setdefault(bank, {})[str(pcr)] = data[off:off + size].hex()
            off += size
    if off != len(data):
        sys.exit(f"wire.py: {path} has {len(data)} bytes, selection needs {off}")
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("challenge")
    c.add_argument("--ek-public", required=True)
    c.add_argument("--ak-public", required=True)
    c.add_argument("--ek-cert")
    e = sub.add_parser("evidence")
    for a in ("--session", "--secret", "--quote", "--signature", "--pcr-values", "--selection"):
        e.add_argument(a, required=True)
    e.add_argument("--event-log")
    g = sub.add_parser("get")
    g.add_argument("file")
    g.add_argument("key")
    g.add_argument("--b64-out")
    s = sub.add_parser("set")
    s.add_argument("file")
    s.add_argument("key")
    s.add_argument("value")
    a = p.parse_args()

    if a.cmd == "challenge":
        body = {"ek_public": b64(a.ek_public), "ak_public": b64(a.ak_public)}
        if a.ek_cert:
            body["ek_certificate"] = b64(a.ek_cert)
        print(json.dumps(body))
    elif a.cmd == "evidence":
        with open(a.secret, "rb") as f:
            secret = f.read().hex()
        body = {"session": a.session, "secret": secret, "quote": b64(a.quote),
                "signature": b64(a.signature),
                "pcrs": pcr_values(a.pcr_values, parse_selection(a.selection))}
        if a.event_log:
            body["event_log"] = b64(a.event_log)
        print(json.dumps(body))
    elif a.cmd == "get":
        with open(a.file) as f:
            doc = json.load(f)
        v = doc
        for k in a.key.split("."):
            v = v[k]
        if a.b64_out:
            with open(a.b64_out, "wb") as f:
                f.write(base64.b64decode(v))
        else:
            print(v if isinstance(v, str) else json.dumps(v))
    elif a.cmd == "set":
        with open(a.file) as f:
            doc = json.load(f)
        doc[a.key] = json.loads(a.value)
        with open(a.file, "w") as f:
            json.dump(doc, f)


if __name__ == "__main__":
    main()
