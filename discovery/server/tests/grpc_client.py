#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A discovery client keelson did not write: Python grpcio, with stubs compiled at run time
from discovery/proto/cluster.proto. Each scenario drives a running keelson-discovery-server
and exits non-zero, with one line saying what differed, when the server misbehaves.

usage: grpc_client.py SCENARIO ADDR [ARGS...]
"""

import os
import sys
import tempfile
import time

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "proto")


def load_stubs():
    out = tempfile.mkdtemp(prefix="keelson-pb-")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(
        [
            "protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(PROTO_DIR, "cluster.proto"),
        ]
    )
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    import cluster_pb2
    import cluster_pb2_grpc

    return cluster_pb2, cluster_pb2_grpc


pb, pb_grpc = load_stubs()
from google.protobuf.duration_pb2 import Duration  # noqa: E402


def fail(msg):
    sys.exit(f"FAIL: {msg}")


def check(cond, msg):
    if not cond:
        fail(msg)


def stub(addr):
    channel = grpc.insecure_channel(addr)
    grpc.channel_ready_future(channel).result(timeout=10)
    return pb_grpc.ClusterStub(channel)


def update(s, cluster, aff, data=None, endpoints=(), ttl=600, metadata=None):
    req = pb.AffiliateUpdateRequest(
        cluster_id=cluster,
        affiliate_id=aff,
        affiliate_endpoints=list(endpoints),
        ttl=Duration(seconds=ttl),
    )
    if data is not None:
        req.affiliate_data = data
    return s.AffiliateUpdate(req, timeout=10, metadata=metadata)


def expect_code(code, fn, what):
    try:
        fn()
    except grpc.RpcError as e:
        check(e.code() == code, f"{what}: got {e.code()} ({e.details()}), want {code}")
        return e.details()
    fail(f"{what}: succeeded, want {code}")


def listed(s, cluster):
    r = s.List(pb.ListRequest(cluster_id=cluster), timeout=10)
    return {a.id: (a.data, list(a.endpoints)) for a in r.affiliates}


def scenario_hello(addr, *args):
    s = stub(addr)
    r = s.Hello(pb.HelloRequest(cluster_id="c", client_version="v1.12.4"), timeout=10)
    check(r.client_ip == bytes([127, 0, 0, 1]), f"client_ip {r.client_ip.hex()}")
    check(not r.HasField("redirect"), "unexpected redirect")
    # Without --trust-proxy-headers the headers are ignored.
    r = s.Hello(pb.HelloRequest(cluster_id="c"), metadata=[("x-real-ip", "1.2.3.4")], timeout=10)
    check(r.client_ip == bytes([127, 0, 0, 1]), f"x-real-ip trusted by default: {r.client_ip.hex()}")
    expect_code(
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda: s.Hello(pb.HelloRequest(cluster_id=""), timeout=10),
        "empty cluster ID",
    )


def scenario_hello_proxy(addr, redirect):
    s = stub(addr)
    r = s.Hello(pb.HelloRequest(cluster_id="c"), metadata=[("x-real-ip", "1.2.3.4")], timeout=10)
    check(r.client_ip == bytes([1, 2, 3, 4]), f"x-real-ip: {r.client_ip.hex()}")
    r = s.Hello(
        pb.HelloRequest(cluster_id="c"),
        metadata=[("x-forwarded-for", "5.6.7.8,192.168.0.0.1")],
        timeout=10,
    )
    check(r.client_ip == bytes([5, 6, 7, 8]), f"x-forwarded-for: {r.client_ip.hex()}")
    r = s.Hello(
        pb.HelloRequest(cluster_id="c"), metadata=[("x-real-ip", "2001:db8::1")], timeout=10
    )
    check(len(r.client_ip) == 16 and r.client_ip[:4] == bytes.fromhex("20010db8"), "IPv6 x-real-ip")
    check(r.redirect.endpoint == redirect, f"redirect {r.redirect.endpoint!r}")


def scenario_merge(addr):
    s = stub(addr)
    update(s, "c1", "af1", b"data1", [b"e1", b"e2"])
    update(s, "c1", "af1", None, [b"e3", b"e2"])
    got = listed(s, "c1")
    check(got == {"af1": (b"data1", [b"e1", b"e2", b"e3"])}, f"list after merge: {got}")
    # Empty data leaves the data alone, as absent data does.
    update(s, "c1", "af1", b"", [])
    check(listed(s, "c1")["af1"][0] == b"data1", "empty data replaced the data")
    s.AffiliateDelete(pb.AffiliateDeleteRequest(cluster_id="c1", affiliate_id="nobody"), timeout=10)
    s.AffiliateDelete(pb.AffiliateDeleteRequest(cluster_id="c1", affiliate_id="af1"), timeout=10)
    check(listed(s, "c1") == {}, "list after delete")


def scenario_watch(addr):
    s = stub(addr)
    update(s, "w", "af1", b"d1")
    stream = s.Watch(pb.WatchRequest(cluster_id="w"), timeout=30)
    first = next(stream)
    check(not first.deleted, "snapshot marked deleted")
    check([(a.id, a.data, list(a.endpoints)) for a in first.affiliates] == [("af1", b"d1", [])], f"snapshot {first}")
    update(s, "w", "af2", b"d2", [b"x"])
    m = next(stream)
    check(not m.deleted and len(m.affiliates) == 1, f"add: {m}")
    check((m.affiliates[0].id, m.affiliates[0].data, list(m.affiliates[0].endpoints)) == ("af2", b"d2", [b"x"]), f"add: {m}")
    s.AffiliateDelete(pb.AffiliateDeleteRequest(cluster_id="w", affiliate_id="af1"), timeout=10)
    m = next(stream)
    check(m.deleted and len(m.affiliates) == 1, f"delete: {m}")
    a = m.affiliates[0]
    check((a.id, a.data, list(a.endpoints)) == ("af1", b"", []), f"delete carries more than the id: {a}")
    stream.cancel()
    # An empty cluster's snapshot is an empty message.
    stream = s.Watch(pb.WatchRequest(cluster_id="empty"), timeout=30)
    m = next(stream)
    check(len(m.affiliates) == 0 and not m.deleted, f"empty snapshot {m}")
    stream.cancel()
    # A bad cluster ID ends the stream with InvalidArgument on the first read.
    bad = s.Watch(pb.WatchRequest(cluster_id=""), timeout=10)
    expect_code(grpc.StatusCode.INVALID_ARGUMENT, lambda: next(bad), "watch with an empty cluster ID")


def scenario_validation(addr):
    s = stub(addr)
    IA, RE = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.RESOURCE_EXHAUSTED
    for cid in ["", "x" * 257, "x" * 1024]:
        expect_code(IA, lambda: s.Hello(pb.HelloRequest(cluster_id=cid), timeout=10), "hello cluster ID")
        expect_code(IA, lambda: s.List(pb.ListRequest(cluster_id=cid), timeout=10), "list cluster ID")
        expect_code(IA, lambda: update(s, cid, "a", b"d"), "update cluster ID")
        expect_code(
            IA,
            lambda: s.AffiliateDelete(pb.AffiliateDeleteRequest(cluster_id=cid, affiliate_id="a"), timeout=10),
            "delete cluster ID",
        )
    msg = expect_code(IA, lambda: update(s, "v", "x" * 257, b"d"), "affiliate ID too long")
    check(msg == "affiliate ID is too long", f"message {msg!r}")
    expect_code(IA, lambda: update(s, "v", "", b"d"), "empty affiliate ID")
    msg = expect_code(IA, lambda: update(s, "v", "a", b"x" * 2049), "data too big")
    check(msg == "affiliate data is too big", f"message {msg!r}")
    expect_code(IA, lambda: update(s, "v", "a", None, [b"x" * 33]), "endpoint too big")
    expect_code(IA, lambda: update(s, "v", "a", b"d", ttl=30 * 60 + 1), "ttl too large")
    update(s, "v", "x" * 256, b"x" * 2048, [b"x" * 32], ttl=30 * 60)
    for i in range(64):
        update(s, "v", "many", None, [bytes([i])])
    msg = expect_code(RE, lambda: update(s, "v", "many", None, [b"\xff\xff"]), "65th endpoint")
    check(msg == "too many endpoints in the affiliate", f"message {msg!r}")
    for i in range(1022):
        update(s, "v", f"af{i}", None)
    msg = expect_code(RE, lambda: update(s, "v", "one-more", b"d"), "1025th affiliate")
    check(msg == "too many affiliates in the cluster", f"message {msg!r}")
    # A method the service does not have.
    channel = grpc.insecure_channel(addr)
    unknown = channel.unary_unary("/sidero.discovery.server.Cluster/Nope")
    expect_code(grpc.StatusCode.UNIMPLEMENTED, lambda: unknown(b"", timeout=10), "unknown method")


def scenario_ratelimit(addr, proxied=""):
    """60 calls pass, the 61st is refused; with proxy headers trusted, each forwarded address
    has its own bucket, whichever header names it."""
    s = stub(addr)
    hello = pb.HelloRequest(cluster_id="c")
    md = [("x-real-ip", "1.2.3.4")] if proxied else None
    for i in range(60):
        s.Hello(hello, timeout=10, metadata=md)
    msg = expect_code(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        lambda: s.Hello(hello, timeout=10, metadata=md),
        "61st call",
    )
    check(msg == "rate limit exceeded", f"message {msg!r}")
    if proxied:
        expect_code(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            lambda: s.Hello(hello, timeout=10, metadata=[("x-forwarded-for", "1.2.3.4, 10.0.0.1")]),
            "the same address through x-forwarded-for",
        )
        s.Hello(hello, timeout=10, metadata=[("x-real-ip", "5.6.7.8")])


def scenario_snapshot_tiny(addr):
    s = stub(addr)
    check(listed(s, "many") == {"b": (b"", [])}, f"many: {listed(s, 'many')}")
    check(listed(s, "fat") == {}, f"fat: {listed(s, 'fat')}")


def scenario_ratelimit_v6(addr):
    """Behind a trusted proxy: 60 calls from 60 addresses of one IPv6 /64 use up its bucket,
    the 61st (yet another address of it) is refused, another /64 is not."""
    s = stub(addr)
    hello = pb.HelloRequest(cluster_id="c")
    for i in range(60):
        s.Hello(hello, timeout=10, metadata=[("x-real-ip", f"2001:db8:0:7::{i + 1:x}")])
    msg = expect_code(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        lambda: s.Hello(hello, timeout=10, metadata=[("x-real-ip", "2001:db8:0:7:ffff::2")]),
        "61st call from the same /64",
    )
    check(msg == "rate limit exceeded", f"message {msg!r}")
    s.Hello(hello, timeout=10, metadata=[("x-real-ip", "2001:db8:0:8::1")])


def scenario_expiry(addr):
    s = stub(addr)
    update(s, "t", "short", b"d", ttl=1)
    update(s, "t", "long", b"d", ttl=600)
    stream = s.Watch(pb.WatchRequest(cluster_id="t"), timeout=30)
    first = next(stream)
    check(sorted(a.id for a in first.affiliates) == ["long", "short"], f"snapshot {first}")
    start = time.monotonic()
    m = next(stream)
    check(m.deleted and [a.id for a in m.affiliates] == ["short"], f"expiry {m}")
    check(time.monotonic() - start < 20, "expiry took too long")
    check(set(listed(s, "t")) == {"long"}, "list after expiry")
    stream.cancel()


MARKER = b"keelson-plaintext-marker-7f3a"


def blobs():
    """A Talos-like affiliate blob and endpoint blob: AES-256-GCM and AES-ECB of plaintexts
    that carry MARKER, so the marker exists only inside ciphertext."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    key = bytes(range(32))
    nonce = os.urandom(12)
    data = nonce + AESGCM(key).encrypt(nonce, b"\x1a" + bytes([len(MARKER)]) + MARKER, None)
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    plain = bytes([10]) + b"\x0a\x04\x0a\x00\x00\x02\x10\xec\x94\x03"
    endpoint = enc.update(plain + b"\0" * (16 - len(plain))) + enc.finalize()
    return data, endpoint


