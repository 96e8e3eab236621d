"""Slurm's job expansion: ``--dependency=expand:N``, then ``NumNodes=0`` (docs/design.md,
"Elastic jobs", "Job expansion").

Slurm grows a running job only this way (its FAQ, "Can I change my job's size after it
has started running?"): a second job is submitted with ``--dependency=expand:N``; once
it runs, ``scontrol update jobid=NEW NumNodes=0`` hands all its nodes to job N, and
``scontrol update jobid=N NumNodes=ALL`` (a no-op in the controller) has scontrol write
``slurm_job_N_resize.sh``/``.csh`` with N's new allocation (``cli/resizescript.py``).

* ``admitted`` is submission's and a Dependency= update's check, Slurm's
  ``_parse_dependency_jobid_new``: SchedulerParameters=permit_job_expansion is needed
  (ESLURM_NOT_SUPPORTED without it); the job to expand must be running, the same
  user's, in the same one partition and QOS (ESLURM_DEPENDENCY otherwise, "Job
  dependency problem"); the new job's time limit is what N has left, as Slurm sets it.
* ``merge`` is the ``NumNodes=0``, Slurm's ``_update_job``: a job that runs steps
  (a batch job's script is one, as Slurm's batch step is) is refused with
  ESLURMD_STEP_EXISTS, a suspended one (either) with ESLURM_JOB_SUSPENDED, N gone with
  ESLURM_INVALID_JOB_ID. Then two ``Resize`` events in one call, so no pass sees the
  nodes free between: the new job holds nothing, and N holds its nodes and the new
  job's, in that order (its batch host first, as every resize keeps); the new job then
  ends COMPLETED, as Slurm 22.05 ends it at once (its salloc's command goes on).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from controller import jobstate
from controller.depspec import expanding
from controller.jobstate import COMPLETING, JobState
from controller.model import Job
from corral import errors
from corral.errors import SlurmError

if TYPE_CHECKING:  # jobcontrol and the store hand themselves in
    from controller.store import JobStore

log = logging.getLogger(__name__)

__all__ = ["admitted", "merge"]


def admitted(store: JobStore, job: Job, now: int) -> Job:
    """``job`` (new, or its Dependency= changed) as an expansion may have it: its time
    limit what the job it expands has left; SlurmError as Slurm refuses one."""
    target_id = expanding(job.deps)
    if not target_id:
        return job
    if store.conf.scheduler_param("permit_job_expansion") is None:
        raise SlurmError(errors.ESLURM_NOT_SUPPORTED)
    target = store.jobs.get(target_id)
    if (
        target is None
        or target.job_id == job.job_id
        or target.state is not JobState.RUNNING
        or COMPLETING in target.flags
        or target.uid != job.uid
        or target.qos != job.qos
        or tuple(job.partitions) != (target.partition,)
        or job.array_pending
    ):
        raise SlurmError(errors.ESLURM_DEPENDENCY)
    if target.end_time > now:  # Slurm: the time the job it expands has left, in minutes
        return replace(job, time_limit=max((target.end_time - now) // 60, 1))
    return job


def merge(store: JobStore, job: Job, now: int) -> Job:
    """``scontrol update jobid=NEW NumNodes=0``: ``job``'s nodes go to the job it expands;
    ``job`` as it is left, holding none and ended."""
    target_id = expanding(job.deps)
    if not target_id or job.state not in (JobState.RUNNING, JobState.SUSPENDED) or not job.nodes:
        raise SlurmError(errors.ESLURM_INVALID_NODE_COUNT)
    if store.conf.scheduler_param("disable_job_shrink") is not None:
        raise SlurmError(errors.ESLURM_NOT_SUPPORTED)  # Slurm's permit_job_shrink comes first
    target = store.jobs.get(target_id)
    if target is None or target.state.finished or COMPLETING in target.flags:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    if JobState.SUSPENDED in (job.state, target.state):
        raise SlurmError(errors.ESLURM_JOB_SUSPENDED)
    if not job.interactive or any(step.running for step in job.steps):
        raise SlurmError(errors.ESLURMD_STEP_EXISTS)
    if target.uid != job.uid or target.partition != job.partition:
        raise SlurmError(errors.ESLURM_DEPENDENCY)  # an operator's Dependency= since
    store.post(job.job_id, jobstate.Resize(now, (), (), ()))
    store.priorities.ended(job, now)  # its fair-share charge: what it held, until now
    store.post(target.job_id, _joined(target, job, now))
    store.update(replace(store.jobs[job.job_id], min_nodes=0, max_nodes=0))  # as Slurm shows
    left = store.post(job.job_id, jobstate.Finish(now, 0, "exited"))  # Slurm ends it now
    log.info(
        "job_id=%d gave %s to job_id=%d (expand): now %d nodes",
        job.job_id,
        ",".join(job.nodes),
        target.job_id,
        len(target.nodes) + len(job.nodes),
    )
    return left


def _joined(target: Job, job: Job, now: int) -> jobstate.Resize:
    """The resize that gives ``target`` ``job``'s nodes after its own, with what ``job``
    held on each."""

    def both(
        mine: tuple[tuple[int, ...], ...], theirs: tuple[tuple[int, ...], ...]
    ) -> tuple[tuple[int, ...], ...]:
        if not mine and not theirs:
            return ()
        return (mine or tuple(() for _ in target.nodes)) + (theirs or tuple(() for _ in job.nodes))

    memory = (
        (target.alloc_mem or (0,) * len(target.nodes)) + (job.alloc_mem or (0,) * len(job.nodes))
        if target.alloc_mem or job.alloc_mem
        else ()
    )
    gres = (target.gres_alloc or tuple(() for _ in target.nodes)) + (
        job.gres_alloc or tuple(() for _ in job.nodes)
    )
    return jobstate.Resize(
        now,
        target.nodes + job.nodes,
        target.cpus + job.cpus,
        memory,
        gres if any(gres) else (),
        both(target.gpus, job.gpus),
        both(target.cpu_ids, job.cpu_ids),
    )
