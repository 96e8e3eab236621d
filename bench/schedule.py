"""One scheduling pass (main + backfill) at scale, over the C node bitmap and its Python twin.

Synthetic clusters of 32-CPU nodes, three in five full, one in five half
busy, one in five idle, the busy ones running jobs whose limits end within a
day; pending jobs of 1 to 256 tasks with limits of 10 minutes to a day
(a fixed seed). For each shape the script times the pure core,
``schedule(snapshot, now, BackfillParams(...))``, at the default
``bf_max_job_test`` (500) and at full depth, and the main pass alone, first
with the C bitmap (``corral.nodeset``: the candidate scans run in
csrc/nodeset.c) and then, in the same run, with its pure-Python twin
(``corral.pynodeset``); both must make the same plan.

The last figures time the set operations alone (intersection, union,
difference, count, first) on 1,000 and 10,000 node sets, C against Python.

    python bench/schedule.py [--quick] [--runs N]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import arguments, figure, log, python_baseline, report
from controller.core import BackfillParams, Running, Snapshot, schedule
from controller.core.nodeindex import C_BITMAPS, PYTHON_BITMAPS, Bitmaps
from corral import nodeset, pynodeset
from tests.unit.scenario import NOW, cluster, job, node, partition

#: (nodes, pending jobs, bf_max_job_test or None for full depth, target seconds)
SHAPES = [
    (1_000, 10_000, 500, None),
    (1_000, 10_000, None, None),
    (10_000, 10_000, 500, None),
    (10_000, 10_000, None, "< 1"),
    (1_000, 100_000, 500, None),
    (1_000, 100_000, None, None),
    (10_000, 100_000, 500, None),
    (10_000, 100_000, None, None),
]


def workload(nodes: int, pending: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    views, running = [], []
    for i in range(nodes):
        used = rng.choice([32, 32, 32, 16, 0])
        name = f"n{i}"
        views.append(node(name, cpus=32, memory=128_000, used_cpus=used))
        if used:
            end = NOW + rng.randint(1, 1440) * 60
            running.append(Running(10**7 + i, (name,), (used,), (0,), end))
    part = partition("batch", [v.name for v in views])
    jobs = [
        job(
            j,
            num_tasks=rng.choice([1, 4, 16, 32, 64, 256]),
            time_limit=rng.choice([10, 60, 240, 1440]),
        )
        for j in range(1, pending + 1)
    ]
    return cluster(views, [replace(part, order=part.nodes)]).snapshot(jobs, running=running)


def one_pass(
    snap: Snapshot, depth: int | None, backfill: bool, bitmaps: Bitmaps = C_BITMAPS
) -> tuple[float, int, int]:
    params = BackfillParams(max_job_test=depth or len(snap.pending)) if backfill else None
    began = time.perf_counter()
    plan = schedule(snap, NOW, params, bitmaps=bitmaps)
    return time.perf_counter() - began, len(plan.starts), len(plan.expected)


def c_and_python(
    snap: Snapshot, depth: int | None, backfill: bool, runs: int
) -> tuple[list[tuple[float, int, int]], dict[str, Any]]:
    """``runs`` passes over the C bitmap, and the Python twin's figures beside them."""
    c = [one_pass(snap, depth, backfill) for _ in range(runs)]
    py = [one_pass(snap, depth, backfill, PYTHON_BITMAPS) for _ in range(runs)]
    if py[0][1:] != c[0][1:]:
        raise SystemExit(f"the bitmaps planned differently: C {c[0][1:]}, Python {py[0][1:]}")
    c_median = statistics.median(r[0] for r in c)
    py_median = statistics.median(r[0] for r in py)
    return c, {"python_s": round(py_median, 3), "speedup": round(py_median / c_median, 1)}


def bitmap_ops(kind: Any, size: int, rounds: int) -> float:
    """Microseconds for one round of the operations a pass asks of node sets."""
    rng = random.Random(size)
    a = kind(rng.sample(range(size), size // 2), size=size)
    b = kind(rng.sample(range(size), size // 3), size=size)
    began = time.perf_counter()
    for _ in range(rounds):
        both = a & b
        either = a | b
        rest = a - b
        _ = len(both) + len(either) + len(rest)
        _ = both.first()
    return (time.perf_counter() - began) / rounds * 1e6


def main() -> None:
    args = arguments(__doc__ or "", runs=3, quick_runs=1)
    baseline = python_baseline()
    shapes = SHAPES[:2] if args.quick else SHAPES
    figures: dict[str, dict[str, Any]] = {}
    for nodes, pending, depth, target in shapes:
        label = f"{nodes}_nodes_{pending}_pending"
        snap = workload(nodes, pending)
        name = f"backfill_{'full_depth' if depth is None else 'default_depth'}_{label}"
        log(f"{name}: {len(snap.running)} running, {args.runs} passes")
        runs, twin = c_and_python(snap, depth, True, args.runs)
        figures[name] = figure(
            [r[0] for r in runs],
            "s",
            target=target,
            slurm=0.203 if depth == 500 else None,
            note="main + backfill pass; Slurm: 203 ms per backfill pass at its default "
            "500 jobs with 10,000 eligible pending on 4 nodes",
            starts=runs[0][1],
            reservations=runs[0][2],
            bf_max_job_test=depth or pending,
            **twin,
        )
        if depth == 500:
            main_only, twin = c_and_python(snap, None, False, args.runs)
            figures[f"main_pass_{label}"] = figure(
                [r[0] for r in main_only],
                "s",
                slurm=0.015 if nodes == 4 else None,
                starts=main_only[0][1],
                **twin,
            )
    for size in (1_000, 10_000):
        rounds = 200 if args.quick else 2_000
        c = bitmap_ops(nodeset.NodeSet, size, rounds)
        py = bitmap_ops(pynodeset.NodeSet, size, rounds)
        figures[f"nodeset_ops_{size}_nodes"] = figure(
            [c],
            "us",
            note="&, |, -, len x3, first() per round; C NodeSet",
            python_us=round(py, 2),
            speedup=round(py / c, 1),
        )
    report("schedule", args, baseline, figures)


if __name__ == "__main__":
    main()
