"""Backfill: scenarios with hand-worked timelines, and its promises as properties.

Times: ``NOW`` is a multiple of 60 plus 40 s (see scenario.NOW), so with the
default 60 s resolution a release at ``NOW + 600`` is planned at the next
whole minute, ``NOW + 620``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core import BackfillParams, Expected, Plan, Running, Snapshot, schedule
from controller.core.nodeindex import PYTHON_BITMAPS
from controller.jobstate import Reason
from tests.unit.scenario import NOW, cluster, job, node, partition

BF = BackfillParams()
EASY = BackfillParams(easy=True)
MINUTE = 60


def _at(t: int) -> int:
    """``t`` rounded up to the backfill resolution."""
    return -(-t // MINUTE) * MINUTE


# Two 4-CPU nodes; n1 is full until NOW + 600 (its job's time limit).
TWO = cluster([node("n1", used_cpus=4), node("n2")], [partition("batch", "n[1-2]")])
BUSY_N1 = Running(99, ("n1",), (4,), (0,), NOW + 600)


def _plan(pending: list[Any], params: BackfillParams | None = BF) -> Plan:
    return schedule(TWO.snapshot(pending, running=[BUSY_N1]), NOW, params)


def _started(plan: Plan) -> list[int]:
    return [s.job_id for s in plan.starts]


def test_a_short_job_starts_ahead_without_delaying_the_top_job() -> None:
    top = job(1, num_tasks=8, time_limit=60)  # both nodes: waits for n1
    short = job(2, num_tasks=4, time_limit=5)  # n2 for 5 minutes: done before n1 frees
    plan = _plan([top, short])
    assert _started(plan) == [2]
    assert plan.expected[1] == Expected(_at(NOW + 600), "batch", ("n1", "n2"))
    assert plan.reasons[1] is Reason.RESOURCES
    assert 2 not in plan.reasons


def test_a_job_that_would_delay_the_top_job_waits_for_its_turn() -> None:
    top = job(1, num_tasks=8, time_limit=60)
    long = job(2, num_tasks=4, time_limit=20)  # would still hold n2 when top should start
    plan = _plan([top, long])
    assert _started(plan) == []
    assert plan.reasons[2] is Reason.PRIORITY
    # Conservative: it gets its own reservation, after the top job.
    assert plan.expected[2].start_time == _at(NOW + 600) + 60 * MINUTE


def test_without_backfill_the_main_pass_blocks_behind_the_top_job() -> None:
    plan = _plan([job(1, num_tasks=8, time_limit=60), job(2, num_tasks=4, time_limit=5)], None)
    assert _started(plan) == []
    assert plan.expected == {}


def test_easy_reserves_only_for_the_first_waiting_job() -> None:
    pending = [
        job(1, num_tasks=8, time_limit=60),
        job(2, num_tasks=4, time_limit=20),
        job(3, num_tasks=4, time_limit=5),
    ]
    plan = _plan(pending, EASY)
    assert set(plan.expected) == {1}
    assert _started(plan) == [3]


def test_an_unlimited_job_holds_its_reservation_to_the_end_of_the_window() -> None:
    top = job(1, num_tasks=8, time_limit=60)
    forever = job(2, num_tasks=4)  # no limit: it may run past the window
    after = job(3, num_tasks=8, time_limit=5)  # needs both nodes: none free in the window
    plan = _plan([top, forever, after])
    assert _started(plan) == []
    assert plan.expected[2].start_time == _at(NOW + 600) + 60 * MINUTE
    assert 3 not in plan.expected


def test_bf_max_job_test_bounds_the_jobs_tried() -> None:
    pending = [job(1, num_tasks=8, time_limit=60), job(2, num_tasks=4, time_limit=5)]
    plan = _plan(pending, BackfillParams(max_job_test=1))
    assert _started(plan) == []
    assert set(plan.expected) == {1}


def test_bf_max_job_user_skips_a_users_later_jobs() -> None:
    pending = [job(1, num_tasks=8, time_limit=60), job(2, num_tasks=4, time_limit=5)]
    plan = _plan(pending, BackfillParams(max_job_user=1))
    assert _started(plan) == []


def test_jobs_started_this_pass_count_as_busy_until_their_limit() -> None:
    # n2 is free now: job 1 takes it for 30 minutes in the main pass; job 2 needs
    # both nodes and may start only once both job 1 and n1's job are done.
    pending = [job(1, num_tasks=4, time_limit=30), job(2, num_tasks=8, time_limit=10)]
    plan = _plan(pending)
    assert _started(plan) == [1]
    assert plan.expected[2].start_time == _at(NOW + 30 * MINUTE)


def test_array_tasks_backfill_and_the_rest_reserve() -> None:
    top = job(1, num_tasks=8, time_limit=60)
    tasks = job(2, num_tasks=2, time_limit=5, array_job_id=2, array_pending="1-5")
    plan = _plan([top, tasks])
    assert _started(plan) == [2, 2]  # two 2-CPU tasks fill n2 for 5 minutes
    assert plan.reasons[2] is Reason.PRIORITY
    assert 2 in plan.expected


# ---------------------------------------------------------------- properties


@st.composite
def _workload(draw: st.DrawFn) -> Snapshot:
    """One partition, a few nodes partly busy until random limits, random jobs."""
    count = draw(st.integers(1, 4))
    names = [f"n{i}" for i in range(1, count + 1)]
    nodes, running = [], []
    for i, name in enumerate(names):
        used = draw(st.sampled_from([0, 0, 2, 4]))
        nodes.append(node(name, used_cpus=used))
        if used:
            end = NOW + draw(st.integers(1, 180)) * MINUTE
            running.append(Running(900 + i, (name,), (used,), (0,), end))
    pending = [
        job(
            j,
            num_tasks=draw(st.integers(1, 4 * count)),
            time_limit=draw(st.sampled_from([-1, 5, 30, 90, 300])),
            exclusive=draw(st.booleans()),
            admin_priority=draw(st.integers(1, 3)),
        )
        for j in range(1, draw(st.integers(1, 7)) + 1)
    ]
    return cluster(nodes, [partition("batch", names)]).snapshot(pending, running=running)


def _outcome(plan: Plan, job_id: int) -> tuple[object, ...]:
    starts = [s for s in plan.starts if s.job_id == job_id]
    if starts:
        return ("now", starts[0].nodes)
    expected = plan.expected.get(job_id)
    return ("later", expected.start_time, expected.nodes) if expected else ("unknown",)


@pytest.mark.parametrize("params", [BF, EASY], ids=["conservative", "easy"])
@settings(max_examples=200, deadline=None)
@given(snap=_workload())
def test_lower_priority_jobs_never_change_what_a_higher_one_gets(
    params: BackfillParams, snap: Snapshot
) -> None:
    """Each job's start (now or expected) is what it is with only the jobs ahead of it."""
    full = schedule(snap, NOW, params)
    ordered = sorted(snap.pending, key=lambda j: (-snap.ranking.of(j), j.submit_time, j.job_id))
    for i, j in enumerate(ordered):
        alone = Snapshot(snap.nodes, snap.partitions, tuple(ordered[: i + 1]), {}, {}, snap.running)
        assert _outcome(full, j.job_id) == _outcome(schedule(alone, NOW, params), j.job_id)


