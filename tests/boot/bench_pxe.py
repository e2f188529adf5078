# SPDX-License-Identifier: Apache-2.0
"""Firmware PXE boot time: keelson-operator against dnsmasq (scripts/bench-pxe; root).

The same VM (QEMU TCG, its iPXE ROM, -boot n) on the same namespace bridge as
`scripts/test-pxe --proxy-dhcp`, the same kernel and initramfs, timed from QEMU's start to
keelson's `network ready` on the console:

- `operator`: dnsmasq leases addresses only; keelson-operator answers proxyDHCP with the script
  URL and serves the script, kernel and initramfs over HTTP (docs/pxe.md).
- `dnsmasq`: dnsmasq alone, DHCP and TFTP, as a user would set it up for iPXE: the ROM (user
  class iPXE, option 175) gets `boot.ipxe` by TFTP, which loads the kernel and initramfs by
  TFTP from the same dnsmasq.

Usage: scripts/bench-pxe [--runs N] [--initrd PATH]
"""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "qemu"))
import pxe  # noqa: E402
import vm  # noqa: E402

MAC = pxe.MAC
IP = "192.168.77.2"  # dnsmasq's side of the veth


def boot(prefix, nic, timeout=300):
    """Start QEMU; seconds until `network ready` on the console (None: not in time)."""
    cmd = [*prefix, "qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-nographic",
           "-no-reboot", "-serial", "mon:stdio", "-boot", "n", *nic]
    start = time.monotonic()
    q = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    try:
        for raw in q.stdout:
            if b"keelson: network ready" in raw:
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                return None
        return None
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
        return boot(ns, nic())
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
        return boot(["ip", "netns", "exec", pxe.NS], nic())
    finally:
        dhcp.terminate()
        dhcp.wait(timeout=10)
        pxe.netns_down()


def main():
    args = sys.argv[1:]
    runs = int(args[args.index("--runs") + 1]) if "--runs" in args else 3
    initrd = Path(args[args.index("--initrd") + 1]) if "--initrd" in args else None
    subprocess.run(["cargo", "build", "-q", "-p", "keelson-operator"], cwd=vm.ROOT, check=True)
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
            t = f(data, kernel, initrd)
            results[name].append(t)
            print(f"run {i + 1} {name}: " + (f"{t:.1f} s" if t else "no network ready"),
                  flush=True)
            subprocess.run(["rm", "-rf", str(data)])
    for name, ts in results.items():
        ok = sorted(t for t in ts if t)
        if ok:
            print(f"{name}: QEMU start to network ready, median {ok[len(ok) // 2]:.1f} s "
                  f"(min {ok[0]:.1f}, max {ok[-1]:.1f}, {len(ok)}/{len(ts)} runs)")
        else:
            print(f"{name}: no run reached network ready")


if __name__ == "__main__":
    main()
