# SPDX-License-Identifier: Apache-2.0
"""Boot a keelson node under QEMU (TCG) and watch its serial console.

Shared by qemu/node (interactive), scripts/boot (--check), the boot tests (tests/boot/) and
scripts/bench-boot. Stdlib only. A node is Debian's kernel plus an initramfs, one virtio NIC
on QEMU's user network with a host port forwarded to the demo workload (guest port 8080), the
serial console on stdout (captured to a log file when checking), and an HMP monitor on a unix
socket (for `sendkey ctrl-alt-delete` and `quit`).
"""

import os
import re
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
DEFAULT_INITRD = BUILD / "keelson-initramfs.cpio.zst"
# The kernel's own settings: serial console, timestamps on every line (the benchmark reads
# them), and on a panic (for instance if /init exits) no reboot loop: with -no-reboot QEMU
# exits at once.
BASE_CMDLINE = "console=ttyS0 panic=-1 printk.time=1"
# QEMU's user network: 10.0.2.15/24, gateway 10.0.2.2, DNS 10.0.2.3. By default the node gets
# them from QEMU's own DHCP server (keelson runs DHCPv4 on physical links nothing else
# configures); STATIC_IP is the same as an ip= entry. Without udev the NIC is eth0.
STATIC_IP = "ip=10.0.2.15::10.0.2.2:255.255.255.0::eth0:off:10.0.2.3"
DEFAULT_CONFIG_ARG = "talos.config=/etc/keelson/config.yaml"
DEFAULT_CMDLINE = DEFAULT_CONFIG_ARG
GUEST_PORT = 8080
# The static binary scripts/build-initramfs builds (also the host-side client in tests).
STATIC_BIN = ROOT / "target/x86_64-unknown-linux-musl/release/keelson"
# keelson's API over TLS (the port Talos's API uses too).
API_PORT = 50000
# Kernel timestamp at the start of a console line: "[    1.234567] ".
TIMESTAMP = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")


