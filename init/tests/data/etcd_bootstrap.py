# SPDX-License-Identifier: Apache-2.0
"""Bootstrap, ServiceList and the etcd calls against keelson's local API socket with grpcio
and the PyPI Talos bindings (talos-linux-api-v1-6-0). Prints `ok SCENARIO` at the end.

  python3 etcd_bootstrap.py bootstrap SOCKET        # Bootstrap succeeds
  python3 etcd_bootstrap.py again SOCKET            # Bootstrap is AlreadyExists
  python3 etcd_bootstrap.py service SOCKET          # etcd is listed, running and healthy
  python3 etcd_bootstrap.py members SOCKET          # EtcdMemberList: prints `members JSON`
  python3 etcd_bootstrap.py status SOCKET           # EtcdStatus: prints `status JSON`
  python3 etcd_bootstrap.py forfeit SOCKET          # EtcdForfeitLeadership: `forfeit NAME`
  python3 etcd_bootstrap.py remove SOCKET ID        # EtcdRemoveMemberByID succeeds
  python3 etcd_bootstrap.py remove-self SOCKET ID   # ... of this node's ID: FailedPrecondition
  python3 etcd_bootstrap.py remove-name SOCKET NAME # EtcdRemoveMember of no member: NotFound
  python3 etcd_bootstrap.py leave SOCKET            # EtcdLeaveCluster succeeds
  python3 etcd_bootstrap.py leave-last SOCKET       # EtcdLeaveCluster of the only member: refused"""
import json
import sys
import time

import grpc

from talos_linux_api.v1_6_0 import machine as tm
import betterproto.lib.google.protobuf as pb


def call(ch, path, req, reply_cls):
    return ch.unary_unary(path, request_serializer=bytes, response_deserializer=reply_cls.FromString)(req, timeout=10)


def refused(what, code, fn, check):
    """`fn` must fail with gRPC status `code`, its message passing `check`; prints it."""
    try:
        r = fn()
    except grpc.RpcError as e:
        assert e.code() == code, (e.code(), e.details())
        assert check(e.details()), e.details()
        print(f"  {what}:", e.code().name, e.details())
    else:
        raise AssertionError(f"{what} answered {r!r}")


def main():
    what, sock = sys.argv[1], sys.argv[2]
    ch = grpc.insecure_channel(f"unix:{sock}")
    if what == "bootstrap":
        r = call(ch, "/machine.MachineService/Bootstrap", tm.BootstrapRequest(), tm.BootstrapResponse)
        assert len(r.messages) == 1 and r.messages[0].metadata is not None, r
    elif what == "again":
        refused("second Bootstrap", grpc.StatusCode.ALREADY_EXISTS,
                lambda: call(ch, "/machine.MachineService/Bootstrap", tm.BootstrapRequest(), tm.BootstrapResponse),
                lambda d: d == "etcd data directory is not empty")
    elif what == "service":
        r = call(ch, "/machine.MachineService/ServiceList", pb.Empty(), tm.ServiceListResponse)
        etcd = [s for s in r.messages[0].services if s.id == "etcd"]
        assert len(etcd) == 1, r
        assert etcd[0].state == "Running" and etcd[0].health.healthy, etcd[0]
        print("  etcd:", etcd[0].state, "healthy")
    elif what == "members":
        r = call(ch, "/machine.MachineService/EtcdMemberList", tm.EtcdMemberListRequest(), tm.EtcdMemberListResponse)
        assert len(r.messages) == 1 and r.messages[0].metadata is not None, r
        ms = r.messages[0].members
        assert r.messages[0].legacy_members == [m.hostname for m in ms], r
        print("members", json.dumps([[m.id, m.hostname, m.is_learner] for m in ms]))
    elif what == "status":
        r = call(ch, "/machine.MachineService/EtcdStatus", pb.Empty(), tm.EtcdStatusResponse)
        st = r.messages[0].member_status
        assert st.protocol_version and st.raft_term > 0 and st.db_size > 0, st
        print("status", json.dumps({"member_id": st.member_id, "leader": st.leader}))
    elif what == "forfeit":
        r = call(ch, "/machine.MachineService/EtcdForfeitLeadership", tm.EtcdForfeitLeadershipRequest(), tm.EtcdForfeitLeadershipResponse)
        print("forfeit", r.messages[0].member)
    elif what in ("remove", "remove-self"):
        req = tm.EtcdRemoveMemberByIdRequest(member_id=int(sys.argv[3]))
        remove = lambda: call(ch, "/machine.MachineService/EtcdRemoveMemberByID", req, tm.EtcdRemoveMemberByIdResponse)
        if what == "remove":
            # etcd refuses a removal until the remaining members have been connected for its
            # health interval (5 s) after the last membership change ("unhealthy cluster");
            # the node passes that on as UNAVAILABLE, which a client retries.
            deadline = time.monotonic() + 20
            while True:
                try:
                    r = remove()
                    break
                except grpc.RpcError as e:
                    transient = e.code() == grpc.StatusCode.UNAVAILABLE and "unhealthy cluster" in e.details()
                    if not transient or time.monotonic() > deadline:
                        raise
                    print("  remove: UNAVAILABLE (unhealthy cluster), retried")
                    time.sleep(0.5)
            assert len(r.messages) == 1, r
        else:
            refused("remove self", grpc.StatusCode.FAILED_PRECONDITION, remove,
                    lambda d: "is this node: use EtcdLeaveCluster" in d)
    elif what == "remove-name":
        req = tm.EtcdRemoveMemberRequest(member=sys.argv[3])
        refused("remove by name", grpc.StatusCode.NOT_FOUND,
                lambda: call(ch, "/machine.MachineService/EtcdRemoveMember", req, tm.EtcdRemoveMemberResponse),
                lambda d: "in list of etcd members" in d)
    elif what == "leave":
        r = call(ch, "/machine.MachineService/EtcdLeaveCluster", tm.EtcdLeaveClusterRequest(), tm.EtcdLeaveClusterResponse)
        assert len(r.messages) == 1 and r.messages[0].metadata is not None, r
    elif what == "leave-last":
        refused("leave of the last member", grpc.StatusCode.FAILED_PRECONDITION,
                lambda: call(ch, "/machine.MachineService/EtcdLeaveCluster", tm.EtcdLeaveClusterRequest(), tm.EtcdLeaveClusterResponse),
                lambda d: "only member" in d)
    else:
        raise SystemExit(f"unknown scenario {what}")
    ch.close()
    print(f"ok {what}")


if __name__ == "__main__":
    main()
