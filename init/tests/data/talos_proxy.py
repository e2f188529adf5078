# SPDX-License-Identifier: Apache-2.0
"""Calls for other nodes through one endpoint (talosctl's `-n a,b -e x`), with clients nobody
here wrote: the PyPI Talos bindings over grpclib, and grpcio. Prints `ok SCENARIO` at the end;
any failure exits non-zero with a traceback.

  python3 talos_proxy.py proxy ENDPOINT_ADDR NODE_A NODE_B ADMIN_KEELSONCONFIG READER_KEELSONCONFIG SOCKET"""
import asyncio
import os
import sys

import grpc
import grpclib
from grpclib.const import Status

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from talos_api import EMPTY, channel, collect, fails, say  # noqa: E402

from talos_linux_api.v1_6_0 import machine as tm  # noqa: E402

# TEST-NET-1: no route in the test's namespaces, so forwarding to it fails at once.
UNREACHABLE = "192.0.2.1"


async def proxy(addr, a, b, admin, reader, sock):
    ch = channel(addr, admin)
    machine = tm.MachineServiceStub(ch)
    # One unary call for two nodes: one reply, a message from each, named as asked.
    reply = await machine.version(EMPTY, metadata=[("nodes", a), ("nodes", b)])
    hosts = [m.metadata.hostname for m in reply.messages]
    assert hosts == [a, b], reply
    for m in reply.messages:
        assert m.metadata.error == "", m
        assert m.version.tag.startswith("v0."), m
        assert m.features.rbac is True, m
    say("  version for", hosts)
    # Comma-separated in one value, as some clients send it.
    reply = await machine.hostname(EMPTY, metadata=[("nodes", f"{b},{a}")])
    assert [m.metadata.hostname for m in reply.messages] == [b, a], reply
    assert sorted(m.hostname for m in reply.messages) == ["node-a", "node-b"], reply
    # A node that cannot be reached is a message with its error; the others still answer.
    reply = await machine.version(EMPTY, metadata=[("nodes", f"{a},{UNREACHABLE}")])
    assert len(reply.messages) == 2, reply
    ok, bad = reply.messages
    assert ok.metadata.hostname == a and ok.metadata.error == "", ok
    assert bad.metadata.hostname == UNREACHABLE and bad.metadata.error, bad
    assert bad.metadata.status.code == grpclib.const.Status.UNAVAILABLE.value, bad
    say("  unreachable:", bad.metadata.error)
    # One node with `node`: its answer as it is (its own hostname), streams as streams.
    reply = await machine.hostname(EMPTY, metadata=[("node", b)])
    assert [m.hostname for m in reply.messages] == ["node-b"], reply
    events = await collect(machine.events(tm.EventsRequest(tail_events=5), metadata=[("node", b)]), n=1)
    assert events and events[0].metadata.hostname == "node-b", events
    say("  events from", b, len(events))
    # Malformed routing is refused before anything is sent.
    await fails("a port in nodes", Status.INVALID_ARGUMENT, machine.version(EMPTY, metadata=[("nodes", f"{b}:50000")]))
    await fails("two node values", Status.INVALID_ARGUMENT, machine.version(EMPTY, metadata=[("node", a), ("node", b)]))
    ch.close()
    # The caller's rights go with the call: a reader may not reboot another node either.
    ch = channel(addr, reader)
    machine = tm.MachineServiceStub(ch)
    await fails("reader reboot via proxy", Status.PERMISSION_DENIED, machine.reboot(tm.RebootRequest(), metadata=[("nodes", b)]))
    reply = await machine.version(EMPTY, metadata=[("nodes", b)])
    assert [m.metadata.hostname for m in reply.messages] == [b], reply
    ch.close()
    # grpcio, another client, on the node's local socket (admin; grpcio's TLS takes no
    # Ed25519 certificates): the same call, metadata as grpcio sends it.
    with grpc.insecure_channel(f"unix:{sock}") as gch:
        call = gch.unary_unary("/machine.MachineService/Version", request_serializer=bytes, response_deserializer=tm.VersionResponse.FromString)
        reply = call(b"", metadata=(("nodes", a), ("nodes", b)), timeout=30)
        assert [m.metadata.hostname for m in reply.messages] == [a, b], reply
    say("  grpcio: version for", [a, b])
    say("ok proxy")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "proxy":
        asyncio.run(proxy(*args))
    else:
        raise SystemExit(f"unknown scenario {what}")


if __name__ == "__main__":
    main()
