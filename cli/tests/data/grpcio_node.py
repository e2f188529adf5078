# SPDX-License-Identifier: Apache-2.0
"""A stand-in node for the client's gRPC tests: Python grpcio serving a few
machine.MachineService methods on a Unix socket, with Talos's own message classes
(talos-linux-api-v1-6-0).

usage: grpcio_node.py SOCKET
"""
import sys
import time
from concurrent import futures

import grpc
from talos_linux_api.v1_6_0 import common, machine


def version(request, context):
    reply = machine.VersionResponse(messages=[machine.Version(
        version=machine.VersionInfo(tag="v9.9.9", sha="abc", os="linux", arch="amd64"),
        features=machine.FeaturesInfo(rbac=True))])
    return bytes(reply)


def dmesg(request, context):
    # Three chunks, the last one with a terminal escape in it.
    for chunk in [b"first line\n", b"second ", b"line\n\x1b[2Jthird\n"]:
        yield bytes(common.Data(bytes=chunk))


def huge(request, context):
    # 17 MiB: over the client's 16 MiB message bound.
    return bytes(17 << 20)


def empty_unary(request, context):
    return b""


def main():
    path = sys.argv[1]
    ident = lambda b: b
    handlers = {
        "Version": grpc.unary_unary_rpc_method_handler(version, ident, ident),
        "Dmesg": grpc.unary_stream_rpc_method_handler(dmesg, ident, ident),
        "Huge": grpc.unary_unary_rpc_method_handler(huge, ident, ident),
        "Empty": grpc.unary_unary_rpc_method_handler(empty_unary, ident, ident),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                         options=[("grpc.max_send_message_length", 64 << 20)])
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("machine.MachineService", handlers),))
    server.add_insecure_port("unix:" + path)
    server.start()
    print("ready", flush=True)
    while True:
        time.sleep(3600)


main()
