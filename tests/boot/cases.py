# SPDX-License-Identifier: Apache-2.0
"""Boot tests: the demo node under QEMU (TCG) with Debian's kernel, asserting on the serial
console and on the workload's answers through the forwarded port.

Cases (one boot each; `scripts/test-boot NAME...` runs only those; `--help` or `--list`
prints this):
  standard      scripts/boot --check: modules loaded, network ready, kubelet stand-in started
                with --node-ip=10.0.2.15, the host fetched its answer, zombies reaped, clean
                power-off after ctrl-alt-del
  bad-cmdline   a malformed ip= entry next to a good one, and an unknown talos.foo= key: a
                clear console line for each, and the boot still completes
  no-config     talos.config=/nope.yaml: maintenance mode, no kubelet, no crash; the TLS API
                in maintenance mode from the host (version, get links, get machinestatus says
                maintenance; logs refused); a gen config machine config applied with
                --insecure: mutual TLS, the kubelet starts, the stage becomes running once its
                health endpoint answers, admin and reader certificates, refusals; power-off
  try-rollback  no config, DHCP: a config applied in maintenance mode, then apply-config
                --mode try of one that moves eth0 off the address the API is reached on:
                the API goes away, the node rolls back by itself and says so; power-off
  bad-kubelet   machine.kubelet.command names a file that does not exist: a clear error,
                retries with growing delays, the node stays up; power-off
  clock         the VM's RTC says 2015 (-rtc base=2015-01-01); chrony on the host's 127.0.0.1
                (-x: it never sets the host's clock) is reached at 10.0.2.2: PID 1 steps the
                VM's clock by ~11 years, confirms it within 100 ms, then starts the kubelet
  clock-nts     the same over NTS: chrony serves NTS-KE with a test CA's certificate (the
                image's only trust root) on 10.0.2.2; the certificate, issued today, is
                accepted although the VM's clock says 2015 (validity dates are not checked
                before the first sync), then the clock is stepped and synced, the kubelet starts
  generic-virtio, generic-e1000, generic-rtl8139, generic-vmxnet3, generic-e1000e-q35
                the generic image (scripts/build-initramfs --drivers net, an empty fixed
                list) with one NIC of that model (q35: QEMU's PCIe machine): the driver is
                loaded by modalias, the link gets net_id's name (ens3 on the default i440FX
                machine's slot 3, enp0s2 on q35's root complex), DHCP leases, the workload
                answers, power-off
  generic-selectors
                the generic image with a virtio, an e1000e and an rtl8139 NIC (slots 3, 5, 6)
                and a config naming ens3 by name, the e1000e by `deviceSelector: {driver:
                e1000e}` and the rtl8139 by `{busPath: "0000:00:06.0"}`: each link gets its
                own addresses
  feature-on-demand
                vlan= and bond= on the command line of the demo image: 8021q and bonding are
                loaded by the kernel's modprobe helper (keelson) when the links are created
  feature-by-config
                the generic image with a config that makes a VLAN on ens3 and a dummy link:
                PID 1 asks its loader threads for 8021q and dummy as soon as the config is
                loaded (decompressed from .ko.zst), the VLAN and the dummy link get their
                addresses, network ready
  system-identity
                QEMU started with -uuid and -smbios type=1,...: the console's system line
                shows the manufacturer, product, serial and UUID keelson read
  install       a blank 64 MiB virtio disk: maintenance mode, `disks` lists vda, a config
                with machine.install.disk applied with --insecure: the console says
                installing, then installed, the kubelet starts; `reboot` through the API; the
                second boot reads the state from the disk: no maintenance mode, the same
                config (mutual TLS with its CA), the same NodeID and KubeSpan public key, and
                on the wire DHCP INIT-REBOOT (a REQUEST for 10.0.2.15 without a server ID)
                and no DISCOVER
  install-refused
                a disk with an MBR partition table: the same config is refused with one line,
                the node stays in maintenance mode, the disk is unchanged (SHA-256)
  install-refused-url
                the same config from talos.config=http://..., then (a second boot) from
                talos.config.inline=, on a disk with an MBR partition table: refused with one
                line (as apply-config refuses it), the stage stays maintenance, the kubelet
                never starts, the disk is unchanged
  state-small   a GPT (written as another tool would) whose KEELSON-STATE partition is 4 KiB,
                with a sentinel partition right after it: one console line says the state
                partition is too small and the state is kept in RAM; after a boot with DHCP
                and a node identity (what a state disk is written with) and a power-off, the
                sentinel's bytes and the whole disk are unchanged
  reset         a blank 64 MiB disk, a config with machine.install.disk applied in maintenance
                mode, then `keelson reset --reboot`: the console says what is wiped, QEMU exits
                at the reboot, both state slots on the disk are zero (the GPT stays); the next
                boot finds the state partition empty: maintenance mode, a new NodeID, `disks`
                lists vda
  upgrade       image A (trusting a test CA) installed on a blank disk; image B is the same
                build stamped with the version suffix -upgrade-b (build-initramfs
                --version-suffix), served over https with the Debian kernel from the host; an
                upgrade manifest whose initramfs digest is wrong is refused in one console line
                and A keeps running; the right one is downloaded, loaded and booted by kexec:
                B starts, reads the state from the disk (the same NodeID), and `keelson
                version` with the kept config's admin certificate reports B's version
  generic-hotplug
                the generic image booted with a virtio NIC; then an e1000 is hot-plugged into
                slot 6 through the QEMU monitor: its driver is loaded from the uevent, it is
                named ens6 and leases from its own user network
  config-url    an image that trusts a test CA (/etc/keelson/ca.pem); QEMU with -uuid and
                -smbios serial; talos.config=https://10.0.2.2:PORT/ok/${mac}.yaml?uuid=&
                serial=${serial}&token=... served by scripts/config-server on the host, which
                answers 503 for its first 10 s: the node retries, fetches, says so with size
                and sha256, applies it (the kubelet starts with the config's hostname); the
                server saw the MAC, UUID and serial substituted; the token never reaches the
                console. Then a second boot with talos.config.inline= (base64 of a config):
                the kubelet starts with that config's hostname
  config-url-bad
                three boots, each one refusal: a 404, a body that is not a config, https from
                a server whose certificate another CA signed; each is one console line ending
                in maintenance mode, never retried, and the node stays up in maintenance mode

Exit code 0 only if every check of every case passed.
"""

import base64
import json
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The QEMU helpers stay in qemu/: qemu/node, scripts/boot and the benchmarks share them.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "qemu"))
import bootcheck  # noqa: E402
import statecheck  # noqa: E402
import vm  # noqa: E402
from bootcheck import BOOT_TIMEOUT, STEP_TIMEOUT  # noqa: E402

GOOD_IP = vm.STATIC_IP
CONFIG = vm.DEFAULT_CONFIG_ARG


def case_standard(initrd):
    node = vm.Node("test-standard", initrd=initrd)
    r = bootcheck.Report(node, "standard boot")
    try:
        bootcheck.standard(r)
    finally:
        node.stop()
    return r.finish()


def case_bad_cmdline(initrd):
    # The malformed entry comes first, so a parser that gives up on the whole line (as Talos
    # does) loses the good entry too and the node never reaches 10.0.2.15.
    cmdline = f"ip=10.0.2.99::bad:255.255.255.0::eth0:off {GOOD_IP} {CONFIG} talos.foo=bar"
    node = vm.Node("test-bad-cmdline", initrd=initrd, cmdline=cmdline)
    r = bootcheck.Report(node, f"bad input on the command line: {cmdline}")
    try:
        # Not the echo of the whole command line: the entry, the column and the reason.
        r.console(r"keelson: .*ip=10\.0\.2\.99::bad\S*: column \d+: invalid gateway",
                  "the malformed ip= entry is reported", BOOT_TIMEOUT)
        r.console(r"keelson: .*column \d+: unknown parameter \"talos\.foo\"",
                  "the unknown talos.foo key is reported", 10)
        bootcheck.check_network_and_kubelet(r)
        bootcheck.check_workload(r)
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


def case_no_config(initrd):
    node = vm.Node("test-no-config", initrd=initrd, cmdline=f"{GOOD_IP} talos.config=/nope.yaml")
    r = bootcheck.Report(node, "missing config file: talos.config=/nope.yaml")
    try:
