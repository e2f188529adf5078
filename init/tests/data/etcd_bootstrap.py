# SPDX-License-Identifier: Apache-2.0
"""Bootstrap and ServiceList against keelson's local API socket with grpcio and the PyPI
Talos bindings (talos-linux-api-v1-6-0). Prints `ok SCENARIO` at the end.

  python3 etcd_bootstrap.py bootstrap SOCKET        # Bootstrap succeeds
  python3 etcd_bootstrap.py again SOCKET            # Bootstrap is AlreadyExists
  python3 etcd_bootstrap.py service SOCKET          # etcd is listed, running and healthy"""
import sys

import grpc

from talos_linux_api.v1_6_0 import machine as tm
import betterproto.lib.google.protobuf as pb


def call(ch, path, req, reply_cls):
    return ch.unary_unary(path, request_serializer=bytes, response_deserializer=reply_cls.FromString)(req, timeout=10)


def main():
    what, sock = sys.argv[1], sys.argv[2]
    ch = grpc.insecure_channel(f"unix:{sock}")
    if what == "bootstrap":
        r = call(ch, "/machine.MachineService/Bootstrap", tm.BootstrapRequest(), tm.BootstrapResponse)
        assert len(r.messages) == 1 and r.messages[0].metadata is not None, r
    elif what == "again":
        try:
            r = call(ch, "/machine.MachineService/Bootstrap", tm.BootstrapRequest(), tm.BootstrapResponse)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.ALREADY_EXISTS, (e.code(), e.details())
            assert e.details() == "etcd data directory is not empty", e.details()
            print("  second Bootstrap:", e.code().name, e.details())
        else:
            raise AssertionError(f"a second Bootstrap answered {r!r}")
    elif what == "service":
        r = call(ch, "/machine.MachineService/ServiceList", pb.Empty(), tm.ServiceListResponse)
        etcd = [s for s in r.messages[0].services if s.id == "etcd"]
        assert len(etcd) == 1, r
        assert etcd[0].state == "Running" and etcd[0].health.healthy, etcd[0]
        print("  etcd:", etcd[0].state, "healthy")
    else:
        raise SystemExit(f"unknown scenario {what}")
    ch.close()
    print(f"ok {what}")


if __name__ == "__main__":
    main()
