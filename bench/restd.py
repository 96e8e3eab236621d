"""corral-restd: GET /jobs with 10,000 jobs, submissions over one connection, and
the controller's metrics scrape with 10,000 jobs.

Each run gets a fresh 4-node cluster with its restd and the controller's
metrics endpoint; 10,000 held jobs are submitted through the framed API first
(held: nothing starts, the listing stays the same size). The load generator is
aiohttp's client in this process, on loopback, over keep-alive connections:
GET /jobs one request after another (latency percentiles) and from 4
connections at once (requests per second); submissions one after another
over one connection, as slurmrestd's figure was taken. The baseline, measured
the same way in the same run, is GET /slurm/v0.0.42/ping: one HTTP round trip
and one gRPC call, the floor of any request.

    python bench/restd.py [--quick] [--runs N]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    BenchCluster,
    CommandFailed,
    arguments,
    each_run,
    failed,
    figure,
    framed_spec,
    log,
    python_baseline,
    report,
)
from tests.integration.cluster import free_port

#: slurmrestd 22.05 on the same machine (from the issue).
SLURMRESTD = {"jobs_empty_ms": 7.8, "jobs_10k_ms": 2300.0, "submissions_per_s": 303.0}
CONNECTIONS = 4
V = "/slurm/v0.0.42"


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(int(fraction * len(ordered)), len(ordered) - 1)]


async def _timed_gets(session: Any, url: str, count: int) -> list[float]:
    """``count`` GETs one after another; each one's milliseconds."""
    times = []
    for _ in range(count):
        began = time.perf_counter()
        async with session.get(url) as reply:
            body = await reply.read()
            if reply.status != 200:
                raise CommandFailed(f"GET {url}: {reply.status} {body[:300]!r}")
        times.append((time.perf_counter() - began) * 1000)
    return times


async def _rate(session: Any, url: str, count: int) -> float:
    """GETs per second from CONNECTIONS connections at once."""
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            async with session.get(url) as reply:
                await reply.read()

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return count / (time.perf_counter() - began)


