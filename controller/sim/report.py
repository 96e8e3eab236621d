"""What a replay amounts to: summary figures, one CSV row per job, and a plot.

The figures are the ones scheduling papers compare policies with, so a
replay here can be set beside published ones:

* average wait: start - submit;
* average bounded slowdown: max(1, (wait + run) / max(run, 10 s)), so that
  very short jobs do not dominate the mean (Feitelson et al.'s threshold);
* utilization: CPU-seconds the jobs ran / (all CPUs x makespan);
* makespan: last end - first submit.

Plotting needs matplotlib, an optional extra (``pip install corral[plot]``):
nothing else in Corral needs it, and it costs a large import. Without it
``draw`` raises a SimError, which the CLI checks before replaying.
"""

from __future__ import annotations

import csv
import importlib.util
import os
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from controller.sim.errors import SimError
from controller.sim.replay import JobResult, Replay
from corral.timefmt import format_hms

#: Runs shorter than this count as this long in the bounded slowdown.
SLOWDOWN_THRESHOLD = 10

CSV_COLUMNS = ("id", "submit", "start", "end", "wait", "run", "procs", "nodes")
#: What ``--queues`` adds to each row: the job's leaf queue ("" in none), its runs lost.
QUEUE_COLUMNS = ("queue", "requeued")


@dataclass(frozen=True, slots=True)
class Summary:
    jobs: int
    avg_wait: float  # seconds
    max_wait: int
    avg_bounded_slowdown: float
    utilization: float  # 0..1
    makespan: int  # seconds
    first_submit: int
    last_end: int


def summarize(result: Replay) -> Summary:
    jobs = result.jobs
    waits = 0
    max_wait = 0
    slowdowns = 0.0
    cpu_seconds = 0
    for job in jobs:
        run = job.end - job.start
        wait = job.start - job.submit
        waits += wait
        max_wait = max(max_wait, wait)
        slowdowns += max(1.0, (wait + run) / max(run, SLOWDOWN_THRESHOLD))
        cpu_seconds += run * job.procs
    first = min(job.submit for job in jobs)
    last = max(job.end for job in jobs)
    makespan = last - first
    return Summary(
        jobs=len(jobs),
        avg_wait=waits / len(jobs),
        max_wait=max_wait,
        avg_bounded_slowdown=slowdowns / len(jobs),
        utilization=cpu_seconds / (result.total_cpus * makespan) if makespan else 0.0,
        makespan=makespan,
        first_submit=first,
        last_end=last,
    )


def as_dict(trace: str, result: Replay, summary: Summary) -> dict[str, Any]:
    """The summary as ``--json`` prints it (seconds; utilization as a fraction)."""
    return {
        "trace": trace,
        "policy": result.policy,
        "nodes": result.nodes,
        "cpus_per_node": result.cpus_per_node,
        "jobs": summary.jobs,
        "skipped": sum(result.skipped.values()),
        "skipped_why": dict(result.skipped),
        "avg_wait_s": round(summary.avg_wait, 3),
        "max_wait_s": summary.max_wait,
        "avg_bounded_slowdown": round(summary.avg_bounded_slowdown, 4),
        "slowdown_threshold_s": SLOWDOWN_THRESHOLD,
        "utilization": round(summary.utilization, 6),
        "makespan_s": summary.makespan,
        "first_submit": summary.first_submit,
        "last_end": summary.last_end,
        "wall_s": round(result.wall_seconds, 3),
        "core_calls": result.core.count,
        "core_s": round(result.core.seconds, 3),
    }


def text(trace: str, result: Replay, summary: Summary) -> str:
    """The summary as ``corral sim`` prints it by default."""
    skipped = sum(result.skipped.values())
    why = ", ".join(f"{reason}: {count}" for reason, count in sorted(result.skipped.items()))
    rows = [
        ("trace", trace),
        ("cluster", f"{_shape(result)}, policy {result.policy}"),
        ("jobs", f"{summary.jobs}" + (f", {skipped} skipped ({why})" if skipped else "")),
        ("average wait", f"{summary.avg_wait:.1f} s ({format_hms(round(summary.avg_wait))})"),
        ("max wait", f"{summary.max_wait} s ({format_hms(summary.max_wait)})"),
        (
            "avg bounded slowdown",
            f"{summary.avg_bounded_slowdown:.2f} (runs under {SLOWDOWN_THRESHOLD} s count as "
            f"{SLOWDOWN_THRESHOLD} s)",
        ),
        ("utilization", f"{100 * summary.utilization:.2f} %"),
        ("makespan", f"{summary.makespan} s ({format_hms(summary.makespan)})"),
        (
            "replay",
            f"{result.wall_seconds:.2f} s wall, {result.core.count} core calls "
            f"({result.core.seconds:.2f} s in the core)",
        ),
    ]
    width = max(len(label) for label, _ in rows)
    return "\n".join(f"{label:<{width}}  {value}" for label, value in rows)


