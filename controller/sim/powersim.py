"""``corral sim --suspend-time S --resume-time R``: what power saving saves and costs.

The model is the controller's power saving (docs/design.md, "Power saving") cut to
its two figures that matter for a trace:

* a node idle (no job on it) for S seconds is powered down at once (SuspendTime;
  SuspendProgram and SuspendTimeout take no time here);
* the scheduler gives powered-down nodes to jobs as it gives any other (as
  slurmctld does); a job given one or more holds its nodes from then on and starts
  R seconds later (ResumeProgram's boot; the job is CONFIGURING meanwhile), its time
  limit counted from that start, as Slurm 22.05 resets a job's start once its nodes
  are up.

``compare`` replays the trace twice in this process, without and with power
saving, so that the added wait is measured against the same trace, cluster and
policy. The report gives node-hours powered down (from the first submission to the
last job's end, out of all node-hours in it) and the added wait: per job, its wait
with power saving less its wait without, mean and p95 (nearest rank) over all jobs,
and how many jobs waited for a resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.sim.replay import Replay, replay
from controller.sim.swf import Trace

#: Labels as wide as report.text's widest ("avg bounded slowdown"): one table.
LABEL_WIDTH = 20


@dataclass(frozen=True, slots=True)
class PowerModel:
    suspend_time: int  # seconds idle before a node is powered down
    resume_time: int  # seconds a job waits for its powered-down nodes to come up


class PowerTracker:
    """One replay's nodes: since when each is idle, and what power saving did. A node
    no job has had yet is idle since ``start`` (the first submission).

    Implements ``replay.PowerHooks``; ``close`` ends the count at the replay's end.
    """

    def __init__(self, model: PowerModel, start: int) -> None:
        self.model = model
        self.start = start
        self.idle_since: dict[str, int] = {}
        self.busy: set[str] = set()
        self.down_seconds = 0  # node-seconds powered down so far
        self.resumed_nodes = 0
        self.delayed_jobs = 0

    def started(self, nodes: tuple[str, ...], now: int) -> int:
        """Nodes given to a job: those idle for SuspendTime were powered down, and
        the job waits ResumeTime for them (once, however many)."""
        asleep = 0
        for name in nodes:
            if name in self.busy:  # another job's too: on
                continue
            self.busy.add(name)
            since = self.idle_since.pop(name, self.start)
            if now - since >= self.model.suspend_time:
                asleep += 1
                self.down_seconds += now - since - self.model.suspend_time
        if not asleep:
            return 0
        self.resumed_nodes += asleep
        self.delayed_jobs += 1
        return self.model.resume_time

    def idle(self, name: str, now: int) -> None:
        self.busy.discard(name)
        self.idle_since[name] = now

    def close(self, end: int, nodes: int) -> None:
        """The replay of ``nodes`` nodes ended at ``end``: those idle then count as
        powered down until it, the ones no job had from the start."""
        suspend = self.model.suspend_time
        untouched = nodes - len(self.idle_since) - len(self.busy)
        for since in [*self.idle_since.values(), *[self.start] * untouched]:
            self.down_seconds += max(end - since - suspend, 0)
        self.idle_since.clear()


@dataclass(frozen=True, slots=True)
class PowerFigures:
    """Power saving's replay beside the same replay without it."""

    model: PowerModel
    node_hours: float  # all nodes, first submission to last end (with power saving)
    down_node_hours: float
    resumed_nodes: int
    delayed_jobs: int
    mean_wait: float  # seconds, without power saving
    mean_wait_power: float  # with it
    p95_wait: int
    p95_wait_power: int
    mean_added_wait: float  # per job: with less without
    p95_added_wait: int


def _p95(values: list[int]) -> int:
    """Nearest rank: the smallest value at or above 95 % of them (compare.py's)."""
    ordered = sorted(values)
    return ordered[-(-95 * len(ordered) // 100) - 1]


def compare(
    trace: Trace, nodes: int, cpus_per_node: int, policy: str, model: PowerModel, **options: Any
) -> tuple[Replay, PowerFigures]:
    """``trace`` replayed with power saving, and its figures against the same replay
    without; ``options`` are ``replay``'s, for both."""
    base = replay(trace, nodes, cpus_per_node, policy, **options)
    tracker = PowerTracker(model, min(job.submit for job in base.jobs))
    power = replay(trace, nodes, cpus_per_node, policy, power=tracker, **options)
    tracker.close(max(job.end for job in power.jobs), power.nodes)
    return power, figures(base, power, tracker)


def figures(base: Replay, power: Replay, tracker: PowerTracker) -> PowerFigures:
    """The figures of two replays of the same records, ``tracker`` closed already."""
    waits = [job.wait for job in base.jobs]
    powered = [job.wait for job in power.jobs]
    added = [p - b for b, p in zip(waits, powered, strict=True)]
    first = min(job.submit for job in power.jobs)
    last = max(job.end for job in power.jobs)
    n = len(waits)
    return PowerFigures(
        model=tracker.model,
        node_hours=power.nodes * (last - first) / 3600,
        down_node_hours=tracker.down_seconds / 3600,
        resumed_nodes=tracker.resumed_nodes,
        delayed_jobs=tracker.delayed_jobs,
        mean_wait=sum(waits) / n,
        mean_wait_power=sum(powered) / n,
        p95_wait=_p95(waits),
        p95_wait_power=_p95(powered),
        mean_added_wait=sum(added) / n,
        p95_added_wait=_p95(added),
    )


def as_dict(f: PowerFigures) -> dict[str, Any]:
    """``--json``'s ``power_saving`` object (seconds, node-hours)."""
    return {
        "suspend_time_s": f.model.suspend_time,
        "resume_time_s": f.model.resume_time,
        "node_hours": round(f.node_hours, 1),
        "powered_down_node_hours": round(f.down_node_hours, 1),
        "powered_down_share": round(f.down_node_hours / f.node_hours, 6) if f.node_hours else 0,
        "resumed_nodes": f.resumed_nodes,
        "jobs_waiting_for_resume": f.delayed_jobs,
        "mean_wait_without_s": round(f.mean_wait, 3),
        "mean_wait_with_s": round(f.mean_wait_power, 3),
        "p95_wait_without_s": f.p95_wait,
        "p95_wait_with_s": f.p95_wait_power,
        "mean_added_wait_s": round(f.mean_added_wait, 3),
        "p95_added_wait_s": f.p95_added_wait,
    }


def text(f: PowerFigures) -> str:
    """The lines ``corral sim`` prints under its summary."""
    share = 100 * f.down_node_hours / f.node_hours if f.node_hours else 0.0
    rows = [
        (
            "power saving",
            f"SuspendTime {f.model.suspend_time} s, resume {f.model.resume_time} s "
            "(against the same replay without)",
        ),
        (
            "powered down",
            f"{f.down_node_hours:.1f} node-hours of {f.node_hours:.1f} ({share:.2f} %)",
        ),
        ("resumes", f"{f.resumed_nodes} nodes, for {f.delayed_jobs} jobs"),
        (
            "mean wait",
            f"{f.mean_wait_power:.1f} s with, {f.mean_wait:.1f} s without "
            f"(added {f.mean_added_wait:+.1f} s a job)",
        ),
        (
            "p95 wait",
            f"{f.p95_wait_power} s with, {f.p95_wait} s without "
            f"(added per job, p95: {f.p95_added_wait:+d} s)",
        ),
    ]
    return "\n".join(f"{label:<{LABEL_WIDTH}}  {value}" for label, value in rows)