def scenario_snapshot_write(addr, blob_file):
    s = stub(addr)
    data, endpoint = blobs()
    with open(blob_file, "wb") as f:
        f.write(len(data).to_bytes(2, "big") + data + endpoint)
    update(s, "snap", "node-a", data, [endpoint], ttl=1800)
    update(s, "snap", "node-b", None, [endpoint], ttl=1800)
    got = listed(s, "snap")
    check(got["node-a"] == (data, [endpoint]), "blobs changed on the way")


def scenario_snapshot_read(addr, blob_file):
    s = stub(addr)
    raw = open(blob_file, "rb").read()
    n = int.from_bytes(raw[:2], "big")
    data, endpoint = raw[2 : 2 + n], raw[2 + n :]
    got = listed(s, "snap")
    check(got == {"node-a": (data, [endpoint]), "node-b": (b"", [endpoint])}, f"after restart: {got}")


def scenario_memory(addr, pid):
    """The marker travels only as ciphertext, so the server's memory must not hold it."""
    s = stub(addr)
    data, endpoint = blobs()
    update(s, "mem", "node", data, [endpoint])
    check(listed(s, "mem")["node"] == (data, [endpoint]), "blobs changed on the way")
    # Hello's answer holds our address as field 2, 4 bytes: the wire form an address has in a
    # plaintext affiliate record. The server must not keep copies of it either.
    r = s.Hello(pb.HelloRequest(cluster_id="mem"), timeout=10)
    check(r.client_ip == bytes([127, 0, 0, 1]), "client_ip")
    address_form = b"\x12\x04" + r.client_ip
    found, ciphertext, addresses = 0, 0, 0
    try:
        mem = open(f"/proc/{pid}/mem", "rb", 0)
    except PermissionError:
        # Reading another process's memory needs root (or a relaxed Yama ptrace scope).
        if os.environ.get("KEELSON_REQUIRE_ROOT") == "1":
            fail("cannot read the server's memory (root needed)")
        print("SKIP: cannot read the server's memory without root")
        return
    with open(f"/proc/{pid}/maps") as maps, mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1]:
                continue
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found += chunk.count(MARKER)
            ciphertext += chunk.count(data)
            if "w" in fields[1]:
                addresses += chunk.count(address_form)
    # The scan works: it finds the ciphertext the server holds.
    check(ciphertext > 0, "the scan did not find the stored ciphertext")
    check(found == 0, f"plaintext marker found {found} times in the server's memory")
    check(addresses == 0, f"the address wire form found {addresses} times in the server's memory")


