# SPDX-License-Identifier: Apache-2.0
"""Reset and Upgrade against `keelson run` with the PyPI Talos bindings (betterproto messages,
grpclib stubs). Each scenario asserts what it gets and prints `ok SCENARIO` at the end.

  python3 reset_upgrade.py refusals ADDR ADMIN_KEELSONCONFIG READER_KEELSONCONFIG
  python3 reset_upgrade.py upgrade ADDR ADMIN_KEELSONCONFIG MANIFEST_URL
  python3 reset_upgrade.py upgrade_busy ADDR ADMIN_KEELSONCONFIG MANIFEST_URL
  python3 reset_upgrade.py reset ADDR ADMIN_KEELSONCONFIG
  python3 reset_upgrade.py maintenance ADDR"""

import asyncio
import sys

from grpclib.const import Status

from talos_linux_api.v1_6_0 import machine as tm
from talos_linux_api.v1_6_0 import storage as tstorage

# The helpers every Talos API scenario shares (TLS from a keelsonconfig, refusals).
from talos_api import EMPTY, channel, fails, pb_set, say


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


async def upgrade_busy(addr, admin, url):
    ch = channel(addr, admin)
    await fails("another image while one is under way", Status.FAILED_PRECONDITION,
                tm.MachineServiceStub(ch).upgrade(tm.UpgradeRequest(image=url)), "is under way")
    ch.close()
    say("ok upgrade_busy")


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


SCENARIOS = {"refusals": refusals, "upgrade": upgrade, "upgrade_busy": upgrade_busy,
             "reset": reset, "maintenance": maintenance}

if __name__ == "__main__":
    asyncio.run(SCENARIOS[sys.argv[1]](*sys.argv[2:]))
