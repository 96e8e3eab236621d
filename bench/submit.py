"""Submission rates: sbatch one process each, 8 parallel submitters, the API, a job array.

Every job is submitted held (``sbatch --hold``, ``JobSpec.hold``), so nothing
starts and the scheduler does not dominate. Each figure's every run gets a
fresh 4-node cluster in a temporary directory.

    python bench/submit.py [--quick] [--runs N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import (
    SLURM,
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
    run_ms,
    tls_passes,
)

PARALLEL = 8
CONCURRENT = 16


def _check(cluster: BenchCluster, expected: int) -> None:
    got = count_jobs(cluster, ["ALL"])
    if got != expected:
        raise CommandFailed(f"expected {expected} jobs in the controller, found {got}")


def sbatch_sequential(n: int) -> float:
    with BenchCluster() as cluster:
        args = cluster.command("sbatch", "--hold", "--wrap", "true")
        began = time.perf_counter()
        for _ in range(n):
            run_ms(args, cluster.env, cluster.dir)
        rate = n / (time.perf_counter() - began)
        _check(cluster, n)
    return rate


def sbatch_parallel(n: int) -> float:
    with BenchCluster() as cluster:
        args = cluster.command("sbatch", "--hold", "--wrap", "true")
        began = time.perf_counter()
        with ThreadPoolExecutor(PARALLEL) as pool:
            list(pool.map(lambda _: run_ms(args, cluster.env, cluster.dir), range(n)))
        rate = n / (time.perf_counter() - began)
        _check(cluster, n)
    return rate


def api_grpc(n: int) -> float:
    with BenchCluster() as cluster:
        api = cluster.api
        spec = api.spec(cluster.dir, hold=True)
        api.submit(spec)  # connect; not counted
        began = time.perf_counter()
        for _ in range(n):
            api.submit(spec)
        rate = n / (time.perf_counter() - began)
        _check(cluster, n + 1)
    return rate


def api_grpc_concurrent(n: int) -> float:
    """One process, grpc.aio, CONCURRENT calls in flight."""
    with BenchCluster() as cluster:
        api = cluster.api
        spec = api.spec(cluster.dir, hold=True)

        async def submit_all() -> float:
            from corral import grpctls
            from corral.wire import corral_pb2_grpc

            async with grpctls.channel(api.target, api.tls) as channel:
                stub = corral_pb2_grpc.ControllerStub(channel)
                await stub.Submit(api.signed("Submit", api.pb.SubmitRequest(spec=spec)))
                left = n  # the connection is made: from here on, counted

                async def worker() -> None:
                    nonlocal left
                    while left > 0:
                        left -= 1
                        await stub.Submit(api.signed("Submit", api.pb.SubmitRequest(spec=spec)))

                began = time.perf_counter()
                await asyncio.gather(*(worker() for _ in range(CONCURRENT)))
                return n / (time.perf_counter() - began)

        rate = asyncio.run(submit_all())
        _check(cluster, n + 1)
    return rate


def api_framed(n: int) -> float:
    with BenchCluster() as cluster:
        request = {"spec": framed_spec(cluster.dir, hold=True)}
        began = time.perf_counter()
        for _ in range(n):
            cluster.client.call("Submit", request)
        rate = n / (time.perf_counter() - began)
        _check(cluster, n)
    return rate


def sbatch_array(tasks: int) -> float:
    with BenchCluster() as cluster:
        took = cluster.time_command("sbatch", f"--array=1-{tasks}", "--hold", "--wrap", "true")
        _check(cluster, tasks)
    return took / 1000


def api_array(tasks: int) -> float:
    with BenchCluster() as cluster:
        api = cluster.api
        api.jobs()  # connect; not counted
        spec = api.spec(cluster.dir, hold=True, array=f"1-{tasks}")
        began = time.perf_counter()
        api.submit(spec)
        took = time.perf_counter() - began
        _check(cluster, tasks)
    return took


def measure(name: str, runs: int, body: Any, arg: int, unit: str, **fig: Any) -> dict[str, Any]:
    try:
        samples = each_run(runs, name, lambda _: body(arg))
    except (CommandFailed, AssertionError, OSError) as exc:
        log(f"{name}: failed: {exc}")
        return failed(unit, fig.get("target"), fig.get("slurm"), str(exc)[:2000])
    return figure(samples, unit, **fig)


def main() -> None:
    args = arguments(__doc__.splitlines()[0], runs=3, quick_runs=1, tls=True)
    n = 100 if args.quick else 1000
    tasks = 1000
    baseline = python_baseline(10 if args.quick else 20)

    def measured() -> dict[str, dict[str, Any]]:
        """Every figure, from clusters with TLS as ``--tls`` says."""
        figures: dict[str, dict[str, Any]] = {}
        figures["sbatch_one_process_per_submission"] = measure(
            "sbatch, one process per submission",
            args.runs,
            sbatch_sequential,
            n,
            "submissions/s",
            target=">= 33.3",
            slurm=SLURM["sbatch_submissions_per_s"],
            digits=1,
            jobs=n,
            note="no target of its own: the 30 ms budget of a client command gives >= 33.3/s",
        )
        figures["sbatch_8_parallel_submitters"] = measure(
            f"sbatch, {PARALLEL} parallel submitters",
            args.runs,
            sbatch_parallel,
            n,
            "submissions/s",
            target=None,
            slurm=SLURM["sbatch_8_submitters_per_s"],
            digits=1,
            jobs=n,
            note=f"{PARALLEL} threads each running sbatch processes one after another, on "
            f"{os.cpu_count()} cores",
        )
        figures["api_grpc_one_process"] = measure(
            "gRPC API, one process",
            args.runs,
            api_grpc,
            n,
            "submissions/s",
            target=">= 1000",
            slurm=None,
            digits=1,
            jobs=n,
            note="ControllerStub.Submit, one call after another, signed Credential",
        )
        figures["api_framed_client_one_process"] = measure(
            "framed client, one process",
            args.runs,
            api_framed,
            n,
            "submissions/s",
            target=">= 1000",
            slurm=None,
            digits=1,
            jobs=n,
            note="corral.client.Client('Submit'), one call after another, Unix socket",
        )
        figures["api_grpc_one_process_16_in_flight"] = measure(
            f"gRPC API, one process, {CONCURRENT} in flight",
            args.runs,
            api_grpc_concurrent,
            n,
            "submissions/s",
            target=">= 1000",
            slurm=None,
            digits=1,
            jobs=n,
            note=f"grpc.aio with {CONCURRENT} Submit calls in flight (extra figure)",
        )
        figures["sbatch_array_1000"] = measure(
            f"sbatch --array=1-{tasks}",
            args.runs,
            sbatch_array,
            tasks,
            "s",
            target="< 0.03",
            slurm=SLURM["array_1000_s"],
            digits=4,
            tasks=tasks,
            note="wall time of one sbatch process; target: the 30 ms budget of a client command",
        )
        figures["api_array_1000"] = measure(
            f"gRPC API array 1-{tasks}",
            args.runs,
            api_array,
            tasks,
            "s",
            target=None,
            slurm=None,
            digits=4,
            tasks=tasks,
            note="one Submit call with array=1-1000 (extra figure: the "
            "controller's share of the sbatch figure)",
        )
        return figures

    figures = tls_passes(args, measured)
    report("submit", args, baseline, figures, submissions_per_run=n)


if __name__ == "__main__":
    main()