def scenario_tls(addr, ca):
    """TLS with ALPN h2: a Hello and a watch round trip through a verified connection."""
    creds = grpc.ssl_channel_credentials(root_certificates=open(ca, "rb").read())
    channel = grpc.secure_channel(addr, creds, options=[("grpc.ssl_target_name_override", "localhost")])
    grpc.channel_ready_future(channel).result(timeout=10)
    s = pb_grpc.ClusterStub(channel)
    r = s.Hello(pb.HelloRequest(cluster_id="c"), timeout=10)
    check(r.client_ip == bytes([127, 0, 0, 1]), f"client_ip over TLS {r.client_ip.hex()}")
    stream = s.Watch(pb.WatchRequest(cluster_id="tls"), timeout=30)
    check(len(next(stream).affiliates) == 0, "snapshot over TLS")
    update(s, "tls", "a", b"d")
    m = next(stream)
    check([a.id for a in m.affiliates] == ["a"], f"event over TLS {m}")
    stream.cancel()


def scenario_flood(addr, cluster, count):
    """Many large updates; every one must succeed however slow some watcher is."""
    s = stub(addr)
    for i in range(int(count)):
        update(s, cluster, f"af{i % 500}", os.urandom(2000))


def scrape(addr, accept=None):
    import urllib.request

    req = urllib.request.Request(f"http://{addr}/metrics")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.headers.get("content-type"), r.read().decode()


