"""Queues in the scheduling pass: the quota check of every start, and reclaim after.

The quota core (``core/quota.py``) decides by amounts alone; this module puts
it in the pass. The snapshot carries a ``QueueView`` (built by
``controller/queueviews.py``): the queue tree, the fair shares divided this
pass, what each leaf queue's running jobs hold, and per pending job its queue
and request. ``QueueLedger`` is the pass's running count: before the main pass
or backfill starts a job it asks ``admit`` (Kueue's borrowing rules, KAI's
limits), and a refused job waits with the queue's reason without blocking the
jobs behind it, as an accounting limit does; each start is added to the
totals. After the pass, ``reclaims`` asks the core for evictions for the jobs
still waiting, on what the queues hold with the pass's starts: between queues
(``quota.reclaim``), then inside each queue (``quota.preempt_within``, its
WithinQueue policy), and keeps those whose release lets the waiting job fit on
nodes now (quota says how much, placement says where).

An elastic job's nodes above its minimum are victims of their own, tried first
(``core/elastic.divide_quota``): taking one shrinks the job (``Plan.shrunk``).

A victim whose PreemptMode is SUSPEND (``core/preempt.suspends``, the rule
PreemptType's preemption follows) is suspended rather than ended: the quota
core counts it as giving back its CPUs alone, and placement releases its CPUs
alone (``preempt.release(cpus_only=True)``), so it is a victim only where the
waiting job needs nothing else of it.

The ledger also keeps each queue's order. Borrowers go after the jobs within
their guarantee (``in_quota_first``), but in a StrictFIFO queue (Kueue's
queueingStrategy) the first job that cannot start, refused by its queue or
without room, is the queue's head for the rest of the pass: its later jobs wait
behind it (``head_of``) with reason Priority, in the main pass and in backfill,
and claim no reclaim, so its own small jobs cannot keep a big one waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core import elastic, quota
from controller.core.alternatives import first_fit
from controller.core.placement import take
from controller.core.plan import Draft, Start
from controller.core.preempt import release, suspends
from controller.core.quota import Amounts, Eviction, Shares, Tree, WaitingJob
from controller.core.snapshot import NodeView, QueueEntry, QueueView, Snapshot
from controller.jobstate import Reason
from controller.model import Job

__all__ = ["QueueEntry", "QueueLedger", "QueueView", "reclaims", "suspending"]

#: queues.conf's QueueingStrategy under which a queue's head blocks its later jobs.
STRICT = "StrictFIFO"


def _strict(view: QueueView | None) -> frozenset[str]:
    """The leaf queues whose QueueingStrategy is StrictFIFO (their own or inherited)."""
    if view is None:
        return frozenset()
    conf = view.conf
    return frozenset(q for q in conf.leaves() if conf.strategy(q) == STRICT)


class QueueLedger:
    """The queues' totals during one pass: admission asked before each start, each
    start added. With no queues configured every job is admitted."""

    def __init__(self, view: QueueView | None) -> None:
        self.view = view
        self.tree = Tree(view.conf) if view is not None else None
        self.totals = self.tree.totals(view.allocated) if self.tree and view else {}
        self.resources = view.shares.resources if view is not None else ()
        # Admission is a pure function of the totals and of (queue, the governed
        # part of the request, preemptible); between two starts the totals stand
        # still, so the thousands of jobs of a few queues and sizes that wait in a
        # busy pass are answered once each (emptied by ``take``).
        self._answers: dict[tuple[str, bool, tuple[int, ...]], quota.Admission] = {}
        self.strict = _strict(view)
        # Per StrictFIFO queue, its first job that could not start in this pass: the
        # head its later jobs (by ``rank``, the pass's order) wait behind.
        self.heads: dict[str, int] = {}
        self.rank: dict[int, int] = {}

    def blocked(self, job: Job) -> Reason | None:
        """The queue's reason ``job`` may not start now, or None."""
        view, tree = self.view, self.tree
        entry = view.entries.get(job.job_id) if view is not None else None
        if entry is None or entry.queue == quota.ROOT or view is None or tree is None:
            return None  # in no queue: scheduled as without queues
        admission = self._admit(tree, view.shares, entry, entry.preemptible)
        return None if admission.admitted else Reason(admission.reason)  # the core's words

    def _admit(
        self, tree: Tree, shares: Shares, entry: QueueEntry, preemptible: bool
    ) -> quota.Admission:
        """``quota.admit_totals`` on the current totals, answered once per shape."""
        key = (entry.queue, preemptible, tuple(entry.request.get(r, 0) for r in self.resources))
        admission = self._answers.get(key)
        if admission is None:
            admission = quota.admit_totals(
                tree, shares, self.totals, entry.queue, entry.request, preemptible
            )
            self._answers[key] = admission
        return admission

    def in_quota_first(self, jobs: list[Job]) -> list[Job]:
        """``jobs`` in the same order, except that those that would borrow come after
        the rest (Kueue: "workloads that fit under nominal quota go first"), so that
        a borrower, its own queue's reclaimed job requeued, cannot take back what a
        job within its guarantee waits for. A StrictFIFO queue's jobs keep their own
        order: those after its first borrower go behind with it (Kueue puts a queue's
        head, not each of its jobs, in the cohort's order)."""
        if self.view is None:
            return jobs
        first: list[Job] = []
        then: list[Job] = []
        borrowing: set[str] = set()  # StrictFIFO queues whose order reached a borrower
        for job in jobs:
            queue = self._strict_queue(job)
            borrows = queue in borrowing or self._borrows(job)
            if borrows and queue is not None:
                borrowing.add(queue)
            (then if borrows else first).append(job)
        if self.strict:
            self.rank = {job.job_id: i for i, job in enumerate(first + then)}
        return first + then

    def head_of(self, job: Job) -> int | None:
        """The job ``job`` waits behind: the head of its StrictFIFO queue, which could
        not start in this pass (None: ``job`` may be tried)."""
        queue = self._strict_queue(job)
        head = self.heads.get(queue) if queue is not None else None
        if head is None or self.rank.get(job.job_id, 0) <= self.rank.get(head, 0):
            return None  # the head itself, or a job ahead of it (in its reservation)
        return head

    def stop(self, job: Job, reason: Reason) -> None:
        """Note that ``job`` cannot start in this pass. When ``reason`` is its queue's
        refusal or want of room (not a limit of its own, which no waiting in line
        cures) and the queue is StrictFIFO, the queue stops behind its first such job."""
        queue = self._strict_queue(job)
        if queue is not None and reason in WAITING_FOR_ROOM:
            self.heads.setdefault(queue, job.job_id)

    def _strict_queue(self, job: Job) -> str | None:
        """``job``'s queue when it is StrictFIFO, else None."""
        view = self.view
        entry = view.entries.get(job.job_id) if view is not None else None
        return entry.queue if entry is not None and entry.queue in self.strict else None

    def _borrows(self, job: Job) -> bool:
        view, tree = self.view, self.tree
        entry = view.entries.get(job.job_id) if view is not None else None
        if entry is None or entry.queue == quota.ROOT or view is None or tree is None:
            return False
        return self._admit(tree, view.shares, entry, preemptible=True).borrows

    def take(self, job: Job, request: Mapping[str, int] | None = None) -> None:
        """Count a start of ``job`` in its queue and the queues above it: what it asks,
        or ``request`` (the alternative it starts on, core/flavors.py)."""
        view = self.view
        entry = view.entries.get(job.job_id) if view is not None else None
        if entry is not None:
            self.take_growth(entry.queue, entry.request if request is None else request)

    def blocked_growth(self, queue: str, request: Amounts, preemptible: bool) -> Reason | None:
        """The queue's reason a running job of ``queue`` may not take ``request`` more
        now (an elastic job's node more, ``core/elastic.py``), or None."""
        view, tree = self.view, self.tree
        if view is None or tree is None or not queue or queue == quota.ROOT:
            return None
        admission = quota.admit_totals(tree, view.shares, self.totals, queue, request, preemptible)
        return None if admission.admitted else Reason(admission.reason)

    def take_growth(self, queue: str, request: Amounts) -> None:
        """Count ``request`` in ``queue`` and the queues above it."""
        tree = self.tree
        if tree is None or not queue:
            return
        self._answers.clear()
        for name in tree.path(queue):
            totals = self.totals[name]
            for resource, amount in request.items():
                totals[resource] = totals.get(resource, 0) + amount


