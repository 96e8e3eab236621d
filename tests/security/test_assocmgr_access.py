"""The AssocMgr RPC (``scontrol show assoc_mgr``) on the real controller's gRPC API:
refused without a credential and with one made for another call; under
PrivateData=usage,users a user in no account reads no association and no user
record (QOS stay visible, as in Slurm), while root reads them all."""

from __future__ import annotations

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


def _refused(call: Any, request: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    code: grpc.StatusCode = refused.value.code()
    return code


def test_assoc_mgr_only_with_a_credential_and_private_to_others(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "c", 1, ("PrivateData=usage,users",), accounting=True).start()
    try:
        denied = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
            stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
            request = pb.AssocMgrRequest()
            assert _refused(stub.AssocMgr, request) in denied
            for_another = stamp_for_controller(cluster, request, "Licenses")
            assert _refused(stub.AssocMgr, for_another) in denied

            def as_root() -> Any:
                return stub.AssocMgr(stamp_for_controller(cluster, request, "AssocMgr"), timeout=10)

            cluster.wait_for(lambda: as_root().associations, 20, "no associations from dbd")
            assert {u.user.name for u in as_root().users} == {"root"}
            stranger = stamp_for_controller(
                cluster, request, "AssocMgr", uid=STRANGER, gid=STRANGER
            )
            reply = stub.AssocMgr(stranger, timeout=10)
            assert (list(reply.associations), list(reply.users)) == ([], [])
            assert [q.limits.name for q in reply.qos] == ["normal"]
    finally:
        cluster.stop()
