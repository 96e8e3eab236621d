"""sbcast's Broadcast on the real controller's gRPC API: refused without a credential
made for it, refused to a user who does not own the job (the job hidden from them
altogether under PrivateData=jobs), nothing written on the nodes then; then the real
sbcast run by another Unix user, who gets Slurm's words."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _refused(call: Any, request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    return refused.value.code(), str(refused.value.details())


@pytest.mark.parametrize("private", [False, True], ids=["public jobs", "PrivateData=jobs"])
def test_broadcast_only_to_the_jobs_owner(make_cluster: Any, tmp_path: Path, private: bool) -> None:
    settings = ("KillWait=2", "PrivateData=jobs") if private else ("KillWait=2",)
    cluster: Cluster = make_cluster(nodes=1, settings=settings)
    job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
    cluster.wait_state(job, {"RUNNING"}, 30)
    dest = tmp_path / "copy"
    request = pb.BroadcastRequest(job_id=job, dest=str(dest), data=b"x", size=1, last=True)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        code, _ = _refused(stub.Broadcast, request)
        assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        stranger = stamp_for_controller(cluster, request, "Broadcast", uid=STRANGER, gid=STRANGER)
        if private:
            hidden = (grpc.StatusCode.NOT_FOUND, "2017: Invalid job id specified")
            assert _refused(stub.Broadcast, stranger) == hidden
        else:
            denied = (grpc.StatusCode.PERMISSION_DENIED, "2002: Access/permission denied")
            assert _refused(stub.Broadcast, stranger) == denied
        assert not dest.exists()
        owner = stub.Broadcast(stamp_for_controller(cluster, request, "Broadcast"), timeout=30)
        assert list(owner.nodes) == ["node1"] and not owner.failures
        assert dest.read_bytes() == b"x"
    cluster.run("scancel", str(job))


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


def test_another_users_sbcast_is_refused_in_slurms_words(
    users: tuple[str, ...], shared: Path
) -> None:
    cluster = open_cluster(shared)
    try:
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
        cluster.wait_state(job, {"RUNNING"}, 30)
        source = shared / "work" / "theirs"
        source.write_bytes(b"not yours")
        source.chmod(0o644)
        other = pwd.getpwnam(users[0])
        dest = str(shared / "work" / "copy")
        done = run_as(
            cluster, other.pw_uid, other.pw_gid, "sbcast", "-j", str(job), str(source), dest
        )
        assert done.returncode == 1, done.stderr
        assert done.stderr == (
            f"sbcast: error: Slurm job {job} lookup error: Access/permission denied\n"
        )
        assert not Path(dest).exists()
        cluster.run("scancel", str(job))
    finally:
        cluster.stop()
