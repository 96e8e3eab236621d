"""scontrol suspend/resume: the state machine's Suspend and Resume, their effects,
the ledger (a suspended job lends its CPUs, keeps its memory and GRES) and who may
ask (controller/jobcontrol.py)."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from scenario import NOW, running

from controller import effects
from controller.agentlink import AgentLink
from controller.effects import Continue, Kill, Stop
from controller.jobcontrol import JobControl
from controller.jobspec import from_fields
from controller.jobstate import (
    COMPLETING,
    REQUEUED,
    Cancel,
    Finish,
    InvalidTransition,
    JobState,
    NodeFail,
    Reason,
    Requeue,
    Resume,
    Start,
    Suspend,
    apply,
)
from controller.journal import Journal
from controller.principal import principal_for
from controller.steps import StepRequest
from controller.store import JobStore
from corral import errors
from corral.config import parse
from corral.errors import SlurmError
from corral.wire import corral_pb2 as pb
from nodeagent.runner import Runner, Task
from nodeagent.spool import JobDir

START = NOW - 50
RUNNING = running(1, time_limit=10, end_time=START + 600)


# ---------------------------------------------------------------- the state machine


def test_suspend_then_resume_moves_the_end_by_the_time_suspended() -> None:
    stopped = apply(RUNNING, Suspend(NOW))
    assert stopped.state is JobState.SUSPENDED
    assert (stopped.suspend_time, stopped.pre_suspend_secs) == (NOW, 50)
    assert stopped.cpus_released and stopped.end_time == START + 600
    again = apply(stopped, Resume(NOW + 30))
    assert again.state is JobState.RUNNING and not again.cpus_released
    assert (again.suspend_time, again.suspended_secs) == (NOW + 30, 30)
    assert again.end_time == START + 600 + 30
    # A second suspension counts the run time since the resume, and adds up.
    twice = apply(apply(again, Suspend(NOW + 40)), Resume(NOW + 60))
    assert twice.pre_suspend_secs == 50 + 10
    assert (twice.suspended_secs, twice.end_time) == (50, START + 600 + 50)


def test_an_unlimited_job_stays_unlimited() -> None:
    job = running(1, time_limit=-1, end_time=0)
    assert apply(apply(job, Suspend(NOW)), Resume(NOW + 30)).end_time == 0


@pytest.mark.parametrize(
    ("job", "event"),
    [
        (running(1, state=JobState.PENDING, nodes=()), Suspend(NOW)),
        (RUNNING, Resume(NOW)),
        (apply(RUNNING, Suspend(NOW)), Suspend(NOW + 1)),
        (apply(RUNNING, Cancel(NOW)), Suspend(NOW + 1)),
        (running(1, flags=frozenset({COMPLETING, REQUEUED})), Suspend(NOW)),
        (running(1, state=JobState.COMPLETED, end_time=NOW), Resume(NOW)),
    ],
    ids=["pending", "resume-running", "twice", "cancelling", "requeueing", "finished"],
)
def test_suspend_and_resume_only_apply_to_running_and_suspended_jobs(
    job: object, event: Suspend | Resume
) -> None:
    with pytest.raises(InvalidTransition):
        apply(job, event)  # type: ignore[arg-type]


def test_a_suspended_job_cancelled_counts_its_time_suspended_and_keeps_its_cpus_lent() -> None:
    cancelled = apply(apply(RUNNING, Suspend(NOW)), Cancel(NOW + 20, by=0))
    assert (cancelled.state, cancelled.flags) == (JobState.CANCELLED, frozenset({COMPLETING}))
    assert cancelled.suspended_secs == 20 and cancelled.cpus_released
    done = apply(cancelled, Finish(NOW + 25, 9, "cancelled"))
    assert (done.state, done.end_time, done.flags) == (JobState.CANCELLED, NOW + 20, frozenset())


def test_a_suspended_job_requeued_comes_back_held() -> None:
    requeued = apply(apply(RUNNING, Suspend(NOW)), Requeue(NOW + 5))
    assert requeued.flags == frozenset({COMPLETING, REQUEUED})
    pending = apply(requeued, Finish(NOW + 6, 9, "cancelled"))
    assert (pending.state, pending.held, pending.reason) == (
        JobState.PENDING,
        "admin",
        Reason.JOB_HELD_ADMIN,
    )
    assert (pending.cpus_released, pending.suspend_time, pending.suspended_secs) == (False, 0, 0)
    # The user's requeuehold keeps the hold it asked for.
    user = apply(apply(RUNNING, Suspend(NOW)), Requeue(NOW + 5, hold="user"))
    assert user.requeue_hold == "user"


@pytest.mark.parametrize(
    ("requeue", "state"), [(False, JobState.NODE_FAIL), (True, JobState.PENDING)]
)
def test_a_node_failing_under_a_suspended_job_ends_it_as_a_running_one(
    requeue: bool, state: JobState
) -> None:
    after = apply(apply(RUNNING, Suspend(NOW)), NodeFail(NOW + 9, requeue=requeue))
    assert after.state is state
    if not requeue:
        assert (after.end_time, after.suspended_secs) == (NOW + 9, 9)


# ---------------------------------------------------------------- effects


def test_effects_of_suspend_resume_and_a_suspended_jobs_end() -> None:
    stopped = apply(RUNNING, Suspend(NOW))
    assert effects.follow(RUNNING, stopped, Suspend(NOW)) == (Stop(stopped),)
    resumed = apply(stopped, Resume(NOW + 3))
    assert effects.follow(stopped, resumed, Resume(NOW + 3)) == (Continue(resumed),)
    cancelled = apply(stopped, Cancel(NOW + 4))
    assert effects.follow(stopped, cancelled, Cancel(NOW + 4)) == (Kill(stopped, "cancel"),)


# ---------------------------------------------------------------- the ledger

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n1 CPUs=4 RealMemory=8000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = from_fields({"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"})
ROOT = principal_for(0, 0)


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))


def _started(store: JobStore, cpus: int, memory: int, now: int = 110) -> int:
    job = store.submit(SPEC, ROOT, now=100).job
    store.post(job.job_id, Start(now, "p", ("n1",), (cpus,), (memory,), 1, cpu_ids=((0, 1, 2),)))
    return job.job_id


def test_a_suspended_job_lends_its_cpus_and_keeps_its_memory(store: JobStore) -> None:
    first = _started(store, 3, 6000)
    store.post(first, Suspend(120))
    assert store.used("n1") == (0, 6000)
    view = store.snapshot().nodes["n1"]
    assert (view.free_cpus, view.free_memory, view.kept_ids) == (4, 2000, 0)
    running = {r.job_id: r for r in store.snapshot().running}[first]
    assert (running.cpus, running.memory, running.end_time) == ((0,), (6000,), 0)
    # Another job takes the CPUs (memory it must find beside the suspended job's).
    other = store.submit(SPEC, ROOT, now=100).job
    store.post(other.job_id, Start(125, "p", ("n1",), (2,), (1000,), 1, cpu_ids=((0, 1),)))
    assert store.used("n1") == (2, 7000)
    assert not store.cpus_free_for(store.jobs[first])
    store.post(other.job_id, Finish(130, 0, "exited"))
    assert store.cpus_free_for(store.jobs[first])
    store.post(first, Resume(140))
    assert store.used("n1") == (3, 6000)
    assert store.snapshot().nodes["n1"].kept_ids == 0b111


def test_a_suspended_job_cancelled_gives_back_only_what_it_held(store: JobStore) -> None:
    first = _started(store, 3, 6000)
    store.post(first, Suspend(120))
    store.post(first, Cancel(125))
    assert store.used("n1") == (0, 6000)  # completing: its memory until it is gone
    store.post(first, Finish(126, 9, "cancelled"))
    assert store.used("n1") == (0, 0)


def test_the_ledger_survives_a_restart_with_a_suspended_job(tmp_path: Path) -> None:
    conf = parse(CONF, str(tmp_path / "slurm.conf"))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    first = _started(store, 3, 6000)
    store.post(first, Suspend(120))
    asyncio.run(store.flush())
    again = JobStore(conf, Journal(str(tmp_path / "state")))
    again.load(0.0)
    assert again.jobs[first].state is JobState.SUSPENDED
    assert again.used("n1") == (0, 6000)


# ---------------------------------------------------------------- who may ask


def _control(store: JobStore, action: str, job_id: int, uid: int = 0) -> pb.JobResult | None:
    who = principal_for(uid, uid)
    req = pb.JobControlRequest(action=action, job_ids=[str(job_id)])
    results = list(JobControl(store).control(req, who, 150).results)
    return results[0] if results else None


def test_only_an_operator_suspends_or_resumes(store: JobStore) -> None:
    first = _started(store, 1, 100)
    for action in ("suspend", "resume"):
        refused = _control(store, action, first, uid=4242)
        assert refused is not None and refused.code == errors.ESLURM_ACCESS_DENIED
        assert refused.message == "Access/permission denied"
    # Even a job that does not exist: Slurm checks the caller first.
    assert _control(store, "suspend", 999, uid=4242).code == errors.ESLURM_ACCESS_DENIED  # type: ignore[union-attr]
    assert _control(store, "suspend", first) is None
    assert store.jobs[first].state is JobState.SUSPENDED


def test_slurms_answers_for_a_job_in_the_wrong_state(store: JobStore) -> None:
    first = _started(store, 4, 100)
    pending = store.submit(SPEC, ROOT, now=100).job.job_id
    cases = [
        ("resume", first, errors.ESLURM_JOB_NOT_SUSPENDED, "Job is not suspended"),
        ("suspend", pending, errors.ESLURM_JOB_PENDING, "Job is pending execution"),
        ("suspend", 999, errors.ESLURM_INVALID_JOB_ID, "Invalid job id specified"),
    ]
    for action, job_id, code, message in cases:
        result = _control(store, action, job_id)
        assert result is not None and (result.code, result.message) == (code, message)
    assert _control(store, "suspend", first) is None
    again = _control(store, "suspend", first)
    assert again is not None and again.message == "Job is not running"
    # Its CPUs taken meanwhile: the resume is refused, not oversubscribed.
    store.post(pending, Start(150, "p", ("n1",), (1,), (100,), 1, cpu_ids=((3,),)))
    busy = _control(store, "resume", first)
    assert busy is not None and (busy.code, busy.message) == (
        errors.ESLURM_NODES_BUSY,
        "Requested nodes are busy",
    )
    assert store.jobs[first].state is JobState.SUSPENDED


# ---------------------------------------------------------------- the agent's request


def test_the_suspend_request_round_trips_through_the_run_directory(tmp_path: Path) -> None:
    rundir = JobDir(str(tmp_path / "job5.0"))
    (tmp_path / "job5.0").mkdir()
    assert rundir.read_suspend() is None
    rundir.request_suspend(True, 0, 2)
    assert rundir.read_suspend() == (True, 0, 2)
    rundir.request_suspend(False, 42, 2)
    assert rundir.read_suspend() == (False, 42, 2)


class _Timed(Runner):
    """A run whose time limit is ``deadline`` and that notes when it is ended for it."""

    def __init__(self, rundir: JobDir, deadline: float) -> None:
        super().__init__(rundir, None, "job 5")
        self.deadline = deadline
        self.timed_out = False

    def _time_up(self) -> None:
        self.timed_out = True


def test_a_suspended_run_is_not_ended_at_its_limit_which_moves_by_the_time_suspended(
    tmp_path: Path,
) -> None:
    (tmp_path / "job5.0").mkdir()
    now = 1000.0
    run = _Timed(JobDir(str(tmp_path / "job5.0")), deadline=now - 1)
    run.suspended = True  # as ``_suspend`` leaves it once its tasks are stopped
    assert run._act(now) is None and not run.timed_out
    run.suspended, run.suspended_secs = False, 30  # resumed after 30 s suspended
    assert run.limit_at() == now + 29
    assert run._act(now) == pytest.approx(29) and not run.timed_out
    run._act(now + 29)
    assert run.timed_out


class _Signalled(Runner):
    """A run with one live task whose signals are noted instead of sent (not contained:
    it is stopped with SIGSTOP)."""

    def __init__(self, rundir: JobDir) -> None:
        super().__init__(rundir, None, "job 5")
        self.pgid = 4242
        self.tasks = [Task(0, 0)]
        self.sent: list[int] = []

    def _signal(self, sig: int) -> None:
        self.sent.append(sig)


@pytest.fixture
def signalled(tmp_path: Path) -> _Signalled:
    (tmp_path / "job5.0").mkdir()
    return _Signalled(JobDir(str(tmp_path / "job5.0")))


def test_a_suspension_sends_sigtstp_and_stops_the_tasks_after_the_grace(
    signalled: _Signalled,
) -> None:
    """PreemptParameters=suspend_grace_time as slurmstepd applies it: SIGTSTP so that
    the tasks can prepare, the stop only once the grace is over (a timer of the loop,
    never a sleep), SIGCONT with the resume."""
    run = signalled
    run._suspend(True, 0, 30)
    assert run.sent == [signal.SIGTSTP] and run.suspended
    now = time.time()
    assert run._act(now) == pytest.approx(30, abs=1)  # the loop wakes for the stop
    assert run.sent == [signal.SIGTSTP]
    assert run._act(now + 30) is None
    assert run.sent == [signal.SIGTSTP, signal.SIGSTOP]
    run._suspend(True, 0, 30)  # said again (an agent that reconnects): nothing
    assert run.sent == [signal.SIGTSTP, signal.SIGSTOP]
    run._suspend(False, 40, 30)
    assert run.sent[2:] == [signal.SIGCONT] and not run.suspended


def test_a_resume_in_the_grace_cancels_the_stop(signalled: _Signalled) -> None:
    run = signalled
    run._suspend(True, 0, 30)
    run._suspend(False, 5, 30)
    assert run.sent == [signal.SIGTSTP, signal.SIGCONT]  # CONT: SIGTSTP may have stopped some
    assert run._act(time.time() + 60) is None
    assert signal.SIGSTOP not in run.sent


def test_without_a_grace_the_tasks_stop_at_once_and_a_kill_in_the_grace_thaws(
    signalled: _Signalled,
) -> None:
    run = signalled
    run._suspend(True, 0, 0)
    assert run.sent == [signal.SIGTSTP, signal.SIGSTOP]
    run._suspend(False, 1, 0)
    run.sent.clear()
    run._suspend(True, 1, 30)
    run._begin_end("cancelled", kill_wait=30)
    assert run.sent == [signal.SIGTSTP, signal.SIGCONT, signal.SIGCONT, signal.SIGTERM]
    run._act(time.time() + 29)
    assert signal.SIGSTOP not in run.sent


def test_the_controller_passes_the_grace_on_with_every_suspension(tmp_path: Path) -> None:
    """SuspendJob carries slurm.conf's suspend_grace_time for every suspension
    (scontrol's, a preemption's, gang time-slicing's: slurmstepd's one suspend
    serves them all), and to an agent that reconnects."""
    conf = parse(CONF + "PreemptParameters=suspend_grace_time=9\n", str(tmp_path / "slurm.conf"))
    link = AgentLink(SimpleNamespace(conf=conf), b"k" * 32, SimpleNamespace(ttl=60), lambda: None)  # type: ignore[arg-type]
    sent: list[pb.ControllerMessage] = []
    link.sessions["n1"] = SimpleNamespace(send=sent.append)  # type: ignore[assignment]
    job = replace(RUNNING, nodes=("n1",), suspended_secs=3)
    link.suspend(job, resume=False)
    link.suspend(job, resume=True)
    assert [(m.suspend.resume, m.suspend.grace_secs, m.suspend.suspended_secs) for m in sent] == [
        (False, 9, 3),
        (True, 9, 3),
    ]
    assert parse(CONF, "slurm.conf").preemption.suspend_grace == 2  # Slurm's default


def test_no_step_starts_in_a_suspended_job(store: JobStore) -> None:
    first = _started(store, 1, 100)
    store.post(first, Suspend(120))
    with pytest.raises(SlurmError) as refused:
        store.create_step(first, StepRequest(ntasks=1), "s", -1, "srun true", ROOT)
    assert refused.value.code == errors.ESLURM_DISABLED
    store.post(first, Resume(130))
    _, step = store.create_step(first, StepRequest(ntasks=1), "s", -1, "srun true", ROOT)
    assert step.step_id == 0


@pytest.mark.parametrize("requeue", [True, False])
def test_a_node_failing_under_a_suspended_job_requeues_it_as_a_running_one(
    store: JobStore, requeue: bool
) -> None:
    first = _started(store, 3, 6000)
    store.jobs[first] = replace(store.jobs[first], requeue=requeue)
    store.post(first, Suspend(120))
    assert [requeued for _, requeued in store.fail_jobs_on("n1", 130)] == [requeue]
    after = store.jobs[first]
    assert after.state is (JobState.PENDING if requeue else JobState.NODE_FAIL)
    assert store.used("n1") == (0, 0)