# One line that names the file and says what the node does now (not the cmdline echo).
        r.console(r"keelson: (?!cmdline: ).*/nope\.yaml.*maintenance mode",
                  "maintenance mode, naming the missing file", BOOT_TIMEOUT)
        # The network from the command line still applies; the kubelet does not start.
        r.console(r"keelson: run: settled", "the runtime settled", STEP_TIMEOUT)
        r.console(r"keelson: network ready", "network ready without a config", STEP_TIMEOUT)
        started = node.wait_for(r"keelson: started kubelet", 5)
        r.check(started is None, "no kubelet without a config")
        r.check(node.proc.poll() is None, "the node stays up")
        # The TLS API on port 50000, reached through the forwarded host port.
        r.console(r"MAINTENANCE MODE", "the console says maintenance mode", STEP_TIMEOUT)
        line = r.console(r"SHA256 fingerprint: ([0-9a-f]{64})", "the certificate's fingerprint", STEP_TIMEOUT)
        fp = re.search(r"([0-9a-f]{64})", line or "")
        at = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
        if fp:
            at += ["--fingerprint", fp.group(1)]
        ok, out = client("version", *at)
        r.check(ok and "maintenance mode" in out, f"keelson version --insecure over TLS: {out.strip()[-200:]}")
        ok, out = client("get", "links", *at)
        r.check(ok and ("ens3" in out or "eth0" in out), f"keelson get links --insecure over TLS: {out.strip()[-200:]}")
        ok, out = client("logs", *at)
        r.check(not ok and "maintenance mode" in out, f"logs refused in maintenance mode: {out.strip()[-200:]}")
        r.console(r"keelson: machine stage: maintenance", "the stage on the console: maintenance", STEP_TIMEOUT)
        ok, out = client("get", "machinestatus", *at)
        r.check(ok and "maintenance" in out, f"get machinestatus in maintenance mode: {out.strip()[-200:]}")
        configure_over_tls(r, node, at)
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


TALOS_API = Path(__file__).resolve().parents[2] / "init" / "tests" / "data" / "talos_api.py"


def case_talos_api(initrd):
    """The PyPI Talos bindings (betterproto and grpclib, a client nobody here wrote) against a
    booted node through the forwarded port: maintenance mode (Version, Disks, what it refuses,
    ApplyConfiguration), then mutual TLS with the admin and the reader (ServiceList, Dmesg,
    Events, each role's refusals), then Reboot; the same scenarios the namespace suite runs."""
    node = vm.Node("test-talos-api", initrd=initrd, cmdline=f"{GOOD_IP} talos.config=/nope.yaml")
    r = bootcheck.Report(node, "Talos's API from the PyPI bindings")
    try:
        r.console(r"keelson: network ready", "network ready without a config", BOOT_TIMEOUT)
        r.console(r"SHA256 fingerprint: ([0-9a-f]{64})", "the maintenance certificate", STEP_TIMEOUT)
        addr = f"127.0.0.1:{node.api_port}"

        def scenario(*args):
            p = subprocess.run([sys.executable, str(TALOS_API), *args], capture_output=True,
                               text=True, timeout=120)
            out = (p.stdout + p.stderr).strip()
            r.check(p.returncode == 0 and f"ok {args[0]}" in out,
                    f"talos_api.py {args[0]}: {out[-600:]}")
            return p.returncode == 0

        with tempfile.TemporaryDirectory(prefix="keelson-boot-talos-api-") as tmp:
            tmp = Path(tmp) / "ours"
            ok, out = client("gen", "config", "ours", "--output", str(tmp), "--endpoints", addr)
            r.check(ok, f"keelson gen config: {out.strip()[-200:]}")
            text = (tmp / "machine.yaml").read_text()
            # No time server is reachable from the test VM: time sync off, or the kubelet waits.
            text = text.replace("  network: {}\n", "  network:\n    hostname: keelson-demo\n"
                                "  kubelet:\n    command: [/bin/demo-kubelet]\n"
                                "  time:\n    disabled: true\n")
            config = tmp / "node.yaml"
            config.write_text(text)
            if scenario("maintenance", addr, str(config)):
                r.console(r"API: mutual TLS", "mutual TLS with the applied config's CA", STEP_TIMEOUT)
                if scenario("configured", addr, str(tmp / "keelsonconfig"), str(tmp / "keelsonconfig.reader")):
                    scenario("reboot", addr, str(tmp / "keelsonconfig"))
                    rc = node.wait_exit(STEP_TIMEOUT)
                    r.check(rc is not None, f"QEMU exited after the API's Reboot (code {rc})")
                    r.no_console(r"Kernel panic|Attempted to kill init", "no kernel panic")
    finally:
        node.stop()
    return r.finish()


def configure_over_tls(r, node, insecure):
    """`gen config`, then apply-config --insecure from the host: the node leaves maintenance
    mode for mutual TLS and starts the kubelet; then only the admin certificate may do
    everything, the reader may read, another cluster's certificate is refused."""
    with tempfile.TemporaryDirectory(prefix="keelson-boot-tls-") as tmp:
        tmp = Path(tmp)
        for name in ("ours", "theirs"):
            ok, out = client("gen", "config", name, "--output", str(tmp / name), "--endpoints",
                             f"127.0.0.1:{node.api_port}")
            r.check(ok, f"keelson gen config {name}: {out.strip()[-200:]}")
        text = (tmp / "ours" / "machine.yaml").read_text()
        # No time server is reachable from the test VM: time sync off, or the kubelet waits.
        text = text.replace("  network: {}\n", "  network:\n    hostname: keelson-demo\n"
                            "  kubelet:\n    command: [/bin/demo-kubelet]\n"
                            "  time:\n    disabled: true\n")
        config = tmp / "ours" / "node.yaml"
        config.write_text(text)
        ok, out = client("apply-config", str(config), *insecure)
        r.check(ok, f"apply-config --insecure: {out.strip()[-200:]}")
        r.console(r"API: mutual TLS", "mutual TLS with the applied config's CA", STEP_TIMEOUT)
        r.console(r"keelson: started kubelet", "the kubelet starts", BOOT_TIMEOUT)
        r.console(r"keelson: machine stage: \w+ -> running", "running once the kubelet is healthy", BOOT_TIMEOUT)
        admin = ["--keelsonconfig", str(tmp / "ours" / "keelsonconfig")]
        ok, out = client("get", "machinestatus", *admin)
        r.check(ok and "running" in out, f"get machinestatus once configured: {out.strip()[-200:]}")
        reader = ["--keelsonconfig", str(tmp / "ours" / "keelsonconfig.reader")]
        other = ["--keelsonconfig", str(tmp / "theirs" / "keelsonconfig")]
        ok, out = client("get", "addresses", *admin)
        r.check(ok and "10.0.2.15/24" in out, f"get addresses with the admin certificate: {out.strip()[-300:]}")
        ok, out = client("get", "addresses", *reader)
        r.check(ok and "10.0.2.15/24" in out, f"get addresses with the reader certificate: {out.strip()[-200:]}")
        ok, out = client("apply-config", str(config), *reader)
        r.check(not ok and "permission denied" in out, f"the reader may not apply-config: {out.strip()[-200:]}")
        ok, out = client("version", *insecure[:2], "--insecure")
        r.check(not ok and "refused" in out, f"--insecure refused once configured: {out.strip()[-200:]}")
        ok, out = client("version", *other)
        r.check(not ok, f"another cluster's client refused: {out.strip()[-200:]}")


