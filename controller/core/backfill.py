"""Backfill: start lower-priority jobs early without delaying the ones ahead.

Runs after the main pass (``schedule``), over the jobs it left waiting for
Resources or Priority, in the same priority order. For each job, as Slurm's
backfill does:

1. **Start now?** The job may start now on nodes that no job ahead of it has
   reserved for any part of ``[now, now + its time limit)``.
2. **Else reserve.** Find the earliest time the job fits: walk forward
   through the moments running (and just-started) jobs reach their time
   limits, freeing their CPUs and memory, and test the job against the
   resources free then, again avoiding nodes reserved by jobs ahead of it for
   the interval it would run. The nodes it would get are reserved for it
   (whole nodes, as Slurm does "for performance reasons"), and the time and
   nodes become its expected start (``squeue --start``, ``scontrol show job``).

Because a job only ever uses nodes that no job ahead of it reserved for an
overlapping interval, a lower-priority job never delays the expected start of
a higher-priority one, and since starts come out of the live free resources,
no CPU or MiB is allocated twice.

Conservative backfill (the default, and what Slurm does with its default
settings) gives every tested job a reservation; ``easy`` gives one only to
the first waiting job of each partition, and the rest may only start now.
Times are rounded up to ``resolution``; nothing is planned past ``window``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from controller.core.placement import partition_reason, partitions_of, place, take
from controller.core.plan import Expected, Plan, Start
from controller.core.snapshot import NodeView, PartitionView, Snapshot
from controller.jobstate import Reason
from controller.model import Job
from corral import arrayspec

#: The reasons of jobs that backfill tries again.
WAITING = (Reason.RESOURCES, Reason.PRIORITY)


@dataclass(frozen=True, slots=True)
class BackfillParams:
    """SchedulerParameters ``bf_*`` that shape one pass (seconds and counts)."""

    window: int = 1440 * 60  # bf_window (minutes in slurm.conf)
    resolution: int = 60  # bf_resolution
    max_job_test: int = 500  # bf_max_job_test
    max_job_user: int = 0  # bf_max_job_user, 0 = no limit
    easy: bool = False  # only each partition's first waiting job reserves


class _Reservations:
    """Whole nodes promised to jobs ahead, each for ``[begin, end)``."""

    def __init__(self) -> None:
        self._held: list[tuple[int, int, frozenset[str]]] = []

    def add(self, begin: int, end: int, nodes: frozenset[str]) -> None:
        self._held.append((begin, end, nodes))

    def during(self, begin: int, end: int) -> set[str]:
        """Nodes reserved at any moment of ``[begin, end)``."""
        out: set[str] = set()
        for b, e, nodes in self._held:
            if b < end and begin < e:
                out |= nodes
        return out

    def ends(self) -> list[int]:
        return [e for _, e, _ in self._held]


@dataclass(frozen=True, slots=True)
class _Release:
    """Resources a job gives back when it reaches its time limit."""

    at: int
    nodes: tuple[str, ...]
    cpus: tuple[int, ...]
    memory: tuple[int, ...]


def _ceil(t: int, resolution: int) -> int:
    return -(-t // resolution) * resolution


def duration(job: Job, part: PartitionView, window: int) -> int:
    """Seconds the job may run in ``part``: its limit, else the partition's, else the window."""
    minutes = job.time_limit if job.time_limit > 0 else part.max_time
    return minutes * 60 if minutes > 0 else window


def _future(
    nodes: Mapping[str, NodeView], releases: list[_Release], times: list[int]
) -> Iterator[tuple[int, dict[str, NodeView]]]:
    """The free resources at each of ``times`` (ascending), releases applied as they fall due."""
    free = dict(nodes)
    due = sorted(releases, key=lambda r: r.at)
    i = 0
    for when in times:
        while i < len(due) and due[i].at <= when:
            rel = due[i]
            for name, cpus, memory in zip(rel.nodes, rel.cpus, rel.memory, strict=True):
                node = free[name]
                free_cpus = min(node.cpus, node.free_cpus + cpus)
                free[name] = replace(
                    node,
                    free_cpus=free_cpus,
                    free_memory=min(node.real_memory, node.free_memory + memory),
                    idle=free_cpus == node.cpus,
                )
            i += 1
        yield when, free


