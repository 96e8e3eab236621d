"""Preemption: running jobs make room for a waiting job that outranks them.

With ``PreemptType=preempt/qos`` a job may preempt running jobs whose QOS is
in its own QOS's ``Preempt`` list (and, with PreemptMode's ``WITHIN``, jobs of
its own QOS of lower priority); with ``preempt/partition_prio`` jobs of a
partition with a higher PriorityTier preempt jobs of lower tiers. After the
main pass and backfill, each job still waiting for resources (highest
priority first, at most ``MAX_PREEMPTORS`` a pass) looks for victims among
the running jobs it may preempt whose PreemptMode is not OFF, whose
PreemptExemptTime has passed and whose priority is below
``PreemptParameters=min_exempt_priority`` where that is set
(``PreemptPolicy.may_preempt``).

Victims are chosen to lose the least work (``victim_order``): jobs that asked
to be told first (``--signal``: they can save their state), then those with
the least run time since their last checkpoint, then the lowest priority,
then the youngest. They are added one at a time until the job would fit on
what they free; then each is dropped again, the last added first, if the
job still fits without it (Kueue's minimisation), and only the victims on
the nodes it would get are kept. A multi-node job is one victim: its nodes
are freed together or not at all. A job is a victim once per pass.

A victim whose PreemptMode is SUSPEND keeps its memory and GRES while it is
suspended (docs/design.md, "Suspending jobs"), so its trial release gives
back its CPUs alone: it is chosen only where the waiting job needs no more
than those CPUs of it.

An elastic job above its minimum is divided (``core/elastic.py``): its first
``min_nodes`` nodes are one victim, each node above them another, tried before
any whole job; taking one shrinks the job (``Plan.shrunk``) and ends nothing.

With ``PreemptParameters=reclaim_licenses`` a job waiting for licenses (reason
``Licenses``, too few free now) looks for victims too, and every waiting job
fits only where the licenses it asks for are free once its victims are gone:
a victim that holds some of them is kept wherever it runs. A victim suspended
keeps its licenses (so it frees none), and a shrunk elastic job keeps its own.
Without the parameter a job short of licenses waits, as in Slurm.

A waiting job whose victims are still in their GraceTime looks for no more
while what they will free is enough. The controller then warns, requeues or
cancels them (PreemptMode) and the waiting job starts when their nodes are
free, in a later pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet

from controller.core import elastic, nodefree
from controller.core.alternatives import first_fit
from controller.core.licensebook import LicenseBook, needs
from controller.core.plan import Draft, Start
from controller.core.snapshot import NodeView, PreemptPolicy, Running, Snapshot
from controller.jobstate import Reason
from controller.model import Job

__all__ = [
    "MAX_PREEMPTORS",
    "PreemptPolicy",
    "lent_back",
    "may_take",
    "preemptions",
    "suspends",
    "victim_order",
]

#: Waiting jobs that look for victims in one pass.
MAX_PREEMPTORS = 20


def release(nodes: dict[str, NodeView], victim: Running, cpus_only: bool = False) -> None:
    """Give ``victim``'s CPUs (kept or shared), memory and GRES back to ``nodes``;
    its CPUs alone with ``cpus_only`` (a suspension keeps the rest)."""
    for i, name in enumerate(victim.nodes):
        node = nodes.get(name)
        if node is None:
            continue
        gres = victim.gres[i] if victim.gres and not cpus_only else ()
        memory = 0 if cpus_only else victim.memory[i]
        nodes[name] = nodefree.give(
            node, victim.cpus[i], memory, gres, victim.share, victim.partition
        )


def victim_order(now: int) -> Callable[[Running], tuple[bool, int, int, int, int]]:
    """The sort key of candidates, the first the one that loses the least work."""

    def key(r: Running) -> tuple[bool, int, int, int, int]:
        since = now - max(r.start_time, r.checkpointed)
        return (not r.signal, since, r.priority, -r.start_time, -r.job_id)

    return key


def suspends(policy: PreemptPolicy, victim: Running) -> bool:
    """Whether preempting ``victim`` suspends it (PreemptMode=SUSPEND)."""
    return policy.mode_of(victim) == "SUSPEND"


def may_take(
    snap: Snapshot, job: Job, now: int, pool: Sequence[Running] | None = None
) -> Iterator[Running]:
    """The running jobs ``job`` may preempt now under the snapshot's PreemptType
    (none without one): past their PreemptExemptTime, PreemptMode not OFF, and
    ``PreemptPolicy.may_preempt``; of ``pool`` where given (the running jobs with
    elastic ones split, core/elastic.py), else of the snapshot's running jobs."""
    policy = snap.preempt
    if policy is None:
        return
    priority = snap.ranking.of(job)
    for r in snap.running if pool is None else pool:
        if (
            r.preemptable
            and r.eligible <= now
            and policy.mode_of(r) != "OFF"
            and policy.may_preempt(job, r, priority)
        ):
            yield r


