# SPDX-License-Identifier: Apache-2.0
"""Scrapes `keelson run --metrics-listen` from inside its namespace, with parsers keelson did
not write (prometheus_client's text and OpenMetrics parsers, promtool's linter), and plays
hostile clients against the listener.

usage: metrics_scrape.py scrape HOST:PORT MIN_ADDRESSES
       metrics_scrape.py api HOST:PORT API_SOCKET
       metrics_scrape.py hostile HOST:PORT
"""
import socket
import subprocess
import sys
import time

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as prom_parse


def check(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    s.settimeout(10)
    return s


def read_all(s):
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return data
        data += chunk


def request(addr, method, path, accept=None):
    """One request; the status, headers (lower-case names) and body, read until the close."""
    s = connect(addr)
    head = f"{method} {path} HTTP/1.1\r\nHost: {addr}\r\n"
    if accept:
        head += f"Accept: {accept}\r\n"
    s.sendall((head + "\r\n").encode())
    raw = read_all(s)
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def samples(parse, text):
    """(name, labels as a sorted tuple) -> value."""
    out = {}
    for fam in parse(text):
        for smp in fam.samples:
            out[(smp.name, tuple(sorted(smp.labels.items())))] = smp.value
    return out


def scenario_scrape(addr, min_addresses):
    min_addresses = int(min_addresses)
    for accept, parse, ctype in [
        (None, prom_parse, "text/plain; version=0.0.4"),
        ("application/openmetrics-text; version=1.0.0", om_parse, "application/openmetrics-text"),
    ]:
        status, headers, body = request(addr, "GET", "/metrics", accept)
        check(status == 200, f"GET /metrics: {status}")
        check(headers.get("content-type", "").startswith(ctype), f"content type {headers}")
        check(int(headers["content-length"]) == len(body), "content-length matches the body")
        text = body.decode()
        got = samples(parse, text)

        def one(name, **labels):
            return got.get((name, tuple(sorted(labels.items()))))

        addresses = one("keelson_resources", namespace="network", kind="AddressStatus")
        check(addresses is not None and addresses >= min_addresses,
              f"AddressStatus resources {addresses}, want >= {min_addresses}")
        reconciles = {dict(k[1])["controller"]: v for k, v in got.items()
                      if k[0] == "keelson_controller_reconciles_total"}
        check(len(reconciles) > 10, f"controllers {sorted(reconciles)}")
        check(sum(reconciles.values()) > 0, f"reconciles {reconciles}")
        for c, n in reconciles.items():
            count = one("keelson_controller_reconcile_seconds_count", controller=c)
            check(count == n, f"{c}: {n} reconciles but {count} durations")
            check(one("keelson_controller_errors_total", controller=c) is not None, f"{c} errors")
        rss = one("keelson_process_resident_memory_bytes")
        check(rss is not None and rss > 1 << 20, f"RSS {rss}")
        fds = one("keelson_process_open_fds")
        check(fds is not None and fds >= 3, f"fds {fds}")
        check(one("keelson_metrics_dropped_series") == 0, "nothing dropped")
        check(one("keelson_kubespan_peers", state="up") == 0, "no KubeSpan peers")
        if accept is None:
            lint = subprocess.run(["promtool", "check", "metrics"], input=text,
                                  capture_output=True, text=True)
            check(lint.returncode == 0, f"promtool: {lint.stdout}{lint.stderr}")
        else:
            check(text.endswith("# EOF\n"), "OpenMetrics ends with # EOF")

    status, headers, body = request(addr, "HEAD", "/metrics")
    check(status == 200 and body == b"", f"HEAD: {status} {len(body)} bytes")
    check(int(headers["content-length"]) > 1000, f"HEAD's content-length {headers}")
    status, _, body = request(addr, "GET", "/")
    check(status == 200 and b"/metrics" in body, f"GET /: {status} {body!r}")
    status, _, _ = request(addr, "GET", "/nope")
    check(status == 404, f"GET /nope: {status}")
    status, _, _ = request(addr, "POST", "/metrics")
    check(status == 405, f"POST: {status}")


def scenario_hostile(addr):
    # Twenty clients that start a head and never finish it.
    slow = []
    for _ in range(20):
        s = connect(addr)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        slow.append(s)
    time.sleep(0.2)
    started = time.monotonic()
    status, _, body = request(addr, "GET", "/metrics")
    took = time.monotonic() - started
    check(status == 200 and b"keelson_controller_reconciles_total" in body,
          f"scrape beside 20 slow clients: {status}")
    check(took < 2, f"the scrape took {took:.1f}s")

    # A client that reads slowly through a small receive buffer: the response does not fit
    # the socket at once, and still arrives whole.
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.settimeout(10)
    s.connect((host, int(port)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)
    raw = b""
    while True:
        chunk = s.recv(512)
        if not chunk:
            break
        raw += chunk
        time.sleep(0.001)
    s.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    check(head.startswith(b"HTTP/1.1 200 ") and length == [len(body)] and len(body) > 10000,
          f"slow reader: {head[:40]!r}, {length} vs {len(body)} bytes")
    list(prom_parse(body.decode()))

    # A head past 8 KiB: 431, then the server closes.
    s = connect(addr)
    s.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n")
    raw = read_all(s)
    check(raw.startswith(b"HTTP/1.1 431 "), f"9 KB head: {raw[:40]!r}")
    s.close()

    # The slow clients are closed by the server: the oldest made room for the scrape, the
    # rest once their 5 s are up.
    deadline = time.monotonic() + 10
    for s in slow:
        s.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            check(s.recv(1) == b"", "a slow client got an answer")
        except ConnectionResetError:
            pass
        s.close()


def scenario_api(addr, sock):
    """gRPC calls on the node's socket (grpcio), then the calls by method and code and the
    unary durations in the scrape, in both formats."""
    import grpc

    ch = grpc.insecure_channel(f"unix:{sock}")
    call = lambda path, req: ch.unary_unary(path, request_serializer=bytes, response_deserializer=bytes)(req, timeout=10)
    for _ in range(3):
        call("/machine.MachineService/Version", b"")
    for path, req, code in [
        ("/machine.MachineService/Nope", b"", grpc.StatusCode.UNIMPLEMENTED),
        ("/not.A/Service", b"", grpc.StatusCode.UNIMPLEMENTED),
        ("/machine.MachineService/ServiceRestart", b"\x0a\x04nope", grpc.StatusCode.NOT_FOUND),
    ]:
        try:
            call(path, req)
            check(False, f"{path} answered")
        except grpc.RpcError as e:
            check(e.code() == code, f"{path}: {e.code()}")
    ch.close()
    for accept, parse in [(None, prom_parse), ("application/openmetrics-text; version=1.0.0", om_parse)]:
        status, _, body = request(addr, "GET", "/metrics", accept)
        check(status == 200, f"GET /metrics: {status}")
        got = samples(parse, body.decode())
        calls = {(dict(k[1])["method"], dict(k[1])["code"]): v for k, v in got.items()
                 if k[0] == "keelson_api_requests_total"}
        check(calls.get(("/machine.MachineService/Version", "OK"), 0) >= 3, f"Version OK: {calls}")
        check(calls.get(("other", "Unimplemented"), 0) >= 2, f"other: {calls}")
        check(calls.get(("/machine.MachineService/ServiceRestart", "NotFound"), 0) >= 1, f"ServiceRestart: {calls}")
        check(all(m == "other" or m.startswith("/machine.") for m, _ in calls), f"unknown paths stay out: {calls}")
        count = got.get(("keelson_api_unary_seconds_count", (("method", "/machine.MachineService/Version"),)))
        check(count is not None and count >= 3, f"Version durations: {count}")
        if accept is None:
            lint = subprocess.run(["promtool", "check", "metrics"], input=body.decode(),
                                  capture_output=True, text=True)
            check(lint.returncode == 0, f"promtool: {lint.stdout}{lint.stderr}")
        print(f"  {accept or 'text'}: {sorted(calls.items())}")


SCENARIOS = {
    name[len("scenario_"):]: fn for name, fn in globals().items() if name.startswith("scenario_")
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(SCENARIOS)}}} ADDR [ARGS...]")
    SCENARIOS[sys.argv[1]](*sys.argv[2:])
    print(f"ok {sys.argv[1]}")