def scenario_metrics(addr):
    """Calls of known outcome, then /metrics read by parsers keelson did not write: the
    prometheus_client text and OpenMetrics parsers, and promtool's linter."""
    import subprocess

    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
    from prometheus_client.parser import text_string_to_metric_families as prom_parse

    s = stub(addr)
    update(s, "c1", "af1", b"d1", [b"e1", b"e2"])
    update(s, "c1", "af2", b"d2", [b"e3"])
    listed(s, "c1")
    expect_code(
        grpc.StatusCode.INVALID_ARGUMENT,
        lambda: s.Hello(pb.HelloRequest(cluster_id=""), timeout=10),
        "empty cluster ID",
    )
    s.Hello(pb.HelloRequest(cluster_id="c1"), timeout=10)
    # The server runs with a burst of 5: the sixth call is refused.
    expect_code(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        lambda: s.Hello(pb.HelloRequest(cluster_id="c1"), timeout=10),
        "sixth call",
    )
    want_calls = {
        ("AffiliateUpdate", "OK"): 2,
        ("List", "OK"): 1,
        ("Hello", "InvalidArgument"): 1,
        ("Hello", "OK"): 1,
        ("Hello", "ResourceExhausted"): 1,
    }
    want = {
        "discovery_clusters": 1,
        "discovery_affiliates": 2,
        "discovery_endpoints": 3,
        "discovery_rate_limited_total": 1,
        "discovery_connections_open": 1,
    }
    for accept, parse, ctype in [
        (None, prom_parse, "text/plain; version=0.0.4"),
        ("application/openmetrics-text; version=1.0.0", om_parse, "application/openmetrics-text"),
    ]:
        got_type, text = scrape(addr, accept)
        check(got_type.startswith(ctype), f"content type {got_type!r} for Accept {accept!r}")
        samples = {}
        calls = {}
        for fam in parse(text):
            for smp in fam.samples:
                if smp.name == "discovery_calls_total":
                    calls[(smp.labels["method"], smp.labels["code"])] = smp.value
                else:
                    samples[smp.name] = smp.value
        check(calls == want_calls, f"calls {calls} want {want_calls}")
        for name, value in want.items():
            # The scrape's own connection is open too, and grpcio's channel.
            if name == "discovery_connections_open":
                check(samples.get(name, 0) >= value, f"{name} {samples.get(name)}")
            else:
                check(samples.get(name) == value, f"{name} {samples.get(name)} want {value}")
        if accept is None:
            # promtool reads the Prometheus text format only.
            lint = subprocess.run(["promtool", "check", "metrics"], input=text,
                                  capture_output=True, text=True)
            check(lint.returncode == 0, f"promtool: {lint.stdout}{lint.stderr}")


SCENARIOS = {
    name[len("scenario_") :]: fn for name, fn in globals().items() if name.startswith("scenario_")
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(SCENARIOS)}}} ADDR [ARGS...]")
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
