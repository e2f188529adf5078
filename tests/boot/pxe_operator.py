# SPDX-License-Identifier: Apache-2.0
"""keelson-operator drives a firmware-PXE-booted VM to Available (scripts/test-pxe --operator).

`keelson-operator serve` with its private etcd and `--boot-http`; the image `v1.13.0` (Debian's
kernel and keelson's demo initramfs) added; one TalosMachine with a `pxeClientSpec` naming the
VM's MAC, no `config` (the operator generates the cluster's secrets and configuration), and
patches for the demo (hostname, the kubelet stand-in, no time sync on QEMU's network). QEMU's
iPXE ROM (-boot n) runs the operator's script, which carries `BOOTIF=` and `keelson.image=`;
the node boots in maintenance mode and reports its boot MAC in `Version`; the operator moves
the machine Booting -> Pending (BootReported) -> Installing (ApplyConfiguration over the API,
reached through QEMU's hostfwd) -> Available (kubelet Running and healthy, asked over mutual
TLS with the operator's own admin certificate). The states are read with `keelson-operator get
tm -o yaml` while it runs, and the transitions from the leader's log.

With --upgrade (a soak: about two minutes more): then the image `v1.13.1` is added and the
TalosMachine's version changed; the operator moves it to Upgrading and calls Reboot; the ROM
boots again, gets `v1.13.1` with `talos.config=` (the applied configuration, served at
/config/MAC), and the operator sees the new image in the boot report: Available again.

--bench: print the time from QEMU's start to Available only (docs/benchmarks.md).
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

MAC = "52:54:00:a1:b2:c4"
OPERATOR = vm.ROOT / "target/debug/keelson-operator"
TIMEOUT = 150

PATCH = """machine:
  network:
    hostname: pxe-node
  kubelet:
    command: [/bin/demo-kubelet]
  time:
    disabled: true
"""


def machine_doc(version):
    patch = "".join(f"      {line}\n" for line in PATCH.splitlines())
    args = ", ".join(vm.BASE_CMDLINE.split())
    return (
        "apiVersion: keelson.dev/v1alpha1\nkind: TalosMachine\nmetadata:\n  name: pxe1\nspec:\n"
        f"  endpoint: 127.0.0.1\n  version: {version}\n  pxeClientSpec:\n"
        f"    macAddress: {MAC}\n    cpuArchitecture: amd64\n    kernelCmdlineArgs: [{args}]\n"
        f"  configPatches:\n    - |\n{patch}"
    )


def run(cmd, **kw):
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{p.stdout}{p.stderr}")
    return p.stdout


def state_of(data):
    """The TalosMachine's status.state and observedVersion, from `get -o yaml`."""
    p = subprocess.run([str(OPERATOR), "get", "tm", "pxe1", "-o", "yaml", "--data-dir", str(data)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None, None, p.stdout + p.stderr
    state = re.search(r"^  state: (\w+)$", p.stdout, re.M)
    observed = re.search(r"^  observedVersion: (\S+)$", p.stdout, re.M)
    return (state.group(1) if state else None,
            observed.group(1) if observed else None, p.stdout)


def check_metrics(port, check):
    """Scrape the leader's /metrics: promtool accepts it, and it counts what happened."""
    import urllib.request
    tm = 'kind="TalosMachines.keelson.dev"'
    available = f'keelson_operator_resources{{{tm},state="Available"}} 1'
    # The gauge is the state at the start of the leader's last pass: the pass after the one
    # that made the machine Available counts it (passes run every 0.5 to 5 s).
    end = time.monotonic() + 15
    while True:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                      timeout=10).read().decode()
        if available in text.splitlines() or time.monotonic() > end:
            break
        time.sleep(0.5)
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True)
    ok = check(lint.returncode == 0, "promtool check metrics accepts the operator's /metrics"
               + ("" if lint.returncode == 0 else f": {lint.stdout}{lint.stderr}"))
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    ok &= check(samples.get("keelson_operator_leader") == 1, "the metrics say this replica leads")
    ok &= check(samples.get(f'keelson_operator_resources{{{tm},state="Available"}}') == 1,
                "one TalosMachine Available in keelson_operator_resources")
    ok &= check(samples.get(f"keelson_operator_reconcile_seconds_count{{{tm}}}", 0) >= 4,
                "reconcile durations counted for the TalosMachine")
    ok &= check(samples.get('keelson_operator_etcd_request_seconds_count{op="range"}', 0) > 0
                and samples.get('keelson_operator_etcd_request_seconds_count{op="txn"}', 0) > 0,
                "etcd request latency counted (range and txn)")
    if not ok:
        print(text)
    return ok


