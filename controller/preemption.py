"""Carrying out a plan's preemptions: the warning, the GraceTime, the action, the record.

The core (``core/preempt.py``) chooses victims; here they are dealt with, in
the store's world and through its effect queue, never by waiting in a handler.
A victim without a GraceTime is requeued or cancelled at once (PreemptMode);
a SUSPEND victim is suspended at once (no GraceTime, as in Slurm), its CPUs
lent and its memory and GRES kept, and ``preemptresume.py`` resumes it when
they are free again. A job the gang scheduler holds suspended, waiting for its
turn, is a victim as a running one is (it keeps its CPUs): suspended for the
preemptor it lends them, else it is requeued or cancelled at once.
A victim with one is warned first, as Slurm does: SIGCONT and SIGTERM to all
its processes (or, with ``PreemptParameters=send_user_signal``, the signal it
asked for with ``--signal``), its PreemptTime set to now and its EndTime to
now + GraceTime; ``due`` then requeues or cancels it once that time has come,
in the scheduling cycle, like ``signals_due``. The waiting job starts once
the victim's nodes are free.

Every preemption is explained: a controller log line (who, for whom, why, what
it freed), the victim's SystemComment (``scontrol show job``), and
``preempted_by`` on the victim, which ``corral why`` of the waiting job reads.
"""

from __future__ import annotations

import logging
import signal as signals
from dataclasses import replace
from typing import TYPE_CHECKING

from controller import effects, jobstate
from controller.jobstate import COMPLETING, GANG, JobState
from controller.model import Job
from corral import hostlist, timefmt

if TYPE_CHECKING:
    from controller.core import Plan
    from controller.store import JobStore

__all__ = ["begin", "due", "reason", "shadowed"]

log = logging.getLogger("corral.controller")


def reason(store: JobStore, victim: Job, preemptor: Job | None) -> str:
    """Why ``preemptor`` may preempt ``victim``, in PreemptType's terms."""
    conf = store.conf
    if preemptor is None:
        return "its preemptor is gone"
    if conf.preempt_type == "PREEMPT/QOS":
        if preemptor.qos == victim.qos:
            return f"QOS {victim.qos} has WITHIN: a higher priority job of it"
        return f"QOS {preemptor.qos} preempts QOS {victim.qos}"
    tiers = {p.name: p.priority_tier for p in conf.partitions}
    mine = max((tiers.get(p, 0) for p in preemptor.partitions), default=0)
    return (
        f"PriorityTier {mine} over {tiers.get(victim.partition, 0)} of partition {victim.partition}"
    )


def _freed(job: Job, suspend: bool = False) -> str:
    nodes = hostlist.compress(list(job.nodes))
    if suspend:
        return f"{nodes} ({sum(job.cpus)} CPUs; its {sum(job.alloc_mem)}M and GRES kept)"
    return f"{nodes} ({sum(job.cpus)} CPUs, {sum(job.alloc_mem)}M)"


def _warn(store: JobStore, job: Job) -> None:
    """The warning at the start of a GraceTime: the job's own signal with
    send_user_signal, else SIGCONT and SIGTERM to all its processes."""
    if store.conf.preemption.send_user_signal and job.signal_num:
        store.emit(
            effects.Signal(job, job.signal_num, batch_only=job.signal_batch_only, reason="preempt")
        )
        return
    store.emit(
        effects.Signal(job, signals.SIGCONT, full=True, reason="preempt"),
        effects.Signal(job, signals.SIGTERM, full=True, reason="preempt"),
    )


def _act(store: JobStore, job: Job, requeue: bool, now: int) -> Job:
    """The mode's action: requeue (if the job may be) or cancel."""
    requeue = requeue and job.requeue
    event: jobstate.Event = jobstate.Requeue(now) if requeue else jobstate.Preempt(now)
    return store.post(job.job_id, event)


def _suspend(store: JobStore, job: Job, for_id: int, comment: str, now: int) -> None:
    """PreemptMode=SUSPEND: the victim stopped now, the preemptor recorded on it (no
    PreemptTime: nothing ends it later, unlike a GraceTime)."""
    store.update(replace(job, preempted_by=for_id, system_comment=comment))
    store.post(job.job_id, jobstate.Suspend(now, by=for_id))