def reclaims(
    snap: Snapshot, plan: Draft, nodes: Mapping[str, NodeView], ordered: list[Job]
) -> dict[int, Eviction]:
    """Victims by quota for the jobs the pass left waiting (victim id -> eviction),
    each group kept only if, once its victims' resources are free, the waiting job
    fits on nodes now."""
    view = snap.queues
    if view is None:
        return {}
    waiting = [
        WaitingJob(
            job_id=job.job_id,
            queue=entry.queue,
            priority=snap.ranking.of(job),
            request=entry.request,
            submit_time=job.submit_time,
            eligible_time=entry.eligible_time,
            preemptible=entry.preemptible,
        )
        for job in ordered
        if (entry := view.entries.get(job.job_id)) is not None
        and entry.queue != quota.ROOT
        and plan.reasons.get(job.job_id) in WAITING_FOR_ROOM
    ]
    if not waiting:
        return {}
    suspended = suspending(snap)
    pool = [replace(r, suspends=True) if r.job_id in suspended else r for r in view.running]
    # An elastic job's nodes above its minimum are victims of their own, and the
    # cheapest: taking one only shrinks the job (core/elastic.py).
    pool = elastic.divide_quota(pool, snap.elastic)
    evictions = quota.reclaim(
        view.conf, view.shares, _held_after(view, plan), waiting, pool, plan.now
    )
    # Then preemption inside each queue (its WithinQueue policy), for the jobs reclaim
    # found no room for, among the running jobs it did not take.
    helped = {e.for_job for e in evictions}
    taken = {(e.victim, e.part) for e in evictions}
    left = [w for w in waiting if w.job_id not in helped]
    others = [r for r in pool if r.key not in taken]
    for name in sorted({w.queue for w in left}):
        evictions += quota.preempt_within(view.conf, name, left, others, plan.now)
    return _placed(snap, plan, nodes, ordered, evictions, suspended)


