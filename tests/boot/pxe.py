# SPDX-License-Identifier: Apache-2.0
"""Firmware network boot: QEMU's own iPXE ROM (-boot n) boots keelson from keelson-operator.

keelson-operator serves the boot HTTP service on 127.0.0.1 (QEMU's user network reaches the
host as 10.0.2.2); the image `pxe-test` is Debian's kernel and keelson's demo initramfs
(scripts/build-initramfs); the machine table holds the VM's MAC with the demo's kernel
arguments. QEMU's DHCP server hands the ROM `bootfile=http://10.0.2.2:PORT/ipxe?mac=...`
(and `tftp=` the iPXE binaries, which this boot does not need: the ROM is iPXE already). The
test passes when the console shows the script's echo line, keelson's `network ready`, the
config fetched from the operator's /config/<mac> (the script's talos.config=) and the kubelet
stand-in started with that config's hostname.

With --proxy-dhcp (root): the same boot on a bridge in network namespaces instead of QEMU's
user network: the VM's tap and a veth to a second namespace where dnsmasq hands out addresses
and nothing else; the operator runs `serve --proxy-dhcp br0` next to the bridge, and the ROM
learns the script URL only from the operator's proxyDHCP answers (the operator logs them).

On the bridge the test also checks that the VM's address came from dnsmasq (its log and lease
file name the VM's MAC), and that a MAC the operator does not know gets nothing from the proxy:
a client in a third namespace on the same bridge (busybox udhcpc with option 60
`PXEClient:Arch:00000:UNDI:002001`, MAC STRANGER) gets a lease from dnsmasq, while tcpdump on
br0 sees no packet from the operator's address for that MAC and the operator logs it as
unknown. `--capture DIR` keeps that tcpdump (DHCP and proxyDHCP, ports 67, 68 and 4011) as
DIR/NAME.pcap (NAME: `ipxe-bios` or `ovmf`), the captures the proxyDHCP unit tests read.

With --uefi (implies --proxy-dhcp): OVMF's own network stack instead of QEMU's iPXE ROM (the
NIC's option ROM is left out): the firmware's PXE client gets `ipxe.efi` named by the
operator's proxyDHCP (option 93 = 7) and fetches it from the operator's TFTP server; that
iPXE asks again (user class iPXE) and gets the script URL.

scripts/test runs the default and --uefi boots (about 15 s and 40 s). Usage:
  scripts/test-pxe [--initrd PATH] [--proxy-dhcp] [--uefi] [--capture DIR] [--keep]
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "qemu"))
import vm  # noqa: E402

MAC = "52:54:00:a1:b2:c3"
OPERATOR = vm.ROOT / "target/debug/keelson-operator"
TIMEOUT = 240
NS = "keelson-pxe"
NS_DHCP = "keelson-pxe-dhcp"
NS_STRANGER = "keelson-pxe-stranger"
STRANGER = "52:54:00:de:ad:01"
BRIDGE_IP = "192.168.77.1"


def sh(*cmd):
    subprocess.run(cmd, check=True)


def netns_up(data):
    """br0 (BRIDGE_IP) with tap0 for QEMU and a veth to NS_DHCP, where dnsmasq leases
    192.168.77.50-99 with no boot options."""
    netns_down()
    sh("ip", "netns", "add", NS)
    sh("ip", "netns", "add", NS_DHCP)
    x = ("ip", "netns", "exec", NS)
    sh(*x, "ip", "link", "set", "lo", "up")
    sh(*x, "ip", "link", "add", "br0", "type", "bridge")
    sh(*x, "ip", "tuntap", "add", "dev", "tap0", "mode", "tap")
    sh(*x, "ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
    sh(*x, "ip", "link", "set", "veth1", "netns", NS_DHCP)
    # The stranger's NIC: an unknown MAC on the same LAN.
    sh("ip", "netns", "add", NS_STRANGER)
    sh(*x, "ip", "link", "add", "veth2", "type", "veth", "peer", "name", "eth0")
    sh(*x, "ip", "link", "set", "eth0", "netns", NS_STRANGER)
    z = ("ip", "netns", "exec", NS_STRANGER)
    sh(*z, "ip", "link", "set", "eth0", "address", STRANGER)
    sh(*z, "ip", "link", "set", "lo", "up")
    sh(*z, "ip", "link", "set", "eth0", "up")
    for dev in ("tap0", "veth0", "veth2"):
        sh(*x, "ip", "link", "set", dev, "master", "br0")
        sh(*x, "ip", "link", "set", dev, "up")
    sh(*x, "ip", "addr", "add", f"{BRIDGE_IP}/24", "dev", "br0")
    sh(*x, "ip", "link", "set", "br0", "up")
    y = ("ip", "netns", "exec", NS_DHCP)
    sh(*y, "ip", "addr", "add", "192.168.77.2/24", "dev", "veth1")
    sh(*y, "ip", "link", "set", "veth1", "up")
    return subprocess.Popen(
        [*y, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--no-resolv",
         "--interface=veth1", "--bind-interfaces", "--dhcp-range=192.168.77.50,192.168.77.99,1h",
         f"--dhcp-leasefile={data}/dnsmasq.leases", "--log-dhcp"],
        stdout=open(data / "dnsmasq.log", "w"), stderr=subprocess.STDOUT)


def netns_down():
    for ns in (NS, NS_DHCP, NS_STRANGER):
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def pcap_dhcp(path):
    """(source IPv4, destination port, chaddr, BOOTP payload) of each UDP packet in a
    classic pcap file of Ethernet frames (tcpdump -w), read with no library."""
    import struct
    b = Path(path).read_bytes()
    if len(b) < 24 or b[:4] not in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        raise SystemExit(f"{path}: not a little-endian pcap file")
    out, i = [], 24
    while i + 16 <= len(b):
        incl = struct.unpack_from("<I", b, i + 8)[0]
        f = b[i + 16:i + 16 + incl]
        i += 16 + incl
        if len(f) < 14 + 20 + 8 or f[12:14] != b"\x08\x00" or f[23] != 17:
            continue
        ihl = (f[14] & 15) * 4
        udp = 14 + ihl
        dport = struct.unpack_from(">H", f, udp + 2)[0]
        bootp = f[udp + 8:]
        if len(bootp) < 44:
            continue
        src = ".".join(str(c) for c in f[26:30])
        out.append((src, dport, ":".join(f"{c:02x}" for c in bootp[28:34]), bootp))
    return out


def stranger_asks(data):
    """The unknown MAC's PXE-flavoured DHCP: it must get a lease (dnsmasq answers it)."""
    p = subprocess.run(
        ["ip", "netns", "exec", NS_STRANGER, "busybox", "udhcpc", "-i", "eth0", "-n", "-q",
         "-f", "-t", "4", "-T", "2", "-s", "/bin/true", "-V", "PXEClient:Arch:00000:UNDI:002001"],
        capture_output=True, text=True, timeout=60)
    (data / "udhcpc.log").write_text(p.stdout + p.stderr)
    return p.returncode == 0 and "lease of 192.168.77." in p.stdout + p.stderr