def newest_kernel():
    """The newest Debian kernel in /boot (scripts/setup installs linux-image-amd64)."""

    def key(p):
        return [int(x) if x.isdigit() else -1 for x in re.split(r"[.-]", p.name[8:])]

    kernels = sorted(Path("/boot").glob("vmlinuz-*-amd64"), key=key)
    if not kernels:
        raise SystemExit("no Debian kernel in /boot (scripts/setup installs linux-image-amd64)")
    return kernels[-1]


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago (QEMU binds it right after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qemu_command(kernel, initrd, cmdline, port, monitor, memory=512, extra=(), mac=None,
                 api_port=None, nic="virtio-net-pci", machine=None, nic_id=None, user_nic=True,
                 wrap=()):
    """The QEMU command line for one node; `api_port` on 127.0.0.1 reaches its TLS API.
    Without `user_nic` the node has only the NICs `extra` names; `wrap` goes before QEMU
    (for instance `ip netns exec NS`, to reach taps in a namespace)."""
    user = ("-nic", f"user,model={nic},hostfwd=tcp:127.0.0.1:{port}-:{GUEST_PORT}"
            + (f",hostfwd=tcp:127.0.0.1:{api_port}-:{API_PORT}" if api_port else "")
            + (f",mac={mac}" if mac else "")
            # A name for the network backend, for -object filter-dump,netdev=... in `extra`.
            + (f",id={nic_id}" if nic_id else ""))
    return [
        *wrap,
        "qemu-system-x86_64", "-accel", "tcg", "-m", str(memory),
        "-nographic", "-no-reboot",
        # The console on stdio, multiplexed with a monitor (Ctrl-A c, Ctrl-A x to quit) for a
        # person at the terminal; scripts use the unix-socket monitor.
        "-serial", "mon:stdio",
        "-monitor", f"unix:{monitor},server=on,wait=off",
        "-kernel", str(kernel), "-initrd", str(initrd),
        "-append", cmdline,
        *(["-machine", machine] if machine else []),
        *(user if user_nic else ()),
        *extra,
    ]


def full_cmdline(cmdline=None, append=""):
    """The kernel command line: the base settings, then `cmdline` (default: DHCP and the
    baked-in config), then `append`."""
    parts = [BASE_CMDLINE, DEFAULT_CMDLINE if cmdline is None else cmdline, append]
    return " ".join(p for p in parts if p)


class Node:
    """One QEMU node started in the background, its console captured line by line."""

    def __init__(self, name, initrd=DEFAULT_INITRD, kernel=None, cmdline=None, append="",
                 port=None, log=None, echo=False, extra=(), mac=None, nic="virtio-net-pci",
                 machine=None, nic_id=None, user_nic=True, wrap=(), memory=512):
        BUILD.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.kernel = Path(kernel) if kernel else newest_kernel()
        self.cmdline = full_cmdline(cmdline, append)
        self.port = port or free_port()
        self.api_port = free_port()
        self.monitor = BUILD / f"{name}.monitor"
        self.log_path = Path(log) if log else BUILD / f"{name}.console.log"
        self.echo = echo
        self.lines = []  # (wall time, console line)
        self.cond = threading.Condition()
        self.started = time.monotonic()
        if self.monitor.exists():
            self.monitor.unlink()
        cmd = qemu_command(self.kernel, initrd, self.cmdline, self.port, self.monitor,
                           memory=memory, extra=extra, mac=mac, api_port=self.api_port, nic=nic,
                           machine=machine, nic_id=nic_id, user_nic=user_nic, wrap=wrap)
        self.log = open(self.log_path, "w", encoding="utf-8", errors="replace")
        self.log.write("# " + " ".join(cmd) + "\n")
        self.log.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            self.log.write(line + "\n")
            self.log.flush()
            if self.echo:
                print(line, flush=True)
            with self.cond:
                self.lines.append((time.monotonic(), line))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    # --- the console ---------------------------------------------------------------------

    def find(self, pattern, start=0):
        """Index of the first console line at or after `start` that matches, or None."""
        rx = re.compile(pattern)
        with self.cond:
            for i in range(start, len(self.lines)):
                if rx.search(self.lines[i][1]):
                    return i
        return None

    def matching(self, pattern):
        """All console lines that match."""
        rx = re.compile(pattern)
        with self.cond:
            return [line for _, line in self.lines if rx.search(line)]

    def wait_for(self, pattern, timeout, start=0):
        """Waits until a console line matches; returns it, or None after `timeout` seconds or
        when QEMU has exited and no line matches."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    if rx.search(self.lines[i][1]):
                        return self.lines[i][1]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self.reader.is_alive()):
                    return None
                self.cond.wait(min(left, 0.5))

    def timestamp(self, pattern):
        """The kernel timestamp (seconds since the kernel started) of the first console line
        that matches, or None."""
        for line in self.matching(pattern):
            m = TIMESTAMP.match(line)
            if m:
                return float(m.group(1))
        return None

    def tail(self, n=40):
        with self.cond:
            return [line for _, line in self.lines[-n:]]

    # --- the workload through the forwarded port -----------------------------------------

    def http_get(self, path="/", timeout=3):
        """The body of GET http://127.0.0.1:<port><path>, or raises OSError."""
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode("utf-8", "replace")

    def http_get_until(self, path, accept, timeout):
        """Polls GET `path` until accept(body) is true; returns (body, error). Retries on
        connection errors (the workload may not listen yet) until the deadline."""
        deadline = time.monotonic() + timeout
        body, err = None, "no attempt"
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                body = self.http_get(path)
                if accept(body):
                    return body, None
                err = "answer not accepted yet"
            except (OSError, urllib.error.URLError) as e:
                err = str(e)
            time.sleep(0.5)
        return body, err

    # --- the monitor ---------------------------------------------------------------------

    def monitor_command(self, command, timeout=10):
        """Sends one HMP command over the unix-socket monitor; returns what QEMU answered."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(2)
                s.connect(str(self.monitor))
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with s:
            out = b""
            try:
                while b"(qemu)" not in out:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    out += chunk
                s.sendall(command.encode() + b"\n")
                out = b""
                while out.count(b"(qemu)") < 1:
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    out += chunk
            except OSError:
                pass  # `quit` closes the socket under us
            return out.decode("utf-8", "replace")

    def ctrl_alt_del(self):
        return self.monitor_command("sendkey ctrl-alt-delete")

    def wait_exit(self, timeout):
        """QEMU's exit code, or None if it is still running after `timeout` seconds."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(timeout=5)
        return rc

    def stop(self):
        """Ends QEMU if it still runs (monitor `quit`, then kill), and closes the log."""
        if self.proc.poll() is None:
            try:
                self.monitor_command("quit", timeout=3)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(timeout=5)
        self.log.close()
        if self.monitor.exists():
            self.monitor.unlink()


def build_initramfs(out=None, config=None, reference=False, drivers=None, fixed_all=False,
                    ca_bundle=None, add=(), binary=None, version_suffix=None, etcd=None,
                    compress=None, ko=None):
    """Runs scripts/build-initramfs; returns the image path. `add`: (source, path in the
    image) pairs of extra files; `etcd`: an etcd binary for /usr/bin/etcd; `compress` and
    `ko`: the script's --compress and --ko. KEELSON_BINARY
    names a static keelson binary (demo-kubelet beside it) to use instead of building this
    checkout's, for iterating on a harness."""
    binary = binary or os.environ.get("KEELSON_BINARY")
    cmd = [str(ROOT / "scripts/build-initramfs")]
    for src, dest in add:
        cmd += ["--add", f"{src}:{dest}"]
    if out:
        cmd += ["--out", str(out)]
    if config:
        cmd += ["--config", str(config)]
    if reference:
        cmd += ["--reference-busybox"]
    if drivers:
        cmd += ["--drivers", drivers]
    if fixed_all:
        cmd += ["--fixed-all"]
    if ca_bundle:
        cmd += ["--ca-bundle", str(ca_bundle)]
    if binary:
        cmd += ["--binary", str(binary)]
    if version_suffix:
        cmd += [f"--version-suffix={version_suffix}"]  # it may start with "-"
    if etcd:
        cmd += ["--etcd", str(etcd)]
    if compress:
        cmd += ["--compress", compress]
    if ko:
        cmd += ["--ko", ko]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"build-initramfs failed:\n{proc.stdout}{proc.stderr}")
    line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    path = Path(out) if out else BUILD / (
        "reference-initramfs.cpio.zst" if reference else "keelson-initramfs.cpio.zst")
    return path, line


def env_flag(name):
    return os.environ.get(name, "0") not in ("", "0")