def _placed(
    snap: Snapshot,
    plan: Draft,
    nodes: Mapping[str, NodeView],
    ordered: list[Job],
    evictions: list[Eviction],
    suspended: frozenset[int],
) -> dict[int, Eviction]:
    """The evictions whose release lets their waiting job fit on nodes now, each
    group's room its own; the elastic nodes among them are recorded as shrinks of
    ``plan`` and the whole victims returned (victim id -> eviction)."""
    by_job: dict[int, list[Eviction]] = {}
    for eviction in evictions:
        by_job.setdefault(eviction.for_job, []).append(eviction)
    running = {r.job_id: r for r in snap.running}
    divided, parts = elastic.divide(snap.running, snap.elastic)
    pieces = {(r.job_id, r.nodes[0]): r for r in divided if r in parts}
    jobs = {job.job_id: job for job in ordered}
    trial = dict(nodes)
    chosen: dict[int, Eviction] = {}
    for job_id, group in by_job.items():
        attempt = dict(trial)
        for eviction in group:
            part = pieces.get((eviction.victim, eviction.part))
            victim = part or running.get(eviction.victim)
            if victim is not None:
                release(attempt, victim, cpus_only=part is None and victim.job_id in suspended)
        outcome = first_fit(jobs[job_id], snap, attempt, set())
        if isinstance(outcome, Start):
            take(attempt, outcome)  # the room is this job's: not for the next
            trial = attempt
            for eviction in group:
                part = pieces.get((eviction.victim, eviction.part))
                if part is not None:
                    elastic.shrink(plan, part, job_id)
                else:
                    chosen[eviction.victim] = eviction
    for evicted in chosen:  # a job evicted whole gives back every node anyway
        plan.shrunk.pop(evicted, None)
        plan.shrunk_for.pop(evicted, None)
    return chosen


def suspending(snap: Snapshot) -> frozenset[int]:
    """The running jobs that a preemption would suspend (PreemptMode=SUSPEND under
    the snapshot's PreemptType; none without one)."""
    policy = snap.preempt
    if policy is None:
        return frozenset()
    return frozenset(r.job_id for r in snap.running if suspends(policy, r))


def _held_after(view: QueueView, plan: Draft) -> dict[str, dict[str, int]]:
    """What each leaf queue holds once the pass's starts have run: a queue that
    started jobs this pass reclaims on what it holds with them (else it could take
    back, as if within its guarantee, what it would in fact borrow)."""
    held = {queue: dict(amounts) for queue, amounts in view.allocated.items()}
    for start in plan.starts:  # an array's tasks: one start each
        entry = view.entries.get(start.job_id)
        if entry is not None:
            mine = held.setdefault(entry.queue, {})
            for resource, amount in entry.request.items():
                mine[resource] = mine.get(resource, 0) + amount
    return held


#: A waiting job's reasons that reclaim can help: its queue's (but a queue that takes no
#: jobs), or no room.
WAITING_FOR_ROOM = frozenset(
    {
        Reason.QUEUE_LIMIT,
        Reason.QUEUE_BORROW_LIMIT,
        Reason.QUEUE_GUARANTEE,
        Reason.QUEUE_COHORT_FULL,
        Reason.RESOURCES,
        Reason.PRIORITY,
    }
)