def case_try_rollback(initrd):
    """No config, DHCP: a config applied in maintenance mode, then `--mode try` of one that
    moves eth0 off 10.0.2.15, where the forwarded API port arrives: the API goes away and
    comes back by itself with the previous config, and the console says so."""
    node = vm.Node("test-try-rollback", initrd=initrd, cmdline="talos.config=/nope.yaml")
    r = bootcheck.Report(node, "apply-config --mode try that cuts the API off")
    try:
        r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode on the DHCP address", BOOT_TIMEOUT)
        insecure = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
        with tempfile.TemporaryDirectory(prefix="keelson-boot-try-") as tmp:
            tmp = Path(tmp)
            ok, out = client("gen", "config", "demo", "--output", str(tmp / "gen"), "--endpoints",
                             f"127.0.0.1:{node.api_port}")
            r.check(ok, f"gen config: {out.strip()[-200:]}")
            skeleton = (tmp / "gen" / "machine.yaml").read_text()
            kubelet = "  kubelet:\n    command: [/bin/demo-kubelet]\n  time:\n    disabled: true\n"
            base = tmp / "base.yaml"
            base.write_text(skeleton.replace("  network: {}\n", "  network:\n    hostname: keelson-demo\n" + kubelet))
            moved = tmp / "moved.yaml"
            moved.write_text(skeleton.replace(
                "  network: {}\n",
                "  network:\n    hostname: keelson-demo\n    interfaces:\n      - interface: eth0\n"
                "        dhcp: false\n        addresses: [10.0.2.16/24]\n" + kubelet))
            ok, out = client("apply-config", str(base), *insecure)
            r.check(ok, f"apply-config --insecure: {out.strip()[-200:]}")
            r.console(r"API: mutual TLS", "mutual TLS", STEP_TIMEOUT)
            admin = ["--keelsonconfig", str(tmp / "gen" / "keelsonconfig")]
            ok, out = client("apply-config", str(moved), "--mode", "try", "--timeout", "20s", *admin)
            r.check(ok and "on trial for 20 s" in out, f"apply-config --mode try: {out.strip()[-200:]}")
            gone = wait_until(lambda: not client("version", *admin)[0], 30)
            r.check(gone, "the API goes away with the address")
            r.console(r"rolled back to the previous config", "the console says it rolled back", 60)
            back = wait_until(lambda: client("version", *admin)[0], 90)
            r.check(back, "the API comes back by itself")
            ok, out = client("get", "addresses", *admin)
            r.check(ok and "10.0.2.15/24" in out and "10.0.2.16" not in out,
                    f"the previous addresses: {out.strip()[-300:]}")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


