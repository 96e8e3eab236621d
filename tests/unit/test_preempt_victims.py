"""Which victims preemption chooses: the least work lost, modes, exemptions, WITHIN,
GraceTime and the minimisation pass (issue 17, points 3 and 4)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core import schedule
from controller.core.preempt import PreemptPolicy
from controller.core.priority import Ranking
from controller.core.snapshot import Running
from tests.unit.scenario import NOW, cluster, job, node, partition
from tests.unit.test_preempt import victim

NODES = [node(f"n{i}", cpus=4, used_cpus=4) for i in (1, 2, 3)]
PARTS = [partition("low", "n[1-3]"), partition("high", "n[1-3]", tier=2)]
TIERS = PreemptPolicy("partition_prio", tiers={"low": 1, "high": 2})


def plan_for(
    pending: list[object], running: list[Running], policy: PreemptPolicy = TIERS
) -> object:
    base = cluster(NODES, PARTS).snapshot(pending, running=running)  # type: ignore[arg-type]
    return schedule(replace(base, preempt=policy), NOW)


URGENT = job(1, num_tasks=4, partitions=("high",))


#: Two candidates, 10 on n1 and 11 on n2 (their fields besides the defaults), and the
#: one a job needing one node chooses.
CASES: dict[str, tuple[dict[str, object], dict[str, object], int]] = {
    "a job that asked to be told goes first": ({}, {"signal": True}, 11),
    "the freshest checkpoint loses the least": (
        {"checkpointed": NOW - 60},
        {"checkpointed": NOW - 5},
        11,
    ),
    "run time since the start when no checkpoint is newer": (
        {"start_time": NOW - 30},
        {"checkpointed": NOW - 90},
        10,
    ),
    "then the lowest priority": (
        {"priority": 5, "checkpointed": NOW - 5},
        {"priority": 1, "checkpointed": NOW - 5},
        11,
    ),
    "then the youngest": ({"start_time": NOW - 20}, {"start_time": NOW - 20}, 11),
    "PreemptMode=OFF is never a victim": ({"signal": True, "mode": "OFF"}, {}, 11),
    "PreemptExemptTime not yet over": ({"signal": True, "eligible": NOW + 1}, {}, 11),
    "PreemptExemptTime just over": ({"signal": True, "eligible": NOW}, {}, 10),
}


@pytest.mark.parametrize(("first", "second", "chosen"), list(CASES.values()), ids=list(CASES))
def test_the_victim_that_loses_the_least_work_is_chosen(
    first: dict[str, object], second: dict[str, object], chosen: int
) -> None:
    running = [victim(10, ("n1",), **first), victim(11, ("n2",), **second)]
    plan = plan_for([URGENT], running)
    assert plan.preempted == {chosen: 1}  # type: ignore[attr-defined]


def test_a_gang_is_one_victim_and_the_minimisation_drops_who_is_not_needed() -> None:
    # The two-node job's checkpoint is the freshest: it is the one victim, both
    # its nodes freed together; a three-node job takes it whole and one more.
    gang = victim(10, ("n1", "n2"), checkpointed=NOW - 1)
    single = victim(11, ("n3",), checkpointed=NOW - 50)
    plan = plan_for([URGENT], [gang, single])
    assert plan.preempted == {10: 1}  # type: ignore[attr-defined]
    wide = job(2, num_tasks=12, min_nodes=3, nodes_given=True, partitions=("high",))
    plan = plan_for([wide], [gang, single])
    assert plan.preempted == {10: 2, 11: 2}  # type: ignore[attr-defined]


def test_minimisation_drops_an_earlier_victim_made_useless_by_a_later_one() -> None:
    # On one node: victim 10 (first: it asked to be told) frees 1 CPU, too few for
    # 3; victim 11 frees 3, enough alone, so 10 is dropped again though on the same node.
    nodes = [node("n1", cpus=4, used_cpus=4)]
    parts = [partition("low", "n1"), partition("high", "n1", tier=2)]
    small = Running(10, ("n1",), (1,), (0,), 0, preemptable=True, partition="low", signal=True)
    large = Running(11, ("n1",), (3,), (0,), 0, preemptable=True, partition="low")
    needs3 = job(1, num_tasks=3, partitions=("high",))
    base = cluster(nodes, parts).snapshot([needs3], running=[small, large])
    plan = schedule(replace(base, preempt=TIERS), NOW)
    assert plan.preempted == {11: 1}


def test_modes_and_grace_per_victim_reach_the_plan() -> None:
    wide = job(2, num_tasks=12, min_nodes=3, nodes_given=True, partitions=("high",))
    running = [
        victim(10, ("n1",), mode="REQUEUE", requeue=True, grace=30),
        victim(11, ("n2",), mode="CANCEL", requeue=True),
        victim(12, ("n3",), requeue=True),  # the policy's global mode
    ]
    plan = plan_for([wide], running, replace(TIERS, requeue=True))
    assert set(plan.preempted) == {10, 11, 12}  # type: ignore[attr-defined]
    assert plan.requeued == {10, 12}  # type: ignore[attr-defined]
    assert dict(plan.grace) == {10: 30}  # type: ignore[attr-defined]


def test_a_job_whose_victims_are_in_their_grace_time_takes_no_more() -> None:
    warned = victim(10, ("n1",), preemptable=False, preempted_for=1)
    plan = plan_for([URGENT], [warned, victim(11, ("n2",))])
    assert plan.preempted == {}  # type: ignore[attr-defined]
    other = job(2, num_tasks=4, partitions=("high",))
    plan = plan_for([other], [warned, victim(11, ("n2",))])
    assert plan.preempted == {11: 2}  # type: ignore[attr-defined]


def test_within_lets_a_qos_preempt_its_own_lower_priority_jobs() -> None:
    policy = PreemptPolicy("qos", qos={}, within=frozenset({"team"}))
    mine = job(1, num_tasks=4, qos="team", partitions=("low",))
    running = [victim(10, ("n1",), qos="team", priority=5)]
    ranking = Ranking(values={1: 50}, at=NOW)
    base = cluster(NODES, PARTS).snapshot([mine], running=running)
    plan = schedule(replace(base, preempt=policy, ranking=ranking), NOW)
    assert plan.preempted == {10: 1}
    higher = [victim(10, ("n1",), qos="team", priority=80)]
    base = cluster(NODES, PARTS).snapshot([mine], running=higher)
    plan = schedule(replace(base, preempt=policy, ranking=ranking), NOW)
    assert plan.preempted == {}
    plan = schedule(replace(base, preempt=replace(policy, within=frozenset())), NOW)
    assert plan.preempted == {}
