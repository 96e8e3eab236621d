"""corral sim with backfill: the shown-jobs fast path, SchedulerParameters, properties,
and agreement with textbook EASY (tests/unit/textbook_easy.py).

The fast path (``policy.Backfilling``) shows the core only the jobs that can
change a start; every test here compares it job by job with the controller's
way (``whole_queue=True``: every pending job and node at every event).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from controller.core import BackfillParams, Plan
from controller.model import Job
from controller.sim import SimError, Trace, cluster_shape, policy, read, replay
from controller.sim.params import backfill_params
from controller.sim.replay import admit
from controller.sim.swf import parse
from tests.unit.textbook_easy import easy

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("CORRAL_TRACES", ROOT.parent / "shared" / "traces"))
LUBLIN = TRACES / "lublin_256.swf.gz"
HPC2N = TRACES / "HPC2N-2002-2.2-cln.swf.gz"
CTC_SP2 = TRACES / "CTC-SP2-1996-3.1-cln.swf.gz"
needs_traces = pytest.mark.skipif(not LUBLIN.exists(), reason="no traces in ../shared/traces")

#: Textbook EASY's conditions (docs/sim.md): Slurm's largest bf_window and
#: bf_max_job_test, a one-second resolution, one reservation per partition.
TEXTBOOK = BackfillParams(window=43200 * 60, resolution=1, max_job_test=1_000_000, easy=True)
PARAMS = st.builds(
    BackfillParams,
    window=st.sampled_from([600, 86400]),
    resolution=st.sampled_from([1, 60]),
    max_job_test=st.integers(1, 6),
    max_job_user=st.integers(0, 4),
)


def line(number: int, submit: int, run: int, procs: int, req_time: int = -1) -> bytes:
    fields = [number, submit, -1, run, -1, -1, -1, procs, req_time, -1, 1]
    return " ".join(str(f) for f in fields + [-1] * (18 - len(fields))).encode()


def perfect(trace: Trace) -> Trace:
    """``trace`` with perfect estimates: run time and request both its run time in whole
    minutes (Slurm's time limits are minutes, so only those can be exact)."""
    records = tuple(
        dataclasses.replace(r, run=60 * -(-r.run // 60), req_time=60 * -(-r.run // 60))
        for r in trace.records
    )
    return dataclasses.replace(trace, records=records)


RECORD = st.tuples(
    st.integers(0, 300),  # gap since the previous submission
    st.integers(1, 6),  # run time, minutes
    st.integers(0, 3),  # minutes asked beyond it (0: a perfect estimate)
    st.integers(1, 8),  # processors
)


def random_trace(records: list[tuple[int, int, int, int]], exact: bool = False) -> Trace:
    submit = 0
    lines = []
    for number, (gap, run, over, procs) in enumerate(records, 1):
        submit += gap
        lines.append(line(number, submit, 60 * run, procs, 60 * (run + (0 if exact else over))))
    return parse(lines, "random")


# ---------------------------------------------------------------- fast path == the controller's way


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=40),
    nodes=st.integers(1, 4),
    cpus=st.integers(1, 3),
    name=st.sampled_from(["easy", "conservative"]),
    params=PARAMS,
)
def test_fast_backfill_decides_as_the_whole_queue(
    records: list[tuple[int, int, int, int]],
    nodes: int,
    cpus: int,
    name: str,
    params: BackfillParams,
) -> None:
    assume(any(procs <= nodes * cpus for *_, procs in records))
    trace = random_trace(records)
    fast = replay(trace, nodes, cpus, name, params=params)
    slow = replay(trace, nodes, cpus, name, whole_queue=True, params=params)
    assert fast.jobs == slow.jobs
    assert fast.core.count <= slow.core.count


@needs_traces
@pytest.mark.parametrize("params", [None, TEXTBOOK], ids=["defaults", "textbook"])
@pytest.mark.parametrize("name", ["easy", "conservative"])
@pytest.mark.parametrize(
    ("path", "jobs"),
    [(LUBLIN, (0, 200)), (LUBLIN, (5000, 5200)), (HPC2N, (0, 400)), (CTC_SP2, (0, 1000))],
)
def test_fast_backfill_on_real_windows(
    name: str, path: Path, jobs: tuple[int, int], params: BackfillParams | None
) -> None:
    """Real queues (hundreds deep, jobs of 1 to all nodes; CTC-SP2's 338 nodes, where
    the core's placement and timeline shortcuts matter most): the same start and node
    count for every job, with Slurm's default SchedulerParameters and textbook ones.

    Short windows, as the controller's way costs seconds per hundred jobs; the
    longer ones of docs/sim.md were compared the same way."""
    trace = read(str(path), *jobs)
    nodes, cpus = cluster_shape(trace.header, None, None)
    fast = replay(trace, nodes, cpus, name, params=params)
    slow = replay(trace, nodes, cpus, name, whole_queue=True, params=params)
    assert [(j.start, j.nodes) for j in fast.jobs] == [(j.start, j.nodes) for j in slow.jobs]
    assert fast.core.count < slow.core.count


def _shown_per_call(
    monkeypatch: pytest.MonkeyPatch, trace: Trace, nodes: int = 1, cpus: int = 2
) -> list[tuple[int, tuple[int, ...]]]:
    """(now, pending job ids shown) of every pass of an ``easy`` replay (on a node of
    2 CPUs: on nodes of one CPU the plan is counted, ``test_easy_counts_the_plan``),
    after checking its starts against the controller's way."""
    shown: list[tuple[int, tuple[int, ...]]] = []
    real = policy.call_pass

    def spy(
        backfill: BackfillParams | None,
        cluster: policy.Cluster,
        pending: tuple[Job, ...],
        now: int,
        calls: policy.CoreCalls,
        busy: bool = True,
    ) -> Plan:
        shown.append((now, tuple(job.job_id for job in pending)))
        return real(backfill, cluster, pending, now, calls, busy)

    monkeypatch.setattr(policy, "call_pass", spy)
    fast = replay(trace, nodes, cpus, "easy")
    monkeypatch.undo()
    assert fast.jobs == replay(trace, nodes, cpus, "easy", whole_queue=True).jobs
    return shown


#: A head planned at 3600 behind job 1, and jobs 3 and 4 that would run into its plan.
BLOCKED_HEAD = [
    line(1, 0, 3600, 1, 3600),
    line(2, 10, 60, 2, 60),
    line(3, 20, 7200, 1, 7200),
    line(4, 30, 7200, 1, 7200),
    line(5, 40, 60, 2, 60),
    line(6, 50, 60, 1, 60),
]


def test_easy_reuses_a_pass_that_started_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 1 runs to 3600 on one CPU; job 2 (both CPUs) waits, planned at 3600; job 3
    (two hours) cannot start beside it. Nothing starts or ends before job 6: job 4 (two
    hours, no CPU outside the plan) and job 5 (two CPUs, behind) make no call, job 6
    (one minute) is tested alone and starts; its end frees a CPU, and the next pass
    tests them all again."""
    trace = parse(BLOCKED_HEAD, "reuse")
    calls = _shown_per_call(monkeypatch, trace)
    assert calls[:4] == [(0, (1,)), (20, (2, 3)), (50, (2, 6)), (110, (2, 3, 4))]


def test_easy_counts_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same trace on 2 nodes of one CPU: job 2's plan is counted (controller/sim/
    shadow.py), so jobs 3 and 4, which would run into it and need the one node it
    leaves free, are never shown, not even after job 6's end; job 6 ends before the
    plan begins, so the main pass starts it, without the head (no reservation made)."""
    trace = parse(BLOCKED_HEAD, "counted")
    calls = _shown_per_call(monkeypatch, trace, nodes=2, cpus=1)
    assert calls[:3] == [(0, (1,)), (50, (6,)), (3600, (2,))]


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            st.integers(0, 120),  # gap since the previous submission, seconds
            st.integers(1, 400),  # run time, seconds
            st.integers(1, 6),  # limit, minutes: jobs run past it too, as in real traces
            st.integers(1, 10),  # processors
        ),
        min_size=1,
        max_size=60,
    ),
    nodes=st.integers(1, 10),
    params=PARAMS,
)
def test_counted_plan_decides_as_the_whole_queue(
    records: list[tuple[int, int, int, int]], nodes: int, params: BackfillParams
) -> None:
    """``easy`` on nodes of one CPU, where the head's plan is counted and jobs that
    it leaves alone start in the main pass: every start and node count as the
    controller's way, with jobs over their limits and random ``bf_*`` values."""
    assume(any(procs <= nodes for *_, procs in records))
    submit, lines = 0, []
    for number, (gap, run, limit, procs) in enumerate(records, 1):
        submit += gap
        lines.append(line(number, submit, run, procs, 60 * limit))
    trace = parse(lines, "counted")
    fast = replay(trace, nodes, 1, "easy", params=params)
    assert fast.jobs == replay(trace, nodes, 1, "easy", whole_queue=True, params=params).jobs


