"""Elastic jobs: when one grows, and which of its nodes pressure takes first.

An elastic job (``sbatch -N min-max --elastic``, docs/design.md "Elastic jobs") is
placed as ``-N min`` would be (``placement``). The pass's last phase, ``grow``, then
gives each elastic job, starting in this pass or running, highest in the queue's
order first, nodes the pass left free, up to its most (``Elastic.most``: ``-N``
max, its partition's MaxNodes and its accounting limits), each node shaped as
``-N min`` shapes its nodes (the same CPUs, memory and GRES). A job starting now
starts with them (its ``Start`` widened); a running one grows (``Plan.grown``).

Growth never takes what a pending job of higher priority needs (KAI allocates a
gang's elastic part after what outranks it):

* it runs after the main pass, backfill and preemption, so it only ever takes what
  no pending job could start on now, whatever its priority;
* the nodes backfill reserved for a higher pending job waiting for resources are
  left alone, since a grown job gives them back only when it ends;
* where such a job waits without a reservation (this pass ran no backfill, or found
  it none) or took victims this pass, the elastic job does not grow in that job's
  partitions in this pass: any free node could be the one it needs.

What an elastic job holds above its minimum is lent: a job before it in the queue's
order that still waits takes back what it needs (``core/preempt.lent_back``, just
before growth, with or without a PreemptType), so a job that grew never holds back
one of higher priority that came later.

Under pressure an elastic job is divided (``divide``): its first ``min_nodes`` nodes
are one victim, whose preemption ends the job, and each node above them a victim of
its own, a cheaper one, whose preemption only shrinks the job (``Plan.shrunk``).
Preemption (``core/preempt.py``) and reclaim (``core/queueplan.py``) try such parts
before any whole job, as KAI evicts an elastic job's pods above its minimum first.
Its batch host and its first ``min_nodes`` nodes are never a part, so pressure never
takes a job below its minimum: only the whole job's preemption ends it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Protocol, TypeVar, cast

from controller.core import devices, features, threads
from controller.core.limits import Usage
from controller.core.nodeindex import selection_sorted
from controller.core.placement import take
from controller.core.plan import Draft, Start
from controller.core.quota import Amounts, RunningJob
from controller.core.request import Fit, cpus_per_node, node_fits, share
from controller.core.resvwindows import ResvWindows, run_end
from controller.core.snapshot import (
    Elastic,
    NodeView,
    PartitionView,
    ResvView,
    Running,
    Snapshot,
)
from controller.jobstate import Reason
from controller.model import Job

__all__ = ["divide", "divide_quota", "grow", "shrink", "shrinking"]

#: A pending job's reasons that say it waits for nodes (so growth must not take them).
_WAITING = frozenset({Reason.RESOURCES, Reason.PRIORITY})

Key = Callable[[Job], tuple[int, ...]]


class QueueLedger(Protocol):
    """What growth asks of the pass's queue ledger (``core/queueplan.QueueLedger``),
    named here so that this module, which queueplan and preempt use, imports
    neither."""

    def blocked_growth(self, queue: str, request: Amounts, preemptible: bool) -> Reason | None:
        """The queue's reason ``queue`` may not take ``request`` more now, or None."""

    def take_growth(self, queue: str, request: Amounts) -> None:
        """Count ``request`` in ``queue`` and the queues above it."""


T = TypeVar("T")


def grow(
    snap: Snapshot,
    plan: Draft,
    nodes: dict[str, NodeView],
    usage: Usage,
    queues: QueueLedger,
    key: Key,
) -> None:
    """Widen the elastic jobs of ``plan`` (starting) and ``snap`` (running) onto the
    nodes the pass left free in ``nodes``, highest in ``key``'s order first."""
    if not snap.elastic:
        return
    starting = {s.job_id: i for i, s in enumerate(plan.starts) if s.job_id in snap.elastic}
    growers = [
        e
        for e in snap.elastic.values()
        if (e.job.nodes or e.job.job_id in starting)
        and e.job.job_id not in plan.preempted
        and e.job.job_id not in plan.shrunk
        and not e.job.array_pending
    ]
    if not growers:
        return
    started = {s.job_id for s in plan.starts}
    waiting = [(key(j), j) for j in snap.pending if _waits(j, plan, started)]
    windows = ResvWindows(snap.reservations)
    for e in sorted(growers, key=lambda e: key(e.job)):
        index = starting.get(e.job.job_id)
        held = plan.starts[index] if index is not None else None
        part = snap.partitions.get(held.partition if held else e.job.partition)
        if part is None:
            continue
        rank = key(e.job)
        ahead = [j for k, j in waiting if k < rank]
        reserved = _reserved(ahead, part, plan)
        if reserved is None:
            continue
        mine = held.nodes if held else e.job.nodes
        end = e.job.end_time or run_end(e.job, part, plan.now)
        resv = windows.confine(e.job)
        avoid = windows.avoid(plan.now, end, e.job.reservation) if resv is None else frozenset()
        room = _room(e, part, len(mine))
        added = _nodes_for(e, part, nodes, mine, room, reserved | avoid, resv, usage, queues)
        if not added:
            continue
        bound = devices.bind(_start(e.job, part, added), nodes)
        if bound is None:  # a GPU this pass gave away: the next pass
            continue
        take(nodes, bound)
        if held is not None and index is not None:
            plan.starts[index] = _joined(held, bound)
        else:
            plan.grown[e.job.job_id] = bound


