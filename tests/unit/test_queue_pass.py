"""Queues in the scheduling pass, end to end in the core: jobs of the store's kind
through ``queueviews.view`` into ``schedule`` (core/queueplan.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import queueviews
from controller.core import quota, schedule
from controller.core.fairshare import Usage
from controller.core.preempt import PreemptPolicy
from controller.core.priority import NO_RANKING
from controller.core.snapshot import Running
from controller.jobstate import JobState, Reason
from controller.model import Job
from corral.queueconf import parse
from tests.unit.scenario import NOW, cluster, job, node, partition, running

#: One node of 4 CPUs, held by a running job of the team.
NODES = [node("n1", cpus=4, used_cpus=4)]
PARTS = [partition("batch", "n1")]


def plan_for(queues: str, pending: list[Job], held: list[Job], mode: str = "") -> object:
    """The pass's plan; ``mode``: the held jobs' PreemptMode ("": REQUEUE), under a
    PreemptType whose own preemption takes nobody here."""
    conf = parse(queues, "queues.conf")
    configured = {n.name: replace(n, free_cpus=n.cpus) for n in NODES}
    live = {n.name: n for n in NODES}
    view = queueviews.view(
        conf,
        held,
        pending,
        queueviews.capacity_of(configured, live),
        None,
        Usage(),
        NO_RANKING,
    )
    views = [
        Running(
            j.job_id, j.nodes, j.cpus, j.alloc_mem, 0, preemptable=True, requeue=True, mode=mode
        )
        for j in held
    ]
    snap = replace(cluster(NODES, PARTS).snapshot(pending, running=views), queues=view)
    if mode:
        snap = replace(snap, preempt=PreemptPolicy("partition_prio"))
    return schedule(snap, NOW)


@pytest.mark.parametrize(
    ("policy", "preempted"),
    [
        pytest.param("Never", {}, id="never"),
        pytest.param("LowerPriority", {10: 1}, id="lower-priority"),
    ],
)
def test_a_queue_preempts_its_own_lower_priority_job_by_its_policy(
    policy: str, preempted: dict[int, int]
) -> None:
    queues = f"QueueName=team Accounts=a Guarantee=cpu=4 WithinQueue={policy}\n"
    urgent = job(1, account="a", num_tasks=4, calc_priority=100)
    low = running(10, account="a", cpus=(4,), calc_priority=1)
    plan = plan_for(queues, [urgent], [low])
    assert plan.preempted == preempted  # type: ignore[attr-defined]
    assert plan.requeued == frozenset(preempted)  # type: ignore[attr-defined]
    if preempted:
        assert "preempted in queue team" in plan.why[10]  # type: ignore[attr-defined]


def test_a_queue_suspends_its_own_job_whose_preempt_mode_is_suspend() -> None:
    """Within a queue too, a SUSPEND victim is suspended: it lends the CPUs the urgent
    job needs, and keeps its node (the urgent job shares it)."""
    queues = "QueueName=team Accounts=a Guarantee=cpu=4 WithinQueue=LowerPriority\n"
    urgent = job(1, account="a", num_tasks=4, calc_priority=100)
    low = running(10, account="a", cpus=(4,), calc_priority=1)
    plan = plan_for(queues, [urgent], [low], mode="SUSPEND")
    assert plan.preempted == {10: 1}  # type: ignore[attr-defined]
    assert plan.suspended == {10} and not plan.requeued  # type: ignore[attr-defined]


def test_a_job_past_its_queue_limit_waits_with_the_queues_reason() -> None:
    queues = "QueueName=team Accounts=a Guarantee=cpu=2 Limit=cpu=2\n"
    free = [node("n1", cpus=4)]
    conf = parse(queues, "queues.conf")
    live = {n.name: n for n in free}
    wide = job(1, account="a", num_tasks=3)
    narrow = job(2, account="a", num_tasks=2)
    other = job(3, account="b", num_tasks=2)  # in no queue: as before
    view = queueviews.view(
        conf, [], [wide, narrow, other], queueviews.capacity_of(live, live), None, Usage(),
        NO_RANKING,
    )  # fmt: skip
    snap = replace(cluster(free, PARTS).snapshot([wide, narrow, other]), queues=view)
    plan = schedule(snap, NOW)
    assert plan.reasons[1] is Reason.QUEUE_LIMIT
    assert sorted(s.job_id for s in plan.starts) == [2, 3]


def test_every_refusal_of_the_quota_core_is_a_pending_reason() -> None:
    """The pass turns the core's words into squeue's reasons as they are."""
    words = (quota.LIMIT, quota.BORROW_LIMIT, quota.GUARANTEE, quota.COHORT_FULL)
    assert [Reason(w).value for w in (*words, quota.INVALID_QUEUE)] == [*words, "InvalidQueue"]


@pytest.mark.parametrize(
    ("lent", "counted"),
    [
        pytest.param(False, {"cpu": 4, "mem": 500, "gres/gpu": 1, "node": 1}, id="running"),
        pytest.param(True, {"mem": 500, "gres/gpu": 1, "node": 1}, id="suspended: cpus lent"),
    ],
)
def test_a_suspended_job_counts_in_its_queue_without_the_cpus_it_lends(
    lent: bool, counted: dict[str, int]
) -> None:
    """A job a preemption suspended lent its CPUs (others may run on them): its queue
    counts its memory, GPUs and node, not those CPUs; resumed, it counts them again."""
    conf = parse("QueueName=team Accounts=a Guarantee=cpu=4\n", "queues.conf")
    held = running(
        10,
        account="a",
        cpus=(4,),
        alloc_mem=(500,),
        gres_alloc=((("gpu", "", 1),),),
        state=JobState.SUSPENDED if lent else JobState.RUNNING,
        cpus_released=lent,
    )
    view = queueviews.view(conf, [held], [], {"cpu": 4}, None, Usage(), NO_RANKING)
    assert {r: n for r, n in view.allocated["team"].items() if r != "billing"} == counted
    assert [r.resources for r in view.running] == [view.allocated["team"]]
