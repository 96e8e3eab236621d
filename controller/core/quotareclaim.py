"""Reclaim between queues and preemption inside one, by quota (KAI's reclaim and
preempt actions, with Kueue's per-queue policies).

Reclaim: a waiting job whose queue is below its fair share (MaintainFairShare,
tried first) or its guarantee (GuaranteeDeservedQuota), and that admission
refuses, takes resources back from running jobs of *other* queues. Where L
is the lowest common ancestor of the two queues, a victim is taken only when:

* it is preemptible, has run at least the effective ``reclaim_min_runtime``
  of its queue, and frees something the waiting job asks for;
* the waiting job has waited the effective ``preemption_delay`` of its queue
  (an autoscaler may add nodes first), and its queue's
  ``reclaim_within_cohort`` allows it (Never; LowerPriority: only victims of
  lower priority; Any);
* every queue from the victim's up to below L keeps, after the eviction and in
  every resource the victim holds, at least its guarantee (in-quota resources
  are always protected) and, for MaintainFairShare, its fair share;
* every queue from the waiting job's up to below L stays, after the job
  starts, within its fair share (MaintainFairShare) or its guarantee
  (GuaranteeDeservedQuota) in what it asks for. Should that leave the
  waiting job's queue above its guarantee (borrowing), the queue's
  ``borrow_within_cohort`` must be LowerPriority, and the victim of lower
  priority than the waiting job and at most ``borrow_priority_threshold``
  (Kueue's preemption while borrowing).

Victims are tried in order: queues most over their fair share first, then the
job that loses the least work (one that asked for ``--signal``, then the least
run since its last checkpoint or start), then lowest priority, until admission accepts the
waiting job on what they free; then, as Kueue does, those not needed after
all are given back (latest first). If the victims allowed cannot make room,
nobody is evicted for that job. Each job is a victim once, and each waiting
job that gets room counts as started for those after it.

This is reclaim by quota: which nodes the waiting job would get is for the
caller, as ``core/preempt.py`` does for PreemptType.

Preempt within a queue: with the queue's ``within_queue`` policy
(LowerPriority, or LowerOrNewerEqualPriority: also equal priority submitted
later than the waiting job), its waiting jobs, highest priority first, evict
its own preemptible running jobs that have run the effective
``preempt_min_runtime``, lowest priority and most recently started first,
until what they free covers the request.

A victim whose preemption suspends it (``RunningJob.suspends``: PreemptMode
SUSPEND) lends its CPUs and keeps its memory, GRES and nodes, which go on
counting in its queue; so it gives back its CPUs alone (``freed``), and is a
victim only for a waiting job that needs CPUs of it. Within a queue, where
the cover counts every resource the job asks for, a job no victims can cover
whole may still have its CPUs covered by suspensions alone: the rest of what
it asks must then be free beside them, which the caller's placement checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from heapq import merge
from itertools import groupby

from controller.core.quotaadmit import admit_totals
from controller.core.quotadivide import Shares
from controller.core.quotatree import Amounts, Tree, add, inherited
from corral.queueconf import QueueConf

__all__ = [
    "GUARANTEE_DESERVED_QUOTA",
    "MAINTAIN_FAIR_SHARE",
    "MAX_RECLAIMERS",
    "Eviction",
    "QueueJob",
    "RunningJob",
    "WaitingJob",
    "kept",
    "preempt_within",
    "reclaim",
]

MAINTAIN_FAIR_SHARE = "MaintainFairShare"
GUARANTEE_DESERVED_QUOTA = "GuaranteeDeservedQuota"

#: Waiting jobs that look for victims in one reclaim (KAI's queueDepthPerAction).
MAX_RECLAIMERS = 50

Totals = dict[str, dict[str, int]]

#: What a suspended job lends and so no longer holds: its CPUs (``billing`` counts
#: CPUs, as Slurm's without TRESBillingWeights). Its memory, GRES and nodes stay its own.
LENT_WHEN_SUSPENDED = frozenset({"cpu", "billing"})


def _lent(amounts: Amounts) -> dict[str, int]:
    """The part of ``amounts`` a suspended job lends (LENT_WHEN_SUSPENDED)."""
    return {r: n for r, n in amounts.items() if r in LENT_WHEN_SUSPENDED and n > 0}


def kept(amounts: Amounts) -> dict[str, int]:
    """The part of ``amounts`` a suspended job keeps and its queue still counts."""
    return {r: n for r, n in amounts.items() if r not in LENT_WHEN_SUSPENDED}


@dataclass(frozen=True, slots=True)
class QueueJob:
    """What reclaim and preemption know of any job: its queue and priority."""

    job_id: int
    queue: str
    priority: int


@dataclass(frozen=True, slots=True)
class WaitingJob(QueueJob):
    """A pending job; ``eligible_time`` starts its queue's preemption delay."""

    request: Amounts
    submit_time: int
    eligible_time: int
    preemptible: bool = True


