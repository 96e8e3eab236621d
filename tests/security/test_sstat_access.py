"""sstat's StepStats on the real controller's gRPC API: refused without a credential
made for it, refused to a user who does not own the job, and the job hidden from them
altogether under PrivateData=jobs; the owner (root here) reads it. Then the real sstat
run by another Unix user, who gets Slurm's words for each."""

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
SAMPLED = ("KillWait=2", "JobAcctGatherType=jobacct_gather/linux", "JobAcctGatherFrequency=1")


def _refused(call: Any, request: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as refused:
        call(request, timeout=10)
    return refused.value.code(), str(refused.value.details())


@pytest.mark.parametrize("private", [False, True], ids=["public jobs", "PrivateData=jobs"])
def test_step_stats_only_for_the_jobs_owner(make_cluster: Any, private: bool) -> None:
    settings = (*SAMPLED, "PrivateData=jobs") if private else SAMPLED
    cluster: Cluster = make_cluster(nodes=1, settings=settings)
    job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
    cluster.wait_state(job, {"RUNNING"}, 30)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.StepStatsRequest(job_id=job, all_steps=True)
        code, _ = _refused(stub.StepStats, request)
        assert code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
        stranger = stamp_for_controller(cluster, request, "StepStats", uid=STRANGER, gid=STRANGER)
        if private:
            hidden = (grpc.StatusCode.NOT_FOUND, "2017: Invalid job id specified")
            assert _refused(stub.StepStats, stranger) == hidden
        else:
            denied = (grpc.StatusCode.PERMISSION_DENIED, "2002: Access/permission denied")
            assert _refused(stub.StepStats, stranger) == denied
        owner = stub.StepStats(stamp_for_controller(cluster, request, "StepStats"), timeout=10)
        assert owner.running and list(owner.steps) == ["batch"]
    cluster.run("scancel", str(job))


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


@pytest.mark.parametrize("private", [False, True], ids=["public jobs", "PrivateData=jobs"])
def test_another_users_sstat_is_refused_in_slurms_words(
    users: tuple[str, ...], shared: Path, private: bool
) -> None:
    settings = (*SAMPLED, "PrivateData=jobs") if private else SAMPLED
    cluster = open_cluster(shared, settings)
    try:
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "srun sleep 300")

        def sampled() -> bool:
            mine = cluster.run("sstat", "-n", "-P", "-o", "JobID", "-j", str(job), check=False)
            return mine.stdout == f"{job}.0\n"

        cluster.wait_for(sampled, 30, "the owner's sstat never showed the step")
        other = pwd.getpwnam(users[0])
        done = run_as(cluster, other.pw_uid, other.pw_gid, "sstat", "-n", "-j", str(job))
        if private:
            refusal = f"couldn't get steps for job {job}"
        else:
            refusal = f"problem getting step_layout for JobId={job}: Access/permission denied"
        assert (done.returncode, done.stdout, done.stderr) == (0, "", f"sstat: error: {refusal}\n")
        cluster.run("scancel", str(job))
    finally:
        cluster.stop()