def main():
    args = sys.argv[1:]
    upgrade = "--upgrade" in args
    bench = "--bench" in args
    initrd = None
    if "--initrd" in args:
        initrd = Path(args[args.index("--initrd") + 1])
    if not OPERATOR.exists() or os.environ.get("KEELSON_PXE_BUILD", "1") != "0":
        run(["cargo", "build", "-q", "-p", "keelson-operator"], cwd=vm.ROOT)
    if initrd is None:
        initrd, _ = vm.build_initramfs()
    kernel = vm.newest_kernel()
    data = Path(tempfile.mkdtemp(prefix="keelson-pxe-op-"))
    port, api_port, metrics_port = vm.free_port(), vm.free_port(), vm.free_port()
    base = f"http://10.0.2.2:{port}"
    run([OPERATOR, "image", "add", "v1.13.0", "--kernel", kernel, "--initramfs", initrd,
         "--data-dir", data])
    op_log_path = data / "operator.log"
    op = subprocess.Popen(
        [str(OPERATOR), "serve", "--data-dir", str(data), "--boot-http", f"127.0.0.1:{port}",
         "--boot-url", base, "--talos-port", str(api_port),
         "--metrics-listen", f"127.0.0.1:{metrics_port}"],
        stdout=open(op_log_path, "w"), stderr=subprocess.STDOUT)
    qemu = None
    ok = False
    lines = []
    seen = []
    started = time.monotonic()

    def op_log():
        return op_log_path.read_text()

    def check(hit, what):
        nonlocal ok
        print(f"{'ok' if hit else 'FAIL'}: {what} ({time.monotonic() - started:.1f} s)",
              flush=True)
        return hit

    def watch(until_state, until_version, timeout):
        """Poll `get -o yaml` every 0.5 s, recording each new state, until the machine is in
        `until_state` with `until_version` observed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            state, observed, _ = state_of(data)
            if state and (not seen or seen[-1] != state):
                seen.append(state)
                print(f"  get tm pxe1: {state} ({time.monotonic() - started:.1f} s)", flush=True)
            if state == until_state and observed == until_version:
                return True
            if qemu.poll() is not None or op.poll() is not None:
                return False
            time.sleep(0.5)
        return False

    try:
        deadline = time.monotonic() + 60
        while not ("boot http on" in op_log() and " leads (lease" in op_log()):
            if time.monotonic() > deadline or op.poll() is not None:
                raise SystemExit("keelson-operator did not start:\n" + op_log())
            time.sleep(0.2)
        doc = data / "tm.yaml"
        doc.write_text(machine_doc("v1.13.0"))
        run([OPERATOR, "apply", "-f", doc, "--data-dir", data])
        nic = (f"user,model=virtio-net-pci,mac={MAC},bootfile={base}/ipxe?mac={MAC},"
               f"hostfwd=tcp:127.0.0.1:{api_port}-:50000")
        # No -no-reboot: the upgrade's Reboot must bring the ROM back.
        cmd = ["qemu-system-x86_64", "-accel", "tcg", "-m", "512", "-nographic",
               "-serial", "mon:stdio", "-boot", "n", "-nic", nic]
        print("# " + " ".join(cmd), flush=True)
        t_qemu = time.monotonic()
        qemu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)

        def read():
            for raw in qemu.stdout:
                lines.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

        threading.Thread(target=read, daemon=True).start()
        ok = check(watch("Available", "v1.13.0", TIMEOUT), "the machine is Available at v1.13.0")
        t_available = time.monotonic() - t_qemu
        log = op_log()
        order = ["TalosMachine pxe1: (new) -> Booting (WaitingForBoot)",
                 "TalosMachine pxe1: Booting -> Pending (BootReported)",
                 "TalosMachine pxe1: Pending -> Installing (Applied)",
                 "TalosMachine pxe1: Installing -> Available (KubeletRunning)"]
        at = [log.find(o) for o in order]
        ok &= check(all(a >= 0 for a in at) and at == sorted(at),
                    "the leader logged Booting -> Pending -> Installing -> Available in order")
        # `get` saw the states in that order. Pending lasts one pass and Installing only until
        # the node's kubelet runs (a second or less), so either may fall between two reads;
        # the leader's log above has all four.
        want = ["Booting", "Pending", "Installing", "Available"]
        ok &= check(seen[0] == "Booting" and seen[-1] == "Available"
                    and [s for s in want if s in seen] == seen,
                    f"get -o yaml showed the states in order: {' -> '.join(seen)}")
        _, _, yaml = state_of(data)
        ok &= check(f"node booted from {MAC} (v1.13.0)" in yaml,
                    "the BootReported event names the VM's MAC and image")
        ok &= check(any(f"BOOTIF=01-{MAC.replace(':', '-')} keelson.image=v1.13.0" in l
                        for l in lines), "the kernel command line carried BOOTIF= and keelson.image=")
        ok &= check("cluster pxe1: generated its secrets" in log,
                    "the operator generated the cluster's secrets")
        ok &= check("REDACTED" in yaml and "clusterName: pxe1" in yaml,
                    "status shows the generated configuration, redacted")
        ok &= check_metrics(metrics_port, check)
        if bench:
            print(f"BENCH: QEMU start to Available: {t_available:.1f} s")
        if ok and upgrade:
            run([OPERATOR, "image", "add", "v1.13.1", "--kernel", kernel, "--initramfs", initrd,
                 "--data-dir", data])
            doc.write_text(machine_doc("v1.13.1"))
            run([OPERATOR, "apply", "-f", doc, "--data-dir", data])
            seen.clear()
            # Upgrading -> Available needs the node's own report: the operator's readiness
            # check compares the image the node reports (its boot report, from the kernel's
            # keelson.image=) with the spec's version and stays in Upgrading until they match.
            ok &= check(watch("Available", "v1.13.1", TIMEOUT + 60),
                        "after the version change the machine is Available at v1.13.1")
            log = op_log()
            a = log.find("TalosMachine pxe1: Available -> Upgrading (Upgrading)")
            b = log.find("TalosMachine pxe1: Upgrading -> Available (KubeletRunning)")
            ok &= check(0 <= a < b, "the leader logged Available -> Upgrading -> Available")
            ok &= check("Upgrading" in seen, f"get -o yaml showed {' -> '.join(seen)}")
            ok &= check(any(f"keelson-operator: {MAC} boots v1.13.1" in l for l in lines),
                        "the ROM booted v1.13.1 after the Reboot")
            ok &= check(any(f"fetched config from {base}/config/{MAC}" in l for l in lines),
                        "the rebooted node fetched its applied configuration from /config/MAC")
    finally:
        if qemu:
            qemu.kill()
            qemu.wait()
        op.terminate()
        op.wait(timeout=30)
        if not ok:
            print("--- console (last 60 lines)\n" + "\n".join(lines[-60:]))
            print("--- operator log\n" + op_log())
            print("--- get tm pxe1 -o yaml\n" + state_of(data)[2])
        if "--keep" not in args:
            subprocess.run(["rm", "-rf", str(data)])
        else:
            print(f"data kept in {data}")
    print(f"{'PASS' if ok else 'FAIL'}: the operator drove a PXE-booted VM "
          f"in {time.monotonic() - started:.1f} s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
