"""The Queues RPC (``corral queues``) on the real controller's gRPC API: refused
without a credential, and with one made for another call; any authenticated user
(here one with no account at all) reads the queues, which hold amounts per queue
and no user's data. Without a queues.conf it answers Slurm's way that none are
configured."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.rogue import controller_target, stamp_for_controller

STRANGER = 4242  # not root, not the controller's user, in no account
QUEUES = "QueueName=teama Accounts=teama Guarantee=cpu=1\n"


def _refused(call: Any, request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    return refused.value.code(), str(refused.value.details())


def test_queues_only_with_a_credential_made_for_it(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(nodes=1, start=False)
    Path(os.path.dirname(cluster.conf), "queues.conf").write_text(QUEUES)
    cluster.start()
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.QueuesRequest()
        code, _ = _refused(stub.Queues, request)
        assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        for_another = stamp_for_controller(cluster, request, "Shares")
        code, _ = _refused(stub.Queues, for_another)
        assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        stranger = stamp_for_controller(cluster, request, "Queues", uid=STRANGER, gid=STRANGER)
        reply = stub.Queues(stranger, timeout=10)
        assert [q.name for q in reply.queues] == ["root", "teama"]
        assert reply.queues[1].resources[0].guarantee == 1


def test_no_queues_conf_is_said_in_slurms_words(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(nodes=1)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = stamp_for_controller(cluster, pb.QueuesRequest(), "Queues")
        code, details = _refused(stub.Queues, request)
        assert details == "2037: no queues are configured", (code, details)
    shown = cluster.run("corral", "queues", check=False)
    assert shown.returncode == 1
    assert shown.stderr.strip() == "corral queues: error: no queues are configured"
