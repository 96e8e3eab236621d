"""``corral sim TRACE --policy fcfs,easy,conservative``: policies side by side.

Each policy replays the same trace on the same cluster in a process of its
own (``multiprocessing``, spawned: a replay is CPU-bound Python, so threads
would take turns), and one table compares them. Per policy:

* jobs replayed;
* mean and p95 wait (start - submit); p95 by nearest rank: the smallest wait
  at least 95 % of the jobs waited no longer than;
* mean bounded slowdown: max(1, (wait + run) / max(run, 10 s)) (Feitelson's
  bound, as report.py);
* utilization: the CPU-seconds the jobs ran over all CPUs x the makespan;
* makespan: last end - first submit.

With ``-f slurm.conf`` the same figures follow per partition and per account
(utilization there: the group's CPU-seconds over the whole cluster's).

A worker gets a ``Setup`` (paths and numbers: cheap to send, and each worker
reads the trace and the configuration itself) and sends back a ``Replay``.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from controller.sim.errors import SimError
from controller.sim.replay import JobResult, Replay, replay
from controller.sim.report import SLOWDOWN_THRESHOLD, save, table
from controller.sim.siterun import Setup

__all__ = [
    "Figures",
    "as_dict",
    "figures",
    "group_dicts",
    "group_text",
    "grouped",
    "run",
    "run_all",
    "text",
]


def run(setup: Setup, policy: str) -> Replay:
    """One replay of ``setup`` under ``policy`` (what each worker runs)."""
    from controller.sim import siterun, swf
    from controller.sim.replay import cluster_shape

    trace = swf.read(setup.trace, setup.start, setup.stop)
    if setup.conf is not None:
        site = siterun.site_of(setup)
        result = siterun.replay_site(site, trace, policy, timeline=setup.timeline)
    else:
        nodes, cpus = cluster_shape(trace.header, setup.nodes, setup.cpus_per_node)
        result = replay(trace, nodes, cpus, policy, timeline=setup.timeline)
    # Read-only mapping views do not pickle: the parent gets plain dicts.
    return replace(result, skipped=dict(result.skipped), queues=dict(result.queues))


def run_all(setup: Setup, policies: Sequence[str]) -> list[Replay]:
    """One replay per policy, in parallel processes, in the order of ``policies``."""
    workers = min(len(policies), os.cpu_count() or 1)
    if workers <= 1:
        return [run(setup, policy) for policy in policies]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = [pool.submit(run, setup, policy) for policy in policies]
        return [future.result() for future in futures]


@dataclass(frozen=True, slots=True)
class Figures:
    jobs: int
    mean_wait: float  # seconds
    p95_wait: int
    mean_bounded_slowdown: float
    utilization: float  # 0..1
    makespan: int  # seconds (of the whole replay, for a group too)


def figures(jobs: Sequence[JobResult], total_cpus: int, makespan: int | None = None) -> Figures:
    """The figures of ``jobs`` on ``total_cpus`` CPUs; ``makespan`` that of the whole
    replay when ``jobs`` are one group of it (else theirs)."""
    if not jobs:
        return Figures(0, 0.0, 0, 0.0, 0.0, makespan or 0)
    waits = sorted(job.start - job.submit for job in jobs)
    n = len(waits)
    slowdowns = sum(
        max(1.0, (job.end - job.submit) / max(job.end - job.start, SLOWDOWN_THRESHOLD))
        for job in jobs
    )
    if makespan is None:
        makespan = max(job.end for job in jobs) - min(job.submit for job in jobs)
    cpu_seconds = sum((job.end - job.start) * job.procs for job in jobs)
    return Figures(
        jobs=n,
        mean_wait=sum(waits) / n,
        p95_wait=waits[-(-95 * n // 100) - 1],
        mean_bounded_slowdown=slowdowns / n,
        utilization=cpu_seconds / (total_cpus * makespan) if makespan else 0.0,
        makespan=makespan,
    )


def grouped(result: Replay, group_of: Callable[[JobResult], str]) -> dict[str, Figures]:
    """The figures of each group of ``result``'s jobs (by name)."""
    groups: dict[str, list[JobResult]] = {}
    for job in result.jobs:
        groups.setdefault(group_of(job), []).append(job)
    whole = figures(result.jobs, result.total_cpus).makespan
    return {name: figures(jobs, result.total_cpus, whole) for name, jobs in sorted(groups.items())}


