"""Elastic jobs in the scheduling core (issue 18, point 3): when one grows, and how
pressure takes its nodes above its minimum first (``controller/core/elastic.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import queueviews
from controller.core import BackfillParams, schedule
from controller.core.fairshare import Usage
from controller.core.limits import Gate
from controller.core.plan import Plan
from controller.core.preempt import PreemptPolicy
from controller.core.priority import NO_RANKING, Ranking
from controller.core.snapshot import Elastic, NodeView, Running, Snapshot
from controller.elasticviews import views as elastic_views
from controller.jobstate import Reason
from controller.model import Job
from corral.queueconf import parse as parse_queues
from tests.unit.scenario import NOW, cluster, job, node, partition, running

BACKFILL = BackfillParams(window=86400, resolution=60, max_job_test=100, max_job_user=0)


def elastic(
    job_id: int, nodes: tuple[str, ...] = ("n1",), least: int = 1, most: int = 3, **fields: Any
) -> Job:
    """A running elastic job of ``-N least-most`` on ``nodes`` (4 CPUs each)."""
    values: dict[str, Any] = {
        "min_nodes": least,
        "max_nodes": most,
        "nodes_given": True,
        "elastic_signal": 28,
        "cpus": tuple(4 for _ in nodes),
        "cpus_per_task": 4,
        "calc_priority": 10,
    }
    values.update(fields)
    return running(job_id, nodes, **values)


def pending_elastic(job_id: int, least: int = 1, most: int = 3, **fields: Any) -> Job:
    values: dict[str, Any] = {"min_nodes": least, "max_nodes": most, "nodes_given": True}
    values.update(elastic_signal=28, cpus_per_task=4)
    values.update(fields)
    return job(job_id, **values)


def whole(job_id: int, count: int = 1, **fields: Any) -> Job:
    """A pending job of ``-N count`` whole 4-CPU nodes, of priority 50 unless said."""
    values: dict[str, Any] = {"min_nodes": count, "nodes_given": True, "cpus_per_task": 4}
    values["calc_priority"] = 50
    values.update(fields)
    return job(job_id, **values)


def as_running(job: Job, end: int = 0, **fields: Any) -> Running:
    values: dict[str, Any] = {"preemptable": True, "partition": job.partition, "priority": 10}
    values.update(fields)
    return Running(
        job.job_id, job.nodes, job.cpus, job.alloc_mem, end, start_time=job.start_time, **values
    )


def snap(
    pending: Iterable[Job],
    jobs: Iterable[Job] = (),
    *,
    free: Iterable[str] = (),
    ends: dict[int, int] | None = None,
    count: int = 6,
    **fields: Any,
) -> Snapshot:
    """``count`` 4-CPU nodes, busy but those in ``free`` and those no job in ``jobs``
    holds; the running ``jobs`` (elastic ones in ``Snapshot.elastic``)."""
    jobs = list(jobs)
    held = {name for j in jobs for name in j.nodes} - set(free)
    nodes: list[NodeView] = [
        node(f"n{i}", cpus=4, used_cpus=4 if f"n{i}" in held else 0) for i in range(1, count + 1)
    ]
    ends = ends or {}
    parts = [partition("batch", f"n[1-{count}]"), partition("high", f"n[1-{count}]", tier=2)]
    base = cluster(nodes, parts).snapshot(
        pending, running=[as_running(j, ends.get(j.job_id, 0)) for j in jobs]
    )
    views = {j.job_id: Elastic(j, j.max_nodes) for j in [*jobs, *pending] if j.elastic_signal}
    return replace(base, elastic=views, ranking=Ranking(at=NOW), **fields)


def grown(plan: Plan) -> dict[int, tuple[str, ...]]:
    return {job_id: start.nodes for job_id, start in plan.grown.items()}


def started(plan: Plan) -> dict[int, tuple[str, ...]]:
    return {s.job_id: s.nodes for s in plan.starts}


# ---------------------------------------------------------------- growth

E = elastic(1)  # -N 1-3 on n1, priority 10

#: (pending jobs, running jobs, their ends, backfill?) -> (growths, starts)
GROWTH: dict[str, tuple[list[Job], list[Job], dict[int, int], bool, dict[int, Any], Any]] = {
    "grows onto free nodes when nobody waits": ([], [E], {}, False, {1: ("n2", "n3")}, {}),
    "only onto free nodes": (
        [],
        [E, running(9, ("n2",), cpus=(4,))],
        {},
        False,
        {1: ("n3", "n4")},
        {},
    ),
    "never past its maximum": (
        [],
        [elastic(1, most=2)],
        {},
        False,
        {1: ("n2",)},
        {},
    ),
    "a job that can start now comes first, whatever its priority": (
        [whole(5, calc_priority=1)],
        [E],
        {},
        False,
        {1: ("n3", "n4")},
        {5: ("n2",)},
    ),
    "not over a higher-priority job waiting without a reservation": (
        [whole(5, 6)],
        [E],
        {},
        False,
        {},
        {},
    ),
    "with backfill, beside the nodes reserved for a higher-priority job": (
        [whole(5, 4)],
        [E, running(9, ("n3", "n4"), cpus=(4, 4), end_time=NOW + 3600)],
        {9: NOW + 3600},
        True,
        {1: ("n6",)},
        {},
    ),
    "a lower-priority job waiting does not hold it back": (
        [whole(5, 6, calc_priority=1)],
        [E],
        {},
        True,
        {1: ("n2", "n3")},
        {},
    ),
    "a higher-priority job of another partition does not hold it back": (
        [whole(5, 6, partitions=("other",))],
        [E],
        {},
        False,
        {1: ("n2", "n3")},
        {},
    ),
}


@pytest.mark.parametrize(
    ("pending", "jobs", "ends", "backfill", "growths", "starts"),
    list(GROWTH.values()),
    ids=list(GROWTH),
)
def test_an_elastic_job_grows_onto_what_the_pass_leaves_free(
    pending: list[Job],
    jobs: list[Job],
    ends: dict[int, int],
    backfill: bool,
    growths: dict[int, tuple[str, ...]],
    starts: dict[int, tuple[str, ...]],
) -> None:
    plan = schedule(snap(pending, jobs, ends=ends), NOW, BACKFILL if backfill else None)
    assert grown(plan) == growths
    assert started(plan) == starts


def test_the_nodes_it_left_alone_are_the_higher_jobs_reservation() -> None:
    pending = [whole(5, 4)]
    jobs = [E, running(9, ("n3", "n4"), cpus=(4, 4), end_time=NOW + 3600)]
    plan = schedule(snap(pending, jobs, ends={9: NOW + 3600}, count=6), NOW, BACKFILL)
    assert plan.expected[5].nodes == ("n2", "n3", "n4", "n5")
    assert grown(plan) == {1: ("n6",)}


def test_an_elastic_job_starts_with_what_is_free_up_to_its_maximum() -> None:
    plan = schedule(snap([pending_elastic(1, 2, 4)]), NOW)
    assert started(plan) == {1: ("n1", "n2", "n3", "n4")}
    assert plan.grown == {}
    start = plan.starts[0]
    assert start.cpus == (4, 4, 4, 4) and len(start.cpu_ids) == 4


def test_an_elastic_job_waits_for_its_minimum() -> None:
    jobs = [running(9, ("n1", "n2", "n3", "n4", "n5"), cpus=(4, 4, 4, 4, 4))]
    plan = schedule(snap([pending_elastic(1, 2, 4)], jobs), NOW)
    assert plan.starts == () and plan.reasons[1] is Reason.RESOURCES


def test_elastic_jobs_grow_in_priority_order() -> None:
    low, high = elastic(1, calc_priority=5), elastic(2, ("n2",), calc_priority=20)
    plan = schedule(snap([], [low, high], count=4), NOW)
    assert grown(plan) == {2: ("n3", "n4")}


def test_accounting_limits_stop_the_growth() -> None:
    # Each node more counts 4 CPUs against a GrpTRES cpu=8 already 4 used.
    gate = Gate("g:acct:cpu", 8, 4, Reason.ASSOC_GRP_CPU)
    base = snap([], [E])
    views = {1: replace(base.elastic[1], gates=(gate,))}
    plan = schedule(replace(base, elastic=views, usage={"g:acct:cpu": 4}), NOW)
    assert grown(plan) == {1: ("n2",)}
    limited = {1: replace(base.elastic[1], most=1)}
    assert schedule(replace(base, elastic=limited), NOW).grown == {}


# ---------------------------------------------------------------- under pressure

TIERS = PreemptPolicy("partition_prio", tiers={"batch": 1, "high": 2})


def pressed(need: int, wide: Job = E, partition: str = "high") -> Plan:
    """A job of ``need`` whole nodes in ``partition`` against ``wide`` and a whole job
    of the low tier on each other node (jobs 1 to 6 by node), none free."""
    urgent = whole(50, need, partitions=(partition,))
    busy = [
        running(i, (f"n{i}",), cpus=(4,), start_time=NOW - 10)
        for i in range(1, 7)
        if f"n{i}" not in wide.nodes
    ]
    base = snap([urgent], [wide, *busy])
    return schedule(replace(base, preempt=TIERS), NOW)


#: (nodes the waiting job needs, the elastic job) -> (its nodes given back, jobs preempted)
PRESSURE: dict[str, tuple[int, Job, dict[int, tuple[str, ...]], dict[int, int]]] = {
    "one node: the elastic job's last, not a whole job": (
        1,
        elastic(1, ("n1", "n2", "n3")),
        {1: ("n3",)},
        {},
    ),
    "two nodes: both above its minimum": (
        2,
        elastic(1, ("n1", "n2", "n3")),
        {1: ("n2", "n3")},
        {},
    ),
    "never below its minimum: a whole job for the rest": (
        2,
        elastic(1, ("n1", "n2", "n3"), least=2),
        {1: ("n3",)},
        {6: 50},
    ),
    "at its minimum it is a whole job like any other": (
        1,
        elastic(1, ("n1", "n2"), least=2, start_time=NOW - 5),
        {},
        {1: 50},
    ),
    "when it must go whole, nothing is shrunk": (
        6,
        elastic(1, ("n1", "n2", "n3")),
        {},
        {1: 50, 4: 50, 5: 50, 6: 50},
    ),
}


@pytest.mark.parametrize(
    ("need", "wide", "shrunk", "preempted"), list(PRESSURE.values()), ids=list(PRESSURE)
)
def test_preemption_takes_the_elastic_part_first(
    need: int, wide: Job, shrunk: dict[int, tuple[str, ...]], preempted: dict[int, int]
) -> None:
    plan = pressed(need, wide)
    assert {j: tuple(sorted(n)) for j, n in plan.shrunk.items()} == shrunk
    assert dict(plan.preempted) == preempted
    assert set(plan.shrunk_for.values()) <= {50}
    assert plan.grown == {}


#: Without PreemptType: (the waiting job's priority, nodes) -> what the elastic job gives back
LENT = {
    "a higher-priority job takes back what it grew onto": (50, 1, {1: ("n3",)}),
    "as much as it needs": (50, 2, {1: ("n2", "n3")}),
    "never below its minimum, nor for nothing": (50, 3, {}),
    "a lower-priority job waits for it": (5, 1, {}),
}


@pytest.mark.parametrize(("priority", "need", "shrunk"), list(LENT.values()), ids=list(LENT))
def test_what_an_elastic_job_grew_onto_goes_back_to_jobs_before_it(
    priority: int, need: int, shrunk: dict[int, tuple[str, ...]]
) -> None:
    wide = elastic(1, ("n1", "n2", "n3"))
    busy = [running(i, (f"n{i}",), cpus=(4,)) for i in (4, 5, 6)]
    plan = schedule(snap([whole(50, need, calc_priority=priority)], [wide, *busy]), NOW)
    assert {j: tuple(sorted(n)) for j, n in plan.shrunk.items()} == shrunk
    assert plan.preempted == {} and plan.grown == {}


def test_reclaim_takes_the_elastic_part_before_any_whole_job() -> None:
    """Queue b borrows with a 3-node elastic job and a whole one; queue a's job wants
    one node of its guarantee back: one node of the elastic job goes."""
    queues = parse_queues(
        "QueueName=a Accounts=a Guarantee=cpu=8\nQueueName=b Accounts=b Guarantee=cpu=4\n",
        "queues.conf",
    )
    wide = elastic(1, ("n1", "n2", "n3"), account="b", start_time=NOW - 500)
    other = running(4, ("n4",), cpus=(4,), account="b", start_time=NOW - 5, calc_priority=1)
    urgent = whole(50, 1, account="a")
    jobs = [wide, other]
    nodes = [node(f"n{i}", cpus=4, used_cpus=4) for i in (1, 2, 3, 4)]
    live = {n.name: n for n in nodes}
    configured = {n.name: replace(n, free_cpus=4) for n in nodes}
    view = queueviews.view(
        queues, jobs, [urgent], queueviews.capacity_of(configured, live), None, Usage(), NO_RANKING
    )
    base = cluster(nodes, [partition("batch", "n[1-4]")]).snapshot(
        [urgent], running=[as_running(j) for j in jobs]
    )
    views = elastic_views(jobs, None, frozenset(), Usage(), queues)
    plan = schedule(replace(base, queues=view, elastic=views), NOW)
    assert dict(plan.shrunk) == {1: ("n3",)} and dict(plan.shrunk_for) == {1: 50}
    assert dict(plan.preempted) == {}


# ---------------------------------------------------------------- properties


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, BackfillParams | None]:
    """Up to 6 nodes of 4 CPUs; running jobs (some elastic, some --exclusive) on
    consecutive nodes, some of them with time limits; pending jobs of either tier,
    whole or elastic; with or without preemption and backfill."""
    count = draw(st.integers(2, 6))
    jobs: list[Job] = []
    index, job_id = 1, 1
    while index <= count:
        width = draw(st.integers(1, count - index + 1))
        if draw(st.booleans()):  # a free stretch
            index += width
            continue
        names = tuple(f"n{i}" for i in range(index, index + width))
        fields = {
            "exclusive": draw(st.booleans()),
            "calc_priority": draw(st.integers(1, 50)),
            "start_time": NOW - draw(st.integers(1, 500)),
            "end_time": draw(st.sampled_from([0, NOW + 600, NOW + 3600])),
        }
        if draw(st.booleans()):
            least = draw(st.integers(1, width))
            most = draw(st.integers(width, count))
            jobs.append(elastic(job_id, names, least, max(most, least + 1), **fields))
        else:
            jobs.append(running(job_id, names, cpus=(4,) * width, **fields))
        index += width
        job_id += 1
    pending: list[Job] = []
    for n in range(draw(st.integers(0, 3))):
        tier = draw(st.sampled_from(["batch", "high"]))
        priority = draw(st.integers(1, 50))
        least = draw(st.integers(1, count))
        if draw(st.booleans()):
            most = draw(st.integers(least + 1, count + 1))
            pending.append(
                pending_elastic(100 + n, least, most, partitions=(tier,), calc_priority=priority)
            )
        else:
            pending.append(whole(100 + n, least, partitions=(tier,), calc_priority=priority))
    ends = {j.job_id: j.end_time for j in jobs}
    base = snap(pending, jobs, ends=ends, count=count)
    policy = draw(st.sampled_from([None, TIERS]))
    backfill = draw(st.sampled_from([None, BACKFILL]))
    return replace(base, preempt=policy), backfill


@settings(max_examples=300, deadline=None)
@given(case=clusters())
def test_elastic_jobs_stay_within_their_range_and_whole_nodes_stay_whole(
    case: tuple[Snapshot, BackfillParams | None],
) -> None:
    """Whatever the pass decides, an elastic job never holds fewer nodes than its
    minimum nor more than its maximum, starting, grown or shrunk; it only ever gives
    back nodes above its minimum and never its first; no node has more CPUs given than
    it has; and a node given to an --exclusive job is given to no other job."""
    base, backfill = case
    plan = schedule(base, NOW, backfill)
    held: dict[int, list[str]] = {
        r.job_id: list(r.nodes) for r in base.running if r.job_id not in plan.preempted
    }
    jobs = {j.job_id: j for j in [*base.pending, *(e.job for e in base.elastic.values())]}
    for job_id, nodes in plan.shrunk.items():
        job = jobs[job_id]
        assert set(nodes) <= set(job.nodes[job.min_nodes :])
        held[job_id] = [n for n in held[job_id] if n not in nodes]
    for job_id, more in plan.grown.items():
        held[job_id] += list(more.nodes)
    for start in plan.starts:
        held[start.job_id] = list(start.nodes)
    for job_id, nodes in held.items():
        job = jobs.get(job_id)
        if job is not None and job.elastic_signal:
            assert job.min_nodes <= len(nodes) <= job.max_nodes, (job_id, nodes)
            assert job.job_id in plan.shrunk or not job.nodes or nodes[0] == job.nodes[0]
        assert len(nodes) == len(set(nodes))
    owners: dict[str, list[int]] = {}
    for job_id, nodes in held.items():
        for name in nodes:
            owners.setdefault(name, []).append(job_id)
    exclusive = {j.job_id for j in jobs.values() if j.exclusive}
    for name, who in owners.items():
        # Every job here takes whole 4-CPU nodes: one job a node, whatever its kind;
        # a victim preempted in this pass has left (its preemptor starts later).
        assert len(who) == 1 or not exclusive & set(who), (name, who)
        assert len(who) == 1, (name, who)