def wait_until(f, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if f():
            return True
        time.sleep(1)
    return False


def client(*args):
    """The static keelson binary as a client on this machine: (success, stdout+stderr)."""
    p = subprocess.run([str(vm.STATIC_BIN), *args], capture_output=True, text=True, timeout=60)
    return p.returncode == 0, p.stdout + p.stderr


def case_bad_kubelet(_initrd):
    missing = "/bin/no-such-kubelet"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write("version: v1alpha1\nmachine:\n  network:\n    hostname: keelson-demo\n"
                f"  kubelet:\n    command: [{missing}, --flag]\n"
                "  time:\n    disabled: true\n")
        config = f.name
    try:
        initrd, summary = vm.build_initramfs(out=vm.BUILD / "test-bad-kubelet.cpio.zst",
                                             config=config)
    finally:
        Path(config).unlink()
    node = vm.Node("test-bad-kubelet", initrd=initrd)
    r = bootcheck.Report(node, f"kubelet command that does not exist: {missing}")
    try:
        r.console(r"keelson: network ready", "network ready", BOOT_TIMEOUT)
        error = r"(?i)keelson: .*(no-such-kubelet.*(error|fail|cannot|not found|no such)|" \
                r"(error|fail|cannot|not found|no such).*no-such-kubelet)"
        r.console(error, "a clear error names the missing command", STEP_TIMEOUT)
        n = bootcheck.wait_count(node, error, 3, STEP_TIMEOUT)
        r.check(n >= 3, f"retried: {n} failed attempts on the console (want 3+)")
        times = bootcheck.line_times(node, error)
        gaps = [b - a for a, b in zip(times, times[1:])]
        r.check(len(gaps) >= 2 and gaps[-1] > gaps[0],
                f"with backoff: delays between attempts grow ({', '.join(f'{g:.2f}' for g in gaps)} s)")
        r.no_console(r"Kernel panic", "no kernel panic")
        r.check(node.proc.poll() is None, "the node stays up")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


def free_udp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nts_certificates(tmp, ip):
    """A test CA and a server certificate for `ip` (an IP SAN) signed by it, made with openssl:
    (ca.crt, server.crt, server.key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca, crt, key = f"{tmp}/ca.crt", f"{tmp}/server.crt", f"{tmp}/server.key"
    ext = Path(tmp) / "ext"
    ext.write_text(f"subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\n"
                   "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    for cmd in (["req", "-x509", *ec, "-keyout", f"{tmp}/ca.key", "-out", ca, "-days", "2",
                 "-subj", "/CN=keelson-test-ca"],
                ["req", *ec, "-keyout", key, "-out", f"{tmp}/server.csr", "-subj", "/CN=nts"],
                ["x509", "-req", "-in", f"{tmp}/server.csr", "-CA", ca, "-CAkey", f"{tmp}/ca.key",
                 "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", str(ext)]):
        subprocess.run(["openssl", *cmd], check=True, capture_output=True)
    return ca, crt, key


def chrony_on_loopback(tmp, port, nts=None):
    """chronyd serving the host's clock on 127.0.0.1:port; -x: it never adjusts the clock.
    With nts=(cert, key, ke_port) it serves NTS-KE on 127.0.0.1:ke_port too."""
    conf = Path(tmp) / "chrony.conf"
    extra = ""
    if nts:
        cert, key, ke_port = nts
        extra = (f"ntsport {ke_port}\nntsservercert {cert}\nntsserverkey {key}\n"
                 f"ntsdumpdir {tmp}\n")
    conf.write_text(f"local stratum 8\nallow all\nport {port}\nbindaddress 127.0.0.1\n"
                    f"cmdport 0\npidfile {tmp}/chronyd.pid\ndumpdir {tmp}\n{extra}")
    log = open(Path(tmp) / "chrony.log", "w")
    return subprocess.Popen(["chronyd", "-x", "-d", "-u", "root", "-f", str(conf)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)


def case_clock(_initrd):
    tmp = tempfile.mkdtemp(prefix="keelson-clock-")
    port = free_udp_port()
    # QEMU's user network hands UDP to 10.0.2.2 to the host's loopback.
    server = f"10.0.2.2:{port}"
    config = Path(tmp) / "config.yaml"
    config.write_text("version: v1alpha1\nmachine:\n  network:\n    hostname: keelson-demo\n"
                      "  kubelet:\n    command: [/bin/demo-kubelet]\n"
                      f"  time:\n    servers: [\"{server}\"]\n")
    initrd, _ = vm.build_initramfs(out=vm.BUILD / "test-clock.cpio.zst", config=config)
    chrony = chrony_on_loopback(tmp, port)
    node = vm.Node("test-clock", initrd=initrd, extra=("-rtc", "base=2015-01-01"))
    r = bootcheck.Report(node, f"RTC in 2015, NTP from chrony at {server}")
    try:
        years = 365.25 * 86400
        step = r"keelson: time: clock stepped by (-?[0-9.]+) s"
        r.console(step, "the clock is stepped", BOOT_TIMEOUT)
        m = node.matching(step)
        by = float(re.search(step, m[0]).group(1)) if m else 0.0
        r.check(10 * years < by < 13 * years, f"stepped forward by {by / years:.2f} years")
        synced = r"keelson: time: synced to 10\.0\.2\.2:\d+ \(offset (-?[0-9.]+) ms"
        r.console(synced, "then synced", STEP_TIMEOUT)
        m = node.matching(synced)
        offset = float(re.search(synced, m[0]).group(1)) if m else 1e9
        r.check(abs(offset) < 100, f"within 100 ms of the host's clock after the step ({offset:.3f} ms)")
        r.console(r"keelson: started kubelet", "the kubelet starts once synced", STEP_TIMEOUT)
        s_at, k_at = node.timestamp(synced), node.timestamp(r"keelson: started kubelet")
        r.check(s_at is not None and k_at is not None and s_at <= k_at,
                "the kubelet started after the clock was synced")
        bootcheck.power_off(r)
    finally:
        node.stop()
        chrony.terminate()
        chrony.wait()
    return r.finish()


def case_clock_nts(_initrd):
    tmp = tempfile.mkdtemp(prefix="keelson-clock-nts-")
    ntp_port, ke_port = free_udp_port(), free_tcp_port()
    # QEMU's user network hands TCP and UDP to 10.0.2.2 to the host's loopback.
    ca, cert, key = nts_certificates(tmp, "10.0.2.2")
    config = Path(tmp) / "config.yaml"
    config.write_text("version: v1alpha1\nmachine:\n  network:\n    hostname: keelson-demo\n"
                      "  kubelet:\n    command: [/bin/demo-kubelet]\n---\n"
                      "apiVersion: v1alpha1\nkind: TimeSyncConfig\nntp:\n"
                      f"  servers: [\"10.0.2.2:{ke_port}\"]\n  useNTS: true\n")
    # The test CA is the image's whole trust bundle.
    initrd, _ = vm.build_initramfs(out=vm.BUILD / "test-clock-nts.cpio.zst", config=config,
                                   ca_bundle=ca)
    chrony = chrony_on_loopback(tmp, ntp_port, nts=(cert, key, ke_port))
    node = vm.Node("test-clock-nts", initrd=initrd, extra=("-rtc", "base=2015-01-01"))
    r = bootcheck.Report(node, f"RTC in 2015, NTS from chrony at 10.0.2.2:{ke_port}")
    try:
        ke = (r"keelson: time: NTS key exchange with 10\.0\.2\.2 \(10\.0\.2\.2:\d+\): \d+ cookies, "
              rf"NTP server 10\.0\.2\.2:{ntp_port}; certificate validity dates not checked")
        r.console(ke, "NTS-KE accepts the 2026 certificate while the clock says 2015", BOOT_TIMEOUT)
        years = 365.25 * 86400
        step = r"keelson: time: clock stepped by (-?[0-9.]+) s"
        r.console(step, "the clock is stepped over NTS", STEP_TIMEOUT)
        m = node.matching(step)
        by = float(re.search(step, m[0]).group(1)) if m else 0.0
        r.check(10 * years < by < 13 * years, f"stepped forward by {by / years:.2f} years")
        synced = rf"keelson: time: synced to 10\.0\.2\.2:{ntp_port} \(offset (-?[0-9.]+) ms"
        r.console(synced, "then synced", STEP_TIMEOUT)
        r.console(r"keelson: started kubelet", "the kubelet starts once synced", STEP_TIMEOUT)
        bootcheck.power_off(r)
    finally:
        node.stop()
        chrony.terminate()
        chrony.wait()
    return r.finish()


GENERIC = vm.BUILD / "test-generic-initramfs.cpio"


_generic_built = []


def generic_image():
    """The generic image, built once per run (from the binary main() just built)."""
    if not _generic_built:
        _, summary = vm.build_initramfs(out=GENERIC, drivers="net")
        print(summary, flush=True)
        _generic_built.append(True)
    return GENERIC


def generic_case(name, nic, driver, link, machine=None):
    def case(_initrd):
        node = vm.Node(f"test-{name}", initrd=generic_image(), nic=nic, machine=machine)
        r = bootcheck.Report(node, f"generic image, one {nic} NIC"
                             + (f", machine {machine}" if machine else ""))
        try:
            r.console(r"keelson: coldplug: \d+ devices without a driver", "coldplug walked sysfs",
                      BOOT_TIMEOUT)
            r.console(rf"keelson: module loaded: {re.escape(driver)}\b",
                      f"{driver} loaded by modalias (not listed)", STEP_TIMEOUT)
            r.no_console(r"keelson: module loaded: (bonding|8021q|bridge|dummy|veth|wireguard)\b",
                         "no feature module loaded at boot")
            bootcheck.standard(r, link=link, modules=False)
        finally:
            node.stop()
        return r.finish()
    return case


def case_generic_hotplug(_initrd):
    node = vm.Node("test-generic-hotplug", initrd=generic_image())
    r = bootcheck.Report(node, "generic image, an e1000 hot-plugged after boot")
    try:
        r.console(r"keelson: network ready", "network ready on the boot NIC", BOOT_TIMEOUT)
        r.no_console(r"keelson: module loaded: e1000\b", "no e1000 driver before the NIC exists")
        start = len(node.lines)
        node.monitor_command("netdev_add user,id=hp0")
        out = node.monitor_command("device_add e1000,netdev=hp0,id=hpnic,bus=pci.0,addr=0x6")
        r.check("Error" not in out, f"device_add accepted ({out.strip()[-80:] or 'no output'})")
        r.check(node.wait_for(r"keelson: module loaded: e1000\b", STEP_TIMEOUT, start) is not None,
                "e1000 loaded from the uevent")
        r.check(node.wait_for(r"keelson: run: link eth1 renamed to ens6\b", STEP_TIMEOUT, start)
                is not None, "the new link is named ens6 (slot 6)")
        r.check(node.wait_for(r"keelson: .*dhcp4/ens6: bound 10\.0\.2\.15/24", STEP_TIMEOUT, start)
                is not None, "ens6 leased an address from its own user network")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


SELECTOR_CONFIG = """version: v1alpha1
machine:
  network:
    hostname: keelson-demo
    interfaces:
      - interface: ens3
        dhcp: true
      - deviceSelector: {driver: e1000e}
        addresses: [192.168.77.2/24]
      - deviceSelector: {busPath: "0000:00:06.0", physical: true}
        addresses: [192.168.78.2/24]
  kubelet:
    command: [/bin/demo-kubelet]
  time:
    disabled: true
"""


def case_generic_selectors(_initrd):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(SELECTOR_CONFIG)
        config = f.name
    try:
        initrd, summary = vm.build_initramfs(out=vm.BUILD / "test-generic-selectors.cpio",
                                             config=config, drivers="net")
        print(summary, flush=True)
    finally:
        Path(config).unlink()
    # Besides the virtio NIC in slot 3: an e1000e in slot 5 and an rtl8139 in slot 6.
    extra = ["-device", "e1000e,addr=0x5,netdev=n5", "-netdev", "user,id=n5",
             "-device", "rtl8139,addr=0x6,netdev=n6", "-netdev", "user,id=n6"]
    node = vm.Node("test-generic-selectors", initrd=initrd, extra=extra)
    r = bootcheck.Report(node, "generic image, three NICs, a config naming them by predictable "
                               "name, driver and bus path")
    try:
        for link in ("ens3", "ens5", "ens6"):
            r.console(rf"keelson: run: link eth\d renamed to {link}\b", f"{link} named",
                      BOOT_TIMEOUT)
        r.console(r"keelson: .*dhcp4/ens3: bound 10\.0\.2\.15/24", "ens3 (by name) leased",
                  BOOT_TIMEOUT)
        r.console(r"keelson: network ready", "network ready", BOOT_TIMEOUT)
        # The node IP is whichever address the node-address rules pick first; not this test's
        # subject.
        r.console(r"keelson: started kubelet", "kubelet stand-in started", BOOT_TIMEOUT)

        def complete(b):
            return b.rstrip().endswith("ok") and all(
                a in b for a in ("10.0.2.15", "192.168.77.2", "192.168.78.2"))

        body, err = node.http_get_until("/", complete, STEP_TIMEOUT)
        if r.check(body is not None and err is None, "the workload answered with every address"
                   + (f" ({err})" if err else "")):
            for addr, link in (("10.0.2.15", "ens3"), ("192.168.77.2", "ens5"),
                               ("192.168.78.2", "ens6")):
                how = {"ens3": "name", "ens5": "driver e1000e", "ens6": "bus path 0000:00:06.0"}
                r.check(re.search(rf"^\s+{re.escape(addr)} {link}$", body, re.M) is not None,
                        f"{addr} on {link} (selected by {how[link]})")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


def case_feature_on_demand(initrd):
    append = "vlan=ens3.100:ens3 bond=bond0:eth9"
    node = vm.Node("test-feature-on-demand", initrd=initrd, append=append)
    r = bootcheck.Report(node, f"feature modules on first use: {append}")
    try:
        r.console(r"keelson: modprobe: rtnl-link-vlan: 8021q", "8021q loaded when the VLAN is created",
                  BOOT_TIMEOUT)
        r.console(r"keelson: modprobe: rtnl-link-bond: bonding",
                  "bonding loaded when the bond is created", STEP_TIMEOUT)
        r.no_console(r"keelson: module loaded: (8021q|bonding)\b",
                     "neither was loaded at boot by the loader threads")
        r.console(r"keelson: network ready", "network ready", STEP_TIMEOUT)
        r.no_console(r"keelson: module (8021q|bonding):", "no module error")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


FEATURE_CONFIG = """version: v1alpha1
machine:
  network:
    hostname: keelson-demo
    interfaces:
      - interface: ens3
        dhcp: true
        vlans: [{vlanId: 100, addresses: [192.168.79.2/24]}]
      - interface: dummy0
        dummy: true
        addresses: [192.168.77.1/24]
  kubelet:
    command: [/bin/demo-kubelet]
  time:
    disabled: true
"""


def case_feature_by_config(_initrd):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(FEATURE_CONFIG)
        config = f.name
    try:
        initrd, summary = vm.build_initramfs(out=vm.BUILD / "test-feature-by-config.cpio",
                                             config=config, drivers="net")
    finally:
        Path(config).unlink()
    print(summary, flush=True)
    node = vm.Node("test-feature-by-config", initrd=initrd)
    r = bootcheck.Report(node, "feature modules asked for by the config, generic image")
    try:
        r.console(r"keelson: feature modules for the config: 8021q dummy$",
                  "the config's feature modules asked for once it is loaded", BOOT_TIMEOUT)
        for m in ("8021q", "dummy"):
            # The loader's line, or the kernel's helper's if a link was created first.
            r.console(rf"keelson: (module loaded|modprobe: rtnl-link-\w+): {m}$",
                      f"{m} loaded", STEP_TIMEOUT)
        r.console(r"keelson: network ready", "network ready", STEP_TIMEOUT)
        r.no_console(r"keelson: module (8021q|dummy):", "no module error")
        body = node.http_get("/")
        for addr in ("192.168.79.2", "192.168.77.1"):
            r.check(addr in body, f"{addr} on the node")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


SMBIOS_UUID = "4c4c4544-0042-1000-8031-b7c04f4d3232"
SMBIOS_SERIAL = "SER-4711"


def case_system_identity(initrd):
    extra = ["-uuid", SMBIOS_UUID,
             "-smbios", f"type=1,manufacturer=Keelson Labs,product=Test Node,serial={SMBIOS_SERIAL}"]
    node = vm.Node("test-system-identity", initrd=initrd, extra=extra)
    r = bootcheck.Report(node, "SMBIOS identity: -uuid and -smbios type=1")
    try:
        r.console(rf'keelson: run: system: Keelson Labs Test Node, serial "{SMBIOS_SERIAL}", '
                  rf"uuid {SMBIOS_UUID}$", "SystemInformation read from /sys/class/dmi/id",
                  BOOT_TIMEOUT)
        r.console(r"keelson: network ready", "network ready", BOOT_TIMEOUT)
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


CONFIG_URL_CONFIG = ("version: v1alpha1\nmachine:\n  network:\n    hostname: {host}\n"
                     "  kubelet:\n    command: [/bin/demo-kubelet]\n"
                     "  time:\n    disabled: true\n")
QEMU_MAC = "52:54:00:12:34:56"  # QEMU's default for the first NIC
_ca_image = {}


def ca_image(tmp):
    """A test CA (scripts/test-ca: server certificates for 10.0.2.2, where the guest reaches
    the host) and the demo image trusting it as /etc/keelson/ca.pem; built once per run."""
    if "image" not in _ca_image:
        ca = Path(tempfile.mkdtemp(prefix="keelson-boot-ca-"))
        subprocess.run([str(vm.ROOT / "scripts/test-ca"), str(ca), "10.0.2.2"], check=True)
        image, _ = vm.build_initramfs(out=vm.BUILD / "config-url-initramfs.cpio.zst",
                                      add=[(ca / "ca.pem", "/etc/keelson/ca.pem")])
        _ca_image.update(image=image, ca=ca)
    return _ca_image["image"], _ca_image["ca"]


class ConfigServer:
    """scripts/config-server on the host's 127.0.0.1 (the guest's 10.0.2.2)."""

    def __init__(self, tmp, config_text, cert=None, key=None, extra=()):
        self.port = vm.free_port()
        self.config = Path(tmp) / f"served-{self.port}.yaml"
        self.config.write_text(config_text)
        self.log = Path(tmp) / f"requests-{self.port}.log"
        cmd = ["python3", str(vm.ROOT / "scripts/config-server"), "--bind", "127.0.0.1",
               "--port", str(self.port), "--config", str(self.config), "--log", str(self.log),
               *extra]
        if cert:
            cmd += ["--cert", str(cert), "--key", str(key)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: self._listening(), 10)

    def _listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def requests(self):
        return self.log.read_text() if self.log.exists() else ""

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def case_config_url(_initrd):
    """The config by URL over https, through 503s, with Talos's variables; then inline."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="keelson-boot-url-") as tmp:
        image, ca = ca_image(tmp)
        srv = ConfigServer(tmp, CONFIG_URL_CONFIG.format(host="fetched-node"),
                           ca / "server.pem", ca / "server.key", ["--fail-for", "10"])
        url = (f"https://10.0.2.2:{srv.port}/ok/${{mac}}.yaml?uuid=&serial=${{serial}}"
               "&token=s3cret-token")
        extra = ["-uuid", SMBIOS_UUID, "-smbios", f"type=1,serial={SMBIOS_SERIAL}"]
        node = vm.Node("test-config-url", initrd=image, cmdline=f"talos.config={url}", extra=extra)
        r = bootcheck.Report(node, "talos.config=https://... with variables, 503 for 10 s")
        try:
            mac = QEMU_MAC.replace(":", "%3A")  # percent-encoded, as every substituted value
            where = rf"https://10\.0\.2\.2:{srv.port}/ok/{mac}\.yaml\?\S* "
            r.console(rf"keelson: config: fetching config from {where}\(attempt 1\)",
                      "the fetch starts once the network is up, the query elided", BOOT_TIMEOUT)
            r.console(r"keelson: config: config fetch attempt \d+ failed: HTTP 503 .*retrying in",
                      "a 503 is retried", STEP_TIMEOUT)
            r.console(rf"keelson: config: fetched config from {where[:-1]}: \d+ bytes, sha256 [0-9a-f]{{12}}",
                      "fetched, with size and sha256", STEP_TIMEOUT)
            r.console(r"keelson: started kubelet.*--hostname-override=fetched-node\b",
                      "the fetched config runs: the kubelet starts with its hostname", BOOT_TIMEOUT)
            want = (f"GET /ok/{mac}.yaml?uuid={SMBIOS_UUID}"
                    f"&serial={SMBIOS_SERIAL}&token=s3cret-token 200")
            seen = srv.requests()
            r.check(want in seen, f"the server saw the substituted URL ({want}): {seen[-300:]!r}")
            r.check(seen.count(" 503") >= 1, f"the server answered 503 first: {seen.count(' 503')} times")
            # The kernel echoes its command line; keelson's own lines never show the token.
            r.no_console(r"keelson: .*s3cret", "the URL's token is not in keelson's lines")
            bootcheck.power_off(r)
        finally:
            node.stop()
            srv.stop()
        ok = r.finish() and ok

        text = CONFIG_URL_CONFIG.format(host="inline-node")
        b64 = base64.b64encode(text.encode()).decode()
        node = vm.Node("test-config-inline", initrd=image,
                       cmdline=f"{GOOD_IP} talos.config.inline={b64}")
        r = bootcheck.Report(node, "talos.config.inline=<base64>")
        try:
            r.console(rf"keelson: config from talos\.config\.inline=: {len(text)} bytes",
                      "the inline config is read", BOOT_TIMEOUT)
            r.console(r"keelson: started kubelet.*--hostname-override=inline-node\b",
                      "the inline config runs: the kubelet starts with its hostname", BOOT_TIMEOUT)
            r.no_console(rf"keelson: .*{re.escape(b64[:24])}",
                         "the inline config is not in keelson's lines")
            bootcheck.power_off(r)
        finally:
            node.stop()
        ok = r.finish() and ok
    return ok


