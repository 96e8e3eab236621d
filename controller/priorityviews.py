"""Priorities and shares as sprio and sshare see them (wire messages).

Part of the service layer, like ``views.py``: it reads the store and the
priority keeper and fills the Priorities and Shares replies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from controller.core import priority
from controller.core.priority import PriorityFactors, PriorityJob, account_of
from controller.jobstate import JobState
from controller.model import Job
from controller.store import JobStore
from corral.wire import corral_pb2 as pb

#: Slurm's TRES list for an association without limits or running jobs.
_NO_TRES = "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0"


def _job_priority(job_id: int, display: str, f: PriorityFactors, store: JobStore) -> pb.JobPriority:
    job = store.jobs[job_id]
    weights = dict(f.weights.tres)
    return pb.JobPriority(
        job_id=job_id,
        display_id=display,
        uid=job.uid,
        user=job.user,
        account=account_of(job),
        partition=f.partition,
        qos=f.qos,
        priority=f.priority,
        direct_priority=f.direct or 0,
        nice=f.nice,
        site=f.site,
        age=f.age,
        assoc=f.assoc,
        fairshare=f.fairshare,
        job_size=f.job_size,
        partition_factor=f.partition_factor,
        qos_factor=f.qos_factor,
        age_weighted=f.weighted_age,
        assoc_weighted=f.weighted_assoc,
        fairshare_weighted=f.weighted_fairshare,
        job_size_weighted=f.weighted_job_size,
        partition_weighted=f.weighted_partition,
        qos_weighted=f.weighted_qos,
        tres=[
            pb.TresFactor(
                name=name,
                factor=factor,
                weight=weights.get(name, 0.0),
                weighted=factor * weights.get(name, 0.0),
            )
            for name, factor in f.tres
        ],
        cluster=store.conf.cluster_name,
    )


def priorities(
    store: JobStore, now: int, visible: Callable[[Job], bool] = lambda _: True
) -> pb.PrioritiesReply:
    """Every pending, eligible job that is not held and the caller may see
    (``visible``: PrivateData=jobs): one row per job and partition."""
    keeper = store.priorities
    config = store.conf.priority
    weights = priority.Weights.from_config(config)
    reply = pb.PrioritiesReply(
        weights=pb.PriorityWeights(
            age=weights.age,
            assoc=weights.assoc,
            fairshare=weights.fairshare,
            job_size=weights.job_size,
            partition=weights.partition,
            qos=weights.qos,
            tres=weights.tres_text,
        ),
        priority_type=config.type,
        now=now,
    )
    for job in store.jobs.values():
        if job.state is not JobState.PENDING or job.held or job.eligible_time > now:
            continue
        if job.admin_priority == 0 or not visible(job):
            continue
        for f in priority.job_priorities(PriorityJob.from_job(job), now, keeper.cluster):
            reply.jobs.append(_job_priority(job.job_id, job.display_id, f, store))
    return reply


def shares(
    store: JobStore,
    users: list[str],
    accounts: list[str],
    now: int,
    visible: Callable[[Iterable[tuple[str, str]]], set[tuple[str, str]]] = set,
) -> pb.SharesReply:
    """The fair-share tree, filtered as sshare's ``-u``/``-A`` ask, and to the
    (account, user) rows ``visible`` keeps (PrivateData=usage)."""
    keeper = store.priorities
    allowed = visible((row.account, row.user) for row in keeper.tree.rows)
    wanted_users = {u.lower() for u in users}
    wanted_accounts = set(accounts)
    reply = pb.SharesReply(fair_tree=keeper.tree.fair_tree, now=now)
    for index, row in enumerate(keeper.tree.rows, 1):
        if row.user and wanted_users and row.user.lower() not in wanted_users:
            continue
        if wanted_accounts and row.account not in wanted_accounts:
            continue
        if (row.account, row.user) not in allowed:
            continue
        info = pb.ShareInfo(
            assoc_id=index,
            cluster=store.conf.cluster_name,
            name=row.user or row.account,
            parent=row.parent,
            user=bool(row.user),
            norm_shares=row.norm_shares,
            raw_usage=int(row.raw_usage),
            effective_usage=row.effective_usage,
            grp_tres_raw=_NO_TRES,
            tres_run_mins=_NO_TRES,
        )
        for name in ("raw_shares", "norm_usage", "fairshare", "level_fs"):
            value = getattr(row, name)
            if value is not None:
                setattr(info, name, value)
        reply.shares.append(info)
    return reply
