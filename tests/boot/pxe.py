# SPDX-License-Identifier: Apache-2.0
"""Firmware network boot: QEMU's own iPXE ROM (-boot n) boots keelson from keelson-operator.

keelson-operator serves the boot HTTP service on 127.0.0.1 (QEMU's user network reaches the
host as 10.0.2.2); the image `pxe-test` is Debian's kernel and keelson's demo initramfs
(scripts/build-initramfs); the machine table holds the VM's MAC with the demo's kernel
arguments. QEMU's DHCP server hands the ROM `bootfile=http://10.0.2.2:PORT/ipxe?mac=...`
(and `tftp=` the iPXE binaries, which this boot does not need: the ROM is iPXE already). The
test passes when the console shows the script's echo line, then keelson's `network ready`.

Not in scripts/test: one TCG boot through the firmware. Usage:
  scripts/test-pxe [--initrd PATH] [--keep]
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
    port = vm.free_port()
    base = f"http://10.0.2.2:{port}"
    started = time.monotonic()
    run([OPERATOR, "image", "add", "pxe-test", "--kernel", kernel, "--initramfs", initrd,
         "--data-dir", data])
    cmdline = f"{vm.BASE_CMDLINE} {vm.DEFAULT_CMDLINE}"
    run([OPERATOR, "machine", "add", MAC, "--version", "pxe-test", "--cmdline", cmdline,
         "--data-dir", data])
    op_log = open(data / "operator.log", "w")
    op = subprocess.Popen([str(OPERATOR), "serve", "--data-dir", str(data), "--boot-http",
                           f"127.0.0.1:{port}", "--boot-url", base],
                          stdout=op_log, stderr=subprocess.STDOUT)
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
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-nographic", "-no-reboot",
               "-serial", "mon:stdio", "-boot", "n",
               "-nic", f"user,model=virtio-net-pci,mac={MAC},tftp=/usr/lib/ipxe,"
               f"bootfile={base}/ipxe?mac={MAC}"]
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
    finally:
        if qemu:
            qemu.kill()
            qemu.wait()
        op.terminate()
        op.wait(timeout=30)
        if not ok:
            print("--- console (last 40 lines)\n" + "\n".join(lines[-40:]))
            print("--- operator log\n" + (data / "operator.log").read_text())
        if "--keep" not in args:
            subprocess.run(["rm", "-rf", str(data)])
        else:
            print(f"data kept in {data}")
    print(f"{'PASS' if ok else 'FAIL'}: firmware PXE boot in {time.monotonic() - started:.1f} s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
