"""A checkpoint reported by touching CORRAL_CHECKPOINT_FILE (issue 17, point 4): the
run's file and its directory, the agent's look at the live runs' files, and the
controller's record of a report, from the session of the job's node only, through to
the victim preemption then chooses."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from controller import jobstate, preemption
from controller.agentlink import AgentLink, _Session
from controller.core import schedule
from controller.jobspec import from_fields
from controller.jobstate import JobState
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral.config import parse as parse_conf
from corral.wire import corral_pb2 as pb
from nodeagent.checkpoints import CheckpointWatch, Watched
from nodeagent.runs import RunTable
from nodeagent.spool import CHECKPOINT_DIR, Result, Spool, Started, StepResult
from tests.unit.test_runs import alive, batch_run, step_run

# ---------------------------------------------------------------- the run's file


def test_the_file_is_the_users_own_dated_never_and_goes_with_its_run(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving the directory to another user needs root")
    jobdir = batch_run(Spool(str(tmp_path), "h"))
    path = jobdir.create_checkpoint(4242, 4343)
    assert path == jobdir.checkpoint_file() == f"{jobdir.path}/{CHECKPOINT_DIR}/saved"
    directory = os.lstat(os.path.dirname(path))
    assert stat.S_IMODE(directory.st_mode) == 0o700
    assert (directory.st_uid, directory.st_gid) == (4242, 4343)
    made = os.lstat(path)
    assert (made.st_uid, made.st_gid, made.st_mtime_ns) == (4242, 4343, 0)


def test_deleting_a_run_removes_what_the_user_left_without_following_links(
    tmp_path: Path,
) -> None:
    jobdir = batch_run(Spool(str(tmp_path), "h"))
    path = Path(jobdir.create_checkpoint(os.getuid(), os.getgid()))
    precious = tmp_path / "precious"
    (precious / "inside").mkdir(parents=True)
    (path.parent / "deep" / "er").mkdir(parents=True)
    (path.parent / "deep" / "er" / "state.pt").write_bytes(b"x" * 100)
    (path.parent / "away").symlink_to(precious)
    jobdir.delete()
    assert not os.path.exists(jobdir.path)
    assert (precious / "inside").is_dir()


# ---------------------------------------------------------------- the agent's look


def test_a_touch_is_reported_once_per_stream_and_an_untouched_file_never(
    tmp_path: Path,
) -> None:
    path = tmp_path / "saved"
    path.touch()
    os.utime(path, ns=(0, 0))  # as the agent makes it
    key = (7, "batch", 0)
    files = [Watched(key, str(path), 7, "n1")]
    watch = CheckpointWatch()
    assert watch.look(files) == []
    os.utime(path, (1_700_000_000, 1_700_000_000))
    assert watch.look(files) == [pb.Checkpoint(job_id=7, node="n1", time=1_700_000_000)]
    assert watch.look(files) == []
    os.utime(path, (1_700_000_050, 1_700_000_050))
    assert watch.look(files) == [pb.Checkpoint(job_id=7, node="n1", time=1_700_000_050)]
    assert CheckpointWatch().look(files) != []  # a new stream (or agent) hears it again
    assert watch.last(files[0]) is None  # the run ends, untouched since the last look
    assert watch.look(files) != []  # (it was forgotten)
    path.unlink()
    path.symlink_to(tmp_path)  # lstat: the link's own time, never its target's
    link_time = os.lstat(path).st_mtime_ns // 1_000_000_000
    assert watch.look(files) == [pb.Checkpoint(job_id=7, node="n1", time=link_time)]
    path.unlink()
    assert watch.look(files) == []
    assert watch.look([]) == [] and watch.look(files) == []


def test_the_table_reports_the_live_runs_touched_files(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    jobdir, stepdir = batch_run(spool), step_run(spool)
    batch_file = jobdir.create_checkpoint(os.getuid(), os.getgid())
    step_file = stepdir.create_checkpoint(os.getuid(), os.getgid())
    now = int(time.time())
    with alive(jobdir), alive(stepdir):
        jobdir.write_started(Started(pid=2**22 + 1, start_time=now))
        stepdir.write_started(Started(pid=2**22 + 2, start_time=now))
        sent: list[pb.AgentMessage] = []
        runs = RunTable(
            spool=spool, hostnames={"n1": "h"}, slurm_conf="/x", kill_wait=1, python="/bin/false"
        )
        runs.recover()  # adopted after an agent restart: untouched files say nothing
        runs.connect(sent.append)
        runs.report_checkpoints()
        assert sent == []
        os.utime(step_file, (now - 5, now - 5))
        runs.report_checkpoints()
        runs.report_checkpoints()
        assert [list(m.checkpoints.checkpoints) for m in sent] == [
            [pb.Checkpoint(job_id=7, node="n1", time=now - 5)]
        ]
        sent.clear()
        runs.disconnect()
        os.utime(batch_file, (now - 1, now - 1))
        runs.report_checkpoints()  # no stream: nothing is taken for told
        runs.connect(sent.append)
        runs.report_checkpoints()
        (message,) = sent
        assert sorted(message.checkpoints.checkpoints, key=lambda c: c.time) == [
            pb.Checkpoint(job_id=7, node="n1", time=now - 5),
            pb.Checkpoint(job_id=7, node="n1", time=now - 1),
        ]
        sent.clear()
        os.utime(step_file, (now, now))  # and the step ends before the next look
        stepdir.write_result(StepResult(statuses=(0, 0), start_time=now, end_time=now))
        jobdir.write_result(Result(exit_status=0, outcome="exited", end_time=now))
    runs.poll()
    assert [m.WhichOneof("body") for m in sent] == ["checkpoints", "step_done", "done"]
    assert list(sent[0].checkpoints.checkpoints) == [pb.Checkpoint(job_id=7, node="n1", time=now)]
    os.utime(batch_file, (now, now))
    runs.report_checkpoints()  # an ended run's file is not looked at
    assert len(sent) == 3
    runs.ack(pb.AckDone(job_id=7, restarts=0))
    assert not os.path.exists(jobdir.path) and not os.path.exists(stepdir.path)


# ---------------------------------------------------------------- the controller's record

CONF = """\
ClusterName=test
SlurmctldHost=ctl
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=n[1-2] CPUs=2 RealMemory=1000
PartitionName=low Nodes=n[1-2] Default=YES
PartitionName=high Nodes=n[1-2] PriorityTier=2
"""
BOB = principal_for(4343, 4343)
SPEC = {"name": "a", "script": "#!/bin/sh\n", "work_dir": "/tmp", "exclusive": True}


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    store = JobStore(parse_conf(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    store.load(0.0)
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 2, 1000), monotonic=1.0, now=10)
    return store


def cycle(store: JobStore, now: int) -> Any:
    plan = schedule(store.snapshot(), now)
    store.commit(plan)
    preemption.begin(store, plan)
    return plan


def started(store: JobStore, now: int, spec: dict[str, Any] = SPEC) -> int:
    job_id = store.submit(from_fields(spec), BOB, now=now).job.job_id
    cycle(store, now)
    assert store.jobs[job_id].state is JobState.RUNNING
    return job_id


def report(store: JobStore, nodes: list[str], *marks: tuple[int, str, int]) -> None:
    """The Checkpoints message ``marks`` (job, node, time), from a session of ``nodes``."""
    link = AgentLink(store, b"k" * 32, SimpleNamespace(ttl=60), lambda: None)  # type: ignore[arg-type]
    session = _Session("agent")
    session.nodes = nodes
    message = pb.Checkpoints(
        checkpoints=[pb.Checkpoint(job_id=j, node=n, time=t) for j, n, t in marks]
    )

    async def take() -> None:
        link._checkpoints(message, session)
        await asyncio.gather(*link._flushes)

    asyncio.run(take())


def test_a_report_is_taken_from_the_jobs_node_alone_and_held_as_scontrols(
    store: JobStore,
) -> None:
    older = started(store, 1000)
    younger = started(store, 1005)
    on = {job_id: store.jobs[job_id].nodes[0] for job_id in (older, younger)}
    other = {on[older]: on[younger], on[younger]: on[older]}
    report(store, [other[on[older]]], (older, on[older], 1015))  # a session of another node
    report(store, [on[older]], (older, other[on[older]], 1015))  # naming the other node
    assert store.jobs[older].checkpointed == 0
    report(store, [on[older]], (older, on[older], 1015), (younger, on[younger], 1016))
    assert store.jobs[older].checkpointed == 1015
    assert store.jobs[younger].checkpointed == 0  # its node is not the session's
    report(store, [on[older]], (older, on[older], 1012))  # another run's older touch
    assert store.jobs[older].checkpointed == 1015
    report(store, [on[younger]], (younger, on[younger], 10))  # before its start: at it
    assert store.jobs[younger].checkpointed == 1005
    future = int(time.time()) + 3600
    report(store, [on[younger]], (younger, on[younger], future))
    assert 1005 < store.jobs[younger].checkpointed <= int(time.time())
    store.post(older, jobstate.Cancel(1020, 0))
    report(store, [on[older]], (older, on[older], 1020))  # a job that no longer runs
    assert store.jobs[older].checkpointed == 1015


def test_the_checkpointed_job_is_then_the_victim(store: JobStore) -> None:
    """Without the report the younger job, which has run the least, would go."""
    older = started(store, 1000)
    younger = started(store, 1005)
    node = store.jobs[older].nodes[0]
    report(store, [node], (older, node, 1015))
    store.submit(from_fields({**SPEC, "partitions": ["high"]}), BOB, now=1020)
    plan = cycle(store, 1020)
    assert set(plan.preempted) == {older}
    assert younger not in plan.preempted
