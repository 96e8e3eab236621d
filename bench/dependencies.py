"""A scheduling pass with a 120 KB dependency list among 10,000 jobs: before and after.

The issue's measurement: one user's ``afterok:`` list of 15,000 job ids (120
KB), pending among 10,000 other jobs, cost 2.3 s per scheduling pass, because
each pass scanned every job for every id. Jobs now carry their list resolved
into references (controller/depspec.py) and a pass looks each reference up in
one index (controller/core/dependency.py).

This script times, on the same synthetic snapshot (10,000 pending jobs on
1,000 nodes, 10,000 finished jobs the ids name, one job with the 120 KB
list): the whole main pass as the controller runs it now, the dependency
check alone, and the former way (one scan of all jobs per id, kept here only
for comparison). Prints one JSON object; nothing is asserted.

    python bench/dependencies.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.core import schedule
from controller.core.dependency import Index, Outcome, check
from controller.core.snapshot import JobFacts, Snapshot
from controller.depspec import Deps
from tests.unit.scenario import NOW, UID, cluster, facts, job, node, partition

JOBS = 10_000
IDS = 15_000
FIRST = 1_000_000  # seven-digit ids: 15,000 of them make the 120 KB list


def workload() -> tuple[Snapshot, Deps]:
    nodes = [node(f"n{i}", cpus=32, memory=128_000, used_cpus=32) for i in range(1_000)]
    part = partition("batch", [n.name for n in nodes])
    known = {i: facts("COMPLETED") for i in range(FIRST, FIRST + JOBS)}
    known[FIRST + JOBS // 2] = facts("RUNNING")  # the list waits on one job still running
    text = "afterok:" + ":".join(str(i) for i in range(FIRST, FIRST + IDS))
    pending = [job(i, num_tasks=1) for i in range(1, JOBS)]
    waiting = job(JOBS, dependency=text)
    assert waiting.deps is not None
    pending.append(waiting)
    snap = cluster(nodes, [part]).snapshot(pending, jobs=known)
    return snap, waiting.deps


def former_check(deps: Deps, jobs: Mapping[int, JobFacts]) -> Outcome:
    """The former cost: for each id, a scan of every job (array members, then the job)."""
    waiting = False
    for item in deps.items:
        for job_id, _, _ in item.references():
            members = [f for f in jobs.values() if f.array_job_id == job_id]
            targets = members or ([jobs[job_id]] if job_id in jobs else [])
            waiting = waiting or any(f.state != "COMPLETED" for f in targets)
    return Outcome.WAITING if waiting else Outcome.SATISFIED


def timed(runs: int, body: Callable[[], Any]) -> list[float]:
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        body()
        samples.append(time.perf_counter() - began)
    return samples


def summary(samples: list[float]) -> dict[str, Any]:
    return {
        "value": round(statistics.median(samples), 4),
        "unit": "s",
        "min": round(min(samples), 4),
        "max": round(max(samples), 4),
        "samples": len(samples),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    snap, deps = workload()
    print(f"dependency list: {len(deps.text)} bytes, {IDS} ids", file=sys.stderr)
    now_check = timed(args.runs, lambda: check(deps, 0, "x", UID, Index(snap.jobs), NOW))
    former = timed(args.runs, lambda: former_check(deps, snap.jobs))
    main_pass = timed(args.runs, lambda: schedule(snap, NOW))
    figures = {
        "main_pass_with_120kb_dependency_list": summary(main_pass),
        "dependency_check_indexed": summary(now_check),
        "dependency_check_former_scan": summary(former),
    }
    out = {
        "benchmark": "dependencies",
        "jobs": JOBS,
        "ids": IDS,
        "list_bytes": len(deps.text),
        "figures": figures,
    }
    print(json.dumps(out, indent=2))
    print(
        f"former pass ~ {statistics.median(main_pass) + statistics.median(former):.2f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
