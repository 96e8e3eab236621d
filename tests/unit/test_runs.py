"""The agent's one table of runs after a restart: what it adopts and what it reports again.

The run directories are made here as a previous agent's processes would have
left them; a live process is played by holding the directory's lock (an
flock, which conflicts with any other open of the file, in this process too).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from corral.wire import corral_pb2 as pb
from nodeagent.runs import RunTable
from nodeagent.spool import (
    LOCK,
    JobDir,
    LaunchSpec,
    Result,
    RunDir,
    Spool,
    Started,
    StepDir,
    StepResult,
    StepSpec,
)


def table(tmp: Path, sent: list[pb.AgentMessage]) -> RunTable:
    runs = RunTable(
        spool=Spool(str(tmp), "h"),
        hostnames={"n1": "h"},
        slurm_conf="/x",
        kill_wait=1,
        python="/bin/false",
    )
    runs.recover()
    runs.connect(sent.append)
    return runs


@contextmanager
def alive(rundir: RunDir) -> Iterator[None]:
    """Play the run's process: hold its lock until the block ends."""
    fd = os.open(rundir.file(LOCK), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)


def batch_run(spool: Spool) -> JobDir:
    spool.prepare("n1")
    jobdir = spool.job_dir("n1", 7, 0)
    jobdir.create()
    jobdir.write_launch(LaunchSpec(job_id=7, restarts=0, node="n1", uid=0, gid=0, user="u"))
    return jobdir


def step_run(spool: Spool) -> StepDir:
    spool.prepare("n1")
    stepdir = spool.step_dir("n1", 7, 1)
    stepdir.create()
    spec = StepSpec(job_id=7, step_id=1, node="n1", uid=0, gid=0, user="u", tasks=(0, 1))
    stepdir.write_spec(spec)
    return stepdir


def kinds(sent: list[pb.AgentMessage]) -> list[str | None]:
    return [message.WhichOneof("body") for message in sent]


def test_a_batch_run_and_a_step_run_are_both_adopted(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    jobdir, stepdir = batch_run(spool), step_run(spool)
    now = int(time.time())
    with alive(jobdir), alive(stepdir):
        jobdir.write_started(Started(pid=2**22 + 1, start_time=now))
        stepdir.write_started(Started(pid=2**22 + 2, start_time=now))
        sent: list[pb.AgentMessage] = []
        runs = table(tmp_path, sent)
        (running,) = runs.running()
        assert (running.job_id, running.restarts, running.start_time) == (7, 0, now)
        assert runs.unacked() == [] and sent == []
        # Both are in the one table: a terminate reaches both.
        runs.signal(pb.SignalJob(job_id=7, signal=0, reason="cancel"))
        assert jobdir.read_cancel() == 1 and stepdir.read_cancel() == 1
        # They end while the table polls them: the step is reported before its job.
        stepdir.write_result(StepResult(statuses=(15, 15), start_time=now, end_time=now))
        jobdir.write_result(Result(exit_status=15, outcome="cancelled", end_time=now))
    runs.poll()
    assert kinds(sent) == ["step_done", "done"]
    assert list(sent[0].step_done.statuses) == [15, 15]
    assert sent[1].done.outcome == "cancelled"
    runs.poll()
    assert len(sent) == 2


def test_a_finished_batch_result_is_reported_again_until_acknowledged(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    jobdir = batch_run(spool)
    jobdir.write_started(Started(pid=2**22 + 1, start_time=int(time.time())))
    jobdir.write_result(Result(exit_status=3 << 8, outcome="exited", end_time=int(time.time())))
    for _ in range(2):  # two restarts, no AckDone: each agent reports it
        sent: list[pb.AgentMessage] = []
        runs = table(tmp_path, sent)
        (done,) = runs.unacked()
        assert (done.job_id, done.restarts, done.exit_status) == (7, 0, 3 << 8)
        assert runs.running() == []
    # A repeated launch is answered with the same end, nothing runs again.
    runs.launch(pb.LaunchJob(job_id=7, restarts=0, node="n1"))
    assert kinds(sent) == ["done"] and sent[0].done == done
    runs.ack(pb.AckDone(job_id=7, restarts=0))
    assert runs.unacked() == []
    assert not os.path.exists(jobdir.path)
    assert table(tmp_path, []).unacked() == []


def test_a_step_result_is_reported_once(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    stepdir = step_run(spool)
    now = int(time.time())
    with alive(stepdir):
        stepdir.write_started(Started(pid=2**22 + 2, start_time=now))
        sent: list[pb.AgentMessage] = []
        runs = table(tmp_path, sent)
        stepdir.write_result(StepResult(statuses=(0, 1 << 8), start_time=now, end_time=now))
    runs.poll()
    runs.poll()
    assert kinds(sent) == ["step_done"]
    assert list(sent[0].step_done.statuses) == [0, 1 << 8]
    assert runs.unacked() == [] and runs.backlog() == []
    assert not os.path.exists(stepdir.path)  # nothing for the next agent to report
    again: list[pb.AgentMessage] = []
    table(tmp_path, again)
    assert again == []


def test_a_step_result_made_while_disconnected_waits_for_the_next_stream(tmp_path: Path) -> None:
    spool = Spool(str(tmp_path), "h")
    stepdir = step_run(spool)
    with alive(stepdir):
        stepdir.write_started(Started(pid=2**22 + 2, start_time=int(time.time())))
        runs = table(tmp_path, [])
        runs.disconnect()
        stepdir.write_result(StepResult(statuses=(0, 0), start_time=0, end_time=0))
    runs.poll()
    (done,) = runs.backlog()
    assert (done.job_id, done.step_id, done.node) == (7, 1, "n1")
    assert runs.backlog() == []  # taken: sent once