@dataclass(frozen=True, slots=True)
class RunningJob(QueueJob):
    """A running job: what it holds, and since when."""

    resources: Amounts
    start_time: int
    submit_time: int = 0
    preemptible: bool = True
    told: bool = False  # it asked for a warning signal (--signal): it can checkpoint
    checkpointed: int = 0  # when it last reported a checkpoint (0: never)
    suspends: bool = False  # preempting it suspends it (PreemptMode=SUSPEND)
    # One node of an elastic job above its minimum (core/elastic.py): taking it only
    # shrinks the job, so it goes before any whole job; "" for a whole job (or the
    # part of an elastic job that ends it).
    part: str = ""

    @property
    def key(self) -> tuple[int, str]:
        """Which victim it is: a job, or one node of an elastic job."""
        return self.job_id, self.part

    @property
    def freed(self) -> dict[str, int]:
        """What preempting it gives back: all it holds, or, suspended, its CPUs alone."""
        if self.suspends:
            return _lent(self.resources)
        return {r: n for r, n in self.resources.items() if n > 0}


@dataclass(frozen=True, slots=True)
class Eviction:
    """One victim: whom it makes room for, by which rule, and why in a line for the log."""

    victim: int
    victim_queue: str
    for_job: int
    for_queue: str
    strategy: str
    why: str
    freed: Amounts
    part: str = ""  # the elastic job's node it takes ("": the whole job)


def reclaim(
    conf: QueueConf,
    shares: Shares,
    allocated: Mapping[str, Amounts],
    waiting: Iterable[WaitingJob],
    running: Iterable[RunningJob],
    now: int,
) -> list[Eviction]:
    """Evictions that give queues below their share or guarantee room back from
    queues above theirs (``allocated``: leaf queue -> resource -> in use)."""
    tree = Tree(conf)
    totals = tree.totals(allocated)
    pool: dict[str, list[RunningJob]] = {}
    for v in running:
        if v.preemptible and v.queue in conf.queues:
            pool.setdefault(v.queue, []).append(v)
    for jobs in pool.values():
        jobs.sort(key=_victim_order)
    min_run = {q: inherited(tree, q, "reclaim_min_runtime") for q in conf.queues}
    delay = {q: inherited(tree, q, "preemption_delay") for q in conf.queues}
    full = {q: _saturation(shares, totals, q) for q in conf.queues}
    order = sorted(
        (w for w in waiting if w.queue in conf.queues and not tree.children[w.queue]),
        key=lambda w: (full[w.queue], -w.priority, w.eligible_time, w.job_id),
    )
    taken: set[tuple[int, str]] = set()
    out: list[Eviction] = []
    tried = 0
    for w in order:
        spec = tree.spec(w.queue)
        need = {r: w.request[r] for r in shares.resources if w.request.get(r, 0) > 0}
        if (
            not need
            or spec.reclaim_within_cohort == "Never"
            or now - w.eligible_time < delay[w.queue]
            or admit_totals(tree, shares, totals, w.queue, w.request, w.preemptible).admitted
        ):
            continue
        if tried >= MAX_RECLAIMERS:
            break
        tried += 1
        for strategy in (MAINTAIN_FAIR_SHARE, GUARANTEE_DESERVED_QUOTA):
            rule = _Rule(tree, shares, strategy, w, need, now, min_run)
            if not rule.reclaimer_fits(totals, w.queue):
                continue
            victims = rule.choose(pool, taken, totals)
            if victims:
                out += [rule.eviction(v, totals) for v in victims]
                for v in victims:
                    _move(tree, totals, v.queue, v.freed, -1)
                    taken.add(v.key)
                _move(tree, totals, w.queue, w.request, 1)
                break
    return out


