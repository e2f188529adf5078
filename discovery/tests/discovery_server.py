#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small in-memory sidero.discovery.server.Cluster service on Python grpcio, for testing the
Rust client against an HTTP/2 and gRPC stack that is not ours. Protobuf is encoded by hand
(generic handlers with bytes in and out), so no protoc is needed.

Usage: discovery_server.py [--redirect HOST:PORT] [--tls CERT KEY]
prints "PORT <n>" once listening.
"""
import argparse
import queue
import sys
import threading
from concurrent import futures

import grpc


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def fields(buf):
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = read_varint(buf, pos)
        elif wt == 2:
            n, pos = read_varint(buf, pos)
            val, pos = buf[pos:pos + n], pos + n
        else:
            raise ValueError("unexpected wire type %d" % wt)
        yield num, val


def read_varint(buf, pos):
    shift = val = 0
    while True:
        b = buf[pos]
        pos += 1
        val |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return val, pos


def affiliate(aid, data, endpoints):
    out = field(1, aid.encode())
    if data:
        out += field(2, data)
    for e in endpoints:
        out += field(3, e)
    return out


class Cluster:
    def __init__(self, redirect):
        self.redirect = redirect
        self.lock = threading.Lock()
        self.clusters = {}  # cluster id -> {affiliate id -> [data, [endpoints]]}
        self.watchers = {}  # cluster id -> [queue]

    def notify(self, cluster, msg):
        for q in self.watchers.get(cluster, []):
            q.put(msg)

    def hello(self, req, ctx):
        peer = ctx.peer()  # "ipv4:127.0.0.1:port"
        ip = peer.split(":")[1] if peer.startswith("ipv4:") else ""
        out = b""
        if self.redirect:
            out += field(1, field(1, self.redirect.encode()))
        if ip:
            out += field(2, bytes(int(x) for x in ip.split(".")))
        return out

    def update(self, req, ctx):
        cluster = aid = None
        data, endpoints = None, []
        for num, val in fields(req):
            if num == 1:
                cluster = val.decode()
            elif num == 2:
                aid = val.decode()
            elif num == 3:
                data = val
            elif num == 4:
                endpoints.append(val)
        if not cluster or not aid:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "cluster ID can't be empty")
        with self.lock:
            c = self.clusters.setdefault(cluster, {})
            rec = c.setdefault(aid, [b"", []])
            if data:
                rec[0] = data
            for e in endpoints:
                if e not in rec[1]:
                    rec[1].append(e)
            self.notify(cluster, field(1, affiliate(aid, rec[0], rec[1])))
        return b""

    def delete(self, req, ctx):
        f = dict(fields(req))
        cluster, aid = f.get(1, b"").decode(), f.get(2, b"").decode()
        with self.lock:
            if self.clusters.get(cluster, {}).pop(aid, None) is not None:
                self.notify(cluster, field(1, affiliate(aid, b"", [])) + varint(2 << 3) + b"\x01")
        return b""

    def list(self, req, ctx):
        cluster = dict(fields(req)).get(1, b"").decode()
        with self.lock:
            c = self.clusters.get(cluster, {})
            return b"".join(field(1, affiliate(a, d, e)) for a, (d, e) in c.items())

    def watch(self, req, ctx):
        cluster = dict(fields(req)).get(1, b"").decode()
        q = queue.Queue()
        with self.lock:
            c = self.clusters.get(cluster, {})
            snapshot = b"".join(field(1, affiliate(a, d, e)) for a, (d, e) in c.items())
            self.watchers.setdefault(cluster, []).append(q)
        ctx.add_callback(lambda: q.put(None))
        try:
            yield snapshot
            while True:
                msg = q.get()
                if msg is None:
                    return
                yield msg
        finally:
            with self.lock:
                self.watchers[cluster].remove(q)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redirect", default="")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    args = ap.parse_args()
    svc = Cluster(args.redirect)
    h = grpc.unary_unary_rpc_method_handler
    handlers = {
        "Hello": h(svc.hello),
        "AffiliateUpdate": h(svc.update),
        "AffiliateDelete": h(svc.delete),
        "List": h(svc.list),
        "Watch": grpc.unary_stream_rpc_method_handler(svc.watch),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sidero.discovery.server.Cluster", handlers),))
    if args.tls:
        cert, key = (open(p, "rb").read() for p in args.tls)
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("PORT %d" % port, flush=True)
    # Exit when the test closes our stdin (or kills us).
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