def case_config_url_bad(_initrd):
    """Three refusals, one boot each: each one console line, maintenance mode, no retry."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="keelson-boot-url-bad-") as tmp:
        image, ca = ca_image(tmp)
        config = CONFIG_URL_CONFIG.format(host="never")
        plain = ConfigServer(tmp, config)
        # A certificate for 10.0.2.2 that the image's CA did not sign.
        wrong = Path(tmp) / "wrong"
        subprocess.run([str(vm.ROOT / "scripts/test-ca"), str(wrong), "10.0.2.2"], check=True)
        tls = ConfigServer(tmp, config, wrong / "server.pem", wrong / "server.key")
        cases = [
            ("404", f"http://10.0.2.2:{plain.port}/missing/node.yaml", r"HTTP 404 Not Found; not retried"),
            ("garbage", f"http://10.0.2.2:{plain.port}/garbage/node.yaml",
             r"is not a valid machine config \(236 bytes, starting \"<html><body>\\x1b\[2J"),
            ("wrong-ca", f"https://10.0.2.2:{tls.port}/ok/node.yaml",
             r"TLS: invalid peer certificate: UnknownIssuer; not retried"),
        ]
        try:
            for name, url, why in cases:
                node = vm.Node(f"test-config-url-{name}", initrd=image,
                               cmdline=f"{GOOD_IP} talos.config={url}")
                r = bootcheck.Report(node, f"talos.config= refused: {name}")
                try:
                    r.console(rf"keelson: config: .*{why}.*maintenance mode: the node waits",
                              "one line says why and that the node waits in maintenance mode",
                              BOOT_TIMEOUT)
                    r.console(r"MAINTENANCE MODE", "maintenance mode announced", STEP_TIMEOUT)
                    r.check(node.wait_for(r"retrying in|fetching config .*\(attempt 2\)", 5) is None,
                            "not retried")
                    r.check(len(node.matching(r"maintenance mode: the node waits")) == 1,
                            "exactly one such line")
                    r.check(node.wait_for(r"keelson: started kubelet", 1) is None, "no kubelet")
                    r.no_console("keelson: .*\x1b", "no escape character from the body in keelson's lines")
                    r.check(node.proc.poll() is None, "the node stays up")
                finally:
                    node.stop()
                ok = r.finish() and ok
        finally:
            plain.stop()
            tls.stop()
    return ok


def case_install(initrd):
    with tempfile.TemporaryDirectory(prefix="keelson-boot-install-") as tmp:
        tmp = Path(tmp)
        disk = statecheck.blank_disk(tmp / "disk.raw")
        first = install_first_boot(initrd, tmp, disk)
        if first is None:
            return False
        return install_second_boot(initrd, tmp, disk, *first)


def install_first_boot(initrd, tmp, disk):
    """Boot 1: maintenance, install, reboot. (node id, KubeSpan key, admin args) or None."""
    node = vm.Node("test-install-1", initrd=initrd, cmdline="talos.config=/nope.yaml",
                   extra=statecheck.qemu_extra(disk, tmp / "boot1.pcap"), nic_id="n0")
    r = bootcheck.Report(node, "install on a blank disk, then reboot")
    result = None
    try:
        r.console(r"keelson: .*no state partition on 1 disk", "no state partition yet", BOOT_TIMEOUT)
        r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode", BOOT_TIMEOUT)
        insecure = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
        ok, out = client("disks", *insecure)
        r.check(ok and "vda" in out, f"disks lists vda in maintenance mode: {out.strip()[-200:]}")
        skeleton = statecheck.gen_config(tmp, node.api_port)
        config = tmp / "node.yaml"
        config.write_text(statecheck.node_config(skeleton))
        ok, out = client("apply-config", str(config), *insecure)
        r.check(ok, f"apply-config --insecure with install.disk: {out.strip()[-200:]}")
        r.console(r"keelson: state: installing: a GPT with the state partition on /dev/vda", "installing", STEP_TIMEOUT)
        r.console(r"keelson: state: installed: state partition on /dev/vda", "installed", STEP_TIMEOUT)
        r.console(r"keelson: state: state generation \d+ written to /dev/vda .*config\.yaml", "the state written with the config", STEP_TIMEOUT)
        r.console(r"keelson: started kubelet", "the kubelet starts", BOOT_TIMEOUT)
        ident = r.console(r"keelson: state: node identity created: (\S+)", "a new node identity", 1)
        key = r.console(r"keelson: .*public key (\S+) \(", "a KubeSpan key", STEP_TIMEOUT)
        admin = ["--keelsonconfig", str(tmp / "gen" / "keelsonconfig")]
        ok, out = client("reboot", *admin)
        r.check(ok, f"reboot through the API: {out.strip()[-200:]}")
        rc = node.wait_exit(STEP_TIMEOUT)
        r.check(rc is not None, f"QEMU exited at the reboot (-no-reboot; code {rc})")
        r.console(r"keelson: reboot$", "the reboot line", 1)
        if ident and key:
            node_id = re.search(r"created: (\S+)", ident).group(1)
            public = re.search(r"public key (\S+)", key).group(1)
            result = (node_id, public, admin)
    finally:
        node.stop()
    return result if r.finish() else None


def install_second_boot(initrd, tmp, disk, node_id, public, admin):
    node = vm.Node("test-install-2", initrd=initrd, cmdline="talos.config=/nope.yaml",
                   extra=statecheck.qemu_extra(disk, tmp / "boot2.pcap"), nic_id="n0")
    r = bootcheck.Report(node, "the second boot from the state disk")
    try:
        r.console(r"keelson: state: state read from /dev/vda: generation \d+ .*config sha256", "the state read from the disk", BOOT_TIMEOUT)
        r.console(rf"keelson: state: node identity kept: {re.escape(node_id)}$", "the same NodeID", 5)
        r.console(r"keelson: .*loaded /var/lib/keelson/config\.yaml", "the stored config loaded", STEP_TIMEOUT)
        r.console(rf"keelson: .*public key {re.escape(public)} \(", "the same KubeSpan public key", STEP_TIMEOUT)
        r.console(r"keelson: .*bound 10\.0\.2\.15/24", "the same address", BOOT_TIMEOUT)
        r.console(r"keelson: started kubelet", "the kubelet starts", BOOT_TIMEOUT)
        r.no_console(r"maintenance mode|MAINTENANCE", "no maintenance mode")
        # The server certificate is issued once the kernel's random pool is ready.
        r.console(r"API: mutual TLS", "the API in mutual TLS with the stored CA", STEP_TIMEOUT)
        get = lambda: client("get", "hostname", *admin, "-n", f"127.0.0.1:{node.api_port}")  # noqa: E731
        wait_until(lambda: get()[0], 30)
        ok, out = get()
        r.check(ok and "keelson-state" in out, f"mutual TLS with the stored config's CA: {out.strip()[-200:]}")
        sent = statecheck.dhcp_client_messages(tmp / "boot2.pcap")
        first = sent[0] if sent else None
        r.check(first is not None and first[0] == "REQUEST" and first[1] == "10.0.2.15" and first[2] is None,
                f"DHCP INIT-REBOOT: the first message is a REQUEST for 10.0.2.15 without a server ID: {sent[:4]}")
        r.check(all(m[0] != "DISCOVER" for m in sent), f"no DHCPDISCOVER: {sent[:6]}")
        bootcheck.power_off(r)
    finally:
        node.stop()
    return r.finish()


def case_install_refused(initrd):
    with tempfile.TemporaryDirectory(prefix="keelson-boot-refused-") as tmp:
        tmp = Path(tmp)
        disk = statecheck.mbr_disk(tmp / "disk.raw")
        before = statecheck.sha256(disk)
        node = vm.Node("test-install-refused", initrd=initrd, cmdline="talos.config=/nope.yaml",
                       extra=statecheck.qemu_extra(disk), nic_id="n0")
        r = bootcheck.Report(node, "install refused on a partitioned disk without wipe")
        try:
            r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode", BOOT_TIMEOUT)
            insecure = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
            config = tmp / "node.yaml"
            config.write_text(statecheck.node_config(statecheck.gen_config(tmp, node.api_port)))
            ok, out = client("apply-config", str(config), *insecure)
            r.check(not ok and "already has a partition table (mbr)" in out,
                    f"apply-config refused: {out.strip()[-240:]}")
            r.console(r"keelson: api: config refused: machine\.install\.disk /dev/vda already has a partition table", "one console line", STEP_TIMEOUT)
            ok, out = client("version", *insecure)
            r.check(ok and "maintenance mode" in out, f"still in maintenance mode: {out.strip()[-200:]}")
            r.no_console(r"keelson: state: installing", "nothing installed")
            bootcheck.power_off(r)
        finally:
            node.stop()
        after = statecheck.sha256(disk)
        r.check(before == after, f"the disk is unchanged (sha256 {before[:16]} before, {after[:16]} after)")
        return r.finish()


def case_install_refused_url(initrd):
    """A config naming an install disk that has a partition table, from talos.config=URL,
    then (a second boot) from talos.config.inline=: refused as apply-config refuses it; the
    node stays in maintenance."""
    ok = True
    with tempfile.TemporaryDirectory(prefix="keelson-boot-refused-url-") as tmp:
        tmp = Path(tmp)
        config = statecheck.node_config(statecheck.gen_config(tmp, vm.API_PORT))
        srv = ConfigServer(tmp, config)
        url = f"http://10.0.2.2:{srv.port}/ok/node.yaml"
        inline = base64.b64encode(config.encode()).decode()
        boots = [
            ("url", f"talos.config={url}", r"keelson: config: fetched config from http://10\.0\.2\.2"),
            ("inline", f"talos.config.inline={inline}", r"keelson: .*config from talos\.config\.inline=: \d+ bytes"),
        ]
        try:
            for name, cmdline, arrived in boots:
                disk = statecheck.mbr_disk(tmp / f"disk-{name}.raw")
                before = statecheck.sha256(disk)
                node = vm.Node(f"test-install-refused-{name}", initrd=initrd, cmdline=cmdline,
                               extra=statecheck.qemu_extra(disk), nic_id="n0")
                r = bootcheck.Report(node, f"install refused on a partitioned disk, config from {cmdline[:40]}")
                try:
                    r.console(arrived, "the config arrives", BOOT_TIMEOUT)
                    r.console(r"keelson: config: .*config refused: machine\.install\.disk /dev/vda already "
                              r"has a partition table \(mbr\).*maintenance mode",
                              "one line: refused, maintenance mode", BOOT_TIMEOUT)
                    r.check(node.wait_for(r"keelson: started kubelet", 10) is None, "the kubelet never starts")
                    r.no_console(r"machine stage: .*(booting|running)", "the stage never leaves maintenance")
                    r.no_console(r"keelson: config: loaded ", "the refused config is not loaded")
                    r.no_console(r"keelson: state: installing", "nothing installed")
                    insecure = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
                    done, out = client("version", *insecure)
                    r.check(done and "maintenance mode" in out,
                            f"the API is in maintenance mode: {out.strip()[-200:]}")
                    done, out = client("get", "machinestatus", *insecure)
                    r.check(done and re.search(r"MachineStatus\s+machine\s+\d+\s+maintenance\b", out),
                            f"machinestatus: stage maintenance: {out.strip()[-300:]}")
                    bootcheck.power_off(r)
                finally:
                    node.stop()
                after = statecheck.sha256(disk)
                r.check(before == after, f"the disk is unchanged (sha256 {before[:16]} before, {after[:16]} after)")
                ok = r.finish() and ok
        finally:
            srv.stop()
    return ok


def case_state_small(initrd):
    """A KEELSON-STATE partition of 4 KiB with a sentinel partition after it: refused with one
    line; nothing is written to the disk."""
    with tempfile.TemporaryDirectory(prefix="keelson-boot-state-small-") as tmp:
        tmp = Path(tmp)
        last = (48 << 20) // 512 - 1
        disk = statecheck.gpt_disk(tmp / "disk.raw", [
            (statecheck.STATE_TYPE, 2048, 2055, statecheck.STATE_LABEL),
            (statecheck.LINUX_TYPE, 2056, last, "sentinel"),
        ])
        sentinel = (2056 * 512, (last + 1) * 512)
        statecheck.fill(disk, *sentinel, 0xA5)
        before = statecheck.sha256(disk)
        node = vm.Node("test-state-small", initrd=initrd, cmdline="talos.config=/nope.yaml",
                       extra=statecheck.qemu_extra(disk), nic_id="n0")
        r = bootcheck.Report(node, "a 4 KiB state partition followed by a sentinel partition")
        try:
            r.console(r"keelson: state: /dev/vda: the state partition is too small: 4096 bytes "
                      r"\(LBA 2048\.\.=2055\); keelson needs at least 16777216 bytes .*state is kept in RAM",
                      "one line: the state partition is too small, state kept in RAM", BOOT_TIMEOUT)
            r.console(r"keelson: state: node identity created", "a node identity (in RAM)", STEP_TIMEOUT)
            r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode, a DHCP lease", BOOT_TIMEOUT)
            # The state thread writes within a quarter second of a change: a few seconds for
            # any write to happen.
            time.sleep(3)
            r.no_console(r"keelson: state: state generation \d+ written", "no state written")
            bootcheck.power_off(r)
        finally:
            node.stop()
        bad = statecheck.all_bytes(disk, *sentinel, 0xA5)
        r.check(bad is None, f"the sentinel partition is untouched (first changed byte: {bad})")
        after = statecheck.sha256(disk)
        r.check(before == after, f"the disk is unchanged (sha256 {before[:16]} before, {after[:16]} after)")
        return r.finish()


# Serves a directory over https (TLS 1.3, the test CA's certificate for 10.0.2.2) on
# 127.0.0.1: python3 -c HTTPS_DIR DIR PORT CERT KEY.
HTTPS_DIR = """
import functools, http.server, ssl, sys
d, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=d)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"""


class HttpsDir:
    """A directory served over https on the host's 127.0.0.1 (the guest's 10.0.2.2)."""

    def __init__(self, directory, cert, key):
        self.port = vm.free_port()
        self.proc = subprocess.Popen(["python3", "-c", HTTPS_DIR, str(directory), str(self.port),
                                      str(cert), str(key)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._listening, 10)

    def _listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def installed(r, node, tmp):
    """Maintenance mode, a config with machine.install.disk applied with --insecure, the
    state written to the disk, mutual TLS: (admin client args, NodeID) or None."""
    r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode", BOOT_TIMEOUT)
    insecure = ["-n", f"127.0.0.1:{node.api_port}", "--insecure"]
    config = tmp / "node.yaml"
    config.write_text(statecheck.node_config(statecheck.gen_config(tmp, node.api_port)))
    ok, out = client("apply-config", str(config), *insecure)
    r.check(ok, f"apply-config --insecure with install.disk: {out.strip()[-200:]}")
    r.console(r"keelson: state: installed: state partition on /dev/vda", "installed", STEP_TIMEOUT)
    r.console(r"keelson: state: state generation \d+ written to /dev/vda .*config\.yaml",
              "the state written with the config", STEP_TIMEOUT)
    ident = r.console(r"keelson: state: node identity created: (\S+)", "a node identity", 1)
    r.console(r"API: mutual TLS", "mutual TLS with the config's CA", STEP_TIMEOUT)
    admin = ["--keelsonconfig", str(tmp / "gen" / "keelsonconfig")]
    if not wait_until(lambda: client("version", *admin)[0], 30) or not ident:
        r.fail("the API answers with the admin certificate")
        return None
    return admin, re.search(r"created: (\S+)", ident).group(1)


def case_reset(initrd):
    """An installed node reset over the API: its state slots zeroed, then the next boot is in
    maintenance mode with a new identity, and `disks` still lists the disk."""
    with tempfile.TemporaryDirectory(prefix="keelson-boot-reset-") as tmp:
        tmp = Path(tmp)
        disk = statecheck.blank_disk(tmp / "disk.raw")
        node = vm.Node("test-reset-1", initrd=initrd, cmdline="talos.config=/nope.yaml",
                       extra=statecheck.qemu_extra(disk))
        r = bootcheck.Report(node, "reset of an installed node, then reboot")
        node_id = None
        try:
            got = installed(r, node, tmp)
            if got:
                admin, node_id = got
                ok, out = client("reset", "--reboot", *admin)
                r.check(ok and "reset: accepted" in out, f"keelson reset --reboot: {out.strip()[-200:]}")
                r.console(r"keelson: api: reset requested: wipe STATE and EPHEMERAL, then reboot",
                          "the request on the console", STEP_TIMEOUT)
                r.console(r"keelson: state: reset: the state partition on /dev/vda is wiped",
                          "the state partition wiped", STEP_TIMEOUT)
                rc = node.wait_exit(STEP_TIMEOUT)
                r.check(rc is not None, f"QEMU exited at the reboot (-no-reboot; code {rc})")
                r.console(r"keelson: reboot$", "the reboot line", 1)
        finally:
            node.stop()
        # Both slots (16 MiB at 1 MiB) are zero; the GPT stays.
        bad = statecheck.all_bytes(disk, 1 << 20, 17 << 20, 0)
        r.check(bad is None, f"the state slots are blank (first non-zero byte at {bad})")
        with open(disk, "rb") as f:
            f.seek(512)
            r.check(f.read(8) == b"EFI PART", "the GPT is kept")
        if not r.finish() or node_id is None:
            return False

        node = vm.Node("test-reset-2", initrd=initrd, cmdline="talos.config=/nope.yaml",
                       extra=statecheck.qemu_extra(disk))
        r = bootcheck.Report(node, "the boot after the reset")
        try:
            r.console(r"keelson: state: state partition on /dev/vda is empty",
                      "the state partition is found, empty", BOOT_TIMEOUT)
            r.console(r"reachable at 10\.0\.2\.15:50000", "maintenance mode", BOOT_TIMEOUT)
            ident = r.console(r"keelson: state: node identity created: (\S+)", "a new node identity", STEP_TIMEOUT)
            r.check(ident is not None and node_id not in ident, f"not the old NodeID {node_id}")
            ok, out = client("disks", "-n", f"127.0.0.1:{node.api_port}", "--insecure")
            r.check(ok and "vda" in out, f"disks lists vda in maintenance mode: {out.strip()[-200:]}")
            bootcheck.power_off(r)
        finally:
            node.stop()
        return r.finish()


def case_upgrade(_initrd):
    """An installed node (image A) upgraded over the API to image B, served over https: a
    manifest with a wrong digest is refused in one line and A keeps running; the right one is
    booted by kexec, B reports its version and keeps the state (config, NodeID)."""
    with tempfile.TemporaryDirectory(prefix="keelson-boot-upgrade-") as tmp:
        tmp = Path(tmp)
        image, ca = ca_image(tmp)
        b, _ = vm.build_initramfs(out=vm.BUILD / "upgrade-b-initramfs.cpio.zst",
                                  add=[(ca / "ca.pem", "/etc/keelson/ca.pem")],
                                  version_suffix="-upgrade-b")
        www = tmp / "www"
        www.mkdir()
        kernel = vm.newest_kernel()
        (www / "vmlinuz").write_bytes(kernel.read_bytes())
        (www / "initramfs.cpio.zst").write_bytes(b.read_bytes())
        digest = {n: statecheck.sha256(www / n) for n in ("vmlinuz", "initramfs.cpio.zst")}
        srv = HttpsDir(www, ca / "server.pem", ca / "server.key")
        disk = statecheck.blank_disk(tmp / "disk.raw")
        node = vm.Node("test-upgrade", initrd=image, cmdline="talos.config=/nope.yaml",
                       extra=statecheck.qemu_extra(disk))
        r = bootcheck.Report(node, "upgrade from image A to image B by kexec")
        try:
            got = installed(r, node, tmp)
            if got:
                admin, node_id = got
                ok, out = client("version", *admin)
                tag = re.search(r"Tag:\s+(\S+)", out)
                r.check(ok and tag and "upgrade-b" not in tag.group(1), f"image A's version: {out.strip()[-200:]}")
                new = (tag.group(1) if tag else "v0") + "-upgrade-b"

                def manifest(name, initramfs_sha):
                    (www / name).write_text(json.dumps({
                        "version": new,
                        "kernel": {"url": "vmlinuz", "sha256": digest["vmlinuz"]},
                        "initramfs": {"url": "initramfs.cpio.zst", "sha256": initramfs_sha}}))
                    return f"https://10.0.2.2:{srv.port}/{name}"

                bad = manifest("bad.json", "0" * 64)
                good = manifest("good.json", digest["initramfs.cpio.zst"])
                ok, out = client("upgrade", "--image", bad, *admin)
                r.check(ok and "Upgrade request received" in out and out.startswith("NODE"),
                        f"keelson upgrade (wrong digest) is acknowledged: {out.strip()[-200:]}")
                r.console(r"keelson: upgrade: upgrade refused: initramfs: sha256 mismatch: the manifest says 0{64}, "
                          r"the download \(\d+ bytes\) is [0-9a-f]{64}; nothing loaded, the node keeps running$",
                          "the digest mismatch in one line", BOOT_TIMEOUT)
                ok, out = client("version", *admin)
                r.check(ok and "upgrade-b" not in out, f"the node still runs image A: {out.strip()[-200:]}")
                ok, out = client("upgrade", "--image", good, *admin)
                r.check(ok and "Upgrade request received" in out, f"keelson upgrade: {out.strip()[-200:]}")
                r.console(rf"keelson: upgrade: upgrade to {re.escape(new)} loaded: stopping services",
                          "downloaded, verified and loaded", BOOT_TIMEOUT)
                r.console(r"keelson: upgrade: booting the new kernel \(kexec\)", "kexec", STEP_TIMEOUT)
                r.console(r"keelson .*-upgrade-b starting as PID 1", "image B starts", BOOT_TIMEOUT)
                r.console(r"keelson: state: state read from /dev/vda", "the state read from the disk", BOOT_TIMEOUT)
                r.console(rf"keelson: state: node identity kept: {re.escape(node_id)}$", "the same NodeID", STEP_TIMEOUT)
                back = wait_until(lambda: "upgrade-b" in client("version", *admin)[1], 60)
                ok, out = client("version", *admin)
                r.check(back and new in out,
                        f"image B answers with the kept config's CA and reports {new}: {out.strip()[-200:]}")
                bootcheck.power_off(r)
        finally:
            node.stop()
            srv.stop()
        return r.finish()


CASES = {
    "standard": case_standard,
    "bad-cmdline": case_bad_cmdline,
    "no-config": case_no_config,
    "talos-api": case_talos_api,
    "try-rollback": case_try_rollback,
    "bad-kubelet": case_bad_kubelet,
    "clock": case_clock,
    "clock-nts": case_clock_nts,
    "generic-virtio": generic_case("generic-virtio", "virtio-net-pci", "virtio_net", "ens3"),
    "generic-e1000": generic_case("generic-e1000", "e1000", "e1000", "ens3"),
    "generic-rtl8139": generic_case("generic-rtl8139", "rtl8139", "8139cp", "ens3"),
    "generic-vmxnet3": generic_case("generic-vmxnet3", "vmxnet3", "vmxnet3", "ens3"),
    "generic-e1000e-q35": generic_case("generic-e1000e-q35", "e1000e", "e1000e", "enp0s2", "q35"),
    "generic-hotplug": case_generic_hotplug,
    "system-identity": case_system_identity,
    "feature-on-demand": case_feature_on_demand,
    "feature-by-config": case_feature_by_config,
    "generic-selectors": case_generic_selectors,
    "config-url": case_config_url,
    "config-url-bad": case_config_url_bad,
    "install": case_install,
    "install-refused": case_install_refused,
    "install-refused-url": case_install_refused_url,
    "state-small": case_state_small,
    "reset": case_reset,
    "upgrade": case_upgrade,
}


def main(argv):
    if any(a in ("-h", "--help", "--list") for a in argv):
        print(__doc__)
        return 0
    names = argv or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        sys.exit(f"test-boot: unknown case(s) {unknown}; cases: {', '.join(CASES)}")
    initrd, summary = vm.build_initramfs()
    print(summary, flush=True)
    failed = [name for name in names if not CASES[name](initrd)]
    if failed:
        print(f"test-boot: failed boots: {', '.join(failed)}")
    # The plain summary line CI tools read.
    print(f"test-boot: {len(names) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