def test_easy_recomputes_a_plan_that_now_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Job 1 runs past its one-minute limit, so job 2's plan starts one resolution
    from now (``_sooner``) and moves with it: every pass tests every job again."""
    trace = parse(
        [
            line(1, 0, 3600, 1, 60),
            line(2, 10, 60, 2, 60),
            line(3, 20, 7200, 1, 7200),
            line(4, 30, 7200, 1, 7200),
            line(5, 40, 60, 2, 60),
        ],
        "moves",
    )
    calls = [c for c in _shown_per_call(monkeypatch, trace) if c[0] < 3600]
    assert calls == [(0, (1,)), (20, (2, 3)), (30, (2, 3, 4)), (40, (2, 3, 4))]


# ---------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(RECORD, min_size=1, max_size=40),
    nodes=st.integers(1, 4),
    cpus=st.integers(1, 3),
    name=st.sampled_from(["fcfs", "easy", "conservative"]),
)
def test_starts_after_submit_within_capacity(
    records: list[tuple[int, int, int, int]], nodes: int, cpus: int, name: str
) -> None:
    assume(any(procs <= nodes * cpus for *_, procs in records))
    result = replay(random_trace(records), nodes, cpus, name)
    for job in result.jobs:
        assert job.start >= job.submit
        running = sum(o.procs for o in result.jobs if o.start <= job.start < o.end)
        assert running <= nodes * cpus
    if name == "fcfs":  # one partition: no job starts ahead of one submitted before it
        for earlier, later in zip(result.jobs, result.jobs[1:], strict=False):
            assert earlier.start <= later.start


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    records=st.lists(RECORD, min_size=1, max_size=30),
    nodes=st.integers(1, 4),
    cpus=st.integers(1, 3),
)
def test_conservative_never_delays_past_the_first_reservation(
    records: list[tuple[int, int, int, int]],
    nodes: int,
    cpus: int,
) -> None:
    """With perfect estimates every job starts no later than the first start backfill
    planned for it (its reservation only moves earlier as the queue ahead starts).
    Derandomized: on nodes of several CPUs a plan can move later where whole-node plans
    hide a job ahead fitting beside another (the test after the next)."""
    assume(any(procs <= nodes * cpus for *_, procs in records))
    _assert_starts_by_first_reservation(records, nodes, cpus)


@settings(max_examples=150, deadline=None)
@given(records=st.lists(RECORD, min_size=1, max_size=30), nodes=st.integers(1, 9))
def test_conservative_plans_hold_on_one_cpu_nodes(
    records: list[tuple[int, int, int, int]], nodes: int
) -> None:
    """Where a node is one CPU, a whole-node plan is exactly what the job takes, so no
    plan ever moves later: each is placed at the first end of a job or plan it fits at,
    on the nodes the jobs ahead leave (before issue 21 a plan went to the first nodes
    free at a doubling probe, and moved)."""
    assume(any(procs <= nodes for *_, procs in records))
    _assert_starts_by_first_reservation(records, nodes, 1)


def test_conservative_plans_whole_nodes_as_slurm_does() -> None:
    """Slurm's backfill reserves whole nodes (sched_config.shtml), so on 3 nodes of 3
    CPUs job 3 (4 CPUs) is planned on n1 and n2 whole from 907, job 4 (5 CPUs) behind
    it at 1087, and job 5 (3 CPUs) on n3 at 907. At 907 the main pass starts jobs 3 and
    4 side by side (n2 shared), which the whole-node plans hid: job 5 waits to 1087."""
    records = [(247, 6, 0, 7), (34, 5, 0, 7), (230, 3, 0, 4), (282, 5, 0, 5), (14, 3, 0, 3)]
    first, starts = _first_reservations(records, 3, 3)
    assert (first[3], first[4], first[5]) == (907, 1087, 907)
    assert starts[2:] == [907, 907, 1087]


def _assert_starts_by_first_reservation(
    records: list[tuple[int, int, int, int]], nodes: int, cpus: int
) -> None:
    """Every job starts no later than the first start a conservative plan gave it."""
    first, starts = _first_reservations(records, nodes, cpus)
    for job_id, start in enumerate(starts, 1):
        if job_id in first:
            assert start <= first[job_id], (job_id, first[job_id])


def _first_reservations(
    records: list[tuple[int, int, int, int]], nodes: int, cpus: int
) -> tuple[dict[int, int], list[int]]:
    """The first start a conservative plan gave each job (by its place among the jobs
    replayed) and the starts, with perfect estimates (bf_resolution=1: Slurm's 60 s
    rounds the ends a plan waits for down to a minute)."""
    first: dict[int, int] = {}
    call = policy.call_core

    def recording(*args: object) -> Plan:
        plan = call(*args)  # type: ignore[arg-type]
        for job_id, expected in plan.expected.items():
            first.setdefault(job_id, expected.start_time)
        return plan

    trace = random_trace(records, exact=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(policy, "call_core", recording)
        exact = BackfillParams(resolution=1)
        result = replay(trace, nodes, cpus, "conservative", whole_queue=True, params=exact)
    return first, [job.start for job in result.jobs]


# ---------------------------------------------------------------- SchedulerParameters


def test_sched_params() -> None:
    assert backfill_params("bf_resolution=1,bf_window=43200", "easy") == dataclasses.replace(
        TEXTBOOK, max_job_test=500
    )
    assert backfill_params("bf_max_job_test=20,bf_job_part_count_reserve=0", "conservative") == (
        BackfillParams(max_job_test=20)
    )
    for text, policy_name, message in [
        ("bf_interval=10", "easy", "not applied by a replay"),
        ("bf_resolution=0", "easy", "use 1 to 3600"),
        ("bf_window=x", "easy", "use 1 to 43200"),
        ("bf_window", "easy", "use 1 to 43200"),
        ("bf_job_part_count_reserve=1", "conservative", "contradicts --policy conservative"),
        ("bf_window=10", "fcfs", "use --policy easy or conservative"),
    ]:
        with pytest.raises(SimError, match=message):
            backfill_params(text, policy_name)


def test_cli_sched_params(tmp_path: Path) -> None:
    path = tmp_path / "t.swf"
    path.write_bytes(b"; MaxNodes: 2\n" + b"\n".join(line(n, n, 60, 1) for n in range(1, 4)))
    ok = _cli(str(path), "--policy", "easy", "--sched-params", "bf_resolution=1", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["jobs"] == 3
    bad = _cli(str(path), "--policy", "easy", "--sched-params", "bf_foo=1")
    assert bad.returncode == 1
    assert bad.stderr.startswith("corral sim: error: --sched-params: 'bf_foo' is not applied")
    assert "Traceback" not in bad.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.corral", "sim", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


# ---------------------------------------------------------------- textbook EASY


def test_textbook_easy_by_hand() -> None:
    # 4 processors. Job 0 holds 3 until 100; job 1 (4) reserves at 100 with no extra;
    # job 2 (1, ends 50) fits before the shadow; job 3 (1, ends 200) would delay job 1.
    jobs = [(0, 3, 100), (1, 4, 10), (2, 1, 48), (3, 1, 197), (100, 1, 1)]
    assert easy(jobs, 4) == [0, 100, 2, 110, 110]
    # Extra processors: job 1 (2) reserves at 100 leaving 2 extra; job 2 runs past it.
    assert easy([(0, 3, 100), (1, 3, 10), (2, 1, 500)], 4) == [0, 100, 2]
    # Every job ending at the shadow time counts: job 2 (3) reserves at 100, when jobs 0
    # and 1 both end, leaving 2 extra; job 3 runs past 100 on one of them.
    assert easy([(0, 2, 100), (0, 2, 100), (1, 3, 10), (2, 1, 500)], 5) == [0, 0, 100, 2]
    # A job the main pass starts now ends too: job 2 (3) reserves at job 1's end, 1100,
    # so job 3 (ends at 300) starts beside job 1 at 100.
    jobs = [(0, 4, 100), (50, 2, 1000), (60, 3, 10), (70, 1, 200)]
    assert easy(jobs, 4) == [0, 100, 1100, 100]


@needs_traces
@pytest.mark.parametrize(("path", "jobs"), [(LUBLIN, 300), (HPC2N, 10_000)])
def test_easy_is_textbook_easy(path: Path, jobs: int) -> None:
    """Under textbook conditions and perfect estimates, every job starts when textbook
    EASY starts it (HPC2N's first 10,000 jobs: about 10 s of CPU)."""
    trace = perfect(read(str(path), 0, jobs))
    nodes, cpus = cluster_shape(trace.header, None, None)
    result = replay(trace, nodes, cpus, "easy", params=TEXTBOOK)
    kept, _ = admit(trace.records, nodes * cpus)
    expected = easy([(r.submit, r.procs, r.run) for r in kept], nodes * cpus)
    assert [j.start for j in result.jobs] == expected
