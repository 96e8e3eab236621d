"""PreemptMode=SUSPEND and GANG (issue 17, point 3): which victims a suspension may
take (their CPUs only), the victim suspended and recorded, resumed when its CPUs are
free again, and the gang scheduler's turns on shared CPUs."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from controller import effects, gang, preemption, preemptresume
from controller.core import Plan, schedule
from controller.core.preempt import PreemptPolicy
from controller.core.snapshot import Running
from controller.effects import Continue, Effect, Stop
from controller.jobspec import from_fields
from controller.jobstate import (
    COMPLETING,
    GANG,
    Cancel,
    Finish,
    InvalidTransition,
    JobState,
    Preempt,
    Requeue,
    Resume,
    Start,
    Suspend,
    apply,
)
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral import queueconf
from corral.config import parse
from tests.unit.scenario import NOW, cluster, job, node, partition, running
from tests.unit.test_preempt import victim

# ---------------------------------------------------------------- the core's choice

PARTS = [partition("low", "n1"), partition("high", "n1", tier=2)]
SUSPEND = PreemptPolicy("partition_prio", tiers={"low": 1, "high": 2})


def _plan(pending: list[object], holder: Running, used_memory: int, gres: str = "") -> Plan:
    nodes = [node("n1", cpus=4, memory=4000, used_cpus=4, used_memory=used_memory, gres=gres)]
    base = cluster(nodes, PARTS).snapshot(pending, running=[holder])  # type: ignore[arg-type]
    return schedule(replace(base, preempt=SUSPEND), NOW)


def _holder(mode: str, memory: int = 3000, gres: tuple[tuple[str, str, int], ...] = ()) -> Running:
    return replace(victim(10, ("n1",), mode=mode), memory=(memory,), gres=(gres,) if gres else ())


@pytest.mark.parametrize(
    ("mode", "memory", "chosen", "suspended"),
    [
        pytest.param("SUSPEND", 500, {10: 1}, {10}, id="its CPUs are enough: suspended"),
        pytest.param("SUSPEND", 2000, {}, set(), id="its memory is needed: not a victim"),
        pytest.param("REQUEUE", 2000, {10: 1}, set(), id="requeued: it frees its memory too"),
    ],
)
def test_a_suspend_victim_frees_its_cpus_only(
    mode: str, memory: int, chosen: dict[int, int], suspended: set[int]
) -> None:
    urgent = job(1, num_tasks=4, mem_per_node=memory, partitions=("high",))
    plan = _plan([urgent], _holder(mode), used_memory=3000)
    assert dict(plan.preempted) == chosen
    assert plan.suspended == suspended
    assert not plan.grace


def test_a_suspend_victim_keeps_its_gpus() -> None:
    gpus = (("gpu", "", 2),)
    urgent = job(1, num_tasks=4, gres="gpu:1", partitions=("high",))
    plan = _plan([urgent], _holder("SUSPEND", 0, gpus), used_memory=0, gres="gpu:0")
    assert not plan.preempted
    plan = _plan([urgent], _holder("REQUEUE", 0, gpus), used_memory=0, gres="gpu:0")
    assert dict(plan.preempted) == {10: 1}


# ---------------------------------------------------------------- the state machine


def test_a_preemption_suspension_is_recorded_and_its_requeue_is_not_held() -> None:
    stopped = apply(running(5), Suspend(NOW, by=7))
    assert (stopped.state, stopped.suspended_by, stopped.cpus_released) == (
        JobState.SUSPENDED,
        7,
        True,
    )
    assert apply(stopped, Resume(NOW + 3)).suspended_by == 0
    requeued = apply(apply(stopped, Requeue(NOW + 1)), Finish(NOW + 2, 9, "cancelled"))
    assert (requeued.state, requeued.held, requeued.suspended_by) == (JobState.PENDING, "", 0)


def test_a_gang_suspension_keeps_its_cpus() -> None:
    stopped = apply(running(5), Suspend(NOW, by=GANG, lend=False))
    assert stopped.state is JobState.SUSPENDED and not stopped.cpus_released


def test_a_preemptor_or_the_gang_takes_a_suspension_over_but_not_an_operators() -> None:
    waiting = apply(running(5), Suspend(NOW, by=GANG, lend=False))
    taken = apply(waiting, Suspend(NOW + 5, by=7))
    assert (taken.state, taken.suspended_by, taken.cpus_released) == (JobState.SUSPENDED, 7, True)
    assert taken.suspend_time == NOW  # still suspended since then
    assert effects.follow(waiting, taken, Suspend(NOW + 5, by=7)) == ()  # frozen already
    back = apply(taken, Suspend(NOW + 9, by=GANG, lend=False))
    assert (back.suspended_by, back.cpus_released, back.suspend_time) == (GANG, False, NOW)
    operators = apply(running(5), Suspend(NOW))
    for event in (Suspend(NOW + 1, by=7), Suspend(NOW + 1, by=GANG, lend=False)):
        with pytest.raises(InvalidTransition):
            apply(operators, event)
    with pytest.raises(InvalidTransition):  # scontrol suspend: the job is not running
        apply(waiting, Suspend(NOW + 1))
    # Preempted with CANCEL, it ends as a running one, its time suspended counted.
    ended = apply(waiting, Preempt(NOW + 4))
    assert (ended.state, ended.flags) == (JobState.PREEMPTED, frozenset({COMPLETING}))
    assert ended.suspended_secs == 4


# ---------------------------------------------------------------- the store

CONF = """\
ClusterName=test
SlurmctldHost=ctl
PreemptType=preempt/partition_prio
PreemptMode=SUSPEND,GANG
SchedulerTimeSlice=2
NodeName=n1 CPUs={cpus} RealMemory=1000
PartitionName=low Nodes=ALL
PartitionName=high Nodes=ALL PriorityTier=2
PartitionName=shared Nodes=ALL OverSubscribe=FORCE:2
"""


def make(tmp_path: Path, cpus: int = 4) -> tuple[JobStore, list[Effect]]:
    conf = parse(CONF.format(cpus=cpus), str(tmp_path / "slurm.conf"))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    store.load(0.0)
    store.node_registered(Registration("n1", cpus, 1000), monotonic=1.0, now=10)
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    return store, sent


def submit(store: JobStore, partition: str, now: int, **fields: object) -> int:
    spec = from_fields(
        {"name": "j", "script": "#!/bin/sh\n", "work_dir": "/tmp", "partitions": [partition]}
        | fields
    )
    return store.submit(spec, principal_for(1000, 1000), now=now).job.job_id


def test_a_victim_is_suspended_then_resumed_when_its_preemptor_ends(tmp_path: Path) -> None:
    store, sent = make(tmp_path)
    low = submit(store, "low", 100, num_tasks=4)
    store.post(low, Start(110, "low", ("n1",), (4,), (600,), 1))
    high = submit(store, "high", 120, num_tasks=4, mem_per_node=300)
    snap = store.snapshot()
    plan = schedule(snap, 130)
    assert dict(plan.preempted) == {low: high} and plan.suspended == {low}
    assert preemption.begin(store, plan) == []
    victim = store.jobs[low]
    assert (victim.state, victim.suspended_by, victim.preempted_by) == (
        JobState.SUSPENDED,
        high,
        high,
    )
    assert victim.system_comment.startswith(f"Preempted (suspend) for job {high} at ")
    assert victim.cpus_released and not victim.preempt_time
    snap = store.snapshot()  # its CPUs are free, but its preemptor waits for them
    assert preemptresume.due(store, snap, 130) == []
    # The preemptor starts on the CPUs it lent; the victim stays suspended meanwhile.
    plan = schedule(store.snapshot(), 131)
    assert [s.job_id for s in plan.starts] == [high]
    store.commit(plan)
    assert preemptresume.due(store, store.snapshot(), 131) == []
    store.post(high, Finish(140, 0, "exited"))
    snap = store.snapshot()
    (resumed,) = preemptresume.due(store, snap, 141)
    assert resumed.job_id == low and resumed.state is JobState.RUNNING
    assert resumed.suspended_secs == 11 and resumed.preempted_by == high
    asyncio.run(store.flush())
    stops = [e for e in sent if isinstance(e, Stop | Continue) and e.job.job_id == low]
    assert [type(e) for e in stops] == [Stop, Continue]


def test_an_operators_suspension_is_not_resumed(tmp_path: Path) -> None:
    store, _ = make(tmp_path)
    low = submit(store, "low", 100)
    store.post(low, Start(110, "low", ("n1",), (1,), (100,), 1))
    store.post(low, Suspend(120))
    snap = store.snapshot()
    assert preemptresume.due(store, snap, 130) == []


# ---------------------------------------------------------------- gang scheduling


def _gang_job(job_id: int, since: int, ids: tuple[int, ...], suspended: bool = False) -> object:
    state = JobState.SUSPENDED if suspended else JobState.RUNNING
    return running(
        job_id,
        partition="shared",
        cpus=(len(ids),),
        cpu_ids=(ids,),
        state=state,
        start_time=since,
        suspend_time=since if suspended else 0,
        suspended_by=GANG if suspended else 0,
    )


def test_the_active_set_keeps_runners_and_rotates_to_the_longest_suspended() -> None:
    first = _gang_job(1, 100, (0,))
    second = _gang_job(2, 105, (0,))
    other_cpu = _gang_job(3, 106, (1,))
    jobs = [first, second, other_cpu]
    assert gang.active(jobs, {"n1": 2}, rotate=False) == {1, 3}  # type: ignore[arg-type]
    waiting = _gang_job(2, 110, (0,), suspended=True)
    jobs = [first, waiting, other_cpu]
    assert gang.active(jobs, {"n1": 2}, rotate=True) == {2, 3}  # type: ignore[arg-type]
    assert gang.active(jobs, {"n1": 2}, rotate=False) == {1, 3}  # type: ignore[arg-type]
    # Without CPU ids their counts decide: two 1-CPU jobs fit on one CPU one at a time.
    counted = [replace(j, cpu_ids=()) for j in (first, second)]  # type: ignore[type-var]
    assert gang.active(counted, {"n1": 1}, rotate=False) == {1}


def test_gang_jobs_on_one_cpu_take_turns(tmp_path: Path) -> None:
    store, sent = make(tmp_path, cpus=1)
    assert gang.partitions(store.conf) == {"shared"}
    one = submit(store, "shared", 100)
    two = submit(store, "shared", 100)
    store.post(one, Start(110, "shared", ("n1",), (1,), (100,), 1, cpu_ids=((0,),)))
    store.post(two, Start(111, "shared", ("n1",), (1,), (100,), 1, cpu_ids=((0,),)))
    assert gang.run(store, 111, rotate=False) == 1  # the newcomer waits its turn
    assert store.jobs[two].state is JobState.SUSPENDED
    assert store.jobs[two].suspended_by == GANG and not store.jobs[two].cpus_released
    assert gang.run(store, 112, rotate=False) == 0
    assert gang.run(store, 113, rotate=True) == 2  # a new slice: they swap
    assert (store.jobs[one].state, store.jobs[two].state) == (
        JobState.SUSPENDED,
        JobState.RUNNING,
    )
    assert gang.run(store, 115, rotate=True) == 2
    assert store.jobs[one].state is JobState.RUNNING
    # The running one ends: its peer is resumed in the next cycle, no slice needed.
    store.post(one, Cancel(116))
    store.post(one, Finish(116, 9, "cancelled"))
    assert store.jobs[two].state is JobState.SUSPENDED
    assert gang.run(store, 116, rotate=False) == 1
    assert store.jobs[two].state is JobState.RUNNING
    asyncio.run(store.flush())
    assert any(isinstance(e, Stop) and e.job.job_id == two for e in sent)


def test_no_gang_without_gang_in_preempt_mode(tmp_path: Path) -> None:
    conf = parse(
        CONF.format(cpus=1).replace("PreemptMode=SUSPEND,GANG", "PreemptMode=REQUEUE"),
        str(tmp_path / "slurm.conf"),
    )
    assert gang.partitions(conf) == frozenset()


def test_an_empty_plan_changes_nothing(tmp_path: Path) -> None:
    store, _ = make(tmp_path)
    empty = Plan(now=1, preempted=MappingProxyType({}))
    assert preemption.begin(store, empty) == []


# ---------------------------------------------------------------- reclaim by suspension

QUEUES_CONF = """\
ClusterName=test
SlurmctldHost=ctl
PreemptType=preempt/partition_prio
PreemptMode=SUSPEND,GANG
NodeName=n1 CPUs=4 RealMemory=1000
PartitionName=pa Nodes=ALL
PartitionName=pb Nodes=ALL
"""
#: Each team is guaranteed half the node's CPUs; the partitions share one tier, so
#: only the queues' reclaim takes victims.
QUEUES = "QueueName=a Partitions=pa Guarantee=cpu=2\nQueueName=b Partitions=pb Guarantee=cpu=2\n"


def _cpus_held(store: JobStore) -> dict[str, tuple[int, int]]:
    """Each queue's (CPUs, memory) as the next pass counts them."""
    view = store.snapshot().queues
    assert view is not None
    return {q: (a.get("cpu", 0), a.get("mem", 0)) for q, a in view.allocated.items()}


