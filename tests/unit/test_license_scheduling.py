"""Licenses through ``schedule``: the main pass starts only what the free licenses
allow, a job short of them waits with reason Licenses without blocking its partition,
and backfill plans licenses over time so that no job behind delays one ahead."""

from __future__ import annotations

from dataclasses import replace

from controller.core import BackfillParams, Expected, Plan, Running, schedule
from controller.core.licensebook import LicenseBook
from controller.jobstate import Reason
from controller.model import Job
from tests.unit.scenario import NOW, Cluster, cluster, job, node, partition

BF = BackfillParams()
MINUTE = 60
FOUR = cluster([node(f"n{i}") for i in range(1, 5)], [partition("batch", "n[1-4]")])


def _at(t: int) -> int:
    return -(-t // MINUTE) * MINUTE


#: n1-n3 full until NOW + 600; n4 idle.
BUSY = cluster(
    [*(node(f"n{i}", used_cpus=4) for i in (1, 2, 3)), node("n4")],
    [partition("batch", "n[1-4]")],
)


def _plan(
    pending: list[Job],
    running: list[Running] = [],  # noqa: B006 (never mutated)
    params: BackfillParams | None = BF,
    where: Cluster = FOUR,
) -> Plan:
    snap = where.snapshot(pending, running=running)
    snap = replace(snap, licenses={"fluent": 3})
    return schedule(snap, NOW, params)


def _started(plan: Plan) -> list[int]:
    return [s.job_id for s in plan.starts]


def test_the_main_pass_starts_only_what_the_free_licenses_allow() -> None:
    first = job(1, num_tasks=1, licenses="fluent:2")
    second = job(2, num_tasks=1, licenses="fluent:2")
    plain = job(3, num_tasks=1)  # asks for no license: starts although a job ahead waits
    plan = _plan([first, second, plain], params=None)
    assert _started(plan) == [1, 3]
    assert plan.reasons[2] is Reason.LICENSES


def test_licenses_held_by_running_jobs_are_not_free() -> None:
    holder = Running(99, ("n1",), (1,), (0,), NOW + 600, licenses="fluent:2")
    plan = _plan([job(1, num_tasks=1, licenses="fluent:2")], [holder], params=None)
    assert _started(plan) == []
    assert plan.reasons[1] is Reason.LICENSES
    fits = _plan([job(1, num_tasks=1, licenses="fluent:1")], [holder], params=None)
    assert _started(fits) == [1]


def test_a_job_behind_may_not_take_the_licenses_a_waiting_job_ahead_asks_for() -> None:
    holder = Running(99, ("n1",), (1,), (0,), 0, licenses="fluent:2")  # no time limit
    top = job(1, num_tasks=1, licenses="fluent:3")  # waits for the holder's two
    small = job(2, num_tasks=1, licenses="fluent:1")  # one is free, but the top job waits
    plan = _plan([top, small], [holder], params=None)
    assert _started(plan) == []
    assert plan.reasons[1] is Reason.LICENSES
    assert plan.reasons[2] is Reason.LICENSES


def test_backfill_plans_a_license_limited_job_when_its_licenses_are_released() -> None:
    holder = Running(99, ("n1",), (1,), (0,), NOW + 600, licenses="fluent:2")
    top = job(1, num_tasks=1, time_limit=60, licenses="fluent:3")
    plan = _plan([top], [holder])
    assert plan.reasons[1] is Reason.LICENSES
    assert plan.expected[1].start_time == _at(NOW + 600)


def test_backfill_starts_a_job_that_returns_the_licenses_before_the_top_job_needs_them() -> None:
    holder = Running(99, ("n1",), (1,), (0,), NOW + 600, licenses="fluent:2")
    top = job(1, num_tasks=1, time_limit=60, licenses="fluent:3")
    short = job(2, num_tasks=1, time_limit=5, licenses="fluent:1")  # done before NOW + 600
    long = job(3, num_tasks=1, time_limit=20, licenses="fluent:1")  # would delay the top job
    plan = _plan([top, short, long], [holder])
    assert _started(plan) == [2]
    assert plan.expected[1].start_time == _at(NOW + 600)
    assert plan.reasons[3] is Reason.LICENSES
    # Its own plan comes after the top job's: the licenses are the top job's until then.
    assert plan.expected[3].start_time >= _at(NOW + 600) + 60 * MINUTE


def test_a_job_waiting_for_nodes_keeps_its_planned_licenses_from_jobs_behind() -> None:
    busy = [Running(90 + i, (f"n{i}",), (4,), (0,), NOW + 600) for i in (1, 2, 3)]
    wide = job(1, num_tasks=16, time_limit=60, licenses="fluent:3")  # waits for n1-n3
    small = job(2, num_tasks=1, time_limit=30, licenses="fluent:1")  # fits on n4 now
    plan = _plan([wide, small], busy, where=BUSY)
    assert plan.reasons[1] is Reason.RESOURCES
    assert plan.expected[1] == Expected(_at(NOW + 600), "batch", ("n1", "n2", "n3", "n4"))
    assert _started(plan) == []  # 30 minutes of one license would delay the wide job
    short = job(2, num_tasks=1, time_limit=5, licenses="fluent:1")
    assert _started(_plan([wide, short], busy, where=BUSY)) == [2]


def test_a_suspended_or_unlimited_holder_keeps_its_licenses_for_ever() -> None:
    holder = Running(99, ("n1",), (1,), (0,), 0, licenses="fluent:3")
    plan = _plan([job(1, num_tasks=1, time_limit=60, licenses="fluent:1")], [holder])
    assert _started(plan) == []
    assert 1 not in plan.expected
    assert plan.reasons[1] is Reason.LICENSES


def test_the_book_counts_the_most_held_at_any_moment_of_an_interval() -> None:
    book = LicenseBook({"fluent": 3})
    book.hold(1, (("fluent", 2),), 100, 200)
    book.hold(2, (("fluent", 1),), 150, None)
    assert book.fits((("fluent", 1),), 0, 100)
    assert book.fits((("fluent", 1),), 0, 150)
    assert book.short((("fluent", 1),), 0, 160) == "fluent"
    assert book.fits((("fluent", 2),), 200, None)
    assert book.short((("ansys", 1),), 0, 10) == "ansys"  # not configured: never fits
    book.until(1, 120)
    assert book.used(110) == {"fluent": 2}
    assert book.used(160) == {"fluent": 1}
