#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A COSI client keelson did not write: grpcio, with stubs compiled at run time by
grpcio-tools from talos-api/proto (resource.proto, state.proto, meta.proto). It talks to a
node's local API socket the way `talosctl get` talks to Talos: it resolves `addresses`
through the resource definitions in `meta`, lists, gets and watches. Run inside the node's
network namespace; it adds an address itself (`ip addr add`) and expects to see it. Prints
`ok SCENARIO` at the end; any failure exits non-zero with a traceback.

  python3 cosi_client.py local SOCKET LINK ADDRESS/BITS
  python3 cosi_client.py maintenance HOST:PORT
  python3 cosi_client.py stall SOCKET LINK COUNT
  python3 cosi_client.py roles HOST:PORT ADMIN_KEELSONCONFIG READER_KEELSONCONFIG MACHINE_YAML

`stall` also lists COUNT addresses twice on one connection whose window is wide open (a
client that sends nothing while it takes a long list)."""

import os
import base64
import queue
import socket
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
    # Everything listed before is in the initial state (link-local addresses may have
    # appeared since; none go away).
    assert set(ids) <= set(created) and len(set(created)) == len(created), (created, ids)
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
    proto_specs(stub, addr)
    say("ok local")


def proto_specs(stub, addr):
    """The protobuf specs talosctl decodes, read with the PyPI Talos bindings (generated from
    Talos's own .proto files) and checked against what the YAML says."""
    import ipaddress

    from talos_linux_api.v1_6_0.talos.resource.definitions import network as tnet
    from talos_linux_api.v1_6_0.talos.resource.definitions import runtime as truntime

    def listed(t, ns="network", some=True):
        out = [r.resource for r in stub.List(st.ListRequest(namespace=ns, type=t), timeout=T)]
        assert out or not some, t
        for r in out:
            assert r.spec.proto_spec, (t, r.metadata.id)
        return out

    lo = next(r for r in listed(ADDRESSES) if r.metadata.id == "lo/127.0.0.1/8")
    a = tnet.AddressStatusSpec().parse(lo.spec.proto_spec)
    assert bytes(a.address.ip) == bytes([127, 0, 0, 1]) and a.address.prefix_length == 8, a
    assert a.link_name == "lo" and a.family == 2 and a.scope == 254, a
    ours = ipaddress.ip_interface(addr)
    mine = [tnet.AddressStatusSpec().parse(r.spec.proto_spec) for r in listed(ADDRESSES)]
    assert any(bytes(m.address.ip) == ours.ip.packed and m.address.prefix_length == ours.network.prefixlen for m in mine), mine
    links = {r.metadata.id: tnet.LinkStatusSpec().parse(r.spec.proto_spec) for r in listed("LinkStatuses.net.talos.dev")}
    assert links["lo"].type == 772 and links["lo"].flags & 0x9 == 0x9, links["lo"]  # loopback, UP|LOOPBACK
    assert links["lo"].operational_state in (0, 6), links["lo"]
    routes = [tnet.RouteStatusSpec().parse(r.spec.proto_spec) for r in listed("RouteStatuses.net.talos.dev")]
    assert any(r.out_link_name and r.table == 254 and r.family == 2 for r in routes), routes
    # A node without a config has no hostname; one with a name sends it.
    h = [tnet.HostnameStatusSpec().parse(r.spec.proto_spec) for r in listed("HostnameStatuses.net.talos.dev", some=False)]
    assert all(x.hostname for x in h), h
    n = [tnet.NodeAddressSpec().parse(r.spec.proto_spec) for r in listed("NodeAddresses.net.talos.dev")]
    assert any(bytes(p.ip) == ours.ip.packed for x in n for p in x.addresses), n
    ms = listed("MachineStatuses.runtime.talos.dev", "runtime")[0]
    m = truntime.MachineStatusSpec().parse(ms.spec.proto_spec)
    # No config: maintenance, as the YAML says.
    assert "stage: maintenance" in ms.spec.yaml_spec, ms.spec.yaml_spec
    assert m.stage == 3 and any(c.name == "config" for c in m.status.unmet_conditions), m
    say(f"  proto_spec: {len(mine)} addresses, {len(links)} links, {len(routes)} routes, hostnames {[x.hostname for x in h]}, stage {m.stage}")


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


def h2_client(sock, window):
    """A raw HTTP/2 client (the h2 library) on the socket, with a receive window of `window`
    bytes for the connection and each stream."""
    import h2.config
    import h2.connection
    import h2.settings

    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(sock)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.local_settings = h2.settings.Settings(
        client=True, initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
    )
    conn.initiate_connection()
    if window > 65535:
        conn.increment_flow_control_window(window - 65535)
    raw.sendall(conn.data_to_send())
    return raw, conn


def h2_call(raw, conn, method, req):
    """Start a call; its stream ID."""
    sid = conn.get_next_available_stream_id()
    conn.send_headers(
        sid,
        [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", f"/cosi.resource.State/{method}"),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ],
    )
    body = req.SerializeToString()
    conn.send_data(sid, b"\0" + len(body).to_bytes(4, "big") + body, end_stream=True)
    raw.sendall(conn.data_to_send())
    return sid


def wide_window_lists(sock, count):
    """Two lists on one connection whose window is wide open: the client sends nothing while
    it takes them, so the node must go on sending by itself."""
    import h2.events

    raw, conn = h2_client(sock, 1 << 24)
    raw.settimeout(T)
    for round in range(2):
        t0 = time.monotonic()
        sid = h2_call(raw, conn, "List", st.ListRequest(namespace="network", type=ADDRESSES))
        got, ended = 0, False
        while not ended:
            data = raw.recv(1 << 20)
            assert data, "the node closed the connection"
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                    got += len(ev.data)
                    conn.acknowledge_received_data(ev.flow_controlled_length, sid)
                if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                    ended = True
            raw.sendall(conn.data_to_send())
        assert got > count * 100, f"list {round}: {got} bytes for {count} addresses"
        say(f"  wide-window list {round}: {got} bytes in {time.monotonic() - t0:.2f} s")
    raw.close()


def stall(sock, link, count):
    """A watcher that stops reading (the h2 library, its flow-control window never opened
    again) while COUNT addresses appear: its stream is reset, and the node keeps answering
    others all along."""
    import h2.events

    raw, conn = h2_client(sock, 65535)
    req = st.WatchRequest(
        namespace="network",
        type=ADDRESSES,
        options=st.WatchOptions(bootstrap_contents=True),
        api_version=1,
    )
    sid = h2_call(raw, conn, "Watch", req)
    started = time.monotonic()

    count = int(count)
    batch = "".join(
        f"address add 10.{80 + i // 65536}.{i // 256 % 256}.{i % 256}/32 dev {link}\n"
        for i in range(count)
    )
    subprocess.run(["ip", "-batch", "-"], input=batch.encode(), check=True)
    say(f"  {count} addresses added in {time.monotonic() - started:.1f} s")

    # Others are answered while the stalled watch holds its stream (once the node has seen
    # every address: it learns them from the kernel as they come).
    other = st_grpc.StateStub(grpc.insecure_channel(f"unix:{sock}"))
    deadline = time.monotonic() + T
    while True:
        t0 = time.monotonic()
        n = sum(1 for _ in other.List(st.ListRequest(namespace="network", type=ADDRESSES), timeout=T))
        if n >= count:
            break
        assert time.monotonic() < deadline, f"the node has {n} of {count} addresses"
        time.sleep(0.2)
    t1 = time.monotonic()
    other.Get(st.GetRequest(namespace="network", type=ADDRESSES, id="lo/127.0.0.1/8"), timeout=T)
    say(f"  another client: list of {n} addresses {t1 - t0:.2f} s, get {time.monotonic() - t1:.2f} s")
    wide_window_lists(sock, count)

    # Now read what the stalled stream was sent: it must end in a reset.
    raw.settimeout(1)
    reset = None
    got = 0
    deadline = time.monotonic() + 25
    while reset is None and time.monotonic() < deadline:
        try:
            data = raw.recv(1 << 20)
        except socket.timeout:
            continue
        if not data:
            reset = "connection closed"
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.DataReceived) and ev.stream_id == sid:
                got += len(ev.data)
            if isinstance(ev, h2.events.StreamReset) and ev.stream_id == sid:
                reset = f"RST_STREAM {ev.error_code!r}"
            if isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid:
                reset = "stream ended"
    assert reset is not None, "the stalled watch was never dropped"
    assert got < 1 << 20, f"{got} bytes were sent to a client that did not read"
    say(f"  stalled watch dropped after {time.monotonic() - started:.1f} s ({reset}, {got} bytes sent)")
    say("ok stall")


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


def roles(addr, admin_cfg, reader_cfg, machine_yaml):
    """Mutual TLS: os:reader reads what is not sensitive; the machine config and KubeSpan's
    keys are os:admin's, and even the admin sees the CA key redacted."""
    import asyncio

    import grpclib.client
    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    host, _, port = addr.rpartition(":")
    path = "/cosi.resource.State/"
    with open(machine_yaml) as f:
        secrets = [
            v.strip()
            for line in f
            for k, _, v in [line.strip().partition(":")]
            if k in ("key", "secret", "token") and len(v.strip()) > 20
        ]
    assert secrets, "the machine config has a key to look for"

    def ctx(cfg):
        files = keelsonconfig(cfg)
        c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        c.set_alpn_protocols(["h2"])
        c.load_verify_locations(files["ca"])
        c.load_cert_chain(files["crt"], files["key"])
        return c

    async def run():
        reader = grpclib.client.Channel(host, int(port), ssl=ctx(reader_cfg))
        admin = grpclib.client.Channel(host, int(port), ssl=ctx(admin_cfg))
        try:

            def get(ch, ns, ty, id):
                req = st.GetRequest(namespace=ns, type=ty, id=id)
                return grpclib.client.UnaryUnaryMethod(
                    ch, path + "Get", st.GetRequest, st.GetResponse
                )(req, timeout=T)

            def lst(ch, ns, ty):
                req = st.ListRequest(namespace=ns, type=ty)
                return grpclib.client.UnaryStreamMethod(
                    ch, path + "List", st.ListRequest, st.ListResponse
                )(req, timeout=T)

            async def refused(what, coro):
                try:
                    await coro
                except GRPCError as e:
                    assert e.status == Status.PERMISSION_DENIED, f"{what}: {e.status} {e.message}"
                    say(f"  {what}: {e.status.name}: {e.message}")
                    return
                raise AssertionError(f"{what}: allowed")

            mc = ("config", "MachineConfigs.config.talos.dev", "v1alpha1")
            addrs = await lst(reader, "network", ADDRESSES)
            assert any(r.resource.metadata.id == "lo/127.0.0.1/8" for r in addrs), addrs
            status = await lst(reader, "runtime", "MachineStatuses.runtime.talos.dev")
            assert len(status) == 1, status
            say("  reader lists", len(addrs), "addresses and the machine status")
            await refused("reader gets the machine config", get(reader, *mc))
            await refused("reader lists KubeSpan identities", lst(reader, "kubespan", "KubeSpanIdentities.kubespan.talos.dev"))
            await refused(
                "reader creates",
                grpclib.client.UnaryUnaryMethod(
                    reader, path + "Create", st.CreateRequest, st.CreateResponse
                )(st.CreateRequest(resource=addrs[0].resource), timeout=T),
            )
            got = await get(admin, *mc)
            yaml = got.resource.spec.yaml_spec
            assert got.resource.metadata.type == mc[1] and "<redacted>" in yaml, yaml[:400]
            for secret in secrets:
                assert secret not in yaml, "a key of the machine config went out"
            say(f"  admin gets the machine config ({len(yaml)} bytes of YAML, keys redacted)")
            await refused(
                "admin destroys",
                grpclib.client.UnaryUnaryMethod(
                    admin, path + "Destroy", st.DestroyRequest, st.DestroyResponse
                )(st.DestroyRequest(namespace=mc[0], type=mc[1], id=mc[2]), timeout=T),
            )
        finally:
            reader.close()
            admin.close()

    asyncio.run(run())
    say("ok roles")


def main():
    scenario = sys.argv[1]
    if scenario == "local":
        local(*sys.argv[2:5])
    elif scenario == "stall":
        stall(*sys.argv[2:5])
    elif scenario == "roles":
        roles(*sys.argv[2:6])
    elif scenario == "maintenance":
        maintenance(sys.argv[2])
    else:
        sys.exit(f"unknown scenario {scenario}")


main()