def run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{p.stdout}{p.stderr}")
    return p.stdout


def main():
    args = sys.argv[1:]
    initrd = None
    if "--initrd" in args:
        initrd = Path(args[args.index("--initrd") + 1])
    if not OPERATOR.exists() or os.environ.get("KEELSON_PXE_BUILD", "1") != "0":
        run(["cargo", "build", "-q", "-p", "keelson-operator"], cwd=vm.ROOT)
    if initrd is None:
        initrd, _ = vm.build_initramfs()
    kernel = vm.newest_kernel()
    data = Path(tempfile.mkdtemp(prefix="keelson-pxe-"))
    uefi = "--uefi" in args
    proxy = "--proxy-dhcp" in args or uefi
    port = vm.free_port()
    base = f"http://{BRIDGE_IP if proxy else '10.0.2.2'}:{port}"
    started = time.monotonic()
    run([OPERATOR, "image", "add", "pxe-test", "--kernel", kernel, "--initramfs", initrd,
         "--data-dir", data])
    # The machine's config is the operator's (the demo config under another hostname): the
    # script adds talos.config=<service>/config/<mac>, and keelson fetches it.
    config = data / "pxe-node.yaml"
    config.write_text((vm.ROOT / "initramfs/config.yaml").read_text()
                      .replace("hostname: keelson-demo", "hostname: pxe-node"))
    run([OPERATOR, "machine", "add", MAC, "--version", "pxe-test", "--cmdline",
         vm.BASE_CMDLINE, "--config", config, "--data-dir", data])
    op_log = open(data / "operator.log", "w")
    dnsmasq = None
    tcpdump = None
    capture = Path(args[args.index("--capture") + 1]).resolve() if "--capture" in args else None
    if proxy:
        dnsmasq = netns_up(data)
        tcpdump = subprocess.Popen(
            ["ip", "netns", "exec", NS, "tcpdump", "-Z", "root", "-i", "br0", "-U", "-s", "1500", "-w",
             str(data / "dhcp.pcap"), "udp port 67 or udp port 68 or udp port 4011"],
            stdout=subprocess.DEVNULL, stderr=open(data / "tcpdump.log", "w"))
        serve = ["ip", "netns", "exec", NS, str(OPERATOR), "serve", "--data-dir", str(data),
                 "--boot-http", f"0.0.0.0:{port}", "--proxy-dhcp", "br0",
                 "--tftp", f"{BRIDGE_IP}:69"]
        nic = ["-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
               "-device", f"virtio-net-pci,netdev=n0,mac={MAC}" + (",romfile=" if uefi else "")]
        if uefi:
            varsfile = data / "OVMF_VARS.fd"
            varsfile.write_bytes(Path("/usr/share/OVMF/OVMF_VARS.fd").read_bytes())
            nic += ["-drive", "if=pflash,format=raw,readonly=on,"
                    "file=/usr/share/OVMF/OVMF_CODE.fd",
                    "-drive", f"if=pflash,format=raw,file={varsfile}"]
        prefix = ["ip", "netns", "exec", NS]
    else:
        serve = [str(OPERATOR), "serve", "--data-dir", str(data), "--boot-http",
                 f"127.0.0.1:{port}", "--boot-url", base]
        nic = ["-nic", f"user,model=virtio-net-pci,mac={MAC},tftp=/usr/lib/ipxe,"
               f"bootfile={base}/ipxe?mac={MAC}"]
        prefix = []
    op = subprocess.Popen(serve, stdout=op_log, stderr=subprocess.STDOUT)
    qemu = None
    ok = False
    lines = []
    try:
        deadline = time.monotonic() + 30
        while "boot http on" not in (data / "operator.log").read_text():
            if time.monotonic() > deadline or op.poll() is not None:
                raise SystemExit("keelson-operator did not start:\n"
                                 + (data / "operator.log").read_text())
            time.sleep(0.2)
        cmd = [*prefix, "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-nographic",
               "-no-reboot", "-serial", "mon:stdio", "-boot", "n", *nic]
        print("# " + " ".join(cmd), flush=True)
        qemu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        cond = threading.Condition()

        def read():
            for raw in qemu.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                with cond:
                    lines.append(line)
                    cond.notify_all()

        threading.Thread(target=read, daemon=True).start()

        def wait(pattern, timeout):
            rx = re.compile(pattern)
            end = time.monotonic() + timeout
            with cond:
                while True:
                    for i, line in enumerate(lines):
                        if rx.search(line):
                            return i
                    left = end - time.monotonic()
                    if left <= 0 or qemu.poll() is not None:
                        return None
                    cond.wait(min(left, 1))

        steps = [
            (r"keelson-operator: " + MAC + " boots pxe-test", "the ROM ran the operator's script"),
            (r"keelson: network ready", "keelson booted from the network is network ready"),
            (rf"keelson: config: fetched config from {re.escape(base)}/config/{MAC}",
             "keelson fetched its config from the operator"),
            (r"keelson: started kubelet.*--hostname-override=pxe-node\b",
             "the kubelet stand-in started with that config's hostname"),
        ]
        for pattern, what in steps:
            i = wait(pattern, TIMEOUT)
            t = time.monotonic() - started
            print(f"{'ok' if i is not None else 'FAIL'}: {what} ({t:.1f} s)", flush=True)
            if i is None:
                break
        else:
            ok = True
        served = (data / "operator.log").read_text()
        for part in ("vmlinuz", "initramfs"):
            hit = f"pxe-test/{part} (200" in served
            print(f"{'ok' if hit else 'FAIL'}: the operator served {part}", flush=True)
            ok = ok and hit
        if uefi:
            hit = "ipxe.efi:" in served and "bytes in blocks of" in served
            print(f"{'ok' if hit else 'FAIL'}: the operator's TFTP sent ipxe.efi", flush=True)
            ok = ok and hit
        if proxy and ok:
            hit = stranger_asks(data)
            print(f"{'ok' if hit else 'FAIL'}: the unknown MAC {STRANGER} (option 60 PXEClient) "
                  "got a lease from dnsmasq", flush=True)
            ok = ok and hit
            time.sleep(1)
            served = (data / "operator.log").read_text()
            hit = f"proxydhcp: {STRANGER} is not in the machine table" in served
            print(f"{'ok' if hit else 'FAIL'}: the operator logged the unknown MAC", flush=True)
            ok = ok and hit
            tcpdump.terminate()
            tcpdump.wait(timeout=10)
            pkts = pcap_dhcp(data / "dhcp.pcap")
            from_op = [p for p in pkts if p[0] == BRIDGE_IP]
            hit = any(p[2] == STRANGER for p in pkts) and any(p[2] == MAC for p in from_op) \
                and not any(p[2] == STRANGER for p in from_op)
            print(f"{'ok' if hit else 'FAIL'}: tcpdump on br0: the stranger's requests seen, "
                  f"the operator answered {MAC} ({len(from_op)} packets) and never {STRANGER}",
                  flush=True)
            ok = ok and hit
            leases = (data / "dnsmasq.leases").read_text()
            dlog = (data / "dnsmasq.log").read_text()
            hit = MAC in leases and re.search(rf"DHCPACK\(veth1\) 192\.168\.77\.\d+ {MAC}", dlog)
            print(f"{'ok' if hit else 'FAIL'}: the VM's address came from dnsmasq", flush=True)
            ok = ok and bool(hit)
            if capture and ok:
                capture.mkdir(parents=True, exist_ok=True)
                name = "ovmf" if uefi else "ipxe-bios"
                subprocess.run(["cp", str(data / "dhcp.pcap"), str(capture / f"{name}.pcap")],
                               check=True)
                print(f"capture: {capture / name}.pcap ({len(pkts)} packets)", flush=True)
        if proxy:
            hit = "proxydhcp: answered" in served
            for line in served.splitlines():
                if "proxydhcp" in line or "tftp" in line:
                    print("  operator: " + line, flush=True)
            print(f"{'ok' if hit else 'FAIL'}: the operator's proxyDHCP answered", flush=True)
            ok = ok and hit
    finally:
        if qemu:
            qemu.kill()
            qemu.wait()
        op.terminate()
        op.wait(timeout=30)
        if tcpdump and tcpdump.poll() is None:
            tcpdump.terminate()
            tcpdump.wait(timeout=10)
        if dnsmasq:
            dnsmasq.terminate()
            dnsmasq.wait(timeout=10)
            netns_down()
        if not ok:
            print("--- console (last 40 lines)\n" + "\n".join(lines[-40:]))
            print("--- operator log\n" + (data / "operator.log").read_text())
            if proxy:
                print("--- dnsmasq log\n" + (data / "dnsmasq.log").read_text())
        if "--keep" not in args:
            subprocess.run(["rm", "-rf", str(data)])
        else:
            print(f"data kept in {data}")
    print(f"{'PASS' if ok else 'FAIL'}: firmware PXE boot in {time.monotonic() - started:.1f} s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
