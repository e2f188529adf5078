# SPDX-License-Identifier: Apache-2.0
"""A scripted TLS client for the API tests, driven one JSON command per stdin line; one
answer line per command on stdout. Connections are named, so a test can open one, do other
things, and finish its handshake later.

  {"do": "connect", "id": "a"}                      TCP only, no ClientHello yet
  {"do": "flood", "n": N, "from": ADDR}             N TCP connections from ADDR (kept open,
                                                    no ClientHello): how many connected
  {"do": "tls", "id": "a", "client": PATH|null}     handshake: with PATH (a keelsonconfig)
                                                    its CA is trusted and its certificate
                                                    shown; without, nothing is checked and
                                                    no certificate is shown (--insecure)
  {"do": "send", "id": "a", "req": {...}}           one request line, one answer line
  {"do": "watchers", "n": N, "client": PATH}        N connections that each watch addresses
                                                    (kept open): how many were let in
  {"do": "close"}                                   close everything
Errors are answered as `error: WHY` (a closed connection included)."""
import base64
import json
import os
import socket
import ssl
import sys
import tempfile

PORT = 50000
conns = {}
kept = []


def context(client):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if client is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    fields = {}
    with open(client) as f:
        for line in f:
            key, _, value = line.strip().partition(": ")
            if key in ("ca", "crt", "key") and key not in fields:
                fields[key] = base64.b64decode(value)
    d = tempfile.mkdtemp()
    for k, v in fields.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
    ctx.load_verify_locations(os.path.join(d, "ca"))
    ctx.load_cert_chain(os.path.join(d, "crt"), os.path.join(d, "key"))
    return ctx


def connect(source=None):
    bind = (source, 0) if source else None
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20, source_address=bind)
    return s


def handshake(raw, client):
    s = context(client).wrap_socket(raw, server_hostname="127.0.0.1")
    return s


def ask(s, req):
    s.sendall((json.dumps(req) + "\n").encode())
    line = b""
    while not line.endswith(b"\n"):
        b = s.recv(1)
        if not b:
            raise ConnectionError("closed by the node")
        line += b
    return line.decode().strip()


def run(cmd):
    what = cmd["do"]
    if what == "connect":
        conns[cmd["id"]] = connect()
        return "ok"
    if what == "tls":
        conns[cmd["id"]] = handshake(conns[cmd["id"]], cmd.get("client"))
        # TLS 1.3: the server decides on the client's certificate after the client's
        # Finished; a request answered proves the session was accepted.
        return "ok"
    if what == "send":
        return ask(conns[cmd["id"]], cmd["req"])
    if what == "flood":
        n = 0
        for _ in range(cmd["n"]):
            try:
                kept.append(connect(cmd["from"]))
                n += 1
            except OSError:
                pass
        return str(n)
    if what == "watchers":
        ctx = context(cmd["client"])
        n = 0
        for _ in range(cmd["n"]):
            try:
                s = ctx.wrap_socket(connect(), server_hostname="127.0.0.1")
                s.sendall(b'{"op":"watch","type":"addresses"}\n')
                buf = b""
                while b'"bootstrapped"' not in buf:
                    b = s.recv(65536)
                    if not b or b'"ok":false' in buf + b:
                        raise ConnectionError("refused")
                    buf += b
                kept.append(s)
                n += 1
            except (OSError, ssl.SSLError):
                pass
        return str(n)
    if what == "close":
        for s in list(conns.values()) + kept:
            s.close()
        return "ok"
    return "error: unknown command"


for line in sys.stdin:
    try:
        out = run(json.loads(line))
    except (OSError, ssl.SSLError, ValueError, KeyError) as e:
        out = f"error: {type(e).__name__}: {e}"
    print(out.replace("\n", " "), flush=True)