def _move(tree: Tree, totals: Totals, queue: str, amounts: Amounts, sign: int) -> None:
    """Add (sign 1) or take away (-1) ``amounts`` at ``queue`` and all its ancestors."""
    for q in tree.path(queue):
        add(totals[q], amounts, sign)


def _victim_order(v: RunningJob) -> tuple[bool, bool, int, int, int, int]:
    """Within one queue, the one that loses the least work first (as Slurm's
    preemption here, core/preempt.py): an elastic job's node above its minimum (the
    job goes on), then a job that asked to be told (``--signal``), then the least run
    since its last checkpoint (or start), then lowest priority, then most recently
    started."""
    return (
        not v.part,
        not v.told,
        -max(v.start_time, v.checkpointed),
        v.priority,
        -v.start_time,
        -v.job_id,
    )


def _saturation(shares: Shares, totals: Mapping[str, Mapping[str, int]], queue: str) -> float:
    """How full ``queue`` is against its fair share: the largest held / fair over the
    resources (infinite where it holds what it has no share of)."""
    worst = 0.0
    for r in shares.resources:
        have = totals[queue].get(r, 0)
        fair = shares.fair_of(queue, r)
        if have > 0:
            worst = max(worst, have / fair if fair > 0 else float("inf"))
    return worst


