"""strigger on a real cluster, its controller running as root: an ordinary user's
triggers fire once, their programs run as that user with the nodes or the job id;
another user can neither clear them nor reach the Triggers call without a
credential made for it."""

from __future__ import annotations

import pwd
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from corral import grpctls
from corral.config import load
from corral.wire import corral_pb2 as pb
from corral.wire import corral_pb2_grpc as pb_grpc
from tests.integration.cluster import Cluster
from tests.security.asuser import open_cluster, run_as
from tests.security.rogue import controller_target, stamp_for_controller

#: The program every trigger here runs: who it ran as, and its arguments.
PROGRAM = '#!/bin/sh\necho "$(id -u) $(id -g) $*" > "$(dirname "$0")/work/fired.$2"\n'


@pytest.fixture(scope="module")
def shared(users: tuple[str, ...]) -> Iterator[tuple[Cluster, Path]]:
    top = Path(tempfile.mkdtemp(prefix="corral-strigger-", dir="/tmp"))
    top.chmod(0o755)
    program = top / "record"
    program.write_text(PROGRAM)
    program.chmod(0o755)
    cluster = open_cluster(top)
    try:
        yield cluster, top
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


def _user(name: str) -> tuple[int, int]:
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


def _fired(cluster: Cluster, path: Path) -> str:
    cluster.wait_for(path.exists, 30, f"{path.name} not written")
    cluster.wait_for(lambda: path.read_text().endswith("\n"), 5, "partial output")
    return path.read_text()


def test_a_down_trigger_runs_once_as_its_owner(shared: tuple[Cluster, Path]) -> None:
    cluster, top = shared
    uid, gid = _user("corraltest1")
    other = _user("corraltest2")
    program = f"{top / 'record'} down"
    done = run_as(cluster, uid, gid, "strigger", "--set", "--node=node1", "--down", "-p", program)
    assert done.returncode == 0, done.stderr
    listed = run_as(cluster, *other, "strigger", "--get", "--down").stdout.splitlines()
    assert len(listed) == 2, listed
    trig_id, *row = listed[1].split()
    assert row == ["node", "node1", "down", "0", "corraltest1", *program.split()], listed
    # Another user may not clear it (Slurm: only root or its creator).
    refused = run_as(cluster, *other, "strigger", "--clear", f"--id={trig_id}")
    assert (refused.returncode, refused.stderr) == (
        1,
        "slurm_clear_trigger: Access/permission denied\n",
    )
    cluster.run("scontrol", "update", "NodeName=node1", "State=DOWN", "Reason=trigger test")
    assert _fired(cluster, top / "work" / "fired.node1") == f"{uid} {gid} down node1\n"
    assert cluster.run("strigger", "--get", "--id", trig_id).stdout == ""  # fired once
    cluster.run("scontrol", "update", "NodeName=node1", "State=RESUME")


def test_a_fini_trigger_runs_when_the_job_ends(shared: tuple[Cluster, Path]) -> None:
    cluster, top = shared
    uid, gid = _user("corraltest1")
    submitted = run_as(
        cluster, uid, gid, "sbatch", "--parsable", "-o", "/dev/null", "--wrap", "sleep 2"
    )
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    program = f"{top / 'record'} fini"
    done = run_as(cluster, uid, gid, "strigger", "--set", f"--jobid={job}", "--fini", "-p", program)
    assert done.returncode == 0, done.stderr
    assert _fired(cluster, top / "work" / f"fired.{job}") == f"{uid} {gid} fini {job}\n"
    cluster.wait_done(int(job))


def test_setting_or_clearing_needs_a_credential_made_for_it(shared: tuple[Cluster, Path]) -> None:
    cluster, _ = shared
    denied = (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED)
    request = pb.TriggersRequest(action="clear", uid=0)
    with grpctls.sync_channel(controller_target(cluster), load(cluster.conf).tls) as channel:
        stub = pb_grpc.ControllerStub(channel)  # type: ignore[no-untyped-call]
        for attempt in (request, stamp_for_controller(cluster, request, "Jobs")):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Triggers(attempt, timeout=10)
            assert refused.value.code() in denied
