# SPDX-License-Identifier: Apache-2.0
"""Reset and Upgrade against `keelson run` with the PyPI Talos bindings (betterproto messages,
grpclib stubs). Each scenario asserts what it gets and prints `ok SCENARIO` at the end.

  python3 reset_upgrade.py refusals ADDR ADMIN_KEELSONCONFIG READER_KEELSONCONFIG
  python3 reset_upgrade.py upgrade ADDR ADMIN_KEELSONCONFIG MANIFEST_URL
  python3 reset_upgrade.py reset ADDR ADMIN_KEELSONCONFIG
  python3 reset_upgrade.py maintenance ADDR"""

import asyncio
import base64
import os
import ssl
import sys
import tempfile

import grpclib
from grpclib.client import Channel
from grpclib.const import Status

from talos_linux_api.v1_6_0 import machine as tm
from talos_linux_api.v1_6_0 import storage as tstorage
import betterproto.lib.google.protobuf as pb

EMPTY = pb.Empty()


def say(*a):
    print(*a, flush=True)


def keelsonconfig(path):
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


def channel(addr, client=None):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.set_alpn_protocols(["h2"])
    if client is None:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        files = keelsonconfig(client)
        ctx.load_verify_locations(files["ca"])
        ctx.load_cert_chain(files["crt"], files["key"])
    host, _, port = addr.rpartition(":")
    return Channel(host, int(port), ssl=ctx)


async def fails(what, code, coro, contains=""):
    try:
        got = await coro
    except grpclib.exceptions.GRPCError as e:
        assert e.status == code, f"{what}: {e.status} {e.message!r}, wanted {code}"
        assert contains in (e.message or ""), f"{what}: {e.message!r} lacks {contains!r}"
        say(f"  {what}: {e.status.name}: {e.message}")
        return e
    raise AssertionError(f"{what}: answered {got!r}, wanted {code}")


def wipe(*labels):
    return [tm.ResetPartitionSpec(label=l, wipe=True) for l in labels]


async def refusals(addr, admin, reader):
    ch = channel(addr, reader)
    m = tm.MachineServiceStub(ch)
    await fails("reader resets", Status.PERMISSION_DENIED,
                m.reset(tm.ResetRequest(graceful=True, reboot=True)), "os:reader")
    await fails("reader upgrades", Status.PERMISSION_DENIED,
                m.upgrade(tm.UpgradeRequest(image="https://example.com/m.json")), "os:reader")
    ch.close()
    ch = channel(addr, admin)
    m = tm.MachineServiceStub(ch)
    await fails("an unknown label", Status.INVALID_ARGUMENT,
                m.reset(tm.ResetRequest(system_partitions_to_wipe=wipe("STATE", "META"))),
                'system_partitions_to_wipe[1].label: "META"')
    await fails("user disks with SYSTEM_DISK", Status.INVALID_ARGUMENT,
                m.reset(tm.ResetRequest(user_disks_to_wipe=["/dev/sdb"],
                                        mode=tm.ResetRequestWipeMode.SYSTEM_DISK)))
    await fails("user disks", Status.UNIMPLEMENTED,
                m.reset(tm.ResetRequest(user_disks_to_wipe=["/dev/sdb"])))
    await fails("a container image", Status.INVALID_ARGUMENT,
                m.upgrade(tm.UpgradeRequest(image="ghcr.io/siderolabs/installer:v1.6.0")), "image:")
    await fails("plain http from another host", Status.INVALID_ARGUMENT,
                m.upgrade(tm.UpgradeRequest(image="http://10.9.9.9/m.json")), "use https://")
    await fails("stage", Status.UNIMPLEMENTED,
                m.upgrade(tm.UpgradeRequest(image="https://example.com/m.json", stage=True)))
    await fails("powercycle", Status.INVALID_ARGUMENT,
                m.upgrade(tm.UpgradeRequest(image="https://example.com/m.json",
                                            reboot_mode=tm.UpgradeRequestRebootMode.POWERCYCLE)))
    ch.close()
    say("ok refusals")


async def upgrade(addr, admin, url):
    ch = channel(addr, admin)
    r = await tm.MachineServiceStub(ch).upgrade(tm.UpgradeRequest(image=url))
    assert len(r.messages) == 1, r
    assert r.messages[0].ack == "Upgrade request received" and r.messages[0].actor_id, r
    say("  upgrade accepted:", r.messages[0].actor_id)
    ch.close()
    say("ok upgrade")


async def reset(addr, admin):
    ch = channel(addr, admin)
    r = await tm.MachineServiceStub(ch).reset(
        tm.ResetRequest(graceful=True, reboot=True, system_partitions_to_wipe=wipe("STATE", "EPHEMERAL")))
    assert len(r.messages) == 1 and r.messages[0].actor_id, r
    say("  reset accepted:", r.messages[0].actor_id)
    ch.close()
    say("ok reset")


async def maintenance(addr):
    ch = channel(addr)
    m = tm.MachineServiceStub(ch)
    v = await m.version(EMPTY)
    assert v.messages[0].version.tag.startswith("v0."), v
    # Talos's maintenance service leaves the features out.
    assert not pb_set(v.messages[0], "features"), v
    d = await tstorage.StorageServiceStub(ch).disks(EMPTY)
    assert len(d.messages) == 1, d
    await fails("reset in maintenance mode", Status.UNIMPLEMENTED, m.reset(tm.ResetRequest()))
    ch.close()
    say("ok maintenance")


def pb_set(msg, field):
    import betterproto
    return betterproto.serialized_on_wire(getattr(msg, field))


SCENARIOS = {"refusals": refusals, "upgrade": upgrade, "reset": reset, "maintenance": maintenance}

if __name__ == "__main__":
    asyncio.run(SCENARIOS[sys.argv[1]](*sys.argv[2:]))