@settings(max_examples=200, deadline=None)
@given(snap=_workload())
def test_no_cpu_is_promised_twice(snap: Snapshot) -> None:
    """Starts fit the free CPUs; reservations never share a node at the same time."""
    plan = schedule(snap, NOW, BF)
    used: dict[str, int] = {}
    for start in plan.starts:
        for name, cpus in zip(start.nodes, start.cpus, strict=True):
            used[name] = used.get(name, 0) + cpus
    assert all(used[n] <= snap.nodes[n].free_cpus for n in used)
    pending = {j.job_id: j for j in snap.pending}
    spans = []
    for job_id, exp in plan.expected.items():
        limit = pending[job_id].time_limit
        end = _at(exp.start_time + limit * MINUTE) if limit > 0 else NOW + BF.window
        spans.append((exp.start_time, end, set(exp.nodes)))
    for i, (b1, e1, n1) in enumerate(spans):
        for b2, e2, n2 in spans[i + 1 :]:
            assert not (b1 < e2 and b2 < e1 and n1 & n2)


def test_the_main_pass_tries_default_queue_depth_jobs_and_backfill_the_rest() -> None:
    pending = [job(i, num_tasks=1, time_limit=5) for i in range(1, 5)]
    main_only = schedule(TWO.snapshot(pending, running=[BUSY_N1]), NOW, None, depth=2)
    assert _started(main_only) == [1, 2]
    with_backfill = schedule(TWO.snapshot(pending, running=[BUSY_N1]), NOW, BF, depth=2)
    assert _started(with_backfill) == [1, 2, 3, 4]


