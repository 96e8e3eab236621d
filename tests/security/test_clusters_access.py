"""The Clusters RPC (where ``-M`` finds other clusters' controllers) on the real
controller's gRPC API: refused without a credential and with one made for another
call; any authenticated user reads it, as anyone may run ``sacctmgr show cluster``."""

from __future__ import annotations

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


def test_clusters_only_with_a_credential_made_for_it(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(nodes=1)
    denied = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.ClustersRequest()
        for unsigned in (request, stamp_for_controller(cluster, request, "Ping")):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Clusters(unsigned, timeout=10)
            assert refused.value.code() in denied
        stranger = stamp_for_controller(cluster, request, "Clusters", uid=STRANGER, gid=STRANGER)
        reply = stub.Clusters(stranger, timeout=10)
        assert [(c.name, c.host) for c in reply.clusters] == [("corral", "127.0.0.1")]
        assert reply.own == "corral"
