"""``corral why``'s core (controller/core/why.py): scenarios worked by hand.

Each suggestion is checked against a plan of the whole queue with the job
changed as the suggestion says, so "would start sooner" is the scheduler's
word, not the module's. Times: ``NOW`` is 40 s past a minute (scenario.NOW),
so a release at ``NOW + 600`` is planned at ``NOW + 620``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields, replace

import pytest

from controller.core import BackfillParams, Plan, Running, Snapshot, schedule
from controller.core.snapshot import ResvView
from controller.core.why import Why, explain
from controller.jobstate import Reason
from controller.model import Job
from tests.unit.scenario import NOW, cluster, job, node, partition

BF = BackfillParams()


def _at(t: int) -> int:
    return -(-t // 60) * 60


def _start(plan: Plan, job_id: int) -> int | None:
    if any(s.job_id == job_id for s in plan.starts):
        return plan.now
    exp = plan.expected.get(job_id)
    return exp.start_time if exp else None


def _whole_queue_start(snap: Snapshot, changed: Job) -> int | None:
    """Where a plan of the whole queue, with ``changed`` in place of its job, starts it."""
    pending = tuple(changed if j.job_id == changed.job_id else j for j in snap.pending)
    return _start(schedule(replace(snap, pending=pending), NOW, BF), changed.job_id)


def _why(snap: Snapshot, job_id: int, others: tuple[str, ...] = ()) -> Why:
    return explain(snap, NOW, job_id, BF, schedule(snap, NOW, BF), others)


# n1 is full until NOW + 600 (bob's job 99, priority 50); n2 is free.
TWO = cluster([node("n1", used_cpus=4), node("n2")], [partition("batch", "n[1-2]")])
BUSY_N1 = Running(99, ("n1",), (4,), (0,), NOW + 600, priority=50, user="bob", start_time=NOW)


def test_blocked_by_a_running_job_and_fewer_nodes_start_now() -> None:
    wide = job(1, num_tasks=2, min_nodes=2, nodes_given=True, time_limit=60)
    snap = TWO.snapshot([wide], running=[BUSY_N1])
    why = _why(snap, 1)
    assert (why.reason, why.partition, why.position, why.queued) == (
        Reason.RESOURCES,
        "batch",
        1,
        1,
    )
    assert (why.needs.nodes, why.needs.cpus_per_node, why.needs.minutes) == (2, 1, 60)
    assert why.free_nodes == ("n2",)
    assert [(b.job_id, b.user, b.nodes, b.end, b.running) for b in why.blockers] == [
        (99, "bob", ("n1",), NOW + 600, True)
    ]
    assert (why.expected_start, why.expected_nodes) == (_at(NOW + 600), ("n1", "n2"))
    assert [(s.option, s.start, s.nodes) for s in why.suggestions] == [("--nodes=1", NOW, ("n2",))]
    one = replace(wide, min_nodes=1, num_tasks=1)
    assert _whole_queue_start(snap, one) == NOW


def test_blocked_by_a_higher_priority_job_and_a_shorter_limit_backfills() -> None:
    top = job(1, num_tasks=8, time_limit=60, calc_priority=1000, user="carol")
    mine = job(2, num_tasks=4, time_limit=20, calc_priority=10)
    snap = TWO.snapshot([top, mine], running=[BUSY_N1])
    why = _why(snap, 2)
    assert why.reason is Reason.PRIORITY
    assert (why.position, why.queued) == (2, 2)
    assert why.expected_start == _at(NOW + 600) + 3600
    planned = [b for b in why.blockers if not b.running]
    assert [(b.job_id, b.user, b.priority, b.start) for b in planned] == [
        (1, "carol", 1000, _at(NOW + 600))
    ]
    assert [b.job_id for b in why.blockers if b.running] == [99]
    assert [s.option for s in why.suggestions] == ["--time=10"]
    assert why.suggestions[0].start == NOW
    assert _whole_queue_start(snap, replace(mine, time_limit=10)) == NOW
    # The job ahead keeps its start: a suggestion never comes at its cost.
    assert _start(
        schedule(replace(snap, pending=(top, replace(mine, time_limit=10))), NOW, BF), 1
    ) == (_at(NOW + 600))


def test_blocked_by_a_reservation_and_a_run_that_ends_before_it_starts_now() -> None:
    idle = cluster([node("n1"), node("n2")], [partition("batch", "n[1-2]")])
    maint = ResvView("maint", frozenset({"n1", "n2"}), NOW + 300, NOW + 3900)
    mine = job(1, num_tasks=1, time_limit=60)
    snap = replace(idle.snapshot([mine]), reservations=(maint,))
    why = _why(snap, 1)
    assert why.reason is Reason.RESOURCES
    assert [(r.name, r.nodes, r.start, r.end) for r in why.reservations] == [
        ("maint", ("n1", "n2"), NOW + 300, NOW + 3900)
    ]
    assert why.expected_start >= NOW + 3900
    assert why.free_nodes == ("n1", "n2")  # free now; the reservation is what stops it
    options = {s.option: s.start for s in why.suggestions}
    assert options["--time=4"] == NOW
    assert _whole_queue_start(snap, replace(mine, time_limit=4)) == NOW
    assert _whole_queue_start(snap, replace(mine, time_limit=30)) != NOW


def test_a_partition_limit_suggests_its_max_time_and_another_partition() -> None:
    parts = [partition("short", "n1", max_time=30), partition("long", "n2")]
    two = cluster([node("n1"), node("n2")], parts)
    mine = job(1, partitions=("short",), time_limit=60)
    snap = two.snapshot([mine])
    why = _why(snap, 1, others=("long", "short", "gone"))
    assert why.reason is Reason.PARTITION_TIME_LIMIT
    assert (why.partition, why.max_time, why.needs.minutes) == ("short", 30, 60)
    assert why.expected_start == 0 and why.blockers == ()
    assert [(s.option, s.start, s.nodes) for s in why.suggestions] == [
        ("--time=30", NOW, ("n1",)),
        ("-p long", NOW, ("n2",)),
    ]
    assert _whole_queue_start(snap, replace(mine, time_limit=30)) == NOW
    assert _whole_queue_start(snap, replace(mine, partitions=("long",))) == NOW


def test_no_suggestion_that_does_not_start_sooner() -> None:
    both_busy = cluster([node("n1", used_cpus=4), node("n2", used_cpus=4)], TWO.partitions)
    running = [BUSY_N1, Running(98, ("n2",), (4,), (0,), NOW + 900, user="dan")]
    wide = job(1, num_tasks=2, min_nodes=2, nodes_given=True, time_limit=60)
    snap = both_busy.snapshot([wide], running=running)
    why = _why(snap, 1)
    assert why.free_nodes == ()
    # One node frees at NOW + 600: --nodes=1 starts then, sooner than both at NOW + 900.
    assert [(s.option, s.start) for s in why.suggestions] == [("--nodes=1", _at(NOW + 600))]
    assert [b.job_id for b in why.blockers] == [99, 98]
    # A shorter limit helps nothing here, so none is offered.
    assert not any(s.option.startswith("--time") for s in why.suggestions)


def test_held_jobs_get_their_reason_and_no_suggestions() -> None:
    held = job(1, held="user", num_tasks=8, time_limit=60)
    why = _why(TWO.snapshot([held], running=[BUSY_N1]), 1)
    assert why.reason is Reason.JOB_HELD_USER
    assert why.suggestions == ()


def test_a_job_that_starts_now_waits_for_nobody() -> None:
    why = _why(TWO.snapshot([job(1, num_tasks=4, time_limit=5)], running=[BUSY_N1]), 1)
    assert (why.reason, why.expected_start, why.expected_nodes) == (Reason.NONE, NOW, ("n2",))
    assert why.blockers == () and why.suggestions == ()


def test_the_answer_is_the_plans_expected_start_with_or_without_the_plan() -> None:
    pending = [
        job(1, num_tasks=8, time_limit=60, calc_priority=1000),
        job(2, num_tasks=4, time_limit=20, calc_priority=10),
        job(3, num_tasks=8, time_limit=30, calc_priority=5),
    ]
    snap = TWO.snapshot(pending, running=[BUSY_N1])
    plan = schedule(snap, NOW, BF)
    for job_id in (1, 2, 3):
        given = explain(snap, NOW, job_id, BF, plan)
        computed = explain(snap, NOW, job_id, BF)
        assert given.expected_start == plan.expected[job_id].start_time
        assert given == computed


def _contents(plan: Plan) -> dict[str, object]:
    """Every field of ``plan``, its read-only maps copied out."""
    return {
        f.name: dict(v) if isinstance(v := getattr(plan, f.name), Mapping) else v
        for f in fields(plan)
    }


def test_explaining_changes_neither_the_snapshot_nor_the_plan() -> None:
    pending = [job(1, num_tasks=8, time_limit=60, calc_priority=1000), job(2, num_tasks=4)]
    snap = replace(
        TWO.snapshot(pending, running=[BUSY_N1]),
        reservations=(ResvView("r", frozenset({"n2"}), NOW + 60, NOW + 120),),
    )
    plan = schedule(snap, NOW, BF)
    before_snap, before_plan = copy.deepcopy(snap), _contents(plan)
    nodes_before = dict(snap.nodes)
    explain(snap, NOW, 2, BF, plan, others=("batch",))
    assert snap == before_snap and _contents(plan) == before_plan
    assert dict(snap.nodes) == nodes_before


def test_a_job_not_pending_in_the_snapshot_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        explain(TWO.snapshot([job(1)]), NOW, 7, BF)
