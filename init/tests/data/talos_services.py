# SPDX-License-Identifier: Apache-2.0
"""TimeCheck against a time server, and ServiceStop/ServiceStart of a supervised kubelet, on
a node's local socket with grpcio and the PyPI Talos bindings' messages. Prints
`ok SCENARIO` at the end; any failure exits non-zero with a traceback.

  python3 talos_services.py timecheck SOCKET
  python3 talos_services.py services SOCKET STARTS_FILE"""
import os
import socket
import struct
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from talos_api import EMPTY, grpcio_call, grpcio_fails, say  # noqa: E402

from talos_linux_api.v1_6_0 import machine as tm  # noqa: E402
from talos_linux_api.v1_6_0 import time as ttime  # noqa: E402

NTP_EPOCH = 2208988800
AHEAD = 5.0


def ntp_stamp(t):
    secs = int(t) + NTP_EPOCH
    frac = int((t - int(t)) * (1 << 32))
    return struct.pack("!II", secs & 0xFFFFFFFF, frac)


def sntp_server(sock):
    """Answer each request as a stratum-2 server whose clock is AHEAD seconds ahead."""
    while True:
        try:
            data, peer = sock.recvfrom(512)
        except OSError:
            return
        if len(data) < 48:
            continue
        now = time.time() + AHEAD
        reply = bytes([(0 << 6) | (4 << 3) | 4, 2, 6, 0xEC]) + bytes(8) + b"LOCL"
        reply += ntp_stamp(now - 10) + data[40:48] + ntp_stamp(now) + ntp_stamp(now)
        sock.sendto(reply, peer)


def timecheck(sock_path):
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    threading.Thread(target=sntp_server, args=(srv,), daemon=True).start()
    ch = grpc.insecure_channel(f"unix:{sock_path}")
    server = f"127.0.0.1:{port}"
    r = grpcio_call(ch, "/time.TimeService/TimeCheck", ttime.TimeRequest(server=server), ttime.TimeResponse, timeout=15)
    assert len(r.messages) == 1, r
    m = r.messages[0]
    assert m.server == server, m
    diff = (m.remotetime - m.localtime).total_seconds()
    assert abs(diff - AHEAD) < 0.5, (diff, m)
    say(f"  TimeCheck {server}: remote - local = {diff:.3f} s")
    # Nobody there: the call fails, quickly, as unavailable.
    dead = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    dead.bind(("127.0.0.1", 0))
    nobody = f"127.0.0.1:{dead.getsockname()[1]}"
    dead.close()
    grpcio_fails("TimeCheck of nobody", grpc.StatusCode.UNAVAILABLE, lambda: grpcio_call(ch, "/time.TimeService/TimeCheck", ttime.TimeRequest(server=nobody), ttime.TimeResponse, timeout=15))
    grpcio_fails("TimeCheck of a bad name", grpc.StatusCode.INVALID_ARGUMENT, lambda: grpcio_call(ch, "/time.TimeService/TimeCheck", ttime.TimeRequest(server="a b"), ttime.TimeResponse))
    grpcio_fails("TimeCheck without a server", grpc.StatusCode.INVALID_ARGUMENT, lambda: grpcio_call(ch, "/time.TimeService/TimeCheck", ttime.TimeRequest(), ttime.TimeResponse))
    # The loop kept serving while the check waited.
    grpcio_call(ch, "/machine.MachineService/Version", EMPTY, tm.VersionResponse)
    ch.close()
    say("ok timecheck")


def services(sock_path, starts):
    ch = grpc.insecure_channel(f"unix:{sock_path}")

    def state():
        reply = grpcio_call(ch, "/machine.MachineService/ServiceList", EMPTY, tm.ServiceListResponse)
        return {s.id: s.state for s in reply.messages[0].services}.get("kubelet")

    def wait(what, cond, t=20):
        end = time.monotonic() + t
        while not cond():
            assert time.monotonic() < end, f"{what}: kubelet {state()}"
            time.sleep(0.2)

    wait("running", lambda: state() == "Running")
    r = grpcio_call(ch, "/machine.MachineService/ServiceStop", tm.ServiceStopRequest(id="kubelet"), tm.ServiceStopResponse)
    assert r.messages[0].resp == 'Service "kubelet" stopped', r
    wait("stopped", lambda: state() not in ("Running", "Stopping"))
    count = open(starts).read().count("start")
    # Stopped stays stopped: the restart policy does not bring it back.
    time.sleep(3)
    assert open(starts).read().count("start") == count, "started again after ServiceStop"
    assert state() not in ("Running", "Waiting"), state()
    say("  after ServiceStop:", state())
    r = grpcio_call(ch, "/machine.MachineService/ServiceStart", tm.ServiceStartRequest(id="kubelet"), tm.ServiceStartResponse)
    assert r.messages[0].resp == 'Service "kubelet" started', r
    wait("started again", lambda: open(starts).read().count("start") > count)
    wait("running again", lambda: state() == "Running")
    say("  after ServiceStart:", state())
    grpcio_fails("stop machined", grpc.StatusCode.FAILED_PRECONDITION, lambda: grpcio_call(ch, "/machine.MachineService/ServiceStop", tm.ServiceStopRequest(id="machined"), tm.ServiceStopResponse))
    grpcio_fails("start nothing", grpc.StatusCode.NOT_FOUND, lambda: grpcio_call(ch, "/machine.MachineService/ServiceStart", tm.ServiceStartRequest(id="nope"), tm.ServiceStartResponse))
    ch.close()
    say("ok services")


def main():
    what, args = sys.argv[1], sys.argv[2:]
    {"timecheck": timecheck, "services": services}[what](*args)


if __name__ == "__main__":
    main()
