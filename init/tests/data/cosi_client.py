#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A COSI client keelson did not write: grpcio, with stubs compiled at run time by
grpcio-tools from talos-api/proto (resource.proto, state.proto, meta.proto). It talks to a
node's local API socket the way `talosctl get` talks to Talos: it resolves `addresses`
through the resource definitions in `meta`, lists, gets and watches. Run inside the node's
network namespace; it adds an address itself (`ip addr add`) and expects to see it. Prints
`ok SCENARIO` at the end; any failure exits non-zero with a traceback.

  python3 cosi_client.py local SOCKET LINK ADDRESS/BITS
  python3 cosi_client.py maintenance HOST:PORT"""

import os
import queue
import ssl
import subprocess
import sys
import tempfile
import threading
import time

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "..", "..", "talos-api", "proto")


def load_stubs():
    out = tempfile.mkdtemp(prefix="keelson-cosi-pb-")
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    rc = protoc.main(
        [
            "protoc",
            f"-I{PROTO_DIR}",
            f"-I{include}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            os.path.join(PROTO_DIR, "resource.proto"),
            os.path.join(PROTO_DIR, "state.proto"),
            os.path.join(PROTO_DIR, "meta.proto"),
        ]
    )
    if rc != 0:
        sys.exit(f"protoc failed ({rc})")
    sys.path.insert(0, out)
    import meta_pb2
    import state_pb2
    import state_pb2_grpc

    return meta_pb2, state_pb2, state_pb2_grpc


meta, st, st_grpc = load_stubs()

RD = "ResourceDefinitions.meta.cosi.dev"
ADDRESSES = "AddressStatuses.net.talos.dev"
T = 15


def say(*a):
    print(*a, flush=True)


def fails(what, code, fn):
    try:
        fn()
    except grpc.RpcError as e:
        assert e.code() == code, f"{what}: {e.code()} {e.details()!r}, wanted {code}"
        say(f"  {what}: {e.code().name}: {e.details()}")
        return e
    raise AssertionError(f"{what}: succeeded, wanted {code}")


def resolve(stub, name):
    """What talosctl does with `get NAME`: list the definitions, match ID or alias."""
    matched = []
    for r in stub.List(st.ListRequest(namespace="meta", type=RD), timeout=T):
        md = r.resource.metadata
        assert md.type == RD and md.namespace == "meta", md
        spec = meta.ResourceDefinitionSpec()
        spec.ParseFromString(r.resource.spec.proto_spec)
        assert md.id == spec.resource_type.lower(), (md.id, spec.resource_type)
        if md.id == name.lower() or name.lower() in spec.all_aliases:
            matched.append(spec)
    assert len(matched) == 1, f"{name}: {[m.resource_type for m in matched]}"
    return matched[0]


def local(sock, link, addr):
    stub = st_grpc.StateStub(grpc.insecure_channel(f"unix:{sock}"))
    spec = resolve(stub, "addresses")
    assert spec.resource_type == ADDRESSES, spec
    assert spec.default_namespace == "network", spec
    for alias in ("address", "addressstatus", "addressstatuses"):
        assert resolve(stub, alias).resource_type == ADDRESSES, alias
    say("  addresses ->", spec.resource_type, "in", spec.default_namespace)

    listed = [
        r.resource
        for r in stub.List(st.ListRequest(namespace="network", type=ADDRESSES), timeout=T)
    ]
    ids = [r.metadata.id for r in listed]
    assert "lo/127.0.0.1/8" in ids, ids
    lo = next(r for r in listed if r.metadata.id == "lo/127.0.0.1/8")
    assert lo.metadata.type == ADDRESSES and lo.metadata.namespace == "network", lo.metadata
    assert int(lo.metadata.version) >= 1 and lo.metadata.phase == "running", lo.metadata
    assert lo.metadata.created.seconds > 0, lo.metadata
    assert "address: 127.0.0.1/8" in lo.spec.yaml_spec, lo.spec.yaml_spec
    assert "linkName: lo" in lo.spec.yaml_spec, lo.spec.yaml_spec
    say("  listed:", ids)

    got = stub.Get(
        st.GetRequest(namespace="network", type=ADDRESSES, id="lo/127.0.0.1/8"), timeout=T
    )
    assert got.resource.metadata.id == "lo/127.0.0.1/8", got
    fails(
        "get a missing ID",
        grpc.StatusCode.NOT_FOUND,
        lambda: stub.Get(
            st.GetRequest(namespace="network", type=ADDRESSES, id="nosuch/10.9.9.9/32"), timeout=T
        ),
    )
    fails(
        "get an unknown type",
        grpc.StatusCode.PERMISSION_DENIED,
        lambda: stub.Get(st.GetRequest(namespace="network", type="Bogus.x.dev", id="a"), timeout=T),
    )
    fails(
        "create",
        grpc.StatusCode.PERMISSION_DENIED,
        lambda: stub.Create(st.CreateRequest(resource=lo), timeout=T),
    )
    fails(
        "destroy",
        grpc.StatusCode.PERMISSION_DENIED,
        lambda: stub.Destroy(
            st.DestroyRequest(namespace="network", type=ADDRESSES, id="lo/127.0.0.1/8"), timeout=T
        ),
    )

    # Watch with the initial state, as `talosctl get -w` does; read it on a thread so the
    # main thread can add the address meanwhile.
    events = queue.Queue()
    call = stub.Watch(
        st.WatchRequest(
            namespace="network",
            type=ADDRESSES,
            options=st.WatchOptions(bootstrap_contents=True),
            api_version=1,
        )
    )

    def pump():
        try:
            for msg in call:
                events.put(msg)
        except grpc.RpcError as e:
            events.put(e)

    threading.Thread(target=pump, daemon=True).start()

    def next_msg():
        m = events.get(timeout=T)
        assert not isinstance(m, Exception), m
        return m

    first = next_msg()
    assert len(first.event) == 0, f"the first message is empty: {first}"
    created = []
    while True:
        m = next_msg()
        assert len(m.event) == 1, m
        ev = m.event[0]
        if ev.event_type == st.BOOTSTRAPPED:
            assert ev.resource.metadata.type == ADDRESSES, ev
            break
        assert ev.event_type == st.CREATED, ev
        created.append(ev.resource.metadata.id)
    assert sorted(created) == sorted(ids), (created, ids)
    say("  bootstrapped with", len(created), "addresses")

    want = f"{link}/{addr}"
    subprocess.run(["ip", "addr", "add", addr, "dev", link], check=True)
    deadline = time.monotonic() + T
    while True:
        assert time.monotonic() < deadline, f"no CREATED event for {want}"
        m = next_msg()
        ev = m.event[0]
        say("  event:", st.EventType.Name(ev.event_type), ev.resource.metadata.id)
        if ev.event_type == st.CREATED and ev.resource.metadata.id == want:
            assert f"address: {addr}" in ev.resource.spec.yaml_spec, ev.resource.spec.yaml_spec
            break
    call.cancel()

    # The last events of the kind, without the initial state.
    tail = stub.Watch(
        st.WatchRequest(
            namespace="network",
            type=ADDRESSES,
            options=st.WatchOptions(tail_events=1),
            api_version=1,
        ),
        timeout=3,
    )
    got = []
    try:
        for m in tail:
            got.extend(m.event)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    assert len(got) == 1, got
    say("  tail_events=1:", st.EventType.Name(got[0].event_type), got[0].resource.metadata.id)

    # One ID that does not exist: DESTROYED first.
    one = stub.Watch(
        st.WatchRequest(namespace="network", type=ADDRESSES, id="nosuch/10.9.9.9/32", api_version=1),
        timeout=3,
    )
    msgs = []
    try:
        for m in one:
            msgs.append(m)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    assert len(msgs) == 2 and msgs[1].event[0].event_type == st.DESTROYED, msgs
    say("ok local")


def maintenance(addr):
    """A node without a config over TLS, no client certificate: reads of network, hardware
    and meta resources only, nothing sensitive. grpclib over Python's ssl (which, unlike
    grpcio's TLS, offers the Ed25519 signatures of the node's self-signed certificate),
    the certificate unchecked as `--insecure` has it; the messages are the compiled stubs'."""
    import asyncio

    import grpclib.client
    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    host, _, port = addr.rpartition(":")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    path = "/cosi.resource.State/"

    async def run():
        async with grpclib.client.Channel(host, int(port), ssl=ctx) as ch:

            def stream(name, req, reply):
                return grpclib.client.UnaryStreamMethod(ch, path + name, type(req), reply)(
                    req, timeout=T
                )

            def unary(name, req, reply):
                return grpclib.client.UnaryUnaryMethod(ch, path + name, type(req), reply)(
                    req, timeout=T
                )

            async def refused(what, coro):
                try:
                    await coro
                except GRPCError as e:
                    assert e.status == Status.PERMISSION_DENIED, f"{what}: {e.status} {e.message}"
                    say(f"  {what}: {e.status.name}: {e.message}")
                    return
                raise AssertionError(f"{what}: succeeded in maintenance mode")

            defs = await stream("List", st.ListRequest(namespace="meta", type=RD), st.ListResponse)
            assert any(r.resource.metadata.id == ADDRESSES.lower() for r in defs), defs
            listed = await stream(
                "List", st.ListRequest(namespace="network", type=ADDRESSES), st.ListResponse
            )
            assert any(r.resource.metadata.id == "lo/127.0.0.1/8" for r in listed), listed
            say("  maintenance lists", len(defs), "definitions and", len(listed), "addresses")
            await refused(
                "list machine statuses",
                stream(
                    "List",
                    st.ListRequest(namespace="runtime", type="MachineStatuses.runtime.talos.dev"),
                    st.ListResponse,
                ),
            )
            await refused(
                "get a sensitive type",
                unary(
                    "Get",
                    st.GetRequest(namespace="network", type="LinkSpecs.net.talos.dev", id="lo"),
                    st.GetResponse,
                ),
            )
            await refused(
                "watch members",
                stream(
                    "Watch",
                    st.WatchRequest(
                        namespace="cluster", type="Members.cluster.talos.dev", api_version=1
                    ),
                    st.WatchResponse,
                ),
            )
            await refused(
                "update",
                unary(
                    "Update", st.UpdateRequest(new_resource=listed[0].resource), st.UpdateResponse
                ),
            )

    asyncio.run(run())
    say("ok maintenance")


def main():
    scenario = sys.argv[1]
    if scenario == "local":
        local(*sys.argv[2:5])
    elif scenario == "maintenance":
        maintenance(sys.argv[2])
    else:
        sys.exit(f"unknown scenario {scenario}")


main()
