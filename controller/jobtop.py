"""``scontrol top``: some of a user's pending jobs moved ahead of the user's others.

Slurm's ``job_set_top``: the named jobs (in the order named) take the highest
priorities among the pending jobs of the same user, partition, account and QOS,
and the jobs they pass take the lower ones that are left, so no other user's job
moves relative to them. Each change is made through the job's nice value (and its
recorded priority, which priority/basic keeps), so the order outlives the next
priority calculation. Only operators may do it, unless SchedulerParameters has
``enable_user_top``; then a user moves only their own jobs.

``reorder`` is the pure arithmetic; ``top`` checks the request against the store
and applies the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType

from controller.core.priority import Ranking
from controller.jobstate import JobState
from controller.model import Job
from controller.principal import Principal
from controller.store import JobStore
from corral import errors
from corral.errors import SlurmError


def reorder(top: Sequence[tuple[int, int]], ahead: Sequence[tuple[int, int]]) -> dict[int, int]:
    """New priorities by job id: ``top``'s jobs (job id, priority), in the order
    given, get the highest of all the priorities; ``ahead`` (the same user's jobs
    of the same queue that come first now, in queue order) keep their order below
    them. Equal priorities (common under priority/multifactor) are made one apart,
    counting up from the lowest, so that the new order is the priorities' order.
    Jobs whose priority does not change are left out."""
    pool = sorted((prio for _, prio in [*top, *ahead]), reverse=True)
    for index in range(len(pool) - 2, -1, -1):
        pool[index] = max(pool[index], pool[index + 1] + 1)
    order = [job_id for job_id, _ in top] + [job_id for job_id, _ in ahead]
    old = dict([*top, *ahead])
    return {job_id: prio for job_id, prio in zip(order, pool, strict=True) if old[job_id] != prio}


def _queue(job: Job) -> tuple[int, str, str, str]:
    return job.uid, job.partitions[0] if job.partitions else "", job.account, job.qos


def top(
    store: JobStore, named: Sequence[tuple[str, list[Job]]], who: Principal
) -> SlurmError | None:
    """Move the jobs of ``named`` (each id as the caller gave it, with the jobs it
    names) to the top of their owner's queue; the error of the last one refused
    (None: none was). Refused jobs are skipped, the others move."""
    if not allowed(store, who):
        return SlurmError(errors.ESLURM_ACCESS_DENIED)
    refused: SlurmError | None = None
    chosen: dict[int, Job] = {}
    for _, jobs in named:
        if not jobs:
            refused = SlurmError(errors.ESLURM_INVALID_JOB_ID)
        for job in jobs:
            code = _refusal(job, who)
            first = next(iter(chosen.values()), job)
            if code:
                refused = SlurmError(code)
            elif _queue(job) != _queue(first):
                # Slurm's _set_top orders one queue: the first job's user,
                # partition, account and QOS.
                refused = SlurmError(
                    errors.EINVAL,
                    f"job {job.job_id} is not in the same user, partition, account "
                    f"and QOS as job {first.job_id}",
                )
            else:
                chosen.setdefault(job.job_id, job)
    if chosen:
        _apply(store, list(chosen.values()))
    return refused


def allowed(store: JobStore, who: Principal) -> bool:
    """Whether ``who`` may use scontrol top at all: operators, and users where
    SchedulerParameters has enable_user_top."""
    return who.is_operator or store.conf.scheduler_param("enable_user_top") is not None


def _refusal(job: Job, who: Principal) -> int:
    if job.state.finished:
        return errors.ESLURM_ALREADY_DONE
    if not who.is_operator and job.uid != who.uid:
        return errors.ESLURM_ACCESS_DENIED
    if job.state is not JobState.PENDING:
        return errors.ESLURM_JOB_NOT_PENDING
    if len(job.partitions) > 1:
        return errors.ESLURM_REQUESTED_PART_CONFIG_UNAVAILABLE
    if job.held:
        return errors.ESLURM_JOB_HELD
    return 0


def _apply(store: JobStore, chosen: list[Job]) -> None:
    """Give the new priorities: through nice (the formula subtracts it) and the
    recorded priority (priority/basic's), or an administrator's value if set, and
    in the current ranking at once so the next scheduling pass already sees them."""
    ranking = store.ranking
    queue = _queue(chosen[0])
    ids = {job.job_id for job in chosen}
    others = [
        job
        for job in store.jobs.values()
        if job.state is JobState.PENDING
        and not job.held
        and job.job_id not in ids
        and len(job.partitions) <= 1
        and _queue(job) == queue
    ]

    # The jobs ahead of the last named one now, in the scheduler's order
    # (core/schedule.queue_key: priority, then submission).
    def key(job: Job) -> tuple[int, int, int]:
        return -ranking.of(job), job.submit_time, job.job_id

    last = max(key(job) for job in chosen)
    ahead = sorted((j for j in others if key(j) < last), key=key)
    changed = reorder(
        [(j.job_id, ranking.of(j)) for j in chosen], [(j.job_id, ranking.of(j)) for j in ahead]
    )
    values = dict(ranking.values)
    for job_id, prio in changed.items():
        job = store.jobs[job_id]
        if job.admin_priority is not None:  # an administrator's value is the priority
            store.update(replace(job, admin_priority=prio))
            continue
        delta = prio - ranking.of(job)
        store.update(replace(job, nice=job.nice - delta, calc_priority=job.calc_priority + delta))
        if job_id in values:
            values[job_id] = ranking.computed(job) + delta
    store.ranking = Ranking(ranking.at, MappingProxyType(values))
