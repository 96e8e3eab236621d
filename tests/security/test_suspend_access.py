"""scontrol suspend and resume are an operator's: attacks on them refused.

The request is JobControl's ``suspend``/``resume`` action. Without a credential,
with one made for another method, or from an ordinary user (the job's own
owner included, as in Slurm, where only an operator, administrator, SlurmUser
or root may), it changes nothing; a real user's scontrol gets Slurm's error and
a non-zero exit.
"""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import errors, grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.asuser import open_cluster, run_as
from tests.security.rogue import controller_target, stamp_for_controller

NOBODY = 65534


def _running(cluster: Cluster) -> int:
    job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
    cluster.wait_state(job, {"RUNNING"}, timeout=20)
    return job


@pytest.mark.parametrize("action", ["suspend", "resume"])
def test_no_credential_a_borrowed_one_or_an_ordinary_user_suspends_nothing(
    cluster: Cluster, action: str
) -> None:
    job = _running(cluster)
    if action == "resume":
        cluster.run("scontrol", "suspend", str(job))
    before = cluster.job(job)["state"]
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        request = pb.JobControlRequest(action=action, job_ids=[str(job)])
        with pytest.raises(grpc.RpcError) as bare:
            stub.JobControl(request, timeout=10)
        assert bare.value.code() in (
            grpc.StatusCode.UNAUTHENTICATED,
            grpc.StatusCode.PERMISSION_DENIED,
        )
        borrowed = pb.JobControlRequest(action=action, job_ids=[str(job)])
        listing = stamp_for_controller(cluster, pb.JobsRequest(), "Jobs")
        borrowed.cred.CopyFrom(listing.cred)
        with pytest.raises(grpc.RpcError) as moved:
            stub.JobControl(borrowed, timeout=10)
        assert moved.value.details() == "2002: Invalid authentication credential"
        user = stamp_for_controller(cluster, request, "JobControl", uid=NOBODY, gid=NOBODY)
        results = list(stub.JobControl(user, timeout=10).results)
        assert [(r.job_id, r.code, r.message) for r in results] == [
            (str(job), errors.ESLURM_ACCESS_DENIED, "Access/permission denied")
        ]
    assert cluster.job(job)["state"] == before
    cluster.run("scancel", str(job))


@pytest.fixture
def shared(users: tuple[str, ...]) -> Iterator[tuple[Cluster, Path]]:
    top = Path(tempfile.mkdtemp(prefix="corral-suspend-", dir="/tmp"))
    top.chmod(0o755)
    cluster = open_cluster(top, ("KillWait=2", "SlurmdTimeout=6"))
    try:
        yield cluster, top
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_a_user_cannot_suspend_even_their_own_job(shared: tuple[Cluster, Path]) -> None:
    cluster, _ = shared
    user = pwd.getpwnam("corraltest1")
    uid, gid = user.pw_uid, user.pw_gid
    submitted = run_as(
        cluster, uid, gid, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 300"
    )
    assert submitted.returncode == 0, submitted.stderr
    job = int(submitted.stdout.strip().split(";")[0])
    cluster.wait_state(job, {"RUNNING"}, timeout=20)
    for action in ("suspend", "resume"):
        refused: subprocess.CompletedProcess[str] = run_as(
            cluster, uid, gid, "scontrol", action, str(job)
        )
        assert refused.returncode == 1
        assert refused.stderr == (
            f"Access/permission denied for job {job}\n"
            "slurm_suspend error: Access/permission denied\n"
        )
    assert cluster.job(job)["state"] == "RUNNING"
    # root may; and the user sees it suspended.
    cluster.run("scontrol", "suspend", str(job))
    shown = run_as(cluster, uid, gid, "squeue", "-h", "-j", str(job), "-o", "%T")
    assert shown.stdout.strip() == "SUSPENDED"
    assert run_as(cluster, uid, gid, "scancel", str(job)).returncode == 0
    assert cluster.wait_done(job)["state"] == "CANCELLED"