def _shape(result: Replay) -> str:
    """``N nodes x C CPUs (T CPUs)``, or ``N nodes, T CPUs`` where the nodes differ."""
    if result.cpus:
        return f"{result.nodes} node{'s' if result.nodes > 1 else ''}, {result.total_cpus} CPUs"
    return f"{result.nodes} nodes x {result.cpus_per_node} CPUs ({result.total_cpus} CPUs)"


def csv_rows(jobs: Iterable[JobResult]) -> Iterable[tuple[int, ...]]:
    for job in jobs:
        yield (
            job.number,
            job.submit,
            job.start,
            job.end,
            job.start - job.submit,
            job.end - job.start,
            job.procs,
            job.nodes,
        )


def write_csv(path: str, jobs: Iterable[JobResult], queues: bool = False) -> None:
    """One row per job (``CSV_COLUMNS``, then ``QUEUE_COLUMNS`` with ``queues``), times in
    seconds on the trace's clock."""
    try:
        with open(path, "w", newline="") as out:
            writer = csv.writer(out)
            if not queues:
                writer.writerow(CSV_COLUMNS)
                writer.writerows(csv_rows(jobs))
                return
            writer.writerow(CSV_COLUMNS + QUEUE_COLUMNS)
            jobs = tuple(jobs)
            writer.writerows(
                (*row, job.queue, job.requeued)
                for row, job in zip(csv_rows(jobs), jobs, strict=True)
            )
    except OSError as exc:
        raise SimError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_outputs(csv_path: str | None, png: str | None) -> None:
    """Before a replay: each output file's directory is writable, and --png's plotting
    library is there (a SimError naming what is wrong otherwise)."""
    for path in (csv_path, png):
        if path is not None and not os.access(os.path.dirname(path) or ".", os.W_OK):
            raise SimError(f"cannot write {path}: no such directory, or not writable")
    if png is not None and not plotting_available():
        raise SimError("--png needs matplotlib, an optional extra: pip install 'corral[plot]'")


def plotting_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def daily_utilization(result: Replay) -> tuple[list[float], list[float]]:
    """Time-weighted mean of busy CPUs (%) per day from the first sample: (day, mean)."""
    timeline = result.timeline
    if not timeline:
        return [], []
    start = timeline[0][0]
    busy_seconds: dict[int, float] = {}
    for (t, _, cpus), (t_next, _, _) in pairwise(timeline):
        while t < t_next:
            day = (t - start) // 86400
            until = min(t_next, start + (day + 1) * 86400)
            busy_seconds[day] = busy_seconds.get(day, 0.0) + cpus * (until - t)
            t = until
    days = sorted(busy_seconds)
    return [float(d) for d in days], [
        100 * busy_seconds[d] / (result.total_cpus * 86400) for d in days
    ]


def table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    """Columns as wide as their widest cell: the first left-aligned, the others right."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ).rstrip()
        for line in lines
    )


def save(plt: Any, fig: Any, path: str) -> None:
    """Write a finished figure to ``path`` (a SimError if it cannot be) and free it."""
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise SimError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)


def draw(path: str, result: Replay, title: str) -> None:
    """A PNG of the queue length and utilization over time (needs ``timeline``)."""
    if not plotting_available():
        raise SimError("--png needs matplotlib, an optional extra: pip install 'corral[plot]'")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not result.timeline:
        raise SimError("the replay recorded no timeline to plot")
    start = result.timeline[0][0]
    days = [(t - start) / 86400 for t, _, _ in result.timeline]
    queue = [pending for _, pending, _ in result.timeline]
    busy = [100 * cpus / result.total_cpus for _, _, cpus in result.timeline]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    top.step(days, queue, where="post", linewidth=0.6)
    top.set_ylabel("pending jobs")
    top.set_title(title)
    bottom.step(days, busy, where="post", linewidth=0.4, color="tab:green", alpha=0.5)
    mean_days, mean_busy = daily_utilization(result)
    bottom.step(
        mean_days, mean_busy, where="post", linewidth=1.2, color="black", label="daily mean"
    )
    bottom.legend(loc="lower right")
    bottom.set_ylabel("CPUs busy (%)")
    bottom.set_ylim(0, 100)
    bottom.set_xlabel("days since the first submission")
    save(plt, fig, path)