def _waits(job: Job, plan: Draft, started: AbstractSet[int]) -> bool:
    """Whether pending ``job`` waits for nodes after the pass (or was not reached)."""
    if job.job_id in started or job.job_id in plan.ended:
        return False
    reason = plan.reasons.get(job.job_id)
    return reason is None or reason in _WAITING  # None: not tried (default_queue_depth)


def _reserved(ahead: Iterable[Job], part: PartitionView, plan: Draft) -> frozenset[str] | None:
    """The nodes held for the jobs ``ahead`` of an elastic job in ``part``; None when
    one of them may need any of ``part``'s nodes (no reservation, or victims taken)."""
    takers = set(plan.preempted.values()) | set(plan.shrunk_for.values())
    reserved: set[str] = set()
    for job in ahead:
        if part.name not in job.partitions:
            continue
        expected = plan.expected.get(job.job_id)
        if expected is None or job.job_id in takers:
            return None
        reserved.update(expected.nodes)
    return frozenset(reserved)


def _room(e: Elastic, part: PartitionView, holding: int) -> int:
    """How many nodes ``e`` may still take in ``part``."""
    most = e.most if part.max_nodes is None else min(e.most, part.max_nodes)
    return max(most - holding, 0)


def _nodes_for(
    e: Elastic,
    part: PartitionView,
    nodes: Mapping[str, NodeView],
    mine: Sequence[str],
    room: int,
    avoid: frozenset[str],
    resv: ResvView | None,
    usage: Usage,
    queues: QueueLedger,
) -> list[tuple[str, Fit]]:
    """Up to ``room`` free nodes of ``part`` in selection order, each fitting one of
    ``e``'s nodes, within its accounting limits and its queue's quota."""
    if room <= 0:
        return []
    job = e.job
    cpus = cpus_per_node(job, job.min_nodes)
    allowed = _feature_test(job, nodes, mine)
    only = resv.nodes if resv is not None else None
    order = part.order or [n for n in selection_sorted(nodes) if n in set(part.nodes)]
    added: list[tuple[str, Fit]] = []
    for name in order:
        if len(added) == room:
            break
        node = nodes.get(name)
        if node is None or name in mine or name in job.exc_nodes or name in avoid:
            continue
        if only is not None and name not in only:
            continue
        if not allowed(node.features):
            continue
        fit = node_fits(job, part, node, cpus)
        if fit is None:
            continue
        if usage.blocked(e.gates) is not None:
            break
        if queues.blocked_growth(e.queue, e.request, e.preemptible) is not None:
            break
        usage.take(e.gates)
        queues.take_growth(e.queue, e.request)
        added.append((name, fit))
    return added


def _feature_test(
    job: Job, nodes: Mapping[str, NodeView], mine: Sequence[str]
) -> Callable[[frozenset[str]], bool]:
    """Which nodes a job's ``-C`` lets it grow onto: those its filter allows and, where
    it chose one of ``[a|b]``'s alternatives, with the one its first node has."""
    if not job.constraint:
        return lambda _: True
    constraint = features.parse(job.constraint)
    first = nodes.get(mine[0]) if mine else None
    chosen = next(
        (c for c in constraint.choices() if first is not None and c.matches(first.features)),
        None,
    )
    if chosen is None:
        return constraint.allows
    return lambda have: constraint.allows(have) and chosen.matches(have)