@dataclass(frozen=True)
class _Rule:
    """One strategy's tests for one waiting job."""

    tree: Tree
    shares: Shares
    strategy: str
    waiting: WaitingJob
    need: Mapping[str, int]
    now: int
    min_run: Mapping[str, int]  # queue -> its effective reclaim_min_runtime

    def _ceiling(self, queue: str, r: str) -> int:
        """The most the waiting job's side may reach under this strategy."""
        if self.strategy == MAINTAIN_FAIR_SHARE:
            return self.shares.fair_of(queue, r)
        return self.shares.guarantee_of(queue, r)

    def _floor(self, queue: str, r: str) -> int:
        """The least a victim's side must keep: in-quota is always protected."""
        guarantee = self.shares.guarantee_of(queue, r)
        if self.strategy == MAINTAIN_FAIR_SHARE:
            return max(guarantee, self.shares.fair_of(queue, r))
        return guarantee

    def reclaimer_fits(self, totals: Mapping[str, Mapping[str, int]], queue: str) -> bool:
        """The waiting job's queue stays within its ceiling once the job starts."""
        return all(
            totals[queue].get(r, 0) + n <= self._ceiling(queue, r) for r, n in self.need.items()
        )

    def _borrows(self, totals: Mapping[str, Mapping[str, int]], queues: Sequence[str]) -> bool:
        return any(
            totals[q].get(r, 0) + n > self.shares.guarantee_of(q, r)
            for q in queues
            for r, n in self.need.items()
        )

    def allowed(self, v: RunningJob) -> bool:
        """What does not change as victims are taken: policy, run time, usefulness."""
        w = self.waiting
        policy = self.tree.spec(w.queue).reclaim_within_cohort
        return (
            v.queue != w.queue
            and (policy != "LowerPriority" or v.priority < w.priority)
            and self.now - v.start_time >= self.min_run[v.queue]
            and any(v.freed.get(r, 0) > 0 for r in self.need)
        )

    def fits(self, v: RunningJob, totals: Mapping[str, Mapping[str, int]]) -> bool:
        """Taking ``v`` now keeps its side above its floor and the waiting job's
        side within its ceiling (and within the borrowing policy)."""
        w = self.waiting
        top = self.tree.common(w.queue, v.queue)
        freed = v.freed
        for q in self.tree.below(v.queue, top):
            for r in self.shares.resources:
                gives = freed.get(r, 0)
                if gives > 0 and totals[q].get(r, 0) - gives < self._floor(q, r):
                    return False
        mine = self.tree.below(w.queue, top)
        if not all(self.reclaimer_fits(totals, q) for q in mine):
            return False
        if self._borrows(totals, mine):
            spec = self.tree.spec(w.queue)
            threshold = spec.borrow_priority_threshold
            return (
                spec.borrow_within_cohort == "LowerPriority"
                and v.priority < w.priority
                and (threshold is None or v.priority <= threshold)
            )
        return True

    def _open(self, queue: str, totals: Mapping[str, Mapping[str, int]]) -> bool:
        """What ``fits`` asks that does not depend on the job: every queue from
        ``queue`` up to below the common ancestor holds more than its floor of
        something the waiting job needs, and the waiting job's side has room
        (borrowing only where its queue allows preempting to borrow)."""
        top = self.tree.common(self.waiting.queue, queue)
        mine = self.tree.below(self.waiting.queue, top)
        return (
            all(
                any(totals[q].get(r, 0) > self._floor(q, r) for r in self.need)
                for q in self.tree.below(queue, top)
            )
            and all(self.reclaimer_fits(totals, q) for q in mine)
            and (
                self.tree.spec(self.waiting.queue).borrow_within_cohort == "LowerPriority"
                or not self._borrows(totals, mine)
            )
        )

    def _candidates(
        self,
        pool: Mapping[str, Sequence[RunningJob]],
        taken: set[tuple[int, str]],
        trial: Mapping[str, Mapping[str, int]],
        is_open: Callable[[str], bool],
    ) -> Iterator[RunningJob]:
        """Possible victims in order: queues most over their fair share first, then
        (across queues as full as each other) lowest priority, most recently started;
        only from queues ``is_open`` (as the trial stands when each is yielded)."""
        full = {
            q: _saturation(self.shares, trial, q)
            for q in pool
            if q != self.waiting.queue and is_open(q)
        }
        ranked = sorted(full, key=lambda q: (-full[q], q))
        for _, same in groupby(ranked, key=lambda q: full[q]):
            for v in merge(*(pool[q] for q in same), key=_victim_order):
                if v.key not in taken and is_open(v.queue) and self.allowed(v):
                    yield v

    def choose(
        self,
        pool: Mapping[str, Sequence[RunningJob]],
        taken: set[tuple[int, str]],
        totals: Totals,
    ) -> list[RunningJob]:
        """The fewest victims, in order, that let the waiting job be admitted; [] if
        none do. ``pool``: each queue's preemptible jobs in ``_victim_order``."""
        trial = {q: dict(amounts) for q, amounts in totals.items()}
        chosen: list[RunningJob] = []
        # Per queue, whether it may give, until the trial changes: a queue brought
        # down to its floor is not asked again for each of its jobs.
        known: dict[str, bool] = {}

        def is_open(queue: str) -> bool:
            if queue not in known:
                known[queue] = self._open(queue, trial)
            return known[queue]

        for v in self._candidates(pool, taken, trial, is_open):
            if not self.fits(v, trial):
                continue
            _move(self.tree, trial, v.queue, v.freed, -1)
            known.clear()
            chosen.append(v)
            if self._admitted(trial):
                return self._minimal(chosen, trial)
        return []

    def _admitted(self, trial: Totals) -> bool:
        w = self.waiting
        return admit_totals(
            self.tree, self.shares, trial, w.queue, w.request, w.preemptible
        ).admitted

    def _minimal(self, chosen: list[RunningJob], trial: Totals) -> list[RunningJob]:
        """Give back, latest first, the victims the waiting job turns out not to need."""
        needed = list(chosen)
        for v in reversed(chosen):
            _move(self.tree, trial, v.queue, v.freed, 1)
            if self._admitted(trial):
                needed.remove(v)
            else:
                _move(self.tree, trial, v.queue, v.freed, -1)
        return needed

    def eviction(self, v: RunningJob, totals: Mapping[str, Mapping[str, int]]) -> Eviction:
        w = self.waiting
        freed = v.freed
        theirs = ", ".join(
            f"{r} {totals[v.queue].get(r, 0)} held, fair share {self.shares.fair_of(v.queue, r)}, "
            f"guarantee {self.shares.guarantee_of(v.queue, r)}"
            for r in self.need
            if freed.get(r, 0) > 0
        )
        mine = ", ".join(
            f"{r} {totals[w.queue].get(r, 0)} held +{n} asked, "
            f"{'fair share' if self.strategy == MAINTAIN_FAIR_SHARE else 'guarantee'} "
            f"{self._ceiling(w.queue, r)}"
            for r, n in self.need.items()
        )
        why = (
            f"{_victim_name(v)} of queue {v.queue} ({theirs}) reclaimed for job {w.job_id} "
            f"of queue {w.queue} ({mine}) by {self.strategy}"
        )
        return Eviction(v.job_id, v.queue, w.job_id, w.queue, self.strategy, why, freed, v.part)


