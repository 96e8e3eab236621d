"""corral-restd: GET /jobs with 10,000 jobs, job submissions, and the controller's
metrics scrape with 10,000 jobs.

Each run gets a fresh 4-node cluster with its restd and the controller's
metrics endpoint. Jobs are submitted held, so nothing starts and listings keep
their size. The load generator is ``wrk`` (Debian's package) where it is
installed, as slurmrestd's figures were taken, else aiohttp's client in this
process (which takes a share of the same cores: the figures are then lower).
Submissions: one connection, then SUBMITTERS at once, for a few seconds each;
held jobs are then added through the framed API up to 10,000. GET /jobs: the
first listing after that (every job's record built anew), then one connection
(latency percentiles) and CONNECTIONS at once (requests per second). The
baseline, measured the same way in the same run, is GET /slurm/v0.0.42/ping:
one HTTP round trip and one gRPC call, the floor of any request.

    python bench/restd.py [--quick] [--runs N]
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    BenchCluster,
    CommandFailed,
    arguments,
    count_jobs,
    each_run,
    failed,
    figure,
    framed_spec,
    log,
    python_baseline,
    report,
    tls_passes,
)
from tests.integration.cluster import free_port

#: slurmrestd 22.05 on the same machine (from the issue).
SLURMRESTD = {"jobs_empty_ms": 7.8, "jobs_10k_ms": 2300.0, "submissions_per_s": 303.0}
CONNECTIONS = 4  # GET /jobs from this many at once
SUBMITTERS = 8  # submissions from this many connections at once
V = "/slurm/v0.0.42"
WRK = shutil.which("wrk")

Load = dict[str, float]  # per_s, p50_ms, p99_ms


def _ms(text: str) -> float:
    for unit, scale in (("us", 0.001), ("ms", 1.0), ("s", 1000.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * scale
    raise CommandFailed(f"wrk: cannot read the latency {text!r}")


def _wrk(url: str, token: str, connections: int, seconds: float, body: str = "") -> Load:
    """wrk against ``url`` (a POST of ``body`` when given) for ``seconds``."""
    script = Path(os.environ.get("TMPDIR", "/tmp")) / f"corral-bench-wrk-{os.getpid()}.lua"
    lines = [f"wrk.headers[{json.dumps('X-SLURM-USER-TOKEN')}] = {json.dumps(token)}"]
    if body:
        lines += [
            'wrk.method = "POST"',
            'wrk.headers["Content-Type"] = "application/json"',
            f"wrk.body = {json.dumps(body)}",
        ]
    script.write_text("\n".join(lines) + "\n")
    try:
        done = subprocess.run(
            [WRK or "wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency",
             "-s", str(script), url],
            capture_output=True, text=True, timeout=seconds + 60, check=False,
        )  # fmt: skip
    finally:
        script.unlink()
    out = done.stdout
    if done.returncode or "Non-2xx" in out or "Socket errors" in out:
        raise CommandFailed(f"wrk {url}: {(out + done.stderr)[-600:]}")
    found: dict[str, float] = {}
    for line in out.splitlines():
        words = line.split()
        if words[:1] == ["Requests/sec:"]:
            found["per_s"] = float(words[1])
        elif words[:1] in (["50%"], ["99%"]):
            found[f"p{words[0][:-1]}_ms"] = _ms(words[1])
    if len(found) != 3:
        raise CommandFailed(f"wrk {url}: unexpected output {out[-600:]}")
    return found


async def _aiohttp(
    base: str, path: str, token: str, connections: int, count: int, body: str = ""
) -> Load:
    """The same measure with aiohttp's client: ``count`` requests in all."""
    import aiohttp

    times: list[float] = []
    left = count
    headers = {"X-SLURM-USER-TOKEN": token, "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(base, headers=headers, connector=connector) as session:

        async def worker() -> None:
            nonlocal left
            while left > 0:
                left -= 1
                began = time.perf_counter()
                method = session.post if body else session.get
                async with method(path, data=body or None) as reply:
                    answer = await reply.read()
                    if reply.status != 200:
                        raise CommandFailed(f"{path}: {reply.status} {answer[:300]!r}")
                times.append((time.perf_counter() - began) * 1000)

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - began
    ordered = sorted(times)
    return {
        "per_s": count / elapsed,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)],
    }


def load(
    base: str, path: str, token: str, connections: int, seconds: float, count: int, body: str = ""
) -> Load:
    """``connections`` clients at ``base + path``: wrk for ``seconds`` where it is
    installed, else ``count`` requests through aiohttp."""
    if WRK:
        return _wrk(base + path, token, connections, seconds, body)
    return asyncio.run(_aiohttp(base, path, token, connections, count, body))


