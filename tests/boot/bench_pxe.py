# SPDX-License-Identifier: Apache-2.0
"""Firmware PXE boot time: keelson-operator against dnsmasq (scripts/bench-pxe; root).

The same VM (QEMU TCG, its iPXE ROM, -boot n) on the same namespace bridge as
`scripts/test-pxe --proxy-dhcp`, the same kernel and initramfs, timed from QEMU's start to
keelson's `network ready` on the console:

- `operator`: dnsmasq leases addresses only; keelson-operator answers proxyDHCP with the script
  URL and serves the script, kernel and initramfs over HTTP (docs/pxe.md).
- `dnsmasq`: dnsmasq alone, DHCP and TFTP, as a user would set it up for iPXE: the ROM (user
  class iPXE, option 175) gets `boot.ipxe` by TFTP, which loads the kernel and initramfs by
  TFTP from the same dnsmasq: the same image over TFTP only.

Each boot is split in parts, all from QEMU's start (the firmware's): the kernel runs keelson's
`/init` (the kernel's `Run /init as init process`), keelson is `network ready`, and its API
port 50000 on the leased address completes a TLS handshake (from the bridge's namespace,
polled every 0.2 s).

`--http-rate`: instead, the operator's HTTP service (on 127.0.0.1) sends a 10 MiB initramfs
to 10 concurrent curl clients; the aggregate rate is 10 x 10 MiB over the wall time of all
ten (median of --runs).

Usage: scripts/bench-pxe [--runs N] [--initrd PATH] [--http-rate]
"""

import os
import subprocess
import sys
import threading
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "qemu"))
import pxe  # noqa: E402
import vm  # noqa: E402

MAC = pxe.MAC
IP = "192.168.77.2"  # dnsmasq's side of the veth


API_PROBE = """
import socket, ssl, sys, time
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        with socket.create_connection((sys.argv[1], 50000), timeout=1) as s:
            with ctx.wrap_socket(s):
                sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit(1)
"""


def boot(prefix, nic, leases, timeout=300):
    """Start QEMU; seconds from its start to `/init`, to `network ready` on the console and
    to the API's TLS handshake (None for a part not reached in time)."""
    cmd = [*prefix, "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-nographic",
           "-no-reboot", "-serial", "mon:stdio", "-boot", "n", *nic]
    start = time.monotonic()
    q = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    parts = {"init": None, "network": None, "api": None}
    try:
        for raw in q.stdout:
            if parts["init"] is None and b"Run /init as init process" in raw:
                parts["init"] = time.monotonic() - start
            if b"keelson: network ready" in raw:
                parts["network"] = time.monotonic() - start
                break
            if time.monotonic() - start > timeout:
                return parts
        if parts["network"] is None:
            return parts
        # QEMU keeps running (its console drained by a thread) while the API is probed.
        threading.Thread(target=lambda: [None for _ in q.stdout], daemon=True).start()
        text = Path(leases).read_text() if Path(leases).exists() else ""
        ip = next((f.split()[2] for f in text.splitlines() if MAC in f), None)
        if ip and subprocess.run(["ip", "netns", "exec", pxe.NS, "python3", "-c", API_PROBE,
                                  ip, "60"]).returncode == 0:
            parts["api"] = time.monotonic() - start
        return parts
    finally:
        q.kill()
        q.wait()


def nic():
    return ["-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={MAC}"]