def _fit(
    job: Job,
    snap: Snapshot,
    nodes: Mapping[str, NodeView],
    freed: Sequence[Running],
    parts: AbstractSet[Running] = frozenset(),
    book: LicenseBook | None = None,
    now: int = 0,
) -> Start | None:
    """Where ``job`` would start once ``freed`` are gone (or, suspended, have lent
    their CPUs; an elastic job's ``parts`` are given back whole), or None. With
    ``book`` (reclaim_licenses), only where its licenses are free ``now`` too."""
    trial = dict(nodes)
    policy = snap.preempt
    ended: set[int] = set()
    for victim in freed:
        lends = policy is not None and suspends(policy, victim) and victim not in parts
        release(trial, victim, cpus_only=lends)
        if not lends and victim not in parts:
            ended.add(victim.job_id)
    asked = needs(job.licenses)
    freed_book = book.without(ended) if book is not None and asked else None
    if freed_book is not None and freed_book.short(asked, now, now + 1, job.reservation):
        return None
    outcome = first_fit(job, snap, trial, set())
    return outcome if isinstance(outcome, Start) else None


def _holds_asked(victim: Running, job: Job) -> bool:
    """Whether ``victim`` holds some of the licenses ``job`` asks for."""
    asked = {name for name, _ in needs(job.licenses)}
    return bool(asked) and any(name in asked for name, _ in needs(victim.licenses))


def _minimal(
    job: Job,
    snap: Snapshot,
    nodes: Mapping[str, NodeView],
    taken: list[Running],
    parts: AbstractSet[Running],
    book: LicenseBook | None = None,
    now: int = 0,
) -> tuple[list[Running], Start] | None:
    """The fewest of ``taken`` (in order) the job needs, and where it would start:
    those on the nodes it would get, and with ``book`` those holding its licenses."""
    start = _fit(job, snap, nodes, taken, parts, book, now)
    if start is None:
        return None
    kept = list(taken)
    for victim in reversed(taken[:-1]):
        fewer = [v for v in kept if v is not victim]
        trial = _fit(job, snap, nodes, fewer, parts, book, now)
        if trial is not None:
            kept, start = fewer, trial
    used = set(start.nodes)
    return [
        v
        for v in kept
        if used & set(v.nodes) or (book is not None and v not in parts and _holds_asked(v, job))
    ], start