def _still_a_victim(job: Job) -> bool:
    """Whether ``job`` still runs, or waits for its turn (suspended by the gang
    scheduler, keeping its CPUs: ``snapshots._preemptable``), and is not ending."""
    waiting = job.state is JobState.SUSPENDED and job.suspended_by == GANG
    return COMPLETING not in job.flags and (job.state is JobState.RUNNING or waiting)


def begin(store: JobStore, plan: Plan) -> list[tuple[Job, bool]]:
    """Deal with each of ``plan``'s victims that still runs; (the victim, whether it is
    requeued) for those ended now (not those suspended)."""
    now = plan.now
    out = []
    for victim_id, for_id in plan.preempted.items():
        job = store.jobs.get(victim_id)
        if job is None or not _still_a_victim(job):
            continue
        if job.preempt_time:
            continue  # already in its GraceTime
        requeue = victim_id in plan.requeued
        suspend = victim_id in plan.suspended
        grace = 0 if suspend else plan.grace.get(victim_id, 0)
        preemptor = store.jobs.get(for_id)
        why = plan.why.get(victim_id) or reason(store, job, preemptor)
        action = "suspend" if suspend else "requeue" if requeue else "cancel"
        stamp = timefmt.format_timestamp(now)
        comment = f"Preempted ({action}) for job {for_id} at {stamp}: {why}"
        if grace:
            comment += f"; GraceTime {grace}s"
        if suspend:
            _suspend(store, job, for_id, comment, now)
            log.info(
                "job_id=%d of user %s preempted (suspend) for job_id=%d of user %s: %s; lends %s",
                victim_id,
                job.user,
                for_id,
                preemptor.user if preemptor else "?",
                why,
                _freed(job, suspend=True),
            )
            continue
        marked = replace(
            job,
            preempt_time=now,
            preempted_by=for_id,
            preempt_requeue=requeue,
            system_comment=comment,
            end_time=now + grace if grace else job.end_time,
        )
        store.update(marked)
        log.info(
            "job_id=%d of user %s preempted (%s%s) for job_id=%d of user %s: %s; frees %s",
            victim_id,
            job.user,
            action,
            f", GraceTime={grace}s" if grace else "",
            for_id,
            preemptor.user if preemptor else "?",
            why,
            _freed(job),
        )
        if grace:
            _warn(store, marked)
            continue
        out.append((_act(store, marked, requeue, now), requeue))
    return out


def shadowed(store: JobStore, job: Job, by: int, requeue: bool, now: int) -> Job:
    """``job``, running in a time-sliced partition, is under the shadow of job ``by``
    (``gang.py``) and its PreemptMode ends jobs: it is requeued (``requeue``, if it may
    be) or cancelled at once for that job, as Slurm's gang scheduler preempts the
    jobs a shadow catches whose mode is not SUSPEND (``_preempt_job_queue``: no
    GraceTime)."""
    preemptor = store.jobs.get(by)
    why = f"under its shadow: {reason(store, job, preemptor)}"
    action = "requeue" if requeue and job.requeue else "cancel"
    comment = f"Preempted ({action}) for job {by} at {timefmt.format_timestamp(now)}: {why}"
    marked = replace(
        job, preempt_time=now, preempted_by=by, preempt_requeue=requeue, system_comment=comment
    )
    store.update(marked)
    log.info(
        "job_id=%d of user %s preempted (%s) for job_id=%d of user %s: %s; frees %s",
        job.job_id,
        job.user,
        action,
        by,
        preemptor.user if preemptor else "?",
        why,
        _freed(job),
    )
    return _act(store, marked, requeue, now)


def due(store: JobStore, now: int) -> list[tuple[Job, bool]]:
    """Victims whose GraceTime has ended, requeued or cancelled now."""
    ending = [
        job
        for job in store.jobs.values()
        if job.preempt_time
        and job.state is JobState.RUNNING
        and COMPLETING not in job.flags
        and now >= job.end_time
    ]
    out = []
    for job in ending:
        requeue = job.preempt_requeue and job.requeue
        log.info(
            "job_id=%d GraceTime over: %s for job_id=%d",
            job.job_id,
            "requeued" if requeue else "cancelled",
            job.preempted_by,
        )
        out.append((_act(store, job, requeue, now), requeue))
    return out
