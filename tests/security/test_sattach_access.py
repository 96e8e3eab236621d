"""sattach's StepAttach on the real controller's gRPC API: refused without a
credential made for it and to a user who does not own the job; then the real
sattach run by another Unix user, refused in Slurm's words, and the step's runners
never told to connect anywhere (the owner's own attach is tests/integration)."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.asuser import open_cluster, run_as, shared_top
from tests.security.rogue import controller_target, stamp_for_controller

STRANGER = 4242  # not root, not the controller's user, not the job's owner


def test_step_attach_only_for_the_jobs_owner(cluster: Cluster) -> None:
    job = cluster.sbatch("-o", "/dev/null", "--wrap", "srun sleep 300")
    cluster.wait_for(lambda: bool(cluster.job(job)["steps"]), 60, "the step did not start")
    request = pb.StepAttachRequest(job_id=job, step_id=0, layout_only=True)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as unsigned:
            stub.StepAttach(request, timeout=10)
        assert unsigned.value.code() in (
            grpc.StatusCode.PERMISSION_DENIED,
            grpc.StatusCode.UNAUTHENTICATED,
        )
        stranger = stamp_for_controller(cluster, request, "StepAttach", uid=STRANGER, gid=STRANGER)
        with pytest.raises(grpc.RpcError) as refused:
            stub.StepAttach(stranger, timeout=10)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert refused.value.details() == "2002: Access/permission denied"
        owner = stub.StepAttach(stamp_for_controller(cluster, request, "StepAttach"), timeout=10)
        assert list(owner.nodes) == ["node1"]
    cluster.run("scancel", str(job))


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


def test_another_users_sattach_is_refused(users: tuple[str, ...], shared: Path) -> None:
    cluster = open_cluster(shared)
    try:
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "srun sleep 300")
        cluster.wait_for(lambda: bool(cluster.job(job)["steps"]), 60, "the step did not start")
        other = pwd.getpwnam(users[0])
        for argv in (["--layout", f"{job}.0"], [f"{job}.0"]):
            done = run_as(cluster, other.pw_uid, other.pw_gid, "sattach", *argv)
            assert (done.returncode, done.stderr) == (
                1,
                "sattach: error: Access/permission denied\n",
            )
        assert "sattach at" not in cluster.log("nodeagent")
        cluster.run("scancel", str(job))
    finally:
        cluster.stop()
