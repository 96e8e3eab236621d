"""csrc/onecpu.c (controller/sim/onecpu.py) decides as the Python core, pass by pass.

Each example builds a cluster of one-CPU nodes the way a replay does (jobs started
at earlier times, so their ends fall before, at, after and past the window, and a
limit of 0 gives a job started at 0 no end the core knows), then asks both for the
pass at ``now`` over a queue of alike and different jobs: the same jobs start on the
same nodes, in the same order. The replay tests (test_sim_backfill.py) compare whole
traces the same way.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.core import BackfillParams, Plan, schedule
from controller.core.plan import Draft, Start
from controller.sim import replay
from controller.sim.onecpu import job_test_limit, one_cpu_pass
from controller.sim.replay import SimCluster
from controller.sim.swf import Record
from tests.unit.test_sim_backfill import RECORD, random_trace


def record(number: int, submit: int, procs: int, limit: int) -> Record:
    return Record(number - 1, number, number, submit, -1, limit or 1, procs, procs, limit, 1)


def started(plan: Plan) -> list[tuple[int, tuple[str, ...]]]:
    return [(s.job_id, tuple(sorted(s.nodes, key=lambda n: int(n[1:])))) for s in plan.starts]


NOW = 4000
RUNNING = st.lists(
    st.tuples(
        st.just(0) | st.integers(NOW - 4000, NOW),
        st.integers(1, 3),
        st.sampled_from([0, 60, 61, 600, 1800, 5000, 90000]),
    ),
    max_size=10,
)  # (start time, processors, limit in seconds) of jobs running at ``NOW`` and after
PENDING = st.lists(
    st.tuples(st.integers(1, 5), st.sampled_from([0, 60, 120, 300, 1800, 7200])),
    min_size=1,
    max_size=16,
)  # (processors, limit in seconds)
PARAMS = st.builds(
    BackfillParams,
    window=st.sampled_from([600, 3600, 86400]),
    resolution=st.sampled_from([1, 7, 60]),
    max_job_test=st.integers(1, 12),
    max_job_user=st.integers(0, 5),
    easy=st.booleans(),
)


def cluster(
    nodes: int, running: list[tuple[int, int, int]], pending: list[tuple[int, int]]
) -> SimCluster:
    """A replay's cluster: ``running`` started at their times on the first free nodes,
    ``pending`` submitted after them."""
    records = [record(i, 0, procs, limit) for i, (_, procs, limit) in enumerate(running, 1)]
    first = len(records) + 1
    records += [record(first + i, 0, procs, limit) for i, (procs, limit) in enumerate(pending)]
    sim = SimCluster(nodes, 1, records)
    for job_id, (begin, procs, _) in enumerate(running, 1):
        free = [n for n, v in sim.nodes.items() if v.free_cpus][:procs]
        sim.submit(job_id)
        if len(free) < procs:
            sim.pending.pop(job_id)
            continue
        plan = Draft(now=begin)
        plan.starts.append(Start(job_id, "batch", tuple(free), (1,) * procs, (0,) * procs))
        sim.commit(plan.freeze())
    for job_id in range(first, len(records) + 1):
        sim.submit(job_id)
    return sim


@settings(max_examples=400, deadline=None)
@given(
    nodes=st.integers(1, 12),
    running=RUNNING,
    pending=PENDING,
    now=st.integers(NOW, NOW + 900),
    params=st.none() | PARAMS,
)
def test_one_cpu_pass_decides_as_the_core(
    nodes: int,
    running: list[tuple[int, int, int]],
    pending: list[tuple[int, int]],
    now: int,
    params: BackfillParams | None,
) -> None:
    sim = cluster(nodes, running, pending)
    jobs = sim.queue()
    one = sim.one_cpu()
    assert one is not None
    core = schedule(sim.snapshot(jobs), now, params)
    assert started(one_cpu_pass(*one, jobs, now, params)) == started(core)


def test_a_pass_starts_behind_a_head_without_delaying_it() -> None:
    """Four nodes, one busy to 600: the head (4 CPUs) is planned at 600, a job of 3
    CPUs for 20 minutes would delay it and waits, one of 2 CPUs for 5 minutes starts."""
    sim = cluster(4, [(0, 1, 600)], [(4, 60), (3, 1200), (2, 300)])
    one = sim.one_cpu()
    assert one is not None
    plan = one_cpu_pass(*one, sim.queue(), 0, BackfillParams(resolution=1))
    assert started(plan) == [(4, ("n2", "n3"))]


def test_a_resolution_below_a_second_is_refused() -> None:
    sim = cluster(2, [], [(1, 60)])
    one = sim.one_cpu()
    assert one is not None
    with pytest.raises(ValueError, match="bf_resolution must be at least 1"):
        one_cpu_pass(*one, sim.queue(), 0, BackfillParams(resolution=0))


@pytest.mark.parametrize("limit", [1, 5])
def test_job_test_limit_counts_the_jobs_of_one_user(limit: int) -> None:
    assert job_test_limit(BackfillParams(max_job_test=3, max_job_user=limit)) == min(3, limit)
    assert job_test_limit(BackfillParams(max_job_test=3)) == 3


@settings(max_examples=120, deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=60),
    nodes=st.integers(2, 16),
    name=st.sampled_from(["easy", "conservative"]),
    params=PARAMS,
)
def test_replays_decide_as_the_core(
    records: list[tuple[int, int, int, int]], nodes: int, name: str, params: BackfillParams
) -> None:
    """Whole random replays, where queues build up and drain: every start as the
    controller's way (the Python core, every job and node at every event)."""
    assume(any(procs <= nodes for *_, procs in records))
    trace = random_trace(records)
    fast = replay(trace, nodes, 1, name, params=params)
    assert fast.jobs == replay(trace, nodes, 1, name, whole_queue=True, params=params).jobs
