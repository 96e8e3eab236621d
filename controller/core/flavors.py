"""Flavor fungibility: which of its alternatives a job starts on, or waits for.

A job's alternatives (``core/alternatives.py``: ``--gres=a|b`` and ``--prefer``) are
tried in its order of preference, each on its partitions by PriorityTier, as Kueue
assigns a workload the first ResourceFlavor that fits (peers.md §2.3):

1. **Now.** The first alternative that its queue admits and that fits on nodes now
   starts. Two settings of the job's queue (queues.conf, Kueue's
   ``flavorFungibility``; inherited down the tree, the root's for jobs in no queue)
   say when the search goes on past an alternative that could be had:

   * ``WhenCanBorrow=MayStopSearch`` (the default): an alternative that fits by
     borrowing from other queues is taken. ``TryNextFlavor``: the later ones are
     tried for one that fits within the queue's guarantee first; the borrowing one
     is taken only if none does.
   * ``WhenCanPreempt=TryNextFlavor`` (the default): an alternative that does not
     fit now is passed over for the next. ``MayStopSearch``: the search stops at an
     alternative that would fit were the running jobs it may preempt gone (those
     PreemptType lets it preempt, and, when it stays within its queue's guarantee,
     those of queues above theirs, which reclaim takes back): the job waits for it,
     and preemption and reclaim make room for that one alone.

2. **Later.** Backfill plans each alternative without the ``--prefer`` features (as
   Slurm's backfill reserves only for ``-C``, trying ``--prefer`` "now only"), on
   each partition, and the job waits for the one expected to start soonest (a tie:
   the more preferred); under ``MayStopSearch`` only those up to where it stopped.

What was found for each alternative, and which one the job got or awaits and why,
is the ``Choice`` a ``Start`` (or the plan, for a waiting job) carries: ``scontrol
show job`` shows it as ``Flavor=``, ``corral why`` alternative by alternative.

A plain job (no alternatives) takes none of these steps: ``Chooser`` hands it to the
caller's placement and its queue's check unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from controller.core import placement, preempt, quota
from controller.core.alternatives import Flavor, flavors_of
from controller.core.plan import Alternative, Choice, Draft, Start
from controller.core.queueplan import QueueLedger
from controller.core.snapshot import NodeView, QueueEntry, Snapshot
from controller.jobstate import Reason
from controller.model import Job

__all__ = ["MAY_STOP", "TRY_NEXT", "Chooser", "Policy"]

MAY_STOP = "MayStopSearch"
TRY_NEXT = "TryNextFlavor"
#: The reasons of an alternative that waits for room (as backfill's ``WAITING``).
_ROOM = (Reason.RESOURCES, Reason.PRIORITY)

Fit = Callable[[Job], "Start | Reason"]


@dataclass(frozen=True, slots=True)
class Policy:
    """A queue's flavorFungibility (Kueue's words)."""

    when_can_borrow: str = MAY_STOP
    when_can_preempt: str = TRY_NEXT


class Chooser:
    """The flavor choices of one pass, main pass and backfill: each job's
    alternatives listed once, its queue asked per alternative, and what was chosen
    noted in the plan (``plan.choices`` for the jobs that wait)."""

    def __init__(self, snap: Snapshot, queues: QueueLedger, plan: Draft) -> None:
        self.snap = snap
        self.queues = queues
        self.plan = plan
        self._flavors: dict[int, tuple[Job, tuple[Flavor, ...]]] = {}
        self._chosen: dict[int, tuple[Flavor, Choice]] = {}  # the last start chosen per job
        self.stops: dict[int, Flavor] = {}  # MayStopSearch: where each job's search stopped

    # ---------------------------------------------------------------- the pass's hooks

    def blocked(self, job: Job) -> Reason | None:
        """Its queue's reason ``job`` may not start now (``QueueLedger.blocked``); for a
        job with alternatives, only when its queue refuses every one."""
        if not (job.gres_alternatives or job.prefer):  # fungible(job), inline: every job
            return self.queues.blocked(job)
        flavors = self.flavors(job)
        refused = []
        for flavor in flavors:
            admission = self._admission(job, flavor)
            if admission is None or admission.admitted:
                return None
            refused.append(admission.reason)
        self._wait(job, flavors, refused, flavors[0], "waiting")
        return Reason(refused[0])

    def choose(self, job: Job, fit: Fit, nodes: Mapping[str, NodeView]) -> Start | Reason:
        """Where ``job`` starts now, or why it waits. ``fit`` places one alternative
        (the pass's placement now: partitions, blocked nodes, reservations); ``nodes``
        are the resources free now (for ``MayStopSearch``'s what-if)."""
        if not (job.gres_alternatives or job.prefer):  # fungible(job), inline: every job
            return fit(job)
        flavors = self.flavors(job)
        policy = self.policy(job)
        self.stops.pop(job.job_id, None)
        outcomes: list[str] = []
        fallback: tuple[Flavor, Start] | None = None
        reasons: list[Reason] = []
        for flavor in flavors:
            admission = self._admission(job, flavor)
            if admission is not None and not admission.admitted:
                outcome: Start | Reason = Reason(admission.reason)
            else:
                outcome = fit(flavor.job)
            if isinstance(outcome, Start):
                borrows = admission is not None and admission.borrows
                if borrows and policy.when_can_borrow == TRY_NEXT:
                    outcomes.append("borrows")
                    fallback = fallback or (flavor, outcome)
                    continue
                why = "first" if flavor.rank == 0 else "next"
                return self._start(job, flavors, outcomes, flavor, outcome, why)
            outcomes.append(outcome.value)
            reasons.append(outcome)
            admitted = admission is None or admission.admitted
            if (
                policy.when_can_preempt == MAY_STOP
                and outcome is not Reason.PRIORITY  # its turn has not come: nothing to take
                and self._preemptible(job, flavor, nodes, admitted)
            ):
                self.stops[job.job_id] = flavor
                self._wait(job, flavors, outcomes, flavor, "preempting")
                return outcome
        if fallback is not None:
            return self._start(job, flavors, outcomes, *fallback, "borrowing")
        self._wait(job, flavors, outcomes, flavors[0], "waiting")
        return next((r for r in reasons if r in _ROOM), reasons[0] if reasons else Reason.RESOURCES)

    def stamp(self, start: Start) -> Start:
        """``start`` (after device binding) with the choice that made it, if any."""
        made = self._chosen.get(start.job_id) if self._chosen else None
        if made is None:
            return start
        return replace(start, flavor=made[1])

    def take(self, job: Job) -> None:
        """Count ``job``'s start in its queue: what the alternative it got asks."""
        made = self._chosen.get(job.job_id) if self._chosen else None
        entry = self._entry(job) if made is not None else None
        if made is None or entry is None or not entry.flavors:
            self.queues.take(job)
            return
        self.queues.take(job, entry.flavors[made[0].option])

    # ---------------------------------------------------------------- backfill's plans

    def planned(self, job: Job) -> list[Flavor]:
        """The alternatives backfill plans a start for: those without ``--prefer``
        (Slurm reserves for ``-C`` only) that its queue admits now, up to where a
        ``MayStopSearch`` search stopped."""
        stop = self.stops.get(job.job_id)
        out = []
        for flavor in self.flavors(job):
            if stop is not None and flavor.rank > stop.rank:
                break
            admission = self._admission(job, flavor)
            if not flavor.preferred and (admission is None or admission.admitted):
                out.append(flavor)
        return out

    def expect(self, job: Job, starts: Mapping[int, int], chosen: Flavor) -> None:
        """Note the plan for a waiting ``job``: ``starts`` gives each planned
        alternative's expected start (by rank), ``chosen`` the one it waits for."""
        earlier = self.plan.choices.get(job.job_id)
        found = [a.outcome for a in earlier.alternatives] if earlier is not None else []
        why = "preempting" if job.job_id in self.stops else "soonest"
        alternatives = tuple(
            Alternative(
                flavor.label,
                flavor.gres,
                "awaited" if flavor is chosen else _found(found, flavor.rank),
                starts.get(flavor.rank, 0),
            )
            for flavor in self.flavors(job)
        )
        self.plan.choices[job.job_id] = Choice(chosen.rank, alternatives, why)

    # ---------------------------------------------------------------- preemption's view

    def awaited(self, snap: Snapshot, jobs: list[Job]) -> tuple[Snapshot, list[Job]]:
        """``snap`` and ``jobs`` as preemption and reclaim should see them: a job whose
        ``MayStopSearch`` search stopped asks for that alternative alone (its queue
        request too), so that room is made for it and not for one it passed over."""
        if not self.stops:
            return snap, jobs
        view = snap.queues
        if view is not None:
            entries = dict(view.entries)
            for job_id, flavor in self.stops.items():
                entry = entries.get(job_id)
                if entry is not None and entry.flavors:
                    entries[job_id] = replace(entry, request=entry.flavors[flavor.option])
            snap = replace(snap, queues=replace(view, entries=entries))
        return snap, [self.stops[j.job_id].job if j.job_id in self.stops else j for j in jobs]

    # ---------------------------------------------------------------- the parts

    def flavors(self, job: Job) -> tuple[Flavor, ...]:
        """``job``'s alternatives, listed once per pass."""
        known = self._flavors.get(job.job_id)
        if known is None or known[0] is not job:
            known = (job, flavors_of(job))
            self._flavors[job.job_id] = known
        return known[1]

    def policy(self, job: Job) -> Policy:
        """The flavorFungibility of ``job``'s queue (the root's for a job in none;
        Kueue's defaults without queues.conf)."""
        view = self.queues.view
        if view is None:
            return Policy()
        entry = view.entries.get(job.job_id)
        borrow, preempt_word = view.conf.fungibility(entry.queue if entry else quota.ROOT)
        return Policy(borrow, preempt_word)

    def _entry(self, job: Job) -> QueueEntry | None:
        view = self.queues.view
        entry = view.entries.get(job.job_id) if view is not None else None
        return None if entry is None or entry.queue == quota.ROOT else entry

    def _request(self, entry: QueueEntry, flavor: Flavor) -> Mapping[str, int]:
        return entry.flavors[flavor.option] if entry.flavors else entry.request

    def _admission(self, job: Job, flavor: Flavor) -> quota.Admission | None:
        """Whether ``flavor``'s request may start in ``job``'s queue now (None: the job
        is in no queue)."""
        ledger, entry = self.queues, self._entry(job)
        if entry is None or ledger.tree is None or ledger.view is None:
            return None
        return quota.admit_totals(
            ledger.tree,
            ledger.view.shares,
            ledger.totals,
            entry.queue,
            self._request(entry, flavor),
            entry.preemptible,
        )

    def _preemptible(
        self, job: Job, flavor: Flavor, nodes: Mapping[str, NodeView], admitted: bool
    ) -> bool:
        """Whether ``flavor`` would fit now were the running jobs ``job`` may preempt
        gone: PreemptType's (when its queue admits it: they cannot change a quota), and
        those reclaim takes back when it stays within its queue's guarantee (the jobs
        of the queues above theirs)."""
        victims = {}
        if admitted:
            victims = {r.job_id: r for r in preempt.may_take(self.snap, job, self.plan.now)}
        view, entry = self.queues.view, self._entry(job)
        if entry is not None and self._within_guarantee(entry, self._request(entry, flavor)):
            assert view is not None
            borrowing = self._borrowing()
            running = {r.job_id: r for r in self.snap.running}
            victims.update(
                (r.job_id, running[r.job_id])
                for r in view.running
                if r.preemptible
                and r.queue != entry.queue
                and r.queue in borrowing
                and r.job_id in running
            )
        if not victims:
            return False
        trial = dict(nodes)
        policy = self.snap.preempt
        for victim in victims.values():  # one suspended (PreemptMode=SUSPEND) lends its CPUs
            lends = policy is not None and preempt.suspends(policy, victim)
            preempt.release(trial, victim, cpus_only=lends)
        return isinstance(placement.first_fit(flavor.job, self.snap, trial, set()), Start)

    def _within_guarantee(self, entry: QueueEntry, request: Mapping[str, int]) -> bool:
        """Whether ``request`` stays within the guarantee of its queue and every queue
        above it (below the root): reclaim owes it what others borrowed."""
        ledger = self.queues
        tree, view = ledger.tree, ledger.view
        assert tree is not None and view is not None
        return all(
            ledger.totals[q].get(r, 0) + n <= view.shares.guarantee_of(q, r)
            for r in view.shares.resources
            if (n := request.get(r, 0)) > 0
            for q in tree.below(entry.queue, tree.root)
        )

    def _borrowing(self) -> frozenset[str]:
        """The queues holding more than their guarantee of some resource."""
        ledger = self.queues
        view = ledger.view
        assert view is not None
        return frozenset(
            q
            for q, held in ledger.totals.items()
            if any(n > view.shares.guarantee_of(q, r) for r, n in held.items())
        )

    def _start(
        self,
        job: Job,
        flavors: tuple[Flavor, ...],
        outcomes: list[str],
        flavor: Flavor,
        start: Start,
        why: str,
    ) -> Start:
        """Note ``flavor``'s start (``stamp`` and ``take`` read it) and return it."""
        found = [*outcomes[: flavor.rank], "starts", *outcomes[flavor.rank + 1 :]]
        alternatives = tuple(Alternative(f.label, f.gres, _found(found, f.rank)) for f in flavors)
        self._chosen[job.job_id] = (flavor, Choice(flavor.rank, alternatives, why))
        self.plan.choices.pop(job.job_id, None)
        return start

    def _wait(
        self,
        job: Job,
        flavors: tuple[Flavor, ...],
        outcomes: list[str],
        awaited: Flavor,
        why: str,
    ) -> None:
        """Note that ``job`` waits, for ``awaited``, with what each alternative met."""
        alternatives = tuple(
            Alternative(f.label, f.gres, _found(outcomes, f.rank)) for f in flavors
        )
        self.plan.choices[job.job_id] = Choice(awaited.rank, alternatives, why)


def _found(outcomes: Iterable[str], rank: int) -> str:
    """What alternative ``rank`` met (``untried``: the search ended before it)."""
    listed = list(outcomes)
    return listed[rank] if rank < len(listed) else "untried"
