"""Licenses through ``schedule``: the main pass starts only what the free licenses
allow, a job short of them waits with reason Licenses without blocking its partition,
and backfill plans licenses over time so that no job behind delays one ahead."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core import BackfillParams, Expected, Plan, Running, Snapshot, schedule
from controller.core.licensebook import LicenseBook, needs
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
    plain = job(3, num_tasks=1)  # behind a waiting job: the main pass holds it back
    plan = _plan([first, second, plain], params=None)
    assert _started(plan) == [1]
    assert plan.reasons[2] is Reason.LICENSES
    assert plan.reasons[3] is Reason.PRIORITY
    # Backfill starts it: the first job has no time limit, so the second has no plan
    # that it could delay.
    assert _started(_plan([first, second, plain])) == [1, 3]


def test_a_job_behind_a_license_wait_starts_only_if_it_delays_nothing() -> None:
    holder = Running(99, ("n1",), (1,), (0,), NOW + 600, licenses="fluent:2")
    wide = job(1, num_tasks=16, time_limit=60, licenses="fluent:2")  # waits for fluent
    long = job(2, num_tasks=4, time_limit=30)  # would hold n2 when the wide job starts
    short = job(3, num_tasks=4, time_limit=5)  # done before
    plan = _plan([wide, long, short], [holder])
    assert _started(plan) == [3]
    assert plan.expected[1] == Expected(_at(NOW + 600), "batch", ("n1", "n2", "n3", "n4"))


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


# ---------------------------------------------------------------- properties


@st.composite
def _workload(draw: st.DrawFn) -> Snapshot:
    """Three fluent licenses; a few nodes, partly busy until random limits, some of their
    jobs holding licenses; random jobs, some asking for licenses."""
    count = draw(st.integers(1, 3))
    names = [f"n{i}" for i in range(1, count + 1)]
    nodes, running = [], []
    for i, name in enumerate(names):
        used = draw(st.sampled_from([0, 2, 4]))
        nodes.append(node(name, used_cpus=used))
        if used:
            end = NOW + draw(st.integers(1, 180)) * MINUTE
            held = draw(st.sampled_from(["", "", "fluent:1", "fluent:2"]))
            holding = sum(n for r in running for _, n in needs(r.licenses))
            if holding + sum(n for _, n in needs(held)) > 3:
                held = ""  # running jobs hold at most the three there are
            running.append(Running(900 + i, (name,), (used,), (0,), end, licenses=held))
    pending = [
        job(
            j,
            num_tasks=draw(st.integers(1, 4 * count)),
            time_limit=draw(st.sampled_from([-1, 5, 30, 90])),
            admin_priority=draw(st.integers(1, 3)),
            licenses=draw(st.sampled_from(["", "fluent:1", "fluent:2", "fluent:3"])),
        )
        for j in range(1, draw(st.integers(1, 6)) + 1)
    ]
    snap = cluster(nodes, [partition("batch", names)]).snapshot(pending, running=running)
    return replace(snap, licenses={"fluent": 3})


def _outcome(plan: Plan, job_id: int) -> tuple[object, ...]:
    starts = [s for s in plan.starts if s.job_id == job_id]
    if starts:
        return ("now", starts[0].nodes)
    expected = plan.expected.get(job_id)
    return ("later", expected.start_time, expected.nodes) if expected else ("unknown",)


@settings(max_examples=200, deadline=None)
@given(snap=_workload())
def test_jobs_behind_never_change_what_a_job_ahead_gets(snap: Snapshot) -> None:
    """Each job's start (now or expected) is what it is with only the jobs ahead of it."""
    full = schedule(snap, NOW, BF)
    ordered = sorted(snap.pending, key=lambda j: (-snap.ranking.of(j), j.submit_time, j.job_id))
    for i, j in enumerate(ordered):
        alone = replace(snap, pending=tuple(ordered[: i + 1]))
        assert _outcome(full, j.job_id) == _outcome(schedule(alone, NOW, BF), j.job_id)


@settings(max_examples=200, deadline=None)
@given(snap=_workload())
def test_no_license_is_promised_twice(snap: Snapshot) -> None:
    """At no moment do running jobs, starts and planned starts hold more than the total."""
    plan = schedule(snap, NOW, BF)
    pending = {j.job_id: j for j in snap.pending}
    book = LicenseBook({})
    for r in snap.running:
        book.hold(r.job_id, needs(r.licenses), NOW, r.end_time)
    for s in plan.starts:
        limit = pending[s.job_id].time_limit
        book.hold(
            s.job_id,
            needs(pending[s.job_id].licenses),
            NOW,
            NOW + limit * MINUTE if limit > 0 else None,
        )
    for job_id, exp in plan.expected.items():
        limit = pending[job_id].time_limit
        end = exp.start_time + limit * MINUTE if limit > 0 else None
        book.hold(job_id, needs(pending[job_id].licenses), exp.start_time, end)
    moments = {NOW} | {h.begin for h in book.holds}
    assert all(book.used(t).get("fluent", 0) <= 3 for t in moments)
