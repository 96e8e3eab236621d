"""A moved job's submission (``SubmitRequest.moved_from``, docs/federation.md) on the
real controller's gRPC API: refused without a credential made for Submit; a retry with
the key gets the job the first made, but only for the same user; a malformed key is
refused."""

from __future__ import annotations

import pwd
from typing import Any

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller


def test_a_moved_jobs_key_serves_only_its_own_user(
    make_cluster: Any, users: tuple[str, ...]
) -> None:
    cluster: Cluster = make_cluster(nodes=1)
    first, second = (pwd.getpwnam(name) for name in users[:2])
    spec = pb.JobSpec(script="#!/bin/sh\ntrue\n", work_dir="/tmp", std_out="/dev/null", hold=True)
    request = pb.SubmitRequest(spec=spec, moved_from="alpha:7")
    denied = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]

        def submit(user: pwd.struct_passwd, req: pb.SubmitRequest = request) -> int:
            signed = stamp_for_controller(cluster, req, "Submit", uid=user.pw_uid, gid=user.pw_gid)
            return int(stub.Submit(signed, timeout=10).job_id)

        for unsigned in (request, stamp_for_controller(cluster, request, "Ping")):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Submit(unsigned, timeout=10)
            assert refused.value.code() in denied
        made = submit(first)
        assert submit(first) == made  # a retried move: the job the first one made
        theirs = submit(second)
        assert theirs != made  # another user's key finds nothing of the first user's
        bad = pb.SubmitRequest(spec=spec, moved_from="no key")
        with pytest.raises(grpc.RpcError) as malformed:
            submit(first, bad)
        assert "Invalid moved job key" in (malformed.value.details() or "")
    jobs = {j["job_id"]: j for j in cluster.jobs()}
    assert set(jobs) == {made, theirs}
    assert jobs[made]["uid"] == first.pw_uid and jobs[theirs]["uid"] == second.pw_uid
    assert jobs[made]["moved_from"] == "alpha:7"
