"""Elastic jobs in the scheduling core (issue 18, point 3): when one grows, and how
pressure takes its nodes above its minimum first (``controller/core/elastic.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pytest

from controller.core import BackfillParams, schedule
from controller.core.limits import Gate
from controller.core.plan import Plan
from controller.core.priority import Ranking
from controller.core.snapshot import Elastic, NodeView, Running, Snapshot
from controller.jobstate import Reason
from controller.model import Job
from tests.unit.scenario import NOW, cluster, job, node, partition, running

PARTS = [partition("batch", "n[1-6]"), partition("high", "n[1-6]", tier=2)]
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
    base = cluster(nodes, PARTS).snapshot(
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