async def _submissions(
    session: Any, url: str, body: dict[str, Any], count: int, connections: int = 1
) -> tuple[float, list[float]]:
    """``count`` submissions from ``connections`` at once: per second, and each one's ms."""
    times: list[float] = []
    left = count

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            began = time.perf_counter()
            async with session.post(url, json=body) as reply:
                answer = await reply.json()
                if reply.status != 200:
                    raise CommandFailed(f"POST {url}: {reply.status} {answer['errors']}")
            times.append((time.perf_counter() - began) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    return count / (time.perf_counter() - began), times


def one_run(jobs: int, submissions: int, gets: int) -> dict[str, float]:
    import aiohttp

    metrics_port = free_port()
    settings = ("MetricsType=metrics/openmetrics", f"MetricsParameters=port={metrics_port}")
    with BenchCluster(settings=settings) as cluster:
        base = cluster.start_restd()
        token = cluster.run("scontrol", "token", "lifespan=3600").stdout.strip().split("=", 1)[1]
        headers = {"X-SLURM-USER-TOKEN": token}
        desc = {
            "script": "#!/bin/sh\ntrue\n",
            "environment": [f"PATH={os.environ.get('PATH', '/bin')}"],
            "current_working_directory": str(cluster.dir),
            "hold": True,
        }

        async def measure() -> dict[str, float]:
            connector = aiohttp.TCPConnector(limit=CONNECTIONS)
            async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:
                ping = await _timed_gets(session, f"{V}/ping", 50)
                empty = await _timed_gets(session, f"{V}/jobs", 20)
                one, submitted = await _submissions(
                    session, f"{V}/job/submit", {"job": desc}, submissions
                )
                many, _ = await _submissions(
                    session, f"{V}/job/submit", {"job": desc}, submissions, CONNECTIONS
                )
                log(f"submitting held jobs through the framed API up to {jobs}")
                request = {"spec": framed_spec(cluster.dir, hold=True)}
                for _ in range(jobs - 2 * submissions):
                    cluster.client.call("Submit", request)
                cold = await _timed_gets(session, f"{V}/jobs", 1)
                full = await _timed_gets(session, f"{V}/jobs", gets)
                rate = await _rate(session, f"{V}/jobs", gets)
            async with aiohttp.ClientSession(f"http://127.0.0.1:{metrics_port}") as scrape:
                metrics = await _timed_gets(scrape, "/metrics", 20)
            return {
                "ping_ms": statistics.median(ping),
                "jobs_empty_ms": statistics.median(empty),
                "submissions_per_s": one,
                "submissions_concurrent_per_s": many,
                "submission_p99_ms": _percentile(submitted, 0.99),
                "jobs_cold_ms": cold[0],
                "jobs_full_ms": statistics.median(full),
                "jobs_full_p99_ms": _percentile(full, 0.99),
                "jobs_full_per_s": rate,
                "metrics_scrape_ms": statistics.median(metrics),
            }

        return asyncio.run(measure())


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1)
    jobs = 1000 if args.quick else 10_000
    submissions = 200 if args.quick else 1000
    gets = 5 if args.quick else 20
    baseline = python_baseline(10 if args.quick else 20)
    try:
        runs = each_run(args.runs, "restd", lambda _: one_run(jobs, submissions, gets))
    except (CommandFailed, OSError, AssertionError) as exc:
        log(f"restd: failed: {exc}")
        error = str(exc)[:2000]
        report("restd", args, baseline, {"error": failed("", None, None, error)})
        return

    def of(key: str) -> list[float]:
        return [run[key] for run in runs]

    figures = {
        "baseline_ping": figure(
            of("ping_ms"), "ms", digits=2, note="GET /slurm/v0.0.42/ping: the floor of a request"
        ),
        "jobs_empty": figure(
            of("jobs_empty_ms"), "ms", slurm=SLURMRESTD["jobs_empty_ms"], digits=2
        ),
        f"jobs_{jobs}": figure(
            of("jobs_full_ms"),
            "ms",
            target="< 500",
            slurm=SLURMRESTD["jobs_10k_ms"] if jobs == 10_000 else None,
            digits=1,
            jobs=jobs,
            note="median of GET /slurm/v0.0.42/jobs one after another, body read",
        ),
        f"jobs_{jobs}_p99": figure(of("jobs_full_p99_ms"), "ms", digits=1, jobs=jobs),
        f"jobs_{jobs}_first": figure(
            of("jobs_cold_ms"),
            "ms",
            target="< 500",
            digits=1,
            jobs=jobs,
            note="the first listing after the jobs were submitted: every job's JSON made anew",
        ),
        f"jobs_{jobs}_requests_per_s": figure(
            of("jobs_full_per_s"),
            "requests/s",
            digits=2,
            note=f"{CONNECTIONS} keep-alive connections at once",
        ),
        "submissions_one_connection": figure(
            of("submissions_per_s"),
            "submissions/s",
            slurm=SLURMRESTD["submissions_per_s"],
            digits=1,
            submissions=submissions,
            note="POST /slurm/v0.0.42/job/submit one after another over one connection "
            "(slurmrestd's figure was taken so)",
        ),
        f"submissions_{CONNECTIONS}_connections": figure(
            of("submissions_concurrent_per_s"),
            "submissions/s",
            target=">= 1000",
            digits=1,
            submissions=submissions,
            note=f"the same from {CONNECTIONS} keep-alive connections at once",
        ),
        "submission_p99": figure(of("submission_p99_ms"), "ms", digits=2),
        f"metrics_scrape_{jobs}": figure(
            of("metrics_scrape_ms"),
            "ms",
            target="< 50",
            digits=2,
            jobs=jobs,
            note="GET /metrics on the controller (MetricsType=metrics/openmetrics)",
        ),
    }
    report("restd", args, baseline, figures, jobs=jobs, load_generator="aiohttp client")


if __name__ == "__main__":
    main()
