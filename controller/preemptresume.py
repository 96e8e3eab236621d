"""Resuming the victims of PreemptMode=SUSPEND.

A job suspended for a preemptor (``Job.suspended_by`` its id) lent its CPUs
and kept its memory and GRES. It is resumed, as Slurm's gang scheduler does,
once those CPUs are free again on every node it holds (its preemptor ended,
or never took them) and no job waiting for resources may preempt it: else it
would be suspended again by the next pass, and the waiting job it would have
made room for would wait longer. A preemptor still pending keeps its victims
suspended (it waits for their CPUs).

Operators' suspensions (``scontrol suspend``) and the gang scheduler's are
not resumed here. Runs in the scheduling cycle after the plan's starts, so a
pass's jobs have taken what they could first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller import jobstate
from controller.holdings import holds_nodes
from controller.jobstate import JobState, Reason
from controller.model import Job

if TYPE_CHECKING:
    from controller.core import Plan
    from controller.core.snapshot import Snapshot
    from controller.store import JobStore

__all__ = ["due"]

log = logging.getLogger("corral.controller")


def _waiting_preemptor(victim: Job, snap: Snapshot, plan: Plan) -> int:
    """A job waiting for resources that may preempt ``victim`` (0: none)."""
    policy = snap.preempt
    if policy is None:
        return 0
    running = next((r for r in snap.running if r.job_id == victim.job_id), None)
    if running is None:
        return 0
    for job in snap.pending:
        if plan.reasons.get(job.job_id) is not Reason.RESOURCES:
            continue
        if policy.may_preempt(job, running, snap.ranking.of(job)):
            return job.job_id
    return 0


def due(store: JobStore, snap: Snapshot, plan: Plan, now: int) -> list[Job]:
    """The suspended victims resumed now."""
    victims = [
        job
        for job in store.jobs.values()
        if job.state is JobState.SUSPENDED and job.suspended_by > 0
    ]
    resumed = []
    for job in victims:
        preemptor = store.jobs.get(job.suspended_by)
        if preemptor is not None and preemptor.state is JobState.PENDING and not preemptor.held:
            continue  # it still waits for these CPUs
        if not store.cpus_free_for(job) or _waiting_preemptor(job, snap, plan):
            continue
        ended = preemptor is None or not holds_nodes(preemptor)
        resumed.append(store.post(job.job_id, jobstate.Resume(now)))
        log.info(
            "job_id=%d resumed: its CPUs are free again (job_id=%d %s)",
            job.job_id,
            job.suspended_by,
            "ended" if ended else "runs elsewhere",
        )
    return resumed
