"""Resuming the victims of PreemptMode=SUSPEND.

A job suspended for a preemptor (``Job.suspended_by`` its id) lent its CPUs
and kept its memory and GRES. It is resumed, as Slurm's gang scheduler does,
once those CPUs are free again on every node it holds (its preemptor ended,
or never took them), unless its preemptor is still pending: it waits for
those CPUs. This runs after the pass's starts, so CPUs still free are CPUs
no job of higher priority could start on; one that was not tried in this
pass and needs them preempts the victim again in its own pass.

A victim of a time-sliced partition (``gang.py``) is not resumed here but
handed back to the gang scheduler: its suspension becomes a gang suspension
(``Suspend(by=GANG, lend=False)``, its CPUs counted as its own again), and
the gang scheduler, which runs next in the cycle, resumes it if no peer runs
on its CPUs and no shadow covers them, and else gives it its turns. Resuming
it here would put it on CPUs the partition's active set gave a peer, both
running until the gang scheduler suspended one of them again. That is how
Slurm has it: its gang scheduler suspends and resumes every such job.

Operators' suspensions (``scontrol suspend``) and the gang scheduler's are
not resumed here. Runs in the scheduling cycle after the plan's starts, so a
pass's jobs have taken what they could first; it looks only at the jobs the
snapshot shows holding nodes and not preemptable (suspended among them), not
at the whole queue.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from controller import gang, jobstate
from controller.holdings import holds_nodes
from controller.jobstate import GANG, JobState
from controller.model import Job

if TYPE_CHECKING:
    from controller.core.snapshot import Snapshot
    from controller.store import JobStore

__all__ = ["due"]

log = logging.getLogger("corral.controller")


def due(store: JobStore, snap: Snapshot, now: int) -> list[Job]:
    """The suspended victims resumed now, or handed back to the gang scheduler."""
    held = (store.jobs.get(r.job_id) for r in snap.running if not r.preemptable)
    victims = [
        job
        for job in held
        if job is not None and job.state is JobState.SUSPENDED and job.suspended_by > 0
    ]
    sliced = gang.partitions(store.conf)
    resumed = []
    for job in victims:
        preemptor = store.jobs.get(job.suspended_by)
        if preemptor is not None and preemptor.state is JobState.PENDING and not preemptor.held:
            continue  # it still waits for these CPUs
        if not store.cpus_free_for(job):
            continue
        ended = preemptor is None or not holds_nodes(preemptor)
        why = f"job_id={job.suspended_by} {'ended' if ended else 'runs elsewhere'}"
        if job.partition in sliced and not job.interactive:
            event: jobstate.Event = jobstate.Suspend(now, by=GANG, lend=False)
            log.info(
                "job_id=%d back to partition %s's time slices (%s)", job.job_id, job.partition, why
            )
        else:
            event = jobstate.Resume(now)
            log.info("job_id=%d resumed: its CPUs are free again (%s)", job.job_id, why)
        resumed.append(store.post(job.job_id, event))
    return resumed
