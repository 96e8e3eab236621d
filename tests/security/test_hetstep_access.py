"""A step spanning heterogeneous job components, on the real controller's gRPC API:
a cancel of the leader's part reaches every part only for a caller who may manage
the job; a call without a credential made for it and another user's call cancel no
part, attach to no part and read no part's statistics. The owner's cancel, last,
shows the same request does end every part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.errors import ESLURM_ACCESS_DENIED
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.integration.test_hetsteps import SETTINGS, Spanning, alive
from tests.security.rogue import controller_target, stamp_for_controller

STRANGER = 4242  # not root, not the controller's user, not the job's owner
DENIED = (grpc.StatusCode.PERMISSION_DENIED, "2002: Access/permission denied")


def _refused(call: Any, request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    return refused.value.code(), str(refused.value.details())


def test_only_the_owner_reaches_a_spanning_steps_parts(make_cluster: Any, tmp_path: Path) -> None:
    cluster: Cluster = make_cluster(nodes=2, settings=SETTINGS)
    het = Spanning(cluster, tmp_path / "het")
    cancel = pb.SignalRequest(filter=pb.JobFilter(job_ids=[f"{het.leader}.0"]))
    attach = pb.StepAttachRequest(job_id=het.other, step_id=0, layout_only=True)
    stats = pb.StepStatsRequest(job_id=het.other, step="0")
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        for call, request in ((stub.Signal, cancel), (stub.StepAttach, attach)):
            code, _ = _refused(call, request)
            assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)

        def as_stranger(request: Any, method: str) -> Any:
            return stamp_for_controller(cluster, request, method, uid=STRANGER, gid=STRANGER)

        answer = stub.Signal(as_stranger(cancel, "Signal"), timeout=10)
        assert [r.code for r in answer.results] == [ESLURM_ACCESS_DENIED]
        assert _refused(stub.StepAttach, as_stranger(attach, "StepAttach")) == DENIED
        assert _refused(stub.StepStats, as_stranger(stats, "StepStats")) == DENIED
        assert all(map(alive, het.pids)), "a refused cancel ended a part"
        assert "sattach at" not in cluster.log("nodeagent")

        answer = stub.Signal(stamp_for_controller(cluster, cancel, "Signal"), timeout=10)
        assert [r.code for r in answer.results] == [0]
    cluster.wait_for(lambda: not any(map(alive, het.pids)), 30, "the owner's cancel ended no part")
