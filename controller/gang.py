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

Jobs of other partitions cast *shadows*, as in Slurm's gang scheduler
(gang.c's "Shadow" design; preempt.shtml): the CPUs of a job that runs in a
partition of a higher PriorityTier are taken before any of the partition's
own, so its jobs on those CPUs are suspended and stay so until the shadow
goes, and the partition's turns go round the CPUs no shadow covers. Which
jobs cast one on a job J of a time-sliced partition P (``shadows``):

* every job of another partition whose PriorityTier is above P's, under any
  PreemptType (Slurm's rule: gang.c casts by PriorityTier alone);
* under ``PreemptType=preempt/qos``, also every job of another partition
  whose QOS's ``Preempt`` list names J's QOS: Slurm keeps the victims of a
  preemptor of another partition suspended until it ends (slurm.conf's
  PreemptMode=SUSPEND), and since its placement takes every job on those
  CPUs, suspended ones too, as a victim, none of them runs there before it
  ends. Corral lets jobs of two partitions share CPUs, so the shadow is what
  keeps them apart. WITHIN (same QOS, by priority) casts none: jobs of one
  QOS in one partition take turns, as Slurm's do.

A job casts its shadow while it runs: not while it is suspended (a higher
partition's turn may suspend it; partitions are therefore sliced from the
highest tier down, as Slurm sorts them), nor once it is completing, when
Slurm's gang scheduler forgets it too. Jobs of the same partition never
shadow each other; they take turns. A running job a shadow catches is
suspended, unless its PreemptMode ends jobs (REQUEUE or CANCEL, its
PreemptExemptTime over): then it is requeued or cancelled at once for the
job casting it, as Slurm's gang scheduler does (``preemption.shadowed``).

A gang suspension lends nothing (``Suspend.lend`` false): the suspended jobs
keep their CPUs, memory and GRES counted, so the partition's N jobs per CPU
stay N. Jobs an operator or a preemption suspended are left alone (a
preemption's victim comes back to the gang scheduler once its CPUs are free,
``preemptresume.py``), and so are salloc's allocations: their shell runs
outside the nodes and cannot take turns.

``active`` is the pure rule; ``run`` applies it to the store with the
Suspend and Resume events, whose effects freeze and thaw the processes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller import jobstate, preemption, preemptrules
from controller.holdings import holds_nodes
from controller.jobstate import COMPLETING, GANG, JobState
from controller.model import Job
from corral.config import SlurmConfig

if TYPE_CHECKING:
    from controller.store import JobStore

__all__ = ["Shadow", "active", "partitions", "run", "shadows"]

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


@dataclass(frozen=True, slots=True)
class Shadow:
    """A running job of another partition whose CPUs a time-sliced partition's jobs
    must keep off: those of every job (``over`` None: a higher PriorityTier), or of
    the jobs whose QOS is in ``over`` (the QOS its own may preempt)."""

    job: Job
    over: frozenset[str] | None = None

    def covers(self, job: Job) -> bool:
        return self.over is None or job.qos in self.over


class _ActiveSet:
    """The CPUs the jobs chosen so far and the shadows over all of them use: a
    count and the CPU ids, per node."""

    def __init__(self, node_cpus: Mapping[str, int]) -> None:
        self.node_cpus = node_cpus
        self.counts: dict[str, int] = {}
        self.ids: dict[str, set[int]] = {}
        self.chosen: set[int] = set()

    def overlaps(self, job: Job, shadows: Sequence[Job] = ()) -> bool:
        """Whether ``job``'s CPUs meet those of a chosen job, or of one of ``shadows``
        (those over it alone), on one of its nodes."""
        for i, node in enumerate(job.nodes):
            count = self.counts.get(node, 0) + job.cpus[i]
            taken = set(self.ids.get(node, ()))
            for other in shadows:
                for k in (k for k, name in enumerate(other.nodes) if name == node):
                    count += other.cpus[k]
                    taken.update(_ids(other, k))
            if count > self.node_cpus.get(node, 0):
                return True
            if any(cpu in taken for cpu in _ids(job, i)):
                return True
        return False

    def cover(self, job: Job) -> None:
        """Take ``job``'s CPUs (a shadow over every job, or a chosen job)."""
        for i, node in enumerate(job.nodes):
            self.counts[node] = self.counts.get(node, 0) + job.cpus[i]
            self.ids.setdefault(node, set()).update(_ids(job, i))

    def add(self, job: Job) -> None:
        self.chosen.add(job.job_id)
        self.cover(job)


def _ids(job: Job, i: int) -> tuple[int, ...]:
    """The CPU ids ``job`` was given on its ``i``-th node (() when none were named)."""
    return job.cpu_ids[i] if job.cpu_ids and i < len(job.cpu_ids) else ()


def active(
    jobs: Iterable[Job],
    node_cpus: Mapping[str, int],
    rotate: bool,
    shadows: Sequence[Shadow] = (),
) -> set[int]:
    """The ids of ``jobs`` (one partition's, running or gang-suspended) that run now:
    the set seeded with the CPUs of the ``shadows`` over every job, then greedily,
    in ``_turn`` order, each whose CPUs overlap none already chosen nor those of a
    shadow over it."""
    chosen = _ActiveSet(node_cpus)
    for shadow in shadows:
        if shadow.over is None:
            chosen.cover(shadow.job)
    some = [s for s in shadows if s.over is not None]
    for job in sorted(jobs, key=lambda j: _turn(j, rotate)):
        if not chosen.overlaps(job, [s.job for s in some if s.covers(job)]):
            chosen.add(job)
    return chosen.chosen


def _casts(job: Job) -> bool:
    """Whether ``job`` casts a shadow now: it runs (neither suspended nor completing)."""
    return job.state is JobState.RUNNING and COMPLETING not in job.flags and bool(job.nodes)


def shadows(
    conf: SlurmConfig,
    preempts: Mapping[str, frozenset[str]],
    partition: str,
    jobs: Iterable[Job],
) -> list[Shadow]:
    """The shadows that those of ``jobs`` running in other partitions cast on
    ``partition``'s jobs: over all of them from a higher PriorityTier, else over
    those of the QOS their own ``preempts`` (preempt/qos's Preempt lists; empty
    under other PreemptTypes)."""
    tiers = {p.name: p.priority_tier for p in conf.partitions}
    mine = tiers.get(partition, 0)
    out = []
    for job in jobs:
        if job.partition == partition or not _casts(job):
            continue
        if tiers.get(job.partition, 0) > mine:
            out.append(Shadow(job))
        elif preempts.get(job.qos):
            out.append(Shadow(job, preempts[job.qos]))
    return out


def _preempts(store: JobStore) -> Mapping[str, frozenset[str]]:
    """Per QOS, the QOS its jobs may preempt (preempt/qos only)."""
    assocs = store.associations
    if store.conf.preempt_type != "PREEMPT/QOS" or assocs is None:
        return {}
    return {name: q.preempt for name, q in assocs.qos.items() if q.preempt}


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


def _near(store: JobStore, holding: Iterable[Job], jobs: Iterable[Job]) -> list[Job]:
    """Those of ``holding`` on a node of one of ``jobs``, as the store has them now
    (a higher partition's turn may have suspended or resumed some)."""
    nodes = {n for j in jobs for n in j.nodes}
    return [
        store.jobs[j.job_id]
        for j in holding
        if j.job_id in store.jobs and not nodes.isdisjoint(j.nodes)
    ]


def _shading(job: Job, cast: Sequence[Shadow], sizes: Mapping[str, int]) -> list[int]:
    """The ids of the shadows over ``job`` whose CPUs meet its own (for the log)."""
    out = []
    for shadow in cast:
        alone = _ActiveSet(sizes)
        alone.cover(shadow.job)
        if shadow.covers(job) and alone.overlaps(job):
            out.append(shadow.job.job_id)
    return out


def _ending(rules: preemptrules.Rules, job: Job, now: int) -> str:
    """``job``'s PreemptMode where a shadow ends it (REQUEUE or CANCEL, and its
    PreemptExemptTime over), else "" (it is suspended: SUSPEND, OFF, or no
    PreemptType, where Slurm has no mode but OFF)."""
    if not rules.active:
        return ""
    own = rules.of(job)
    if own.mode not in ("REQUEUE", "CANCEL") or now < job.start_time + own.exempt:
        return ""
    return own.mode


def _stop(
    store: JobStore, job: Job, under: Sequence[int], rules: preemptrules.Rules, now: int
) -> None:
    """Take the running ``job`` out of the active set: suspended for its peer's turn
    or ``under`` a shadow, or, under one, preempted if its PreemptMode ends jobs
    (``preemption.shadowed``, Slurm's gang rule)."""
    partition = job.partition
    mode = _ending(rules, job, now) if under else ""
    if mode:
        preemption.shadowed(store, job, under[0], mode == "REQUEUE", now)
        return
    store.post(job.job_id, jobstate.Suspend(now, by=GANG, lend=False))
    why = f"under the shadow of job_id={under[0]}" if under else "time slice"
    log.info("job_id=%d suspended: %s of partition %s", job.job_id, why, partition)


def run(store: JobStore, now: int, rotate: bool) -> int:
    """Suspend and resume the time-sliced partitions' jobs to their active sets,
    from the highest PriorityTier down so each partition sees the shadows of the
    jobs above it as their turns left them (``rotate``: a new time slice); how
    many jobs changed."""
    names = partitions(store.conf)
    if not names:
        return 0
    conf = store.conf
    tiers = {p.name: p.priority_tier for p in conf.partitions}
    preempts = _preempts(store)
    rules = preemptrules.Rules(conf, store.associations)
    holding = [j for j in store.jobs.values() if holds_nodes(j)]
    changed = 0
    members = _members(store, names)
    for partition in sorted(members, key=lambda p: (-tiers.get(p, 0), p)):
        jobs = members[partition]
        cast = shadows(conf, preempts, partition, _near(store, holding, jobs))
        if not cast and len(jobs) < 2 and all(j.state is JobState.RUNNING for j in jobs):
            continue
        sizes = {n: conf.node(n).cpus for j in jobs for n in j.nodes}
        chosen = active(jobs, sizes, rotate, cast)
        for job in jobs:  # suspend first, so no two overlapping jobs run at once
            if job.state is JobState.RUNNING and job.job_id not in chosen:
                _stop(store, job, _shading(job, cast, sizes), rules, now)
                changed += 1
        for job in jobs:
            if job.state is JobState.SUSPENDED and job.job_id in chosen:
                store.post(job.job_id, jobstate.Resume(now))
                log.info("job_id=%d resumed: time slice of partition %s", job.job_id, partition)
                changed += 1
    return changed
