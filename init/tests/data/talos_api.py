# SPDX-License-Identifier: Apache-2.0
"""Scenarios against keelson's gRPC machine API with clients nobody here wrote: the PyPI
Talos bindings (talos-linux-api-v1-6-0: betterproto messages and grpclib stubs), grpcio for
the local Unix socket, and the h2 library for a client that stops reading. Each scenario
asserts what it gets and prints `ok SCENARIO` at the end; any failure exits non-zero with a
traceback.

  python3 talos_api.py local SOCKET
  python3 talos_api.py maintenance ADDR MACHINE_YAML
  python3 talos_api.py configured ADDR ADMIN_KEELSONCONFIG READER_KEELSONCONFIG
  python3 talos_api.py reboot ADDR ADMIN_KEELSONCONFIG
  python3 talos_api.py stall SOCKET"""
import asyncio
import base64
import os
import socket
import ssl
import sys
import tempfile
import time

import grpc
import grpclib
from grpclib.client import Channel
from grpclib.const import Status

from talos_linux_api.v1_6_0 import common as tcommon
from talos_linux_api.v1_6_0 import machine as tm
from talos_linux_api.v1_6_0 import storage as tstorage
from talos_linux_api.v1_6_0 import time as ttime
import betterproto.lib.google.protobuf as pb

EMPTY = pb.Empty()


def say(*a):
    print(*a, flush=True)


def keelsonconfig(path):
    """The CA, certificate and key of a keelsonconfig, as files."""
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition(": ")
            if key in ("ca", "crt", "key") and key not in fields:
                fields[key] = base64.b64decode(value)
    d = tempfile.mkdtemp()
    for k, v in fields.items():
        with open(os.path.join(d, k), "wb") as f:
            f.write(v)
    return {k: os.path.join(d, k) for k in fields}


def tls(client=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_alpn_protocols(["h2"])
    if client is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    files = keelsonconfig(client)
    ctx.load_verify_locations(files["ca"])
    ctx.load_cert_chain(files["crt"], files["key"])
    return ctx


def channel(addr, client=None):
    host, _, port = addr.rpartition(":")
    return Channel(host, int(port), ssl=tls(client))


async def fails(what, code, coro):
    """`coro` must fail with gRPC status `code`."""
    try:
        got = await coro
    except grpclib.exceptions.GRPCError as e:
        assert e.status == code, f"{what}: {e.status} {e.message!r}, wanted {code}"
        say(f"  {what}: {e.status.name}: {e.message}")
        return e
    raise AssertionError(f"{what}: answered {got!r}, wanted {code}")


async def collect(aiter, n=None, timeout=10):
    """Up to `n` messages of a stream (all when None), within `timeout` seconds."""
    out = []

    async def run():
        async for m in aiter:
            out.append(m)
            if n is not None and len(out) >= n:
                break

    try:
        await asyncio.wait_for(run(), timeout)
    except asyncio.TimeoutError:
        pass
    return out


def check_version(reply, maintenance):
    assert len(reply.messages) == 1, reply
    v = reply.messages[0]
    assert v.version.tag.startswith("v0."), v.version
    assert v.version.os == "linux", v.version
    assert v.version.arch in ("amd64", "arm64"), v.version
    assert v.platform.name == "metal" and v.platform.mode == "metal", v.platform
    assert isinstance(v.metadata.hostname, str)
    # Talos's maintenance service has no RBAC to report.
    has_features = pb_set(v, "features")
    assert has_features == (not maintenance), v
    if has_features:
        assert v.features.rbac is True
    return v


def pb_set(msg, field):
    import betterproto

    return betterproto.serialized_on_wire(getattr(msg, field))


# --- scenarios ---------------------------------------------------------------------------


def grpcio_call(ch, path, req, reply_cls, stream=False, timeout=10):
    if stream:
        return ch.unary_stream(path, request_serializer=bytes, response_deserializer=reply_cls.FromString)(req, timeout=timeout)
    return ch.unary_unary(path, request_serializer=bytes, response_deserializer=reply_cls.FromString)(req, timeout=timeout)


def grpcio_fails(what, code, fn):
    try:
        got = fn()
    except grpc.RpcError as e:
        assert e.code() == code, f"{what}: {e.code()} {e.details()!r}, wanted {code}"
        say(f"  {what}: {e.code().name}: {e.details()}")
        return e
    raise AssertionError(f"{what}: answered {got!r}, wanted {code}")


def local(sock):
    """The local socket with grpcio: root's, admin."""
    ch = grpc.insecure_channel(f"unix:{sock}")
    v = grpcio_call(ch, "/machine.MachineService/Version", EMPTY, tm.VersionResponse)
    check_version(v, maintenance=False)
    say("  version:", v.messages[0].version.tag)
    grpcio_fails(
        "unknown method",
        grpc.StatusCode.UNIMPLEMENTED,
        lambda: grpcio_call(ch, "/machine.MachineService/Nope", EMPTY, tm.VersionResponse),
    )
    ch.close()
    say("ok local")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "local":
        local(*args)
    elif what in SCENARIOS:
        asyncio.run(SCENARIOS[what](*args))
    else:
        raise SystemExit(f"unknown scenario {what}")


SCENARIOS = {}

if __name__ == "__main__":
    main()