def preempt_within(
    conf: QueueConf,
    queue: str,
    waiting: Iterable[WaitingJob],
    running: Iterable[RunningJob],
    now: int,
) -> list[Eviction]:
    """Evictions inside ``queue`` by its ``within_queue`` policy: its waiting jobs
    (those allocation and reclaim could not start) take the place of its own
    running jobs of lower (or, LowerOrNewerEqualPriority, equal and newer) priority."""
    tree = Tree(conf)
    if queue not in conf.queues:
        return []
    policy = tree.spec(queue).within_queue
    if policy == "Never":
        return []
    delay = inherited(tree, queue, "preemption_delay")
    min_run = inherited(tree, queue, "preempt_min_runtime")
    mine = [
        v for v in running if v.queue == queue and v.preemptible and now - v.start_time >= min_run
    ]
    # An elastic job's nodes above its minimum first: taking one ends no job.
    mine.sort(key=lambda v: (not v.part, v.priority, -v.start_time, -v.job_id))
    taken: set[tuple[int, str]] = set()
    out: list[Eviction] = []
    for w in sorted(
        (w for w in waiting if w.queue == queue),
        key=lambda w: (-w.priority, w.eligible_time, w.job_id),
    ):
        if now - w.eligible_time < delay:
            continue
        need = {r: n for r, n in w.request.items() if n > 0}
        candidates = [v for v in mine if v.key not in taken and _outranked(policy, w, v)]
        victims = _cover(candidates, need) or _cover(
            [v for v in candidates if v.suspends], _lent(need)
        )
        for v in victims:
            taken.add(v.key)
            why = (
                f"{_victim_name(v)} (priority {v.priority}) preempted in queue {queue} for job "
                f"{w.job_id} (priority {w.priority}) by {policy}"
            )
            out.append(Eviction(v.job_id, queue, w.job_id, queue, policy, why, v.freed, v.part))
    return out


def _victim_name(v: RunningJob) -> str:
    """A victim as the log and SystemComment name it."""
    return f"node {v.part} of elastic job {v.job_id}" if v.part else f"job {v.job_id}"


def _outranked(policy: str, w: WaitingJob, v: RunningJob) -> bool:
    if v.priority < w.priority:
        return True
    return (
        policy == "LowerOrNewerEqualPriority"
        and v.priority == w.priority
        and v.submit_time > w.submit_time
    )


def _cover(candidates: Sequence[RunningJob], need: Mapping[str, int]) -> list[RunningJob]:
    """The first candidates, in order, whose preemption together frees ``need``, less
    those not needed after all (latest first); [] when all of them do not."""

    def covered(jobs: Sequence[RunningJob]) -> bool:
        return all(sum(v.freed.get(r, 0) for v in jobs) >= n for r, n in need.items())

    chosen: list[RunningJob] = []
    for v in candidates:
        if not any(v.freed.get(r, 0) > 0 for r in need):
            continue
        chosen.append(v)
        if covered(chosen):
            for extra in reversed(list(chosen)):
                rest = [c for c in chosen if c is not extra]
                if covered(rest):
                    chosen = rest
            return chosen
    return []
