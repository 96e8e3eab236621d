"""End-to-end throughput: trivial jobs from the first submission until all have completed.

Each run starts a fresh 4-node cluster, submits the jobs (``--wrap true``)
through the gRPC API in one process as fast as it answers, then asks the
controller every POLL seconds for the jobs still active (pending, running or
completing) until none is left. Every job must end COMPLETED.

    python bench/throughput.py [--quick] [--runs N]
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    SLURM,
    BenchCluster,
    CommandFailed,
    arguments,
    each_run,
    failed,
    figure,
    log,
    python_baseline,
    report,
    tls_passes,
)

POLL = 0.25  # seconds between "anything still active?" questions
DEADLINE = 600  # seconds one run may take


def one_run(n: int) -> dict[str, float]:
    with BenchCluster(nodes=4) as cluster:
        api = cluster.api
        spec = api.spec(cluster.dir, hold=False)
        api.jobs()  # connect; not counted
        began = time.perf_counter()
        for _ in range(n):
            api.submit(spec)
        submitted = time.perf_counter() - began
        while api.jobs():
            if time.perf_counter() - began > DEADLINE:
                raise CommandFailed(f"jobs still active after {DEADLINE} s")
            time.sleep(POLL)
        elapsed = time.perf_counter() - began
        jobs = api.jobs(states=["ALL"])
        states = Counter(j.state for j in jobs)
        if states != {"COMPLETED": n}:
            bad = next(j for j in jobs if j.state != "COMPLETED")
            raise CommandFailed(
                f"expected {n} COMPLETED jobs, got {dict(states)}; job {bad.job_id}: "
                f"{bad.state} reason={bad.reason} exit_status={bad.exit_status} "
                f"{bad.state_desc}; node agent log ends:\n{cluster.log('nodeagent')[-1500:]}"
            )
    log(f"  {n} jobs in {elapsed:.2f} s ({n / elapsed:.1f} jobs/s), submitted in {submitted:.2f} s")
    return {"jobs_per_s": n / elapsed, "elapsed_s": elapsed, "submit_s": submitted}


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, tls=True)
    n = 100 if args.quick else 1000
    baseline = python_baseline(10 if args.quick else 20)

    def measured() -> dict[str, dict[str, Any]]:
        """Every figure, from clusters with TLS as ``--tls`` says."""
        figures: dict[str, dict[str, Any]] = {}
        try:
            runs = each_run(args.runs, f"{n} trivial jobs on 4 nodes", lambda _: one_run(n))
        except (CommandFailed, AssertionError, OSError) as exc:
            log(f"failed: {exc}")
            figures["jobs_end_to_end"] = failed(
                "jobs/s", ">= 100", SLURM["jobs_per_s"], str(exc)[:2000]
            )
        else:
            figures["jobs_end_to_end"] = figure(
                [r["jobs_per_s"] for r in runs],
                "jobs/s",
                target=">= 100",
                slurm=SLURM["jobs_per_s"],
                digits=1,
                jobs=n,
                note="Slurm: 4.3 jobs/s as configured, 10 jobs/s tuned",
            )
            figures["elapsed"] = figure(
                [r["elapsed_s"] for r in runs],
                "s",
                jobs=n,
                note=f"first submission to the last job completed (polled every {POLL} s)",
            )
            figures["submit_phase"] = figure(
                [r["submit_s"] for r in runs],
                "s",
                jobs=n,
                note="the submissions alone (gRPC, one after another, jobs already starting)",
            )
        return figures

    figures = tls_passes(args, measured)
    report("throughput", args, baseline, figures, jobs_per_run=n, nodes=4)


if __name__ == "__main__":
    main()
