"""corral sim --policy a,b,c: the comparison's figures, its table and JSON, and the
parallel replays (each the same as a replay of its own)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.sim import compare, read, replay
from controller.sim.compare import Figures
from controller.sim.policy import CoreCalls
from controller.sim.replay import JobResult, Replay
from controller.sim.siterun import Setup

ROOT = Path(__file__).resolve().parents[2]


def result(policy: str, jobs: list[JobResult], cpus: int = 4) -> Replay:
    return Replay(policy, 1, cpus, tuple(jobs), {}, (), CoreCalls(), 0.0)


# number, submit, start, end, procs: waits 0, 10, 20, ..., 190 (20 jobs)
TWENTY = [JobResult(n, 0, 10 * (n - 1), 10 * (n - 1) + 5, 1, 1) for n in range(1, 21)]


def test_figures_by_hand() -> None:
    f = compare.figures(TWENTY, 4)
    assert f.jobs == 20
    assert f.mean_wait == 95.0
    # nearest rank: the 19th smallest of 20 (95 % of 20 = 19)
    assert f.p95_wait == 180
    # run 5 s counts as 10: (wait + 5) / 10, at least 1
    assert f.mean_bounded_slowdown == pytest.approx(
        sum(max(1.0, (10 * i + 5) / 10) for i in range(20)) / 20
    )
    assert f.makespan == 195  # last end 190 + 5 - first submit 0
    assert f.utilization == pytest.approx(20 * 5 / (4 * 195))


def test_p95_of_one_job_and_of_none() -> None:
    one = compare.figures([JobResult(1, 0, 7, 9, 2, 1)], 2)
    assert (one.p95_wait, one.mean_wait, one.makespan) == (7, 7.0, 9)
    assert compare.figures([], 2, 50) == Figures(0, 0.0, 0, 0.0, 0.0, 50)


def test_groups_share_the_whole_replays_makespan() -> None:
    r = result("fcfs", TWENTY)
    by_parity = compare.grouped(r, lambda job: "odd" if job.number % 2 else "even")
    assert list(by_parity) == ["even", "odd"]
    assert by_parity["odd"].jobs == 10 and by_parity["odd"].makespan == 195
    whole = compare.figures(TWENTY, 4).utilization
    assert by_parity["odd"].utilization + by_parity["even"].utilization == pytest.approx(whole)


def test_the_table_and_json_have_a_row_per_policy_and_group() -> None:
    a = result("fcfs", TWENTY)
    b = result("easy", [JobResult(1, 0, 0, 5, 1, 1)])
    groups = {"account": lambda job: "x"}
    table = compare.text([a, b], groups).splitlines()
    assert table[0].split() == [
        "policy",
        "jobs",
        "mean",
        "wait",
        "p95",
        "wait",
        "mean",
        "bsld",
        "util",
        "makespan",
    ]
    assert table[1].split()[:6] == ["fcfs", "20", "95.0", "s", "180", "s"]
    assert table[2].split()[:6] == ["easy", "1", "0.0", "s", "0", "s"]
    assert table[4].split()[:2] == ["policy", "account"]
    assert [row.split()[:3] for row in table[5:]] == [["fcfs", "x", "20"], ["easy", "x", "1"]]
    data = compare.as_dict("t.swf", [a, b], groups)
    assert list(data["policies"]) == ["fcfs", "easy"]
    assert data["policies"]["fcfs"]["p95_wait_s"] == 180
    assert data["policies"]["easy"]["accounts"]["x"]["jobs"] == 1
    assert json.loads(json.dumps(data)) == data


TRACE = "\n".join(
    " ".join(
        map(
            str,
            [
                n,
                10 * n,
                -1,
                100 + 37 * (n % 5),
                1 + n % 4,
                -1,
                -1,
                1 + n % 4,
                300,
                -1,
                1,
                1 + n % 3,
                1,
            ]
            + [-1] * 5,
        )
    )
    for n in range(1, 41)
)


def test_parallel_replays_are_the_same_as_one_at_a_time(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 2\n; MaxProcs: 8\n" + TRACE + "\n")
    results = compare.run_all(Setup(str(trace)), ["fcfs", "easy", "conservative"])
    assert [r.policy for r in results] == ["fcfs", "easy", "conservative"]
    for r in results:
        alone = replay(read(str(trace)), 2, 4, r.policy)
        assert r.jobs == alone.jobs
    # Backfill shortens the waits on this trace: the comparison shows a difference.
    waits = [compare.figures(r.jobs, r.total_cpus).mean_wait for r in results]
    assert waits[1] < waits[0]


def test_cli_compares_policies_as_json(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxNodes: 2\n; MaxProcs: 8\n" + TRACE + "\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.corral",
            "sim",
            str(trace),
            "--policy",
            "fcfs,easy",
            "--json",
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert list(data["policies"]) == ["fcfs", "easy"]
    assert data["policies"]["fcfs"]["jobs"] == 40
    assert data["cpus"] == 8