HEADER = ("policy", "jobs", "mean wait", "p95 wait", "mean bsld", "util", "makespan")


def _row(label: str, f: Figures) -> tuple[str, ...]:
    return (
        label,
        str(f.jobs),
        f"{f.mean_wait:.1f} s",
        f"{f.p95_wait} s",
        f"{f.mean_bounded_slowdown:.2f}",
        f"{100 * f.utilization:.2f} %",
        f"{f.makespan} s",
    )


Groups = Mapping[str, Callable[[JobResult], str]]  # kind (partition, account) -> job's group


def text(results: Sequence[Replay], groups: Groups | None = None) -> str:
    """The comparison table, then one per kind of group (``partition``, ``account``)."""
    shown = table(HEADER, (_row(r.policy, figures(r.jobs, r.total_cpus)) for r in results))
    return "\n\n".join([shown, group_text(results, groups)]) if groups else shown


def group_text(results: Sequence[Replay], groups: Groups | None) -> str:
    """One table per kind of group: a row per policy and group."""
    parts = []
    for kind, group_of in (groups or {}).items():
        rows = [
            _row(f"{r.policy} {name}", f)
            for r in results
            for name, f in grouped(r, group_of).items()
        ]
        parts.append(table((f"policy {kind}", *HEADER[1:]), rows))
    return "\n\n".join(parts)


def _figures_dict(f: Figures) -> dict[str, Any]:
    return {
        "jobs": f.jobs,
        "avg_wait_s": round(f.mean_wait, 3),
        "p95_wait_s": f.p95_wait,
        "avg_bounded_slowdown": round(f.mean_bounded_slowdown, 4),
        "utilization": round(f.utilization, 6),
        "makespan_s": f.makespan,
    }


def group_dicts(result: Replay, groups: Groups | None) -> dict[str, Any]:
    """Per kind of group (``partitions``, ``accounts``) each group's figures."""
    return {
        f"{kind}s": {name: _figures_dict(f) for name, f in grouped(result, group_of).items()}
        for kind, group_of in (groups or {}).items()
    }


def as_dict(trace: str, results: Sequence[Replay], groups: Groups | None = None) -> dict[str, Any]:
    """The comparison as ``--json`` prints it: per policy its figures (and groups')."""
    policies: dict[str, Any] = {}
    for r in results:
        entry = _figures_dict(figures(r.jobs, r.total_cpus))
        entry["skipped"] = sum(r.skipped.values())
        entry["wall_s"] = round(r.wall_seconds, 3)
        entry.update(group_dicts(r, groups))
        policies[r.policy] = entry
    return {
        "trace": trace,
        "cpus": results[0].total_cpus if results else 0,
        "slowdown_threshold_s": SLOWDOWN_THRESHOLD,
        "policies": policies,
    }


def draw(path: str, results: Sequence[Replay], title: str) -> None:
    """One PNG: each policy's wait (by submission time) and queue length over time."""
    from controller.sim.report import plotting_available

    if not plotting_available():
        raise SimError("--png needs matplotlib, an optional extra: pip install 'corral[plot]'")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = min(job.submit for r in results for job in r.jobs)
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    for r in results:
        jobs = sorted(r.jobs, key=lambda j: j.submit)
        top.plot(
            [(j.submit - start) / 86400 for j in jobs],
            [(j.start - j.submit) / 3600 for j in jobs],
            linewidth=0.5,
            label=r.policy,
        )
        bottom.step(
            [(t - start) / 86400 for t, _, _ in r.timeline],
            [pending for _, pending, _ in r.timeline],
            where="post",
            linewidth=0.6,
            label=r.policy,
        )
    top.set_ylabel("wait (hours)")
    top.set_title(title)
    top.legend(loc="upper right")
    bottom.set_ylabel("pending jobs")
    bottom.set_xlabel("days since the first submission")
    save(plt, fig, path)