def one_run(jobs: int, seconds: float, count: int) -> dict[str, float]:
    import aiohttp

    metrics_port = free_port()
    settings = ("MetricsType=metrics/openmetrics", f"MetricsParameters=port={metrics_port}")
    with BenchCluster(settings=settings) as cluster:
        base = cluster.start_restd()
        token = cluster.run("scontrol", "token", "lifespan=3600").stdout.strip().split("=", 1)[1]
        desc = {
            "script": "#!/bin/sh\ntrue\n",
            "environment": [f"PATH={os.environ.get('PATH', '/bin')}"],
            "current_working_directory": str(cluster.dir),
            "hold": True,
        }
        body = json.dumps({"job": desc})
        ping = load(base, f"{V}/ping", token, 1, seconds, count)
        empty = load(base, f"{V}/jobs", token, 1, seconds, count)
        one = load(base, f"{V}/job/submit", token, 1, seconds, count, body)
        many = load(base, f"{V}/job/submit", token, SUBMITTERS, seconds, count, body)
        time.sleep(1)  # wrk stops with requests in flight: let restd finish them
        have = count_jobs(cluster, ["ALL"])
        if have > jobs:
            raise CommandFailed(f"{have} jobs submitted already: more than {jobs}")
        log(f"{have} jobs submitted through restd; the framed API adds {jobs - have}")
        request = {"spec": framed_spec(cluster.dir, hold=True)}
        for _ in range(jobs - have):
            cluster.client.call("Submit", request)

        async def first_and_scrapes() -> tuple[float, list[float]]:
            headers = {"X-SLURM-USER-TOKEN": token}
            async with aiohttp.ClientSession(base, headers=headers) as session:
                began = time.perf_counter()
                async with session.get(f"{V}/jobs") as reply:
                    text = await reply.read()
                first = (time.perf_counter() - began) * 1000  # as wrk times: body read
                listing = orjson.loads(text)
                if len(listing["jobs"]) != jobs:
                    raise CommandFailed(f"GET /jobs listed {len(listing['jobs'])} of {jobs}")
            scrapes = []
            async with aiohttp.ClientSession(f"http://127.0.0.1:{metrics_port}") as scrape:
                for _ in range(20):
                    began = time.perf_counter()
                    async with scrape.get("/metrics") as reply:
                        await reply.read()
                    scrapes.append((time.perf_counter() - began) * 1000)
            return first, scrapes

        first, scrapes = asyncio.run(first_and_scrapes())
        full = load(base, f"{V}/jobs", token, 1, seconds * 2, max(count // 50, 5))
        busy = load(base, f"{V}/jobs", token, CONNECTIONS, seconds * 2, max(count // 50, 5))
        return {
            "ping_ms": ping["p50_ms"],
            "jobs_empty_ms": empty["p50_ms"],
            "submissions_per_s": one["per_s"],
            "submission_p99_ms": one["p99_ms"],
            "submissions_concurrent_per_s": many["per_s"],
            "jobs_first_ms": first,
            "jobs_full_ms": full["p50_ms"],
            "jobs_full_p99_ms": full["p99_ms"],
            "jobs_full_per_s": busy["per_s"],
            "metrics_scrape_ms": statistics.median(scrapes),
        }


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, tls=True)
    jobs = 5000 if args.quick else 10_000
    seconds = 1.0 if args.quick else 3.0
    count = 200 if args.quick else 1000  # requests per measure without wrk
    baseline = python_baseline(10 if args.quick else 20)

    def measured() -> dict[str, dict[str, Any]]:
        """Every figure, from clusters with TLS as ``--tls`` says."""
        try:
            runs = each_run(args.runs, "restd", lambda _: one_run(jobs, seconds, count))
        except (CommandFailed, OSError, AssertionError) as exc:
            log(f"restd: failed: {exc}")
            return {"error": failed("", None, None, str(exc)[:2000])}

        def of(key: str) -> list[float]:
            return [run[key] for run in runs]

        figures = {
            "baseline_ping": figure(
                of("ping_ms"),
                "ms",
                digits=2,
                note="GET /slurm/v0.0.42/ping: the floor of a request",
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
                note="median of GET /slurm/v0.0.42/jobs over one connection, body read",
            ),
            f"jobs_{jobs}_p99": figure(of("jobs_full_p99_ms"), "ms", digits=1, jobs=jobs),
            f"jobs_{jobs}_first": figure(
                of("jobs_first_ms"),
                "ms",
                target="< 500",
                digits=1,
                jobs=jobs,
                note="the first listing after the jobs were submitted: every job's record "
                "built anew",
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
                note="POST /slurm/v0.0.42/job/submit one after another over one connection "
                "(slurmrestd's figure was taken so)",
            ),
            "submission_p99": figure(of("submission_p99_ms"), "ms", digits=2),
            f"submissions_{SUBMITTERS}_connections": figure(
                of("submissions_concurrent_per_s"),
                "submissions/s",
                target=">= 1000",
                digits=1,
                note=f"the same from {SUBMITTERS} keep-alive connections at once",
            ),
            f"metrics_scrape_{jobs}": figure(
                of("metrics_scrape_ms"),
                "ms",
                target="< 50",
                digits=2,
                jobs=jobs,
                note="GET /metrics on the controller (MetricsType=metrics/openmetrics)",
            ),
        }
        return figures

    figures = tls_passes(args, measured)
    generator = "wrk" if WRK else "aiohttp client (in this process)"
    report("restd", args, baseline, figures, jobs=jobs, load_generator=generator)


if __name__ == "__main__":
    main()