def preemptions(
    snap: Snapshot,
    plan: Draft,
    nodes: Mapping[str, NodeView],
    ordered: list[Job],
    claimed: AbstractSet[int] = frozenset(),
    licenses: LicenseBook | None = None,
) -> dict[int, int]:
    """Victims for the waiting jobs of ``plan``: victim job id -> the job it makes room for
    (``claimed``: victims already chosen this pass, by reclaim; ``licenses``: the
    pass's book, which reclaim_licenses reads)."""
    policy = snap.preempt
    if policy is None:
        return {}
    now = plan.now
    book = licenses if policy.reclaim_licenses else None
    waits = (Reason.RESOURCES, Reason.LICENSES) if book is not None else (Reason.RESOURCES,)
    chosen: dict[int, int] = {}
    tried = 0
    key = victim_order(now)
    # An elastic job's nodes above its minimum are victims of their own, tried first:
    # taking one only shrinks the job (core/elastic.py).
    pool, parts = elastic.divide(snap.running, snap.elastic)
    for job in ordered:
        reason = plan.reasons.get(job.job_id)
        if reason not in waits or tried >= MAX_PREEMPTORS:
            continue
        if reason is Reason.LICENSES and not _short(book, job, now):
            continue  # it waits behind a job ahead that asks for them, not for holders
        tried += 1
        warned = [r for r in snap.running if r.preempted_for == job.job_id]
        if warned and _fit(job, snap, nodes, warned, frozenset(), book, now) is not None:
            continue  # its victims' GraceTime runs: what they free is enough
        candidates = sorted(
            (
                r
                for r in may_take(snap, job, now, pool)
                if r.job_id not in chosen
                and r.job_id not in claimed
                and not (r in parts and elastic.shrinking(plan, r))
            ),
            key=lambda r: (r not in parts, *key(r)),
        )
        taken: list[Running] = list(warned)
        for victim in candidates:
            taken.append(victim)
            if _fit(job, snap, nodes, taken, parts, book, now) is None:
                continue
            found = _minimal(job, snap, nodes, taken, parts, book, now)
            if found is not None:
                for kept in found[0]:
                    if kept in parts:
                        elastic.shrink(plan, kept, job.job_id)
                    elif kept not in warned:
                        chosen[kept.job_id] = job.job_id
            break
    for job_id in chosen:  # a job preempted whole gives back every node anyway
        plan.shrunk.pop(job_id, None)
        plan.shrunk_for.pop(job_id, None)
    return chosen


def _short(book: LicenseBook | None, job: Job, now: int) -> bool:
    """Whether too few of ``job``'s licenses are free now (not only awaited ahead)."""
    asked = needs(job.licenses)
    return book is not None and book.short(asked, now, now + 1, job.reservation) is not None


def lent_back(
    snap: Snapshot,
    plan: Draft,
    nodes: Mapping[str, NodeView],
    ordered: list[Job],
    key: Callable[[Job], tuple[int, ...]],
) -> None:
    """An elastic job's nodes above its minimum are lent (``core/elastic.py``): a job
    still waiting for resources that comes before it in the queue's order (``key``)
    takes back the fewest it needs, with or without a PreemptType, as growth never
    takes what such a job waits for. The lowest elastic job in the order gives first,
    its last node first; the job shrinks (``Plan.shrunk``) and goes on."""
    if not snap.elastic:
        return
    pool, parts = elastic.divide(snap.running, snap.elastic)
    owners = {e.job.job_id: e.job for e in snap.elastic.values()}
    lent = sorted(
        (p for p in pool if p in parts), key=lambda p: key(owners[p.job_id]), reverse=True
    )
    takers = set(plan.preempted.values()) | set(plan.shrunk_for.values())
    tried = 0
    for job in ordered:
        reason = plan.reasons.get(job.job_id)
        if reason is not Reason.RESOURCES or job.job_id in takers or tried >= MAX_PREEMPTORS:
            continue
        tried += 1
        rank = key(job)
        taken: list[Running] = []
        for part in lent:
            if part.job_id in plan.preempted or elastic.shrinking(plan, part):
                continue
            if key(owners[part.job_id]) <= rank:
                break  # sorted: the rest come before the waiting job
            taken.append(part)
            if _fit(job, snap, nodes, taken, parts) is None:
                continue
            found = _minimal(job, snap, nodes, taken, parts)
            for given in found[0] if found is not None else ():
                elastic.shrink(plan, given, job.job_id)
            break
