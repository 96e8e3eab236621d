"""Gang scheduling: jobs that share CPUs take turns on them (PreemptMode=...,GANG).

In a partition with ``OverSubscribe=FORCE[:N]`` up to N jobs are given the
same CPUs. With GANG in slurm.conf's PreemptMode they do not run on them at
once: as in Slurm's gang scheduler (gang_scheduling.shtml), each partition
has an *active set* of jobs whose CPUs do not overlap, and the others are
suspended. Every ``SchedulerTimeSlice`` seconds the set is rebuilt starting
with the jobs suspended longest, so the jobs alternate; in every cycle
between, it is rebuilt keeping the running jobs first, which suspends a job
that has just started on CPUs another job is using and resumes a job whose
CPUs its peers have left.

Two jobs overlap on a node where their CPU ids meet, or, where a job has none
named, where their CPU counts add up to more than the node has. Slicing is per
partition, as in Slurm: jobs of two partitions are not rotated against each
other.

A gang suspension lends nothing (``Suspend.lend`` false): the suspended jobs
keep their CPUs, memory and GRES counted, so the partition's N jobs per CPU
stay N. Jobs an operator or a preemption suspended are left alone, and so are
salloc's allocations: their shell runs outside the nodes and cannot take turns.

``active`` is the pure rule; ``run`` applies it to the store with the
Suspend and Resume events, whose effects freeze and thaw the processes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from controller import jobstate
from controller.jobstate import COMPLETING, GANG, JobState
from controller.model import Job
from corral.config import SlurmConfig

if TYPE_CHECKING:
    from controller.store import JobStore

__all__ = ["active", "partitions", "run"]

log = logging.getLogger("corral.controller")


def partitions(conf: SlurmConfig) -> frozenset[str]:
    """The partitions whose jobs are time-sliced (none without GANG)."""
    if not conf.preemption.gang:
        return frozenset()
    return frozenset(p.name for p in conf.partitions if p.oversubscribe.upper().startswith("FORCE"))


def _turn(job: Job, rotate: bool) -> tuple[int, int, int]:
    """The order jobs join the active set: with ``rotate`` those suspended longest
    first, else those running first (the longest running first); the job id last."""
    since = job.suspend_time or job.start_time
    waiting = job.state is JobState.SUSPENDED
    return (int(waiting) if not rotate else int(not waiting), since, job.job_id)


class _ActiveSet:
    """The CPUs the jobs chosen so far use: a count and the CPU ids, per node."""

    def __init__(self, node_cpus: Mapping[str, int]) -> None:
        self.node_cpus = node_cpus
        self.counts: dict[str, int] = {}
        self.ids: dict[str, set[int]] = {}
        self.chosen: set[int] = set()

    def overlaps(self, job: Job) -> bool:
        """Whether ``job``'s CPUs meet those of a chosen job on one of its nodes."""
        for i, node in enumerate(job.nodes):
            if self.counts.get(node, 0) + job.cpus[i] > self.node_cpus.get(node, 0):
                return True
            taken = self.ids.get(node, set())
            if any(cpu in taken for cpu in _ids(job, i)):
                return True
        return False

    def add(self, job: Job) -> None:
        self.chosen.add(job.job_id)
        for i, node in enumerate(job.nodes):
            self.counts[node] = self.counts.get(node, 0) + job.cpus[i]
            self.ids.setdefault(node, set()).update(_ids(job, i))


def _ids(job: Job, i: int) -> tuple[int, ...]:
    """The CPU ids ``job`` was given on its ``i``-th node (() when none were named)."""
    return job.cpu_ids[i] if job.cpu_ids and i < len(job.cpu_ids) else ()


def active(jobs: Iterable[Job], node_cpus: Mapping[str, int], rotate: bool) -> set[int]:
    """The ids of ``jobs`` (one partition's, running or gang-suspended) that run now:
    greedily, in ``_turn`` order, each whose CPUs overlap none already chosen."""
    chosen = _ActiveSet(node_cpus)
    for job in sorted(jobs, key=lambda j: _turn(j, rotate)):
        if not chosen.overlaps(job):
            chosen.add(job)
    return chosen.chosen


def _members(store: JobStore, names: frozenset[str]) -> dict[str, list[Job]]:
    """Per time-sliced partition, its running and gang-suspended jobs."""
    out: dict[str, list[Job]] = {}
    for job in store.jobs.values():
        if job.partition not in names or COMPLETING in job.flags or job.interactive:
            continue
        running = job.state is JobState.RUNNING and not job.preempt_time
        if running or (job.state is JobState.SUSPENDED and job.suspended_by == GANG):
            out.setdefault(job.partition, []).append(job)
    return out


def run(store: JobStore, now: int, rotate: bool) -> int:
    """Suspend and resume the time-sliced partitions' jobs to their active sets
    (``rotate``: a new time slice); how many jobs changed."""
    names = partitions(store.conf)
    if not names:
        return 0
    changed = 0
    for partition, jobs in _members(store, names).items():
        if len(jobs) < 2 and all(j.state is JobState.RUNNING for j in jobs):
            continue
        sizes = {n: store.conf.node(n).cpus for j in jobs for n in j.nodes}
        chosen = active(jobs, sizes, rotate)
        for job in jobs:  # suspend first, so no two overlapping jobs run at once
            if job.state is JobState.RUNNING and job.job_id not in chosen:
                store.post(job.job_id, jobstate.Suspend(now, by=GANG, lend=False))
                log.info("job_id=%d suspended: time slice of partition %s", job.job_id, partition)
                changed += 1
        for job in jobs:
            if job.state is JobState.SUSPENDED and job.job_id in chosen:
                store.post(job.job_id, jobstate.Resume(now))
                log.info("job_id=%d resumed: time slice of partition %s", job.job_id, partition)
                changed += 1
    return changed