@pytest.mark.parametrize("params", [BF, EASY, None], ids=["conservative", "easy", "main"])
@settings(max_examples=100, deadline=None)
@given(snap=_workload())
def test_the_c_and_python_bitmaps_make_the_same_plan(
    params: BackfillParams | None, snap: Snapshot
) -> None:
    """Candidate scans decide alike over the C bitmap and its pure-Python twin."""
    assert schedule(snap, NOW, params) == schedule(snap, NOW, params, bitmaps=PYTHON_BITMAPS)


def test_nodes_are_chosen_in_configuration_order_whatever_the_partition_lists() -> None:
    """As Slurm's node bitmap: Weight, then the order of the NodeName lines."""
    nodes = [node("n1"), node("n2"), node("n3", weight=0)]
    snap = cluster(nodes, [partition("batch", ["n2", "n3", "n1"])]).snapshot(
        [job(1, num_tasks=4), job(2, num_tasks=4), job(3, num_tasks=4)]
    )
    for params in (None, BF):
        assert [s.nodes for s in schedule(snap, NOW, params).starts] == [("n3",), ("n1",), ("n2",)]


def test_a_job_waiting_for_gpus_reserves_them_from_when_running_jobs_give_them_back() -> None:
    gpus = cluster(
        [node("n1", used_cpus=1, gres="gpu:a100:0")], [partition("batch", "n1")]
    )  # both GPUs held by job 99 until its limit
    holder = Running(99, ("n1",), (1,), (0,), NOW + 600, ((("gpu", "a100", 2),),))
    pending = [
        job(1, gres="gpu:2", time_limit=60),
        job(2, time_limit=5),  # CPUs only, done before job 1's reservation
        job(3, gres="gpu:1", time_limit=5),
    ]
    plan = schedule(gpus.snapshot(pending, running=[holder]), NOW, BF)
    assert _started(plan) == [2]
    assert plan.expected[1] == Expected(_at(NOW + 600), "batch", ("n1",))
    assert plan.expected[3].start_time == _at(NOW + 600) + 60 * MINUTE  # after job 1, not before


# ---------------------------------------------------------------- OverSubscribe in the pictures

# n1 (4 CPUs) runs two jobs of "shared" (FORCE:2) that share all its CPUs, one
# ending at NOW + 600, the other at NOW + 1800.
SHARING = cluster(
    [node("n1", shared=(("shared", 8, 4),))],
    [partition("shared", "n1", oversubscribe="FORCE:2"), partition("batch", "n1")],
)
SHARING_JOBS = [
    Running(98, ("n1",), (4,), (0,), NOW + 600, partition="shared", share=2),
    Running(99, ("n1",), (4,), (0,), NOW + 1800, partition="shared", share=2),
]


def test_a_sharing_job_that_ends_frees_no_cpu_another_still_uses() -> None:
    # A whole-node job of "shared" waits for both: the first end leaves the CPUs busy.
    plan = schedule(
        SHARING.snapshot([job(1, exclusive=True, partitions=("shared",))], running=SHARING_JOBS),
        NOW,
        BF,
    )
    assert plan.expected[1].start_time == _at(NOW + 1800)


def test_a_job_that_keeps_its_cpus_reserves_for_when_another_partitions_sharing_jobs_end() -> None:
    plan = schedule(
        SHARING.snapshot([job(1, num_tasks=2, partitions=("batch",))], running=SHARING_JOBS),
        NOW,
        BF,
    )
    assert plan.expected[1].start_time == _at(NOW + 1800)
