# SPDX-License-Identifier: Apache-2.0
"""A scripted TLS client for the API tests, driven one JSON command per stdin line; one
answer line per command on stdout. Connections are named, so a test can open one, do other
things, and finish its handshake later. Calls are gRPC over HTTP/2 (the `h2` library, the
protobuf messages written by hand: they are a few fields).

  {"do": "connect", "id": "a"}                      TCP only, no ClientHello yet
  {"do": "flood", "n": N, "from": ADDR}             N TCP connections from ADDR (kept open,
                                                    no ClientHello): how many connected
  {"do": "tls", "id": "a", "client": PATH|null}     handshake: with PATH (a keelsonconfig)
                                                    its CA is trusted and its certificate
                                                    shown; without, nothing is checked and
                                                    no certificate is shown (--insecure)
  {"do": "send", "id": "a", "req": {"call": C}}     one gRPC call: C is "version", or
                                                    "apply" with "config": TEXT (mode AUTO);
                                                    answered `ok` or `error: status N: MSG`
  {"do": "watchers", "n": N, "client": PATH}        N connections that each watch addresses
                                                    over COSI (kept open): how many were let in
  {"do": "close"}                                   close everything
Errors are answered as `error: WHY` (a closed connection included)."""
import base64
import json
import os
import socket
import ssl
import struct
import sys
import tempfile

import h2.config
import h2.connection
import h2.events

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


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number, value):
    """A length-delimited protobuf field."""
    return varint(number << 3 | 2) + varint(len(value)) + value


def request(req):
    """The method path and message of a `send` request."""
    if req["call"] == "version":
        return "/machine.MachineService/Version", b""
    if req["call"] == "apply":
        # machine.ApplyConfigurationRequest: data = 1, mode = 4 (AUTO = 1).
        return "/machine.MachineService/ApplyConfiguration", field(1, req["config"].encode()) + b"\x20\x01"
    raise ValueError(f"unknown call {req['call']}")


def h2conn(s):
    """The HTTP/2 connection on socket `s` (made, with its preface sent, on first use)."""
    c = getattr(s, "_h2", None)
    if c is None:
        c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        s._h2 = c
    return c


def start(s, path, msg):
    c = h2conn(s)
    stream = c.get_next_available_stream_id()
    c.send_headers(stream, [(":method", "POST"), (":scheme", "https"), (":path", path),
                            (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
                            ("te", "trailers")])
    c.send_data(stream, b"\x00" + struct.pack(">I", len(msg)) + msg, end_stream=True)
    s.sendall(c.data_to_send())
    return c, stream


def events(s, c):
    data = s.recv(65536)
    if not data:
        raise ConnectionError("closed by the node")
    evs = c.receive_data(data)
    out = c.data_to_send()
    if out:
        s.sendall(out)
    return evs


def ask(s, req):
    """One unary call: `ok`, or why not."""
    path, msg = request(req)
    c, stream = start(s, path, msg)
    while True:
        for e in events(s, c):
            if isinstance(e, h2.events.DataReceived):
                c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, h2.events.TrailersReceived) or (
                isinstance(e, h2.events.ResponseReceived) and e.stream_ended is not None
            ):
                h = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
                     for k, v in e.headers}
                status = h.get("grpc-status", "?")
                if status == "0":
                    return "ok"
                return f"error: status {status}: {h.get('grpc-message', '')}"
            elif isinstance(e, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                return f"error: {type(e).__name__}"


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
                # cosi.resource.WatchRequest: namespace = 1, type = 2, options = 4
                # (bootstrap_contents = 1), api_version = 5.
                watch = field(1, b"network") + field(2, b"addresses") + field(4, b"\x08\x01") + b"\x28\x01"
                c, stream = start(s, "/cosi.resource.State/Watch", watch)
                watching = False
                while not watching:
                    for e in events(s, c):
                        if isinstance(e, h2.events.DataReceived):
                            # The first message: the watch is in place.
                            watching = True
                        elif isinstance(e, (h2.events.TrailersReceived, h2.events.StreamReset,
                                            h2.events.ConnectionTerminated)):
                            raise ConnectionError("refused")
                        elif isinstance(e, h2.events.ResponseReceived) and e.stream_ended is not None:
                            raise ConnectionError("refused")
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
