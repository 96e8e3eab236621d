"""The queues as the scheduler's snapshot carries them (``core/queueplan.QueueView``).

A pure function of what the store owns, as ``snapshots.build`` is: which leaf
queue each job is in (``QueueConf.queue_of``: by account, else QOS, else
partition; the account's parents are tried in turn, nearest first, so a
sub-account lands where its parent does), what each queue's running jobs hold
and its pending jobs ask for (``jobtres``: GrpTRES's words), the capacity of
the usable nodes, and the time-decayed usage of each queue's accounts; then the
fair shares of this pass (``quota.divide``).

A job in no queue is scheduled as without queues, but what it holds (and each start
of one in the pass) counts at the root, as used: the queues share what such jobs
leave, and borrowing or a guarantee never counts on GPUs they hold. Reclaim never
takes their jobs.

What a job holds counts in its queue until it is ending: a job being preempted
(in its GraceTime, or completing) counts no more, so that the reclaim that
chose it does not choose again for the same waiting job while it leaves.
A suspended job that lent its CPUs (``Job.cpus_released``: suspended by a
preemption or an operator) counts its memory, GRES and nodes, which it keeps,
and not its CPUs, which other jobs may be using; resumed, it counts them again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from controller import jobtres
from controller.associations import AssocSet
from controller.core import quota
from controller.core.fairshare import Usage
from controller.core.priority import Ranking
from controller.core.queueplan import QueueEntry, QueueView
from controller.core.snapshot import NodeView
from controller.holdings import holds_nodes
from controller.jobstate import COMPLETING, JobState
from controller.model import Job
from corral.queueconf import QueueConf

__all__ = ["account_parents", "capacity_of", "queue_of", "view"]


def queue_of(conf: QueueConf, job: Job, parents: Mapping[str, str]) -> str | None:
    """The leaf queue ``job`` is in (None: none): by its account or the nearest of
    the account's parents (``parents``: :func:`account_parents`) in a queue, else
    by QOS, else by partition."""
    for account in _lineage(job.account, parents):
        found = conf.queue_of(account, "", "")
        if found is not None:
            return found
    for partition in (job.partition, *job.partitions):
        found = conf.queue_of("", job.qos, partition)
        if found is not None:
            return found
    return None


def account_parents(assocs: AssocSet | None) -> dict[str, str]:
    """Each account's parent account, from the associations (none without dbd)."""
    return {} if assocs is None else {a.account: a.parent for a in assocs.assocs if not a.user}


def _lineage(account: str, parents: Mapping[str, str]) -> list[str]:
    """``account`` and its parents up the association tree, nearest first."""
    chain = [account] if account else []
    while chain and (parent := parents.get(chain[-1])) and parent not in chain:
        chain.append(parent)
    return chain


def capacity_of(configured: Mapping[str, NodeView], live: Mapping[str, NodeView]) -> dict[str, int]:
    """What the usable nodes have in all (``configured``: the empty nodes,
    ``admission.static_nodes``; ``live``: the snapshot's, which says which are
    usable), in GrpTRES's words."""
    total: dict[str, int] = {}
    for name, node in configured.items():
        if name not in live or not live[name].usable:
            continue
        counts = {"cpu": node.cpus, "mem": node.real_memory, "node": 1}
        for name, kind, count in node.gres:
            counts[f"gres/{name}"] = counts.get(f"gres/{name}", 0) + count
            if kind:
                counts[f"gres/{name}:{kind}"] = counts.get(f"gres/{name}:{kind}", 0) + count
        for key, count in counts.items():
            total[key] = total.get(key, 0) + count
    return total


def _counts(job: Job) -> bool:
    """Whether what ``job`` holds counts in its queue (see the module)."""
    return (
        holds_nodes(job)
        and job.state in (JobState.RUNNING, JobState.SUSPENDED)
        and COMPLETING not in job.flags
        and not job.preempt_time
    )


def _held(job: Job) -> Mapping[str, int]:
    """What ``job`` holds in its queue: all it was given, less the CPUs it lends
    while suspended."""
    given = jobtres.of_job(job).total
    return quota.kept(given) if job.cpus_released else given


def view(
    conf: QueueConf,
    jobs: Iterable[Job],
    pending: Iterable[Job],
    capacity: Mapping[str, int],
    assocs: AssocSet | None,
    usage: Usage,
    ranking: Ranking,
) -> QueueView:
    """The queues for one pass (see the module)."""
    parents = account_parents(assocs)
    allocated: dict[str, dict[str, int]] = {}
    requested: dict[str, dict[str, int]] = {}
    running: list[quota.RunningJob] = []
    for job in jobs:
        if not _counts(job):
            continue
        queue = queue_of(conf, job, parents)
        held = _held(job)
        if queue is None:  # in no queue: what it holds is the root's, used
            _add(allocated.setdefault(quota.ROOT, {}), held)
            continue
        _add(allocated.setdefault(queue, {}), held)
        _add(requested.setdefault(queue, {}), held)
        running.append(
            quota.RunningJob(
                job_id=job.job_id,
                queue=queue,
                priority=job.calc_priority,
                resources=held,
                start_time=job.start_time,
                submit_time=job.submit_time,
                preemptible=conf.queues[queue].preemptible and job.state is JobState.RUNNING,
                told=job.signal_num > 0,
                checkpointed=job.checkpointed,
            )
        )
    entries: dict[int, QueueEntry] = {}
    for job in pending:
        queue = queue_of(conf, job, parents)
        asked = jobtres.of_job(job).total
        flavors = _flavors(job)
        if queue is None:  # admitted as ever; its start is counted at the root
            entries[job.job_id] = QueueEntry(quota.ROOT, asked, False, 0, flavors)
            continue
        _add(requested.setdefault(queue, {}), asked)
        entries[job.job_id] = QueueEntry(
            queue,
            asked,
            conf.queues[queue].preemptible,
            job.eligible_time or job.submit_time,
            flavors,
        )
    shares = quota.divide(conf, capacity, requested, _usage(conf, usage, parents))
    return QueueView(conf, shares, allocated, entries, tuple(running))


def _flavors(job: Job) -> tuple[Mapping[str, int], ...]:
    """What each of a job's --gres alternatives asks, in its order (none: ())."""
    return tuple(jobtres.of_job(replace(job, gres=g)).total for g in job.gres_alternatives)


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for key, amount in amounts.items():
        into[key] = into.get(key, 0) + amount


def _usage(conf: QueueConf, usage: Usage, parents: Mapping[str, str]) -> dict[str, float]:
    """Each leaf queue's share of the cluster's time-decayed usage (0..1), from its
    accounts' (KAI normalises by capacity over a window; the shares of a decayed
    total keep the same order and need no window)."""
    by_account: dict[str, float] = {}
    for (account, _user), used in usage.raw.items():
        by_account[account] = by_account.get(account, 0.0) + used
    total = sum(by_account.values())
    if total <= 0:
        return {}
    queues: dict[str, float] = {}
    for account, used in by_account.items():
        queue = next(
            (q for a in _lineage(account, parents) if (q := conf.queue_of(a, "", "")) is not None),
            None,
        )
        if queue is not None:
            queues[queue] = queues.get(queue, 0.0) + used / total
    return queues
