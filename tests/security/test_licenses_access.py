"""The Licenses RPC (``scontrol show licenses``) on the real controller's gRPC API:
refused without a credential and with one made for another call; any authenticated
user (here one in no account) reads it, as Slurm lets anyone: counts per license,
no user's data."""

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


def _refused(call: Any, request: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    code: grpc.StatusCode = refused.value.code()
    return code


def test_licenses_only_with_a_credential_made_for_it(make_cluster: Any) -> None:
    cluster: Cluster = make_cluster(nodes=1, settings=("Licenses=fluent:3",))
    denied = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.LicensesRequest()
        assert _refused(stub.Licenses, request) in denied
        for_another = stamp_for_controller(cluster, request, "Queues")
        assert _refused(stub.Licenses, for_another) in denied
        stranger = stamp_for_controller(cluster, request, "Licenses", uid=STRANGER, gid=STRANGER)
        reply = stub.Licenses(stranger, timeout=10)
        assert [(lic.name, lic.total, lic.used) for lic in reply.licenses] == [("fluent", 3, 0)]
