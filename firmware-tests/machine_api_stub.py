#!/usr/bin/env python3
"""machine_api_stub.py: a stand-in for the two machine endpoints rackgated
does not serve yet (GET /v1/machine/config, POST /v1/machine/csr), so the lab
can drive rackgate-agent's config and csr steps end to end. It sits in front
of a real rackgated: the attestation endpoints and GET /v1/machine are passed
through unchanged, and a bearer token is accepted exactly when rackgated
accepts it. Remove it once rackgated serves both endpoints (docs/agent.md).
Standard library plus the openssl command (it signs CSRs with a lab CA).

  machine_api_stub.py --upstream https://127.0.0.1:P --upstream-ca CA.crt
      --cert TLS.crt --key TLS.key --cluster-ca CA.crt --cluster-ca-key CA.key
      --config IGNITION.json --record DIR --port-file FILE [--csr-busy-once]

Every request is recorded as DIR/NNN-<name>.json ({"path", "headers", "body",
"status", "answer"}, bodies that are JSON kept as JSON) for the test to inspect.
"""
import argparse
import datetime
import http.server
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ARGS = None
LOCK = threading.Lock()
COUNTER = [0]
BUSY_ONCE = [False]


def parsed(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def record(name, path, headers, body, status, answer):
    # JSON bodies are kept as JSON, so a test can read their fields.
    body, answer = parsed(body), parsed(answer)
    with LOCK:
        COUNTER[0] += 1
        n = COUNTER[0]
    doc = {"path": path, "headers": headers, "body": body, "status": status, "answer": answer}
    with open(os.path.join(ARGS.record, f"{n:03d}-{name}.json"), "w") as f:
        json.dump(doc, f)


def upstream(method, path, body, headers):
    ctx = ssl.create_default_context(cafile=ARGS.upstream_ca)
    req = urllib.request.Request(ARGS.upstream + path, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=30) as r:
            return r.status, r.read(), r.headers.get("Retry-After")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Retry-After")


def sign_csr(csr_pem, serving):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "csr.pem"), "w") as f:
            f.write(csr_pem)
        cmd = ["openssl", "x509", "-req", "-in", os.path.join(d, "csr.pem"), "-CA", ARGS.cluster_ca,
               "-CAkey", ARGS.cluster_ca_key, "-set_serial", str(COUNTER[0] + 1000), "-days", "1",
               "-out", os.path.join(d, "cert.pem")]
        if serving:
            cmd += ["-copy_extensions", "copy"]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(os.path.join(d, "cert.pem")) as f:
            cert = f.read()
        end = subprocess.run(["openssl", "x509", "-noout", "-enddate", "-dateopt", "iso_8601"],
                             input=cert, capture_output=True, text=True, check=True).stdout
    when = datetime.datetime.strptime(end.strip().split("=", 1)[1], "%Y-%m-%d %H:%M:%SZ")
    return cert, int(when.replace(tzinfo=datetime.timezone.utc).timestamp())


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the records are the log
        pass

    def reply(self, status, body, retry_after=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if retry_after:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(data)
        return data

    def body(self):
        n = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(n) if n else b""

    def authorized(self):
        auth = self.headers.get("Authorization", "")
        status, body, _ = upstream("GET", "/v1/machine", None, {"Authorization": auth})
        return status, body

    def passthrough(self, method, name):
        body = self.body() if method == "POST" else None
        headers = {"Content-Type": "application/json"}
        if self.headers.get("Authorization"):
            headers["Authorization"] = self.headers["Authorization"]
        status, answer, retry_after = upstream(method, self.path, body, headers)
        self.reply(status, answer, retry_after)
        record(name, self.path, dict(self.headers), (body or b"").decode(), status, answer.decode())

    def do_POST(self):
        if self.path in ("/v1/attest/challenge", "/v1/attest/evidence"):
            return self.passthrough("POST", self.path.rsplit("/", 1)[1])
        if self.path != "/v1/machine/csr":
            return self.reply(404, {"error": {"reason": "not_found", "message": "no such endpoint"}})
        body = self.body()
        status, who = self.authorized()
        if status != 200:
            self.reply(status, who)
            return record("csr", self.path, dict(self.headers), body.decode(), status, who.decode())
        req = json.loads(body)
        if ARGS.csr_busy_once and not BUSY_ONCE[0]:
            BUSY_ONCE[0] = True
            answer = {"error": {"reason": "busy", "message": "try again later"}}
            self.reply(503, answer, "1")
            return record("csr", self.path, dict(self.headers), body.decode(), 503, json.dumps(answer))
        serving = req.get("signer") == "kubernetes.io/kubelet-serving"
        cert, not_after = sign_csr(req["csr"], serving)
        with open(ARGS.cluster_ca) as f:
            ca = f.read()
        answer = {"certificate": cert, "ca": ca, "serial": "%x" % (COUNTER[0] + 1000), "not_after": not_after}
        self.reply(200, answer)
        record("csr", self.path, dict(self.headers), body.decode(), 200, json.dumps(answer))

    def do_GET(self):
        if self.path == "/v1/machine":
            return self.passthrough("GET", "machine")
        if self.path != "/v1/machine/config":
            return self.reply(404, {"error": {"reason": "not_found", "message": "no such endpoint"}})
        status, who = self.authorized()
        if status != 200:
            self.reply(status, who)
            return record("config", self.path, dict(self.headers), "", status, who.decode())
        with open(ARGS.config, "rb") as f:
            config = f.read()
        self.reply(200, config)
        record("config", self.path, dict(self.headers), "", 200, config.decode())


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for a in ("--upstream", "--upstream-ca", "--cert", "--key", "--cluster-ca", "--cluster-ca-key",
              "--config", "--record", "--port-file"):
        p.add_argument(a, required=True)
    p.add_argument("--csr-busy-once", action="store_true")
    ARGS = p.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(ARGS.cert, ARGS.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    with open(ARGS.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(ARGS.port_file + ".tmp", ARGS.port_file)
    # The lab's cleanup stops only swtpm and rackgated: the stub ends itself
    # when the test script that started it is gone.
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