def _start(job: Job, part: PartitionView, added: list[tuple[str, Fit]]) -> Start:
    """The nodes a job grows by, as a start of those nodes alone."""
    gres = tuple(fit.gres for _, fit in added)
    cpus = tuple(fit.cpus for _, fit in added)
    return Start(
        job_id=job.job_id,
        partition=part.name,
        nodes=tuple(name for name, _ in added),
        cpus=cpus,
        memory=tuple(fit.memory for _, fit in added),
        gres=gres if any(gres) else (),
        share=share(job, part),
        used=threads.joined([(cpus, tuple(fit.used or fit.cpus for _, fit in added))]),
    )


def _joined(first: Start, more: Start) -> Start:
    """A start widened by ``more`` (a job starting with the nodes it grew by)."""
    gres = _padded(first.gres, len(first.nodes)) + _padded(more.gres, len(more.nodes))
    gpus = _padded(first.gpus, len(first.nodes)) + _padded(more.gpus, len(more.nodes))
    return Start(
        job_id=first.job_id,
        partition=first.partition,
        nodes=first.nodes + more.nodes,
        cpus=first.cpus + more.cpus,
        memory=first.memory + more.memory,
        gres=gres if any(gres) else (),
        share=first.share,
        task=first.task,
        gpus=gpus if any(gpus) else (),
        cpu_ids=first.cpu_ids + more.cpu_ids,
        used=threads.joined([(first.cpus, first.used), (more.cpus, more.used)]),
    )


def _padded(items: tuple[T, ...], count: int) -> tuple[T, ...]:
    """A start's per-node items, or ``count`` empty ones where it has none (``()``)."""
    return items or tuple(cast(T, ()) for _ in range(count))


# ---------------------------------------------------------------- under pressure


def shrink(plan: Draft, part: Running, for_job: int) -> None:
    """Record that ``part`` (one node of an elastic job, ``divide``) is given back to
    make room for waiting job ``for_job``."""
    plan.shrunk[part.job_id] = (*plan.shrunk.get(part.job_id, ()), *part.nodes)
    plan.shrunk_for[part.job_id] = for_job


def shrinking(plan: Draft, part: Running) -> bool:
    """Whether ``part`` is already given back in this pass."""
    return bool(set(part.nodes) & set(plan.shrunk.get(part.job_id, ())))


def divide(
    running: Iterable[Running], elastic: Mapping[int, Elastic]
) -> tuple[list[Running], frozenset[Running]]:
    """The running jobs as preemption weighs them, and the parts among them: an
    elastic job above its minimum is its first ``min_nodes`` nodes (one victim, that
    ends it) and each node above them (one victim each, that only shrinks it)."""
    out: list[Running] = []
    parts: set[Running] = set()
    for r in running:
        least = _least(elastic.get(r.job_id), len(r.nodes))
        if least is None:
            out.append(r)
            continue
        out.append(_slice(r, 0, least))
        for i in reversed(range(least, len(r.nodes))):  # the last one it got first
            part = _slice(r, i, i + 1)
            out.append(part)
            parts.add(part)
    return out, frozenset(parts)


def divide_quota(running: Iterable[RunningJob], elastic: Mapping[int, Elastic]) -> list[RunningJob]:
    """``divide`` in the quota's terms (reclaim): an elastic job above its minimum is
    what its first ``min_nodes`` nodes hold, and each node above them on its own
    (``RunningJob.part``, the node), never suspended (a part is given back)."""
    out: list[RunningJob] = []
    for v in running:
        e = elastic.get(v.job_id)
        least = _least(e, len(e.held) if e is not None else 0)
        if e is None or least is None:
            out.append(v)
            continue
        rest = dict(v.resources)
        for i in reversed(range(least, len(e.held))):  # the last one it got first
            for resource, amount in e.held[i].items():
                rest[resource] = rest.get(resource, 0) - amount
            out.append(replace(v, resources=e.held[i], part=e.job.nodes[i], suspends=False))
        out.append(replace(v, resources={r: n for r, n in rest.items() if n > 0}))
    return out


def _least(e: Elastic | None, holding: int) -> int | None:
    """How many of an elastic job's nodes are one victim; None when it has no part
    that pressure may take alone (not elastic, or at its minimum)."""
    if e is None or not e.job.nodes:
        return None
    least = max(e.job.min_nodes, 1)
    return least if holding > least else None


def _slice(r: Running, begin: int, end: int) -> Running:
    return replace(
        r,
        nodes=r.nodes[begin:end],
        cpus=r.cpus[begin:end],
        memory=r.memory[begin:end],
        gres=r.gres[begin:end] if r.gres else (),
    )
