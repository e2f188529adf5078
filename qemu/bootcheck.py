# SPDX-License-Identifier: Apache-2.0
"""Assertions on a booted node, shared by scripts/boot --check and the boot tests (tests/boot/).

Each check prints one `ok`/`FAIL` line; a Report collects the failures, and at the end prints
the console log's path (and its tail when something failed). Every check can fail: each one
waits for a positive sign (a console line, an HTTP answer) within a deadline.
"""

import re
import time

from vm import ROOT

# Generous: a TCG boot of Debian's kernel takes 10-20 s here, more when the machine is busy.
BOOT_TIMEOUT = 180
STEP_TIMEOUT = 60
NODE_IP = "10.0.2.15"
# The demo NIC (virtio at 00:03.0, hotplug slot 3 on QEMU's default i440FX machine) as keelson
# renames it, like systemd-udevd's net_id; `eth0` stays its altname.
NODE_LINK = "ens3"


class Report:
    def __init__(self, node, title):
        self.node = node
        self.failures = []
        print(f"== {title} (console: {node.log_path})", flush=True)

    def ok(self, what):
        print(f"  ok    {what}", flush=True)

    def fail(self, what):
        print(f"  FAIL  {what}", flush=True)
        self.failures.append(what)

    def check(self, cond, what):
        (self.ok if cond else self.fail)(what)
        return cond

    def console(self, pattern, what, timeout=STEP_TIMEOUT):
        """Waits for a console line matching `pattern`; returns it or None."""
        line = self.node.wait_for(pattern, timeout)
        if line is None:
            self.fail(f"{what}: no console line matching /{pattern}/ within {timeout} s")
        else:
            self.ok(f"{what}: {line.strip()[:160]}")
        return line

    def no_console(self, pattern, what):
        """Checks that no console line so far matches."""
        lines = self.node.matching(pattern)
        if lines:
            self.fail(f"{what}: {lines[0].strip()[:160]}")
        else:
            self.ok(what)

    def finish(self):
        if self.failures:
            print(f"  {len(self.failures)} check(s) failed; console log: {self.node.log_path}")
            print("  last console lines:")
            for line in self.node.tail(30):
                print(f"    | {line}")
        else:
            print(f"  all checks passed; console log: {self.node.log_path}")
        return not self.failures


def listed_modules():
    names = []
    for raw in (ROOT / "initramfs/modules").read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def check_modules(r):
    first = True
    for name in listed_modules():
        rx = rf"keelson: module loaded: {re.escape(name)}\b"
        r.console(rx, f"module {name}", BOOT_TIMEOUT if first else 10)
        first = False


def check_network_and_kubelet(r, node_ip=NODE_IP):
    r.console(r"keelson: network ready", "network ready", BOOT_TIMEOUT)
    r.console(rf"keelson: started kubelet.*--node-ip={re.escape(node_ip)}\b",
              f"kubelet stand-in started with --node-ip={node_ip}", BOOT_TIMEOUT)


def check_workload(r, node_ip=NODE_IP, link=None):
    """The host fetches the workload's answer through the forwarded port."""
    body, err = r.node.http_get_until("/", lambda b: b.rstrip().endswith("ok"), STEP_TIMEOUT)
    if not r.check(body is not None and err is None,
                   f"GET http://127.0.0.1:{r.node.port}/ answered" + (f" ({err})" if err else "")):
        return None
    r.check(f"--node-ip={node_ip}" in body, f"the answer shows --node-ip={node_ip}")
    r.check("--hostname-override=" in body, "the answer shows --hostname-override=")
    link = link or NODE_LINK
    r.check(re.search(rf"^\s+{re.escape(node_ip)} {re.escape(link)}$", body, re.M) is not None,
            f"the node has {node_ip} on {link} (addresses applied)")
    return body


def check_zombies(r, min_abandoned=3):
    """Zombies reaped: after the stand-in has abandoned a few children (each one reparented
    to PID 1 and exiting soon after), no process is left in state Z. Without reaping they
    pile up and the count never returns to 0."""
    last = {}

    def accept(body):
        fields = dict(re.findall(r"^(zombies|abandoned children): (\d+)$", body, re.M))
        last.update(fields)
        return int(fields.get("abandoned children", 0)) >= min_abandoned and \
            fields.get("zombies") == "0"

    body, err = r.node.http_get_until("/zombies", accept, STEP_TIMEOUT)
    r.check(err is None, f"no zombies after {min_abandoned}+ abandoned children "
            f"(last: {last or err}{'' if err is None else '; ' + (body or '').strip()[:200]})")
    r.console(r"keelson: reaped", "PID 1 logged reaping", 10)


def power_off(r):
    """ctrl-alt-del through the monitor; QEMU must exit after keelson's power-off line."""
    if r.node.proc.poll() is not None:
        r.fail(f"QEMU was still running before power-off (exit code {r.node.proc.returncode})")
        return
    r.node.ctrl_alt_del()
    rc = r.node.wait_exit(STEP_TIMEOUT)
    r.check(rc is not None, f"QEMU exited after ctrl-alt-del (code {rc})")
    r.no_console(r"Kernel panic|Attempted to kill init", "no kernel panic")
    r.console(r"keelson: power off", "clean power off", 1)


def standard(r, link=None, modules=True):
    """The full boot check of scripts/boot --check. `link`: the NIC's name once renamed."""
    link = link or NODE_LINK
    if modules:
        check_modules(r)
    r.console(r"keelson: run: link eth0 renamed to " + re.escape(link),
              f"the NIC got its predictable name {link}", BOOT_TIMEOUT)
    r.console(rf"keelson: .*dhcp4/{re.escape(link)}: bound 10\.0\.2\.15/24 from 10\.0\.2\.2",
              f"{link} leased 10.0.2.15 from QEMU's DHCP server", BOOT_TIMEOUT)
    check_network_and_kubelet(r)
    if check_workload(r, link=link) is not None:
        check_zombies(r)
    r.no_console(r"Kernel panic", "no kernel panic while up")
    power_off(r)


def line_times(node, pattern):
    """Kernel timestamps of every console line that matches."""
    out = []
    for line in node.matching(pattern):
        m = re.match(r"^\[\s*(\d+\.\d+)\]", line)
        if m:
            out.append(float(m.group(1)))
    return out


def wait_count(node, pattern, count, timeout):
    """Waits until at least `count` console lines match; returns how many did."""
    deadline = time.monotonic() + timeout
    while True:
        n = len(node.matching(pattern))
        if n >= count or time.monotonic() > deadline or node.proc.poll() is not None:
            return n
        node.wait_for(pattern, 1, start=len(node.lines))
