# SPDX-License-Identifier: Apache-2.0
"""Helpers for the state-disk boots (tests/boot/cases.py: install, install-refused,
install-refused-url, state-small; scripts/test-power-cut): raw disk images, the machine configs they apply, DHCP in a QEMU
packet capture, and the keelson client on the host.

A node with a disk boots with `-drive file=DISK,if=virtio,format=raw` (virtio-blk, /dev/vda
in the guest) and its network backend named `n0`, so `-object filter-dump` can record what
it sends and receives.
"""

import hashlib
import struct
import subprocess
import uuid
import zlib
from pathlib import Path

import vm

DISK_MIB = 64


def blank_disk(path, mib=DISK_MIB):
    """A sparse raw image of zeros."""
    with open(path, "wb") as f:
        f.truncate(mib << 20)
    return Path(path)


def mbr_disk(path, mib=DISK_MIB):
    """A raw image with an MBR partition table: one Linux partition from 1 MiB to the end."""
    blank_disk(path, mib)
    sectors = (mib << 20) // 512
    entry = struct.pack("<B3sB3sII", 0, b"\x00\x02\x00", 0x83, b"\xff\xff\xff", 2048, sectors - 2048)
    with open(path, "r+b") as f:
        f.seek(446)
        f.write(entry)
        f.seek(510)
        f.write(b"\x55\xaa")
    return Path(path)


# keelson's state partition: its type GUID and label (init/src/state/gpt.rs).
STATE_TYPE = uuid.UUID("dcac0c02-f3be-4d89-b748-1c949b7f981a")
STATE_LABEL = "KEELSON-STATE"
LINUX_TYPE = uuid.UUID("0fc63daf-8483-4772-8e79-3d69d8477de4")


def gpt_disk(path, parts, mib=DISK_MIB):
    """A raw image with a GPT (protective MBR, primary and backup headers, 128 entries), as
    another partitioning tool would write it: `parts` are (type UUID, first LBA, last LBA,
    label) with 512-byte sectors."""
    blank_disk(path, mib)
    sectors = (mib << 20) // 512
    entries = bytearray(128 * 128)
    for i, (kind, first, last, label) in enumerate(parts):
        name = label.encode("utf-16-le").ljust(72, b"\0")
        entries[i * 128:(i + 1) * 128] = struct.pack(
            "<16s16sQQQ72s", kind.bytes_le, uuid.uuid4().bytes_le, first, last, 0, name)
    entries_crc = zlib.crc32(entries)
    disk_guid = uuid.uuid4().bytes_le

    def header(mine, alternate, entries_lba):
        h = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x10000, 92, 0, 0, mine,
                                  alternate, 34, sectors - 34, disk_guid, entries_lba, 128, 128,
                                  entries_crc))
        h[16:20] = struct.pack("<I", zlib.crc32(h))
        return bytes(h).ljust(512, b"\0")

    mbr = bytearray(512)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\x00\x02\x00", 0xEE, b"\xff\xff\xff", 1,
                               min(sectors - 1, 0xFFFFFFFF))
    mbr[510:512] = b"\x55\xaa"
    with open(path, "r+b") as f:
        f.write(bytes(mbr) + header(1, sectors - 1, 2) + entries)
        f.seek((sectors - 33) * 512)
        f.write(entries + header(sectors - 1, 1, sectors - 33))
    return Path(path)


def fill(path, start, end, byte):
    """Fill bytes [start, end) of an image with `byte`."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes([byte]) * (end - start))


def all_bytes(path, start, end, byte):
    """Are bytes [start, end) of an image all `byte`? The offset of the first that is not, or
    None."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    bad = next((i for i, b in enumerate(data) if b != byte), None)
    if bad is None and len(data) == end - start:
        return None
    return start + (len(data) if bad is None else bad)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def qemu_extra(disk, pcap=None):
    """QEMU arguments for the disk (and a capture of the NIC's traffic)."""
    extra = ["-drive", f"file={disk},if=virtio,format=raw"]
    if pcap:
        extra += ["-object", f"filter-dump,id=dump0,netdev=n0,file={pcap}"]
    return extra


def client(*args, timeout=60):
    """The static keelson binary as a client on this machine: (success, stdout+stderr)."""
    try:
        p = subprocess.run([str(vm.STATIC_BIN), *args], capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    return p.returncode == 0, p.stdout + p.stderr


def gen_config(tmp, api_port):
    """`keelson gen config` in `tmp/gen`: the skeleton machine config (with its CA) and the
    admin client config; returns the skeleton's text."""
    ok, out = client("gen", "config", "state", "--output", str(tmp / "gen"), "--endpoints",
                     f"127.0.0.1:{api_port}")
    if not ok:
        raise RuntimeError(f"keelson gen config: {out.strip()[-300:]}")
    return (tmp / "gen" / "machine.yaml").read_text()


def node_config(skeleton, disk="/dev/vda", wipe=False, hostname="keelson-state", padding=0):
    """The skeleton with install.disk, KubeSpan on (its key is generated and kept), the demo
    kubelet, time sync off; `padding` bytes of comment make the state write longer."""
    machine = ("  install:\n"
               f"    disk: {disk}\n"
               f"    wipe: {'true' if wipe else 'false'}\n"
               "  network:\n"
               f"    hostname: {hostname}\n"
               "    kubespan:\n"
               "      enabled: true\n"
               "  kubelet:\n"
               "    command: [/bin/demo-kubelet]\n"
               "  time:\n"
               "    disabled: true\n")
    text = skeleton.replace("  network: {}\n", machine)
    if "\ncluster:" not in text:
        text += "cluster:\n  id: c3RhdGUtdGVzdC1jbHVzdGVyLWlkLTAwMDAwMDAwMDA=\n  secret: c3RhdGUtdGVzdC1zZWNyZXQtMDAwMDAwMDAwMDAwMDA=\n"
    if padding:
        text += "".join(f"# padding {i:08d} {'x' * 40}\n" for i in range(padding // 60 + 1))
    return text


def config_digest(text):
    """What the node prints for a config: the first 16 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dhcp_client_messages(pcap):
    """The DHCPv4 messages the node sent, in order: (type, requested IP or None, server ID
    or None). Reads a libpcap file of Ethernet frames."""
    data = Path(pcap).read_bytes()
    out = []
    if len(data) < 24:
        return out
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    at = 24
    while at + 16 <= len(data):
        _, _, incl, _ = struct.unpack(endian + "IIII", data[at:at + 16])
        frame = data[at + 16:at + 16 + incl]
        at += 16 + incl
        if len(frame) < 14 + 20 + 8 or frame[12:14] != b"\x08\x00":
            continue
        ip = frame[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 17:
            continue
        udp = ip[ihl:]
        sport, dport = struct.unpack(">HH", udp[:4])
        if (sport, dport) != (68, 67):
            continue
        bootp = udp[8:]
        if len(bootp) < 240 or bootp[236:240] != b"\x63\x82\x53\x63":
            continue
        opts, i = {}, 240
        while i < len(bootp) and bootp[i] != 255:
            if bootp[i] == 0:
                i += 1
                continue
            code, n = bootp[i], bootp[i + 1]
            opts[code] = bootp[i + 2:i + 2 + n]
            i += 2 + n
        kind = {1: "DISCOVER", 3: "REQUEST", 4: "DECLINE", 7: "RELEASE", 8: "INFORM"}.get(
            opts.get(53, b"\x00")[0], "?")
        ip_of = lambda b: ".".join(str(x) for x in b) if b and len(b) == 4 else None  # noqa: E731
        out.append((kind, ip_of(opts.get(50)), ip_of(opts.get(54))))
    return out