def with_operator(data, kernel, initrd):
    """One boot through keelson-operator's proxyDHCP and HTTP."""
    dhcp = pxe.netns_up(data)
    port = vm.free_port()
    ns = ["ip", "netns", "exec", pxe.NS]
    op = subprocess.Popen(
        [*ns, str(pxe.OPERATOR), "serve", "--data-dir", str(data), "--boot-http",
         f"0.0.0.0:{port}", "--proxy-dhcp", "br0", "--tftp", f"{pxe.BRIDGE_IP}:69"],
        stdout=open(data / "operator.log", "w"), stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        while "proxydhcp on" not in (data / "operator.log").read_text():
            if time.monotonic() > end or op.poll() is not None:
                raise SystemExit("keelson-operator did not start:\n"
                                 + (data / "operator.log").read_text())
            time.sleep(0.2)
        return boot(ns, nic(), data / "dnsmasq.leases")
    finally:
        op.terminate()
        op.wait(timeout=30)
        dhcp.terminate()
        dhcp.wait(timeout=10)
        pxe.netns_down()


def with_dnsmasq(data, kernel, initrd):
    """One boot from dnsmasq's DHCP and TFTP alone."""
    tftp = data / "tftp"
    tftp.mkdir(exist_ok=True)
    (tftp / "vmlinuz").write_bytes(Path(kernel).read_bytes())
    (tftp / "initramfs").write_bytes(Path(initrd).read_bytes())
    (tftp / "boot.ipxe").write_text(
        "#!ipxe\n"
        f"kernel tftp://{IP}/vmlinuz initrd=initramfs {vm.BASE_CMDLINE}\n"
        f"initrd --name initramfs tftp://{IP}/initramfs\n"
        "boot\n")
    # The namespaces of the operator's setup, its address-only dnsmasq replaced.
    pxe.netns_up(data).terminate()
    time.sleep(0.5)
    y = ["ip", "netns", "exec", pxe.NS_DHCP]
    dhcp = subprocess.Popen(
        [*y, "dnsmasq", "--no-daemon", "--conf-file=/dev/null", "--port=0", "--no-resolv",
         "--interface=veth1", "--bind-interfaces", "--dhcp-range=192.168.77.50,192.168.77.99,1h",
         f"--dhcp-leasefile={data}/dnsmasq2.leases", "--enable-tftp", f"--tftp-root={tftp}",
         "--dhcp-match=set:ipxe,175", "--dhcp-boot=tag:ipxe,boot.ipxe",
         "--dhcp-boot=tag:!ipxe,undionly.kpxe", "--log-dhcp"],
        stdout=open(data / "dnsmasq2.log", "w"), stderr=subprocess.STDOUT)
    try:
        time.sleep(1)
        return boot(["ip", "netns", "exec", pxe.NS], nic(), data / "dnsmasq2.leases")
    finally:
        dhcp.terminate()
        dhcp.wait(timeout=10)
        pxe.netns_down()


def http_rate(runs):
    """MiB/s of the operator's HTTP service: a 10 MiB initramfs to 10 concurrent curls."""
    rates = []
    for _ in range(runs):
        data = Path(tempfile.mkdtemp(prefix="keelson-bench-pxe-http-"))
        big = data / "big"
        big.write_bytes(os.urandom(10 << 20))
        subprocess.run([str(pxe.OPERATOR), "image", "add", "rate", "--kernel", str(big),
                        "--initramfs", str(big), "--data-dir", str(data)],
                       check=True, capture_output=True)
        port = vm.free_port()
        op = subprocess.Popen([str(pxe.OPERATOR), "serve", "--data-dir", str(data),
                               "--boot-http", f"127.0.0.1:{port}"],
                              stdout=open(data / "operator.log", "w"), stderr=subprocess.STDOUT)
        try:
            end = time.monotonic() + 60
            while "boot http on" not in (data / "operator.log").read_text():
                if time.monotonic() > end or op.poll() is not None:
                    raise SystemExit("keelson-operator did not start")
                time.sleep(0.2)
            url = f"http://127.0.0.1:{port}/images/rate/initramfs"
            # The first request hashes the file (docs/pxe.md): not part of the rate.
            subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True)
            t = time.monotonic()
            cs = [subprocess.Popen(["curl", "-sf", "-o", "/dev/null", "-w", "%{size_download}",
                                    url], stdout=subprocess.PIPE, text=True) for _ in range(10)]
            sizes = [int(c.communicate()[0] or 0) for c in cs]
            wall = time.monotonic() - t
            if any(c.returncode != 0 for c in cs) or sizes != [10 << 20] * 10:
                raise SystemExit(f"a client failed: {sizes}")
            rates.append(100 / wall)
            print(f"run {len(rates)}: 10 x 10 MiB in {wall:.2f} s: {100 / wall:.0f} MiB/s",
                  flush=True)
        finally:
            op.terminate()
            op.wait(timeout=30)
            subprocess.run(["rm", "-rf", str(data)])
    rates.sort()
    print(f"http: 10 MiB to 10 concurrent curl clients, median {rates[len(rates) // 2]:.0f} "
          f"MiB/s aggregate (min {rates[0]:.0f}, max {rates[-1]:.0f}, {len(rates)} runs)")


def main():
    args = sys.argv[1:]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 3
    initrd = Path(args[args.index("--initrd") + 1]) if "--initrd" in args else None
    subprocess.run(["cargo", "build", "-q", "-p", "keelson-operator"], cwd=vm.ROOT, check=True)
    if "--http-rate" in args:
        return http_rate(runs)
    if initrd is None:
        initrd, _ = vm.build_initramfs()
    kernel = vm.newest_kernel()
    results = {"operator": [], "dnsmasq": []}
    for i in range(runs):
        for name, f in (("operator", with_operator), ("dnsmasq", with_dnsmasq)):
            data = Path(tempfile.mkdtemp(prefix=f"keelson-bench-pxe-{name}-"))
            if name == "operator":
                subprocess.run([str(pxe.OPERATOR), "image", "add", "bench", "--kernel",
                                str(kernel), "--initramfs", str(initrd), "--data-dir", str(data)],
                               check=True, capture_output=True)
                subprocess.run([str(pxe.OPERATOR), "machine", "add", MAC, "--version", "bench",
                                "--cmdline", vm.BASE_CMDLINE, "--data-dir", str(data)],
                               check=True, capture_output=True)
            parts = f(data, kernel, initrd)
            results[name].append(parts)
            print(f"run {i + 1} {name}: " + ", ".join(
                f"{k} {v:.1f} s" if v else f"{k} -" for k, v in parts.items()), flush=True)
            subprocess.run(["rm", "-rf", str(data)])
    for name, rs in results.items():
        line = []
        for part in ("init", "network", "api"):
            ok = sorted(r[part] for r in rs if r[part])
            line.append(f"{part} {ok[len(ok) // 2]:.1f} s ({len(ok)}/{len(rs)})" if ok
                        else f"{part} -")
        print(f"{name}: from QEMU's start, medians: " + ", ".join(line))

if __name__ == "__main__":
    main()
