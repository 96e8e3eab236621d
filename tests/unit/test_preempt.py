"""Preemption in the scheduling core: who makes room for whom."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, replace

import pytest

from controller.core import schedule
from controller.core.preempt import PreemptPolicy
from controller.core.snapshot import Running
from controller.jobstate import COMPLETING, JobState, Reason, apply
from controller.jobstate import Preempt as PreemptEvent
from tests.unit.scenario import NOW, cluster, job, node, partition

NODES = [node("n1", cpus=4, used_cpus=4), node("n2", cpus=4, used_cpus=4)]
PARTS = [partition("low", "n[1-2]"), partition("high", "n[1-2]", tier=2)]


def victim(job_id: int, nodes: tuple[str, ...], **fields: object) -> Running:
    values: dict[str, object] = {
        "preemptable": True,
        "priority": 10,
        "qos": "normal",
        "partition": "low",
        "start_time": NOW - 100,
    }
    values.update(fields)
    cpus = tuple(4 for _ in nodes)
    return Running(job_id, nodes, cpus, (0,) * len(nodes), 0, **values)  # type: ignore[arg-type]


def snap(pending: list[object], running: list[Running], policy: PreemptPolicy) -> object:
    base = cluster(NODES, PARTS).snapshot(pending, running=running)  # type: ignore[arg-type]
    return replace(base, preempt=policy)


TIERS = PreemptPolicy("partition_prio", tiers={"low": 1, "high": 2})


def test_a_higher_tier_job_preempts_the_lowest_priority_youngest_job_it_needs() -> None:
    urgent = job(1, num_tasks=4, partitions=("high",))
    running = [
        victim(10, ("n1",), priority=5, start_time=NOW - 50),
        victim(11, ("n2",), priority=5, start_time=NOW - 10),  # younger: goes first
    ]
    plan = schedule(snap([urgent], running, TIERS), NOW)  # type: ignore[arg-type]
    assert plan.reasons[1] is Reason.RESOURCES
    assert plan.preempted == {11: 1}


def test_only_what_the_job_needs_is_preempted_and_only_once() -> None:
    big = job(1, num_tasks=8, partitions=("high",), min_nodes=2, nodes_given=True)
    small = job(2, num_tasks=4, partitions=("high",))
    running = [victim(10, ("n1",)), victim(11, ("n2",))]
    plan = schedule(snap([big, small], running, TIERS), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {10: 1, 11: 1}  # the small job finds no victim left


def test_jobs_of_the_same_tier_or_unpreemptable_ones_are_left_alone() -> None:
    peer = job(1, num_tasks=4, partitions=("low",))
    plan = schedule(snap([peer], [victim(10, ("n1",))], TIERS), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {}
    urgent = job(2, num_tasks=4, partitions=("high",))
    ending = victim(10, ("n1",), preemptable=False)  # already completing
    plan = schedule(snap([urgent], [ending], TIERS), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {}


def test_min_exempt_priority_spares_jobs_of_that_priority_or_more() -> None:
    """PreemptParameters=min_exempt_priority: only jobs below it may be victims (Slurm's
    documented rule), whatever else would choose them first."""
    urgent = job(1, num_tasks=4, partitions=("high",))
    running = [
        victim(10, ("n1",), priority=100, start_time=NOW - 50),
        victim(11, ("n2",), priority=99, start_time=NOW - 300),
    ]
    assert schedule(snap([urgent], running, TIERS), NOW).preempted == {10: 1}  # type: ignore[arg-type]
    bounded = replace(TIERS, min_exempt_priority=100)
    assert schedule(snap([urgent], running, bounded), NOW).preempted == {11: 1}  # type: ignore[arg-type]
    none_below = replace(TIERS, min_exempt_priority=99)
    assert schedule(snap([urgent], running, none_below), NOW).preempted == {}  # type: ignore[arg-type]


def test_qos_preempt_lists_decide_under_preempt_qos() -> None:
    policy = PreemptPolicy("qos", qos={"gold": frozenset({"scavenger"})})
    gold = job(1, num_tasks=4, qos="gold", partitions=("low",))
    running = [victim(10, ("n1",), qos="normal"), victim(11, ("n2",), qos="scavenger")]
    plan = schedule(snap([gold], running, policy), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {11: 1}
    plain = job(2, num_tasks=4, partitions=("low",))
    plan = schedule(snap([plain], running, policy), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {}


def test_a_cancelled_victim_ends_preempted() -> None:
    running = replace(job(5), state=JobState.RUNNING, start_time=NOW - 10, nodes=("n1",))
    preempted = apply(running, PreemptEvent(NOW))
    assert preempted.state is JobState.PREEMPTED and COMPLETING in preempted.flags


def test_the_plan_says_which_victims_are_requeued_under_preemptmode_requeue() -> None:
    policy = replace(TIERS, requeue=True)
    big = job(1, num_tasks=8, partitions=("high",), min_nodes=2, nodes_given=True)
    running = [victim(10, ("n1",), requeue=True), victim(11, ("n2",), requeue=False)]
    plan = schedule(snap([big], running, policy), NOW)  # type: ignore[arg-type]
    assert plan.preempted == {10: 1, 11: 1}
    assert plan.requeued == {10}  # the other may not be requeued: it is cancelled
    plan = schedule(snap([big], running, TIERS), NOW)  # type: ignore[arg-type]
    assert plan.requeued == frozenset()  # PreemptMode=CANCEL


def test_a_plan_cannot_be_changed_once_returned() -> None:
    urgent = job(1, num_tasks=4, partitions=("high",))
    plan = schedule(snap([urgent], [victim(11, ("n2",))], TIERS), NOW)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        plan.preempted[12] = 1  # type: ignore[index]
    with pytest.raises(AttributeError):
        plan.starts.append(plan.starts[0] if plan.starts else None)  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError):
        plan.now = 0  # type: ignore[misc]


def test_preempting_another_partitions_sharing_jobs_makes_room_for_a_job_that_keeps_its_cpus() -> (
    None
):
    # n1's CPUs are shared by two jobs of "low" (FORCE:2); a job of "high" that
    # keeps its CPUs may not join them, but may once both are gone.
    nodes = [node("n1", cpus=4, shared=(("low", 8, 4),))]
    parts = [partition("low", "n1", oversubscribe="FORCE:2"), partition("high", "n1", tier=2)]
    running = [
        victim(10, ("n1",), share=2, start_time=NOW - 50),
        victim(11, ("n1",), share=2, start_time=NOW - 10),
    ]
    urgent = job(1, num_tasks=2, partitions=("high",))
    base = cluster(nodes, parts).snapshot([urgent], running=running)
    plan = schedule(replace(base, preempt=TIERS), NOW)
    assert plan.preempted == {10: 1, 11: 1}