def test_a_reclaim_victim_is_suspended_lends_its_cpus_and_resumes_after(tmp_path: Path) -> None:
    conf = parse(QUEUES_CONF, str(tmp_path / "slurm.conf"))
    conf = replace(conf, queue_conf=queueconf.parse(QUEUES, str(tmp_path / "queues.conf")))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    store.load(0.0)
    store.node_registered(Registration("n1", 4, 1000), monotonic=1.0, now=10)
    own = submit(store, "pa", 100, num_tasks=2)
    borrowed = submit(store, "pa", 100, num_tasks=2)
    store.post(own, Start(110, "pa", ("n1",), (2,), (200,), 1))
    store.post(borrowed, Start(111, "pa", ("n1",), (2,), (200,), 1))
    assert _cpus_held(store) == {"a": (4, 400)}
    waiting = submit(store, "pb", 120, num_tasks=2, mem_per_node=300)
    plan = schedule(store.snapshot(), 130)
    assert dict(plan.preempted) == {borrowed: waiting} and plan.suspended == {borrowed}
    assert preemption.begin(store, plan) == []
    victim = store.jobs[borrowed]
    assert (victim.state, victim.suspended_by) == (JobState.SUSPENDED, waiting)
    assert victim.system_comment.startswith(f"Preempted (suspend) for job {waiting} at ")
    assert f"reclaimed for job {waiting} of queue b" in victim.system_comment
    # Its CPUs are lent: queue a counts them no more, its memory still.
    assert _cpus_held(store) == {"a": (2, 400)}
    plan = schedule(store.snapshot(), 131)
    assert [s.job_id for s in plan.starts] == [waiting] and not plan.preempted
    store.commit(plan)
    assert _cpus_held(store) == {"a": (2, 400), "b": (2, 300)}
    assert preemptresume.due(store, store.snapshot(), 131) == []
    store.post(waiting, Finish(140, 0, "exited"))
    (resumed,) = preemptresume.due(store, store.snapshot(), 141)
    assert resumed.job_id == borrowed and resumed.state is JobState.RUNNING
    assert _cpus_held(store) == {"a": (4, 400)}
