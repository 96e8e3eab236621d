"""A victim's GraceTime in the store: warned through the effect queue, requeued or
cancelled by the cycle once it is over, and the preemption recorded on the job."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from types import MappingProxyType

import pytest

from controller import preemption
from controller.core import Plan
from controller.effects import Effect, Kill, Signal
from controller.jobspec import from_fields
from controller.jobstate import COMPLETING, Finish, JobState, Start
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore
from corral.config import parse

CONF = """\
ClusterName=test
SlurmctldHost=ctl
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
{extra}
NodeName=n1 CPUs=4 RealMemory=1000
PartitionName=low Nodes=ALL GraceTime=30
PartitionName=high Nodes=ALL PriorityTier=2
"""


def make(tmp_path: Path, extra: str = "") -> tuple[JobStore, list[Effect]]:
    conf = parse(CONF.format(extra=extra), str(tmp_path / "slurm.conf"))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    return store, sent


def running_victim(store: JobStore, **fields: object) -> int:
    spec = from_fields(
        {"name": "v", "script": "#!/bin/sh\n", "work_dir": "/tmp", "partitions": ["low"], **fields}
    )
    victim = store.submit(spec, principal_for(1000, 1000), now=100).job
    store.post(victim.job_id, Start(110, "low", ("n1",), (4,), (1000,), 1))
    return victim.job_id


def urgent(store: JobStore) -> int:
    spec = from_fields(
        {"name": "u", "script": "#!/bin/sh\n", "work_dir": "/tmp", "partitions": ["high"]}
    )
    return store.submit(spec, principal_for(1001, 1001), now=120).job.job_id


def plan(now: int, victim: int, for_id: int, grace: int, requeue: bool = True) -> Plan:
    return Plan(
        now=now,
        preempted=MappingProxyType({victim: for_id}),
        requeued=frozenset({victim} if requeue else ()),
        grace=MappingProxyType({victim: grace} if grace else {}),
    )


def test_a_victim_is_warned_then_requeued_when_its_grace_time_is_over(tmp_path: Path) -> None:
    store, sent = make(tmp_path)
    victim = running_victim(store)
    waiting = urgent(store)
    assert preemption.begin(store, plan(200, victim, waiting, 30)) == []  # nothing ended yet
    asyncio.run(store.flush())
    assert [(type(e), getattr(e, "signal", 0)) for e in sent[1:]] == [
        (Signal, signal.SIGCONT),
        (Signal, signal.SIGTERM),
    ]
    job = store.jobs[victim]
    assert job.state is JobState.RUNNING
    assert (job.preempt_time, job.end_time, job.preempted_by) == (200, 230, waiting)
    assert job.system_comment.startswith(f"Preempted (requeue) for job {waiting} at ")
    assert "PriorityTier 2 over 1 of partition low; GraceTime 30s" in job.system_comment
    assert preemption.due(store, 229) == []
    ended = preemption.due(store, 230)
    assert [(j.job_id, requeued) for j, requeued in ended] == [(victim, True)]
    asyncio.run(store.flush())
    assert isinstance(sent[-1], Kill) and sent[-1].reason == "requeue"
    assert COMPLETING in store.jobs[victim].flags  # RUNNING until its processes are gone
    assert preemption.due(store, 300) == []
    store.post(victim, Finish(240, 0x0F, "requeued"))
    again = store.jobs[victim]
    assert again.state is JobState.PENDING
    assert (again.preempt_time, again.preempted_by) == (0, waiting)  # why names it


def test_send_user_signal_sends_the_jobs_own_signal(tmp_path: Path) -> None:
    store, sent = make(tmp_path, "PreemptParameters=send_user_signal")
    victim = running_victim(store, signal_num=int(signal.SIGUSR1), signal_time=60)
    preemption.begin(store, plan(200, victim, urgent(store), 30, requeue=False))
    asyncio.run(store.flush())
    assert [getattr(e, "signal", 0) for e in sent[1:]] == [signal.SIGUSR1]
    ended = preemption.due(store, 230)
    assert [(j.state, requeued) for j, requeued in ended] == [(JobState.PREEMPTED, False)]


@pytest.mark.parametrize("requeue", [True, False])
def test_without_grace_time_the_mode_acts_at_once(tmp_path: Path, requeue: bool) -> None:
    store, _ = make(tmp_path)
    victim = running_victim(store)
    waiting = urgent(store)
    ended = preemption.begin(store, plan(200, victim, waiting, 0, requeue))
    state = JobState.RUNNING if requeue else JobState.PREEMPTED  # requeued: completing first
    assert [(j.state, r, COMPLETING in j.flags) for j, r in ended] == [(state, requeue, True)]
    assert store.jobs[victim].system_comment.startswith("Preempted (")
