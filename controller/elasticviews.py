"""Elastic jobs as the scheduler sees them: the snapshot's part of them
(docs/design.md, "Elastic jobs"; carrying out their resizes is ``controller/elastic.py``'s).

``views`` gives each elastic job that may change size, with the most nodes its
accounting limits let it hold, what one node more adds to the limits it counts
against and to its queue, and what each node it holds counts there (pressure may
take those above its minimum one by one). It reads jobs and limits, never the
store, so the store's snapshot builder may call it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from controller import associations, assoclimits, jobtres, queueviews
from controller.associations import AssocSet
from controller.core.fairshare import Usage
from controller.core.limits import Gate
from controller.core.quota import ROOT
from controller.core.request import cpus_per_node, gres_request
from controller.core.snapshot import Elastic
from controller.jobstate import COMPLETING, JobState
from controller.model import Job
from corral.queueconf import QueueConf

__all__ = ["resizable", "views"]

#: Node names of a job's nodes not yet chosen (what-ifs of its size; never placed).
_SOME_NODE = "?"


def resizable(job: Job) -> bool:
    """Whether ``job``'s allocation may change now: it runs (not suspended, not
    completing, not in a preemption's GraceTime)."""
    return (
        job.state is JobState.RUNNING
        and bool(job.nodes)
        and COMPLETING not in job.flags
        and not job.preempt_time
    )


# ---------------------------------------------------------------- the snapshot


def views(
    jobs: Iterable[Job],
    assocs: AssocSet | None,
    enforce: frozenset[str],
    usage: Usage,
    queue_conf: QueueConf | None,
) -> dict[int, Elastic]:
    """The elastic jobs a pass may start wider, grow or shrink, by id: pending ones
    and those that run and may be resized."""
    limited = assocs is not None and "limits" in enforce
    spent = _Spent(assocs, enforce, usage) if limited and assocs is not None else None
    parents = queueviews.account_parents(assocs)
    out: dict[int, Elastic] = {}
    for job in jobs:
        if not job.elastic_signal:
            continue
        if job.state is not JobState.PENDING and not resizable(job):
            continue
        out[job.job_id] = _view(job, spent, queue_conf, parents)
    return out


class _Spent:
    """What the accounting limits weigh a what-if size of a job against."""

    def __init__(self, assocs: AssocSet, enforce: frozenset[str], usage: Usage) -> None:
        self.assocs = assocs
        self.used = assoclimits.used_by(assocs, usage)
        self.qos_used = assoclimits.qos_used_by(usage)
        self.safe = "safe" in enforce

    def gates(self, job: Job) -> tuple[Gate, ...]:
        return associations.gates(job, self.assocs, self.used, self.safe, self.qos_used)


def _view(
    job: Job, spent: _Spent | None, conf: QueueConf | None, parents: Mapping[str, str]
) -> Elastic:
    now = len(job.nodes) or job.min_nodes
    most = max(job.max_nodes, now)
    gates: tuple[Gate, ...] = ()
    if spent is not None:
        most, gates = _limited(job, now, most, spent.gates)
    queue, preemptible = "", True
    request: Mapping[str, int] = {}
    held: tuple[Mapping[str, int], ...] = ()
    if conf is not None:
        queue = queueviews.queue_of(conf, job, parents) or ROOT
        preemptible = queue != ROOT and conf.queues[queue].preemptible
        request = jobtres.of_job(_sized(job, 1, alone=True)).total
        held = tuple(jobtres.of_job(_one(job, i)).total for i in range(len(job.nodes)))
    return Elastic(job, most, gates, queue, request, held, preemptible)


def _limited(
    job: Job, now: int, most: int, gates_of: Callable[[Job], tuple[Gate, ...]]
) -> tuple[int, tuple[Gate, ...]]:
    """The most nodes ``job``'s per-job limits let it hold (no more than ``most``),
    and what one node more adds to each counted limit: a limit whose what-if of one
    node more breaks it by itself stops the growth there."""
    base = gates_of(_sized(job, now))
    if any(not g.key for g in base):
        return now, ()
    before = {g.key: g.amount for g in base}
    one = gates_of(_sized(job, now + 1))
    if any(not g.key for g in one):
        return now, ()
    more = tuple(
        Gate(g.key, g.cap, g.amount - before.get(g.key, 0), g.reason)
        for g in one
        if g.amount > before.get(g.key, 0)
    )
    allowed = now + 1
    while allowed < most and all(g.key for g in gates_of(_sized(job, allowed + 1))):
        allowed += 1
    return min(allowed, most), more


def _shape(job: Job) -> tuple[int, int, tuple[tuple[str, str, int], ...]]:
    """CPUs, memory (MiB) and GRES of one of ``job``'s nodes: its first node's once it
    runs, else what ``-N min`` asks of each node (memory by request alone)."""
    if job.nodes:
        gres = job.gres_alloc[0] if job.gres_alloc else ()
        return job.cpus[0], job.alloc_mem[0] if job.alloc_mem else 0, gres
    cpus = cpus_per_node(job, job.min_nodes)
    memory = job.mem_per_node or (job.mem_per_cpu or 0) * cpus
    try:
        gres = gres_request(job.gres) if job.gres else ()
    except ValueError:
        gres = ()
    return cpus, memory, gres


def _sized(job: Job, count: int, *, alone: bool = False) -> Job:
    """``job`` as if it held ``count`` nodes: its own ones first (none if ``alone``),
    then nodes shaped as its first (what-ifs for limits and quotas)."""
    have = 0 if alone else min(len(job.nodes), count)
    cpus, memory, gres = _shape(job)
    extra = count - have
    given = job.gres_alloc[:have] if job.gres_alloc else tuple(() for _ in range(have))
    return replace(
        job,
        nodes=job.nodes[:have] + (_SOME_NODE,) * extra,
        cpus=job.cpus[:have] + (cpus,) * extra,
        alloc_mem=(job.alloc_mem[:have] or (0,) * have) + (memory,) * extra,
        gres_alloc=given + (gres,) * extra if gres or any(given) else (),
    )


def _one(job: Job, index: int) -> Job:
    """``job`` as if it held its ``index``-th node alone (what that node counts)."""
    return replace(
        job,
        nodes=(job.nodes[index],),
        cpus=(job.cpus[index],),
        alloc_mem=(job.alloc_mem[index],) if job.alloc_mem else (0,),
        gres_alloc=(job.gres_alloc[index],) if job.gres_alloc else (),
    )
