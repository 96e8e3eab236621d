"""Per-queue figures of a replay with ``--queues`` (``corral sim``'s report adds them).

For each leaf queue, in queues.conf's order:

* jobs: the trace jobs that landed in it;
* mean and p95 wait (start of the run that completed - submit, so a run lost
  to reclaim counts as waiting); p95 by nearest rank: the smallest wait at
  least 95 % of the queue's jobs waited no longer than;
* mean bounded slowdown, as the summary's (report.py);
* utilization: the CPU-seconds its jobs held (runs later lost to reclaim
  included: they kept the CPUs from others) over the cluster's, all CPUs times
  the makespan;
* borrowed share, per resource the queues govern: of what it held over time,
  the part above its guarantee;
* preempted: evictions of its jobs by reclaim (a job evicted twice counts
  twice); reclaimed for: passes in which one of its waiting jobs had others
  evicted for it (a job counts once per pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.sim.replay import Replay
from controller.sim.report import SLOWDOWN_THRESHOLD, Summary, table

__all__ = ["QueueFigures", "as_dicts", "figures", "text"]


@dataclass(frozen=True, slots=True)
class QueueFigures:
    queue: str
    jobs: int
    mean_wait: float  # seconds
    p95_wait: int
    mean_bounded_slowdown: float
    utilization: float  # 0..1 of the cluster's CPU-seconds
    cpu_seconds: float
    lost_cpu_seconds: float  # of runs reclaim ended
    borrowed_share: dict[str, float]  # resource -> 0..1 of what it held
    preempted: int
    reclaimed_for: int
    requeued_jobs: int  # its jobs requeued at least once


def figures(result: Replay, summary: Summary) -> list[QueueFigures]:
    """The figures of each leaf queue of ``result`` (none without ``--queues``)."""
    waits: dict[str, list[int]] = {queue: [] for queue in result.queues}
    slowdowns: dict[str, float] = dict.fromkeys(result.queues, 0.0)
    requeued: dict[str, int] = dict.fromkeys(result.queues, 0)
    for job in result.jobs:
        if job.queue:
            run = job.end - job.start
            waits[job.queue].append(job.start - job.submit)
            slowdowns[job.queue] += max(1.0, (job.wait + run) / max(run, SLOWDOWN_THRESHOLD))
            requeued[job.queue] += job.requeued > 0
    cluster = result.total_cpus * summary.makespan
    out = []
    for queue, use in result.queues.items():
        ordered = sorted(waits[queue])
        n = len(ordered)
        cpu_seconds = use.seconds.get("cpu", 0.0)
        out.append(
            QueueFigures(
                queue=queue,
                jobs=n,
                mean_wait=sum(ordered) / n if n else 0.0,
                p95_wait=ordered[-(-95 * n // 100) - 1] if n else 0,  # nearest rank
                mean_bounded_slowdown=slowdowns[queue] / n if n else 0.0,
                utilization=cpu_seconds / cluster if cluster else 0.0,
                cpu_seconds=cpu_seconds,
                lost_cpu_seconds=use.lost_cpu_seconds,
                borrowed_share={
                    r: use.borrowed.get(r, 0.0) / held if (held := use.seconds.get(r)) else 0.0
                    for r in use.guarantee
                },
                preempted=use.preempted,
                reclaimed_for=use.reclaimed_for,
                requeued_jobs=requeued[queue],
            )
        )
    return out


def as_dicts(rows: list[QueueFigures]) -> list[dict[str, Any]]:
    """The figures as ``--json`` carries them (key ``queues``)."""
    return [
        {
            "queue": row.queue,
            "jobs": row.jobs,
            "avg_wait_s": round(row.mean_wait, 3),
            "p95_wait_s": row.p95_wait,
            "avg_bounded_slowdown": round(row.mean_bounded_slowdown, 4),
            "utilization": round(row.utilization, 6),
            "cpu_s": round(row.cpu_seconds, 3),
            "lost_cpu_s": round(row.lost_cpu_seconds, 3),
            "borrowed_share": {r: round(v, 6) for r, v in row.borrowed_share.items()},
            "preempted": row.preempted,
            "reclaimed_for": row.reclaimed_for,
            "requeued_jobs": row.requeued_jobs,
        }
        for row in rows
    ]


HEADER = (
    "queue",
    "jobs",
    "avg wait",
    "p95 wait",
    "slowdown",
    "util",
    "borrowed",
    "preempted",
    "reclaimed for",
)


def text(rows: list[QueueFigures]) -> str:
    """The figures as a table under ``corral sim``'s summary."""
    rows_shown = [
        (
            row.queue,
            str(row.jobs),
            f"{row.mean_wait:.1f} s",
            f"{row.p95_wait} s",
            f"{row.mean_bounded_slowdown:.2f}",
            f"{100 * row.utilization:.2f} %",
            " ".join(f"{r} {100 * v:.1f} %" for r, v in row.borrowed_share.items()) or "-",
            str(row.preempted),
            str(row.reclaimed_for),
        )
        for row in rows
    ]
    return table(HEADER, rows_shown)
