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
  python3 talos_api.py stall SOCKET
  python3 talos_api.py protos PROTO_DIR
  python3 talos_api.py kubelet SOCKET STARTS_FILE"""
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


async def fails(what, code, coro, contains=""):
    """`coro` must fail with gRPC status `code` (and a message holding `contains`)."""
    try:
        got = await coro
    except grpclib.exceptions.GRPCError as e:
        assert e.status == code, f"{what}: {e.status} {e.message!r}, wanted {code}"
        assert contains in (e.message or ""), f"{what}: {e.message!r} lacks {contains!r}"
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
    # A request that is not the method's message: field 1 of ApplyConfigurationRequest as a
    # varint instead of bytes.
    bad = ch.unary_unary(
        "/machine.MachineService/ApplyConfiguration",
        request_serializer=lambda _: b"\x08\x01",
        response_deserializer=tm.ApplyConfigurationResponse.FromString,
    )
    grpcio_fails("bad message", grpc.StatusCode.INVALID_ARGUMENT, lambda: bad(None, timeout=10))
    # A message above the method's limit (1 MiB for a config), refused from its length.
    huge = tm.ApplyConfigurationRequest(data=b"#" * (3 << 20), mode=tm.ApplyConfigurationRequestMode.AUTO)
    grpcio_fails(
        "huge message",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        lambda: grpcio_call(ch, "/machine.MachineService/ApplyConfiguration", huge, tm.ApplyConfigurationResponse),
    )
    # The node's own log as machined's, the last 3 lines.
    got = list(
        grpcio_call(
            ch,
            "/machine.MachineService/Logs",
            tm.LogsRequest(namespace="system", id="machined", tail_lines=3),
            tcommon.Data,
            stream=True,
        )
    )
    text = b"".join(d.bytes for d in got).decode()
    lines = text.splitlines()
    assert 1 <= len(lines) <= 3, lines
    assert all(d.metadata is not None for d in got)
    say("  logs --tail 3:", len(lines), "lines")
    grpcio_fails(
        "logs of an unknown service",
        grpc.StatusCode.NOT_FOUND,
        lambda: list(grpcio_call(ch, "/machine.MachineService/Logs", tm.LogsRequest(id="nope"), tcommon.Data, stream=True)),
    )
    # Following: the lines there, then new ones as the node logs (a rejected call logs a
    # line at debug level).
    follow = grpcio_call(
        ch, "/machine.MachineService/Logs", tm.LogsRequest(id="machined", follow=True, tail_lines=1), tcommon.Data, stream=True, timeout=20
    )
    first = next(follow)
    assert first.bytes.count(b"\n") == 1, first.bytes
    grpcio_fails("unknown method again", grpc.StatusCode.UNIMPLEMENTED,
                 lambda: grpcio_call(ch, "/machine.MachineService/NopeAgain", EMPTY, tm.VersionResponse))
    more = next(follow)
    assert b"NopeAgain" in more.bytes or len(more.bytes) > 0, more.bytes
    follow.cancel()
    say("  logs --follow: got new lines")
    # Time from keelson's time sync (no server in this namespace: the local clock only).
    t = grpcio_call(ch, "/time.TimeService/Time", EMPTY, ttime.TimeResponse).messages[0]
    assert abs(t.localtime.timestamp() - time.time()) < 60, t
    say("  time:", t.localtime, repr(t.server))
    h = grpcio_call(ch, "/machine.MachineService/Hostname", EMPTY, tm.HostnameResponse).messages[0]
    assert h.hostname == h.metadata.hostname, h
    mem = grpcio_call(ch, "/machine.MachineService/Memory", EMPTY, tm.MemoryResponse).messages[0]
    assert mem.meminfo.memtotal > 0 and mem.meminfo.memfree <= mem.meminfo.memtotal, mem.meminfo
    load = grpcio_call(ch, "/machine.MachineService/LoadAvg", EMPTY, tm.LoadAvgResponse).messages[0]
    assert load.load1 >= 0 and load.load15 >= 0, load
    for what in ("Bootstrap", "Kubeconfig"):
        req = tm.BootstrapRequest() if what == "Bootstrap" else EMPTY
        fn = (lambda: grpcio_call(ch, "/machine.MachineService/Bootstrap", req, tcommon.EmptyResponse)) if what == "Bootstrap" else (
            lambda: list(grpcio_call(ch, "/machine.MachineService/Kubeconfig", req, tcommon.Data, stream=True)))
        grpcio_fails(what, grpc.StatusCode.FAILED_PRECONDITION, fn)
    ch.close()
    say("ok local")


async def maintenance(addr, config):
    """A node without a config over TLS, no client certificate (talosctl --insecure)."""
    ch = channel(addr)
    machine = tm.MachineServiceStub(ch)
    storage = tstorage.StorageServiceStub(ch)
    v = await machine.version(EMPTY)
    check_version(v, maintenance=True)
    say("  version (maintenance):", v.messages[0].version.tag)
    d = await storage.disks(EMPTY)
    assert len(d.messages) == 1, d
    for disk in d.messages[0].disks:
        assert disk.device_name == "/dev/" + disk.name, disk
        assert not disk.name.startswith(("loop", "ram")), disk
    say("  disks:", [x.name for x in d.messages[0].disks])
    # What Talos's maintenance service does not have.
    await fails("reboot", Status.UNIMPLEMENTED, machine.reboot(tm.RebootRequest()))
    await fails("service list", Status.UNIMPLEMENTED, machine.service_list(EMPTY))
    await fails("dmesg", Status.UNIMPLEMENTED, collect(machine.dmesg(tm.DmesgRequest())))
    await fails("time", Status.UNIMPLEMENTED, ttime.TimeServiceStub(ch).time(EMPTY))
    text = open(config, "rb").read()
    req = lambda **kw: tm.ApplyConfigurationRequest(data=text, **kw)
    await fails(
        "apply --mode no-reboot",
        Status.UNIMPLEMENTED,
        machine.apply_configuration(req(mode=tm.ApplyConfigurationRequestMode.NO_REBOOT)),
    )
    await fails(
        "apply of a broken config",
        Status.INVALID_ARGUMENT,
        machine.apply_configuration(tm.ApplyConfigurationRequest(data=b"version: v1alpha1\nmachine: 3\n")),
    )
    dry = await machine.apply_configuration(req(mode=tm.ApplyConfigurationRequestMode.AUTO, dry_run=True))
    assert "maintenance mode" in dry.messages[0].mode_details, dry
    say("  apply --dry-run:", dry.messages[0].mode_details.splitlines()[0])
    # The node is still in maintenance: a dry run changes nothing.
    await machine.version(EMPTY)
    r = await machine.apply_configuration(req(mode=tm.ApplyConfigurationRequestMode.REBOOT))
    a = r.messages[0]
    assert a.mode == tm.ApplyConfigurationRequestMode.NO_REBOOT, a
    assert "without a reboot" in a.mode_details, a
    assert isinstance(a.metadata.hostname, str)
    say("  applied:", a.mode_details.splitlines()[0])
    # Maintenance is over: this connection has no rights any more.
    try:
        got = await machine.version(EMPTY)
        raise AssertionError(f"version after maintenance ended: {got}")
    except grpclib.exceptions.GRPCError as e:
        assert e.status in (Status.PERMISSION_DENIED, Status.UNAVAILABLE), e
        say(f"  version after the apply: {e.status.name}")
    except (ConnectionError, grpclib.exceptions.StreamTerminatedError, ssl.SSLError) as e:
        say(f"  version after the apply: connection closed ({type(e).__name__})")
    ch.close()
    say("ok maintenance")


async def configured(addr, admin, reader):
    """A node with machine.ca: mutual TLS, each role."""
    # Without a certificate: no session at all.
    ch = channel(addr)
    try:
        got = await asyncio.wait_for(tm.MachineServiceStub(ch).version(EMPTY), 20)
        raise AssertionError(f"version without a client certificate: {got}")
    except AssertionError:
        raise
    except Exception as e:  # noqa: BLE001 - any transport failure is the point
        say(f"  no certificate: refused ({type(e).__name__})")
    ch.close()

    ch = channel(addr, admin)
    machine = tm.MachineServiceStub(ch)
    v = await machine.version(EMPTY)
    check_version(v, maintenance=False)
    services = (await machine.service_list(EMPTY)).messages[0]
    ids = {s.id: s for s in services.services}
    assert "machined" in ids, ids
    assert ids["machined"].state == "Running" and ids["machined"].health.healthy, ids["machined"]
    for s in services.services:
        assert s.state in ("Running", "Finished", "Failed", "Waiting", "Preparing", "Stopping"), s
    say("  services:", {k: s.state for k, s in ids.items()})
    await fails("restart of an unknown service", Status.NOT_FOUND, machine.service_restart(tm.ServiceRestartRequest(id="nope")))
    await fails("restart of machined", Status.FAILED_PRECONDITION, machine.service_restart(tm.ServiceRestartRequest(id="machined")))
    dmesg = await collect(machine.dmesg(tm.DmesgRequest()), timeout=20)
    text = b"".join(d.bytes for d in dmesg)
    assert text.startswith(b"["), text[:80]
    assert all(d.metadata.hostname == v.messages[0].metadata.hostname for d in dmesg)
    say("  dmesg:", len(text), "bytes in", len(dmesg), "messages")
    # Following: the same records, then the stream stays open for new ones.
    followed = []

    async def follow():
        async for d in machine.dmesg(tm.DmesgRequest(follow=True)):
            followed.append(d)

    try:
        await asyncio.wait_for(follow(), 3)
        raise AssertionError("dmesg --follow ended by itself")
    except asyncio.TimeoutError:
        pass
    assert sum(len(d.bytes) for d in followed) >= len(text), (len(text), len(followed))
    say("  dmesg --follow: still open after 3 s")
    events = await collect(machine.events(tm.EventsRequest(tail_events=20)), n=1, timeout=10)
    assert events, "no events"
    kinds = {e.data.type_url for e in events}
    assert all(k.startswith("talos/runtime/machine.") for k in kinds), kinds
    for e in events:
        if e.data.type_url.endswith("MachineStatusEvent"):
            ms = tm.MachineStatusEvent().parse(e.data.value)
            assert ms.stage != tm.MachineStatusEventMachineStage.UNKNOWN, ms
            say("  machine status event:", ms.stage.name)
    assert all(e.id for e in events)
    say("  events:", sorted(kinds))
    await fails("bootstrap", Status.FAILED_PRECONDITION, machine.bootstrap(tm.BootstrapRequest()))
    ch.close()

    ch = channel(addr, reader)
    machine = tm.MachineServiceStub(ch)
    check_version(await machine.version(EMPTY), maintenance=False)
    await fails("reader reboots", Status.PERMISSION_DENIED, machine.reboot(tm.RebootRequest()))
    await fails("reader shuts down", Status.PERMISSION_DENIED, machine.shutdown(tm.ShutdownRequest()))
    await fails(
        "reader applies",
        Status.PERMISSION_DENIED,
        machine.apply_configuration(tm.ApplyConfigurationRequest(data=b"version: v1alpha1\n")),
    )
    await fails("reader restarts a service", Status.PERMISSION_DENIED, machine.service_restart(tm.ServiceRestartRequest(id="kubelet")))
    ch.close()
    say("ok configured")


async def reboot(addr, admin):
    ch = channel(addr, admin)
    r = await tm.MachineServiceStub(ch).reboot(tm.RebootRequest(mode=tm.RebootRequestMode.DEFAULT))
    assert len(r.messages) == 1 and r.messages[0].actor_id, r
    say("  reboot accepted:", r.messages[0].actor_id)
    ch.close()
    say("ok reboot")


def stall(sock):
    """A client that opens a following Logs stream with a 16-byte window and never reads: the
    node drops the stream, and serves another client meanwhile."""
    import h2.config
    import h2.connection
    import h2.events
    import h2.settings

    raw = socket.socket(socket.AF_UNIX)
    raw.connect(sock)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 16})
    req = bytes(tm.LogsRequest(id="machined", follow=True, tail_lines=-1))
    conn.send_headers(
        1,
        [(":method", "POST"), (":scheme", "http"), (":path", "/machine.MachineService/Logs"),
         (":authority", "localhost"), ("content-type", "application/grpc"), ("te", "trailers")],
    )
    conn.send_data(1, b"\0" + len(req).to_bytes(4, "big") + req, end_stream=True)
    raw.sendall(conn.data_to_send())
    started = time.monotonic()
    # Meanwhile another client is served, again and again.
    ch = grpc.insecure_channel(f"unix:{sock}")
    while time.monotonic() - started < 13:
        grpcio_call(ch, "/machine.MachineService/Version", EMPTY, tm.VersionResponse)
        time.sleep(1)
    say("  another client was served while the stream stalled")
    # Now read: the stream was reset by the node.
    raw.settimeout(5)
    reset = None
    deadline = time.monotonic() + 10
    while reset is None and time.monotonic() < deadline:
        data = raw.recv(65536)
        if not data:
            break
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.StreamReset) and ev.stream_id == 1:
                reset = ev
            if isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
    assert reset is not None, "the stalled stream was not reset"
    say(f"  stalled stream reset with error code {reset.error_code}")
    grpcio_call(ch, "/machine.MachineService/Version", EMPTY, tm.VersionResponse)
    ch.close()
    say("ok stall")


def kubelet(sock, starts):
    """A node that supervises a kubelet (a shell that notes each start): its state in
    ServiceList and Events, and ServiceRestart."""
    ch = grpc.insecure_channel(f"unix:{sock}")

    def listed():
        reply = grpcio_call(ch, "/machine.MachineService/ServiceList", EMPTY, tm.ServiceListResponse)
        return {s.id: s for s in reply.messages[0].services}

    deadline = time.monotonic() + 20
    while listed().get("kubelet", tm.ServiceInfo()).state != "Running":
        assert time.monotonic() < deadline, listed()
        time.sleep(0.2)
    k = listed()["kubelet"]
    assert k.events.events and k.events.events[0].state == "Running", k
    assert k.health.unknown is False, k.health
    say("  kubelet:", k.state, "healthy" if k.health.healthy else "not healthy: " + k.health.last_message)
    before = open(starts).read().count("start")
    r = grpcio_call(ch, "/machine.MachineService/ServiceRestart", tm.ServiceRestartRequest(id="kubelet"), tm.ServiceRestartResponse)
    assert "kubelet" in r.messages[0].resp and r.messages[0].metadata is not None, r
    while open(starts).read().count("start") <= before:
        assert time.monotonic() < deadline + 20, "the kubelet did not start again"
        time.sleep(0.2)
    say("  restarted: starts", before, "->", open(starts).read().count("start"))
    events = grpcio_call(ch, "/machine.MachineService/Events", tm.EventsRequest(tail_events=-1), tm.Event, stream=True, timeout=5)
    states = []
    try:
        for e in events:
            if e.data.type_url == "talos/runtime/machine.ServiceStateEvent":
                ev = tm.ServiceStateEvent().parse(e.data.value)
                if ev.service == "kubelet":
                    states.append(ev.action.name)
            if states.count("RUNNING") >= 2:
                break
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    events.cancel()
    # Running, then (after the restart) running again; a state that lasts less than one turn
    # of the node's loop (stopping a shell) may not show.
    assert states.count("RUNNING") >= 2, states
    say("  kubelet events:", states)
    ch.close()
    say("ok kubelet")


def protos(proto_dir):
    """talos-api's .proto subset, compiled with protoc (grpcio-tools), has the field numbers
    of the PyPI bindings (generated from Talos's own .proto files)."""
    import dataclasses
    import importlib

    import betterproto
    from grpc_tools import protoc

    from talos_linux_api.v1_6_0 import common as tc

    out = tempfile.mkdtemp()
    # Nested files too (google/rpc/status.proto, which common.proto imports).
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(proto_dir) for f in fs if f.endswith(".proto"))
    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    assert protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}"] + files) == 0
    sys.path.insert(0, out)
    from talos_linux_api.v1_6_0.talos.resource.definitions import network as tnet
    from talos_linux_api.v1_6_0.talos.resource.definitions import runtime as truntime

    from talos_linux_api.v1_6_0 import securityapi as tsecurity

    bindings = {"machine": tm, "storage": tstorage, "time": ttime, "common": tc, "network": tnet, "runtime": truntime, "securityapi": tsecurity}
    checked = 0
    # keelson's own additions (docs/api.md): they must stay clear of Talos's names and numbers.
    keelson_messages = {("machine", "KeelsonBoot")}
    keelson_fields = {("machine", "Version", "keelson_boot"): 1000}
    added = 0

    def walk(desc, prefix=""):
        yield prefix + desc.name, desc
        for n in desc.nested_types:
            yield from walk(n, prefix + desc.name)

    for package, bp in bindings.items():
        pb = importlib.import_module(f"{package}_pb2")
        for top in pb.DESCRIPTOR.message_types_by_name.values():
            for name, d in walk(top):
                if (package, name) in keelson_messages:
                    assert not hasattr(bp, name), f"{package}.{name}: Talos has a message of that name"
                    added += 1
                    continue
                # betterproto spells `NetIP` as `NetIp`.
                cls = getattr(bp, name, None) or next(getattr(bp, n) for n in dir(bp) if n.lower() == name.lower())
                numbers = {f.name: betterproto.FieldMetadata.get(f).number for f in dataclasses.fields(cls)}
                for f in d.fields:
                    if keelson_fields.get((package, name, f.name)) == f.number:
                        assert f.name not in numbers and f.number not in numbers.values(), f"{package}.{name}.{f.name}: collides with Talos"
                        added += 1
                        continue
                    assert numbers.get(f.name) == f.number, f"{package}.{name}.{f.name}: {f.number} here, {numbers.get(f.name)} in Talos"
                    checked += 1
    assert checked > 100, checked
    assert added == len(keelson_messages) + len(keelson_fields), added
    say(f"  {checked} fields agree")
    say("ok protos")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    if what == "local":
        local(*args)
    elif what == "stall":
        stall(*args)
    elif what == "protos":
        protos(*args)
    elif what == "kubelet":
        kubelet(*args)
    elif what in SCENARIOS:
        asyncio.run(SCENARIOS[what](*args))
    else:
        raise SystemExit(f"unknown scenario {what}")


SCENARIOS = {"maintenance": maintenance, "configured": configured, "reboot": reboot}

if __name__ == "__main__":
    main()
