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

With ``--tls both`` (the default) each run starts a plaintext and a TLS cluster
side by side and takes every measure in short turns on each, the order flipping
every round: passes minutes apart meet this machine's slow spells on one side
only, and TLS's cost on a sub-millisecond call is smaller than those.

    python bench/restd.py [--quick] [--runs N] [--tls on|off|both]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    BenchCluster,
    CommandFailed,
    arguments,
    beside,
    count_jobs,
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


class Side:
    """One cluster under measure, with its restd, a token and a metrics port."""

    def __init__(self, stack: contextlib.ExitStack, tls: bool) -> None:
        self.tls = tls
        self.metrics_port = free_port()
        settings = (
            "MetricsType=metrics/openmetrics",
            f"MetricsParameters=port={self.metrics_port}",
        )
        self.cluster = stack.enter_context(BenchCluster(settings=settings, tls=tls))
        self.base = self.cluster.start_restd()
        lifespan = self.cluster.run("scontrol", "token", "lifespan=3600").stdout
        self.token = lifespan.strip().split("=", 1)[1]
        desc = {
            "script": "#!/bin/sh\ntrue\n",
            "environment": [f"PATH={os.environ.get('PATH', '/bin')}"],
            "current_working_directory": str(self.cluster.dir),
            "hold": True,
        }
        self.body = json.dumps({"job": desc})
        self.values: dict[str, list[float]] = {}

    def load(self, path: str, connections: int, seconds: float, count: int, body: str = "") -> Load:
        return load(self.base, path, self.token, connections, seconds, count, body)

    def add(self, **values: float) -> None:
        for key, value in values.items():
            self.values.setdefault(key, []).append(value)

    def fill(self, jobs: int) -> None:
        """Held jobs through the framed API up to ``jobs`` in all."""
        have = count_jobs(self.cluster, ["ALL"])
        if have > jobs:
            raise CommandFailed(f"{have} jobs submitted already: more than {jobs}")
        log(f"{have} jobs submitted through restd; the framed API adds {jobs - have}")
        request = {"spec": framed_spec(self.cluster.dir, hold=True)}
        for _ in range(jobs - have):
            self.cluster.client.call("Submit", request)

    async def first_and_scrapes(self, jobs: int, scrapes: int) -> None:
        headers = {"X-SLURM-USER-TOKEN": self.token}
        async with aiohttp.ClientSession(self.base, headers=headers) as session:
            began = time.perf_counter()
            async with session.get(f"{V}/jobs") as reply:
                text = await reply.read()
            self.add(jobs_first_ms=(time.perf_counter() - began) * 1000)  # as wrk: body read
            listing = orjson.loads(text)
            if len(listing["jobs"]) != jobs:
                raise CommandFailed(f"GET /jobs listed {len(listing['jobs'])} of {jobs}")
        await self.scrape(scrapes)

    async def scrape(self, scrapes: int) -> None:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{self.metrics_port}") as session:
            for _ in range(scrapes):
                began = time.perf_counter()
                async with session.get("/metrics") as reply:
                    await reply.read()
                self.add(metrics_scrape_ms=(time.perf_counter() - began) * 1000)


def one_run(
    run: int, kinds: Sequence[bool], jobs: int, seconds: float, count: int, rounds: int
) -> dict[bool, dict[str, float]]:
    """Every figure on one cluster per entry of ``kinds`` (TLS or not), all up at once.

    Each measure is taken in ``rounds`` short bursts, the clusters taking turns in an
    order that flips every round, so that a machine growing busier or quieter in the
    middle of a measure weighs on both sides alike; a side's figure is the median of
    its bursts.
    """
    with contextlib.ExitStack() as stack:
        sides = [Side(stack, tls) for tls in kinds]

        def turns(round_: int) -> list[Side]:
            return sides if (round_ + run) % 2 == 0 else sides[::-1]

        for round_ in range(rounds):
            for side in turns(round_):
                side.add(ping_ms=side.load(f"{V}/ping", 1, seconds, count)["p50_ms"])
                side.add(jobs_empty_ms=side.load(f"{V}/jobs", 1, seconds, count)["p50_ms"])
        for round_ in range(rounds):
            for side in turns(round_):
                one = side.load(f"{V}/job/submit", 1, seconds, count, side.body)
                many = side.load(f"{V}/job/submit", SUBMITTERS, seconds, count, side.body)
                side.add(
                    submissions_per_s=one["per_s"],
                    submission_p99_ms=one["p99_ms"],
                    submissions_concurrent_per_s=many["per_s"],
                )
        time.sleep(1)  # wrk stops with requests in flight: let restd finish them
        for side in sides:
            side.fill(jobs)
        for side in turns(0):
            asyncio.run(side.first_and_scrapes(jobs, scrapes=20 // rounds))
        listings = max(count // 50, 5)
        for round_ in range(rounds):
            for side in turns(round_):
                full = side.load(f"{V}/jobs", 1, seconds * 2, listings)
                busy = side.load(f"{V}/jobs", CONNECTIONS, seconds * 2, listings)
                side.add(
                    jobs_full_ms=full["p50_ms"],
                    jobs_full_p99_ms=full["p99_ms"],
                    jobs_full_per_s=busy["per_s"],
                )
                if round_:
                    asyncio.run(side.scrape(20 // rounds))
        return {
            side.tls: {key: statistics.median(got) for key, got in side.values.items()}
            for side in sides
        }


def figures_of(runs: list[dict[str, float]], jobs: int) -> dict[str, dict[str, Any]]:
    """The benchmark's figures from the runs of one kind of cluster."""

    def of(key: str) -> list[float]:
        return [run[key] for run in runs]

    return {
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
            note="the first listing after the jobs were submitted: every job's record built anew",
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


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, tls=True)
    jobs = 5000 if args.quick else 10_000
    count = 200 if args.quick else 1000  # requests per measure without wrk
    kinds = {"both": (False, True), "on": (True,), "off": (False,)}[args.tls]
    # Side by side, each measure is taken in short turns; alone, in one burst.
    rounds = (2 if args.quick else 4) if len(kinds) > 1 else 1
    seconds = 1.0 if args.quick or rounds > 1 else 3.0
    baseline = python_baseline(10 if args.quick else 20)
    try:
        runs = each_run(
            args.runs, "restd", lambda run: one_run(run, kinds, jobs, seconds, count, rounds)
        )
    except (CommandFailed, OSError, AssertionError) as exc:
        log(f"restd: failed: {exc}")
        figures = {"error": failed("", None, None, str(exc)[:2000])}
    else:
        by_kind = {tls: figures_of([run[tls] for run in runs], jobs) for tls in kinds}
        if len(kinds) > 1:
            plain = by_kind[False]
            figures = {name: beside(fig, plain.get(name)) for name, fig in by_kind[True].items()}
        else:
            figures = {name: {**fig, "tls": kinds[0]} for name, fig in by_kind[kinds[0]].items()}
    generator = "wrk" if WRK else "aiohttp client (in this process)"
    report("restd", args, baseline, figures, jobs=jobs, load_generator=generator, rounds=rounds)


if __name__ == "__main__":
    main()