class Backfill:
    """One pass over the jobs the main pass left waiting, in their priority order."""

    def __init__(
        self,
        snap: Snapshot,
        plan: Plan,
        nodes: dict[str, NodeView],
        params: BackfillParams,
        running_arrays: dict[int, int],
    ) -> None:
        self.snap = snap
        self.plan = plan
        self.now = plan.now
        self.horizon = plan.now + params.window
        self.nodes = nodes  # free now, after the main pass's starts
        self.params = params
        self.running_arrays = running_arrays
        self.reserved = _Reservations()
        self.releases = [
            _Release(r.end_time, r.nodes, r.cpus, r.memory)
            for r in snap.running
            if r.end_time and r.end_time < self.horizon
        ]

    def started(self, job: Job, start: Start) -> None:
        """Note a start (by the main pass or by backfill): it ends by its time limit."""
        part = self.snap.partitions[start.partition]
        at = self.now + duration(job, part, self.params.window)
        if at < self.horizon:
            self.releases.append(_Release(at, start.nodes, start.cpus, start.memory))

    def run(self, waiting: list[Job]) -> None:
        tested = 0
        per_user: dict[int, int] = {}
        reserving: set[str] = set()  # partitions whose first waiting job reserved (easy)
        for job in waiting:
            if tested >= self.params.max_job_test:
                break
            if self.params.max_job_user and per_user.get(job.uid, 0) >= self.params.max_job_user:
                continue
            tested += 1
            per_user[job.uid] = per_user.get(job.uid, 0) + 1
            parts = [p for p in partitions_of(job, self.snap) if partition_reason(job, p) is None]
            if not parts:
                continue
            if not self._start_now(job, parts):
                continue
            if self.params.easy:
                if all(p.name in reserving for p in parts):
                    continue
                reserving.update(p.name for p in parts)
            self._reserve(job, parts)

    def _start_now(self, job: Job, parts: list[PartitionView]) -> bool:
        """Start what fits now; True while the job (or some array task) still waits."""
        tasks = arrayspec.count(job.array_pending) or 1
        throttle = job.array_max_tasks
        while tasks:
            if throttle and self.running_arrays.get(job.array_job_id, 0) >= throttle:
                return False
            start = self._fit_now(job, parts)
            if start is None:
                return True
            self.plan.starts.append(start)
            take(self.nodes, start)
            self.started(job, start)
            if job.array_job_id:
                self.running_arrays[job.array_job_id] = (
                    self.running_arrays.get(job.array_job_id, 0) + 1
                )
            tasks -= 1
        self.plan.reasons.pop(job.job_id, None)
        return False

    def _fit_now(self, job: Job, parts: list[PartitionView]) -> Start | None:
        for part in parts:
            end = self.now + duration(job, part, self.params.window)
            blocked = self.reserved.during(self.now, _ceil(end, self.params.resolution))
            outcome = place(job, part, self.nodes, blocked)
            if isinstance(outcome, Start):
                return outcome
        return None

    def _reserve(self, job: Job, parts: list[PartitionView]) -> None:
        """Reserve the earliest nodes and time the job fits at, within the window.

        The candidate times are the moments resources come back (time limits
        of running jobs, ends of reservations). At each, a cheap count (CPUs
        free on the partition's usable, unreserved nodes) skips the times the
        job cannot fit at before ``place`` is asked.
        """
        res = self.params.resolution
        times = sorted({_ceil(r.at, res) for r in self.releases} | set(self.reserved.ends()))
        times = [t for t in times if self.now < t < self.horizon]
        need = job.cpus_needed
        for when, free in _future(self.nodes, self.releases, times):
            for part in parts:
                end = _ceil(when + duration(job, part, self.params.window), res)
                blocked = self.reserved.during(when, end)
                if _free_cpus(free, part, blocked) < need:
                    continue
                outcome = place(job, part, free, blocked)
                if isinstance(outcome, Start):
                    self.reserved.add(when, end, frozenset(outcome.nodes))
                    self.plan.expected[job.job_id] = Expected(when, part.name, outcome.nodes)
                    return


def _free_cpus(nodes: Mapping[str, NodeView], part: PartitionView, blocked: set[str]) -> int:
    """CPUs free on the partition's usable nodes outside ``blocked``."""
    return sum(
        node.free_cpus
        for name in part.nodes
        if name not in blocked and (node := nodes[name]).usable
    )
