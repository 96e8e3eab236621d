"""One scheduling pass: walk pending jobs in priority order and place them.

Phases, in order: ``order`` (partition PriorityTier, priority, then submit order) → for each job
``eligible`` (held, begin time, dependency, partition limits: "not now" or
"never") → ``place`` (first partition, by PriorityTier, whose nodes fit the
job now) → record a start or the reason it waits. Within a partition the
first job that cannot start blocks the ones behind it (they wait with reason
Priority), as Slurm's main scheduler does. Then, when asked, ``backfill``
goes over the jobs left waiting (see ``backfill.py``); then reclaim and
preemption; last, elastic jobs grow onto what is still free (``elastic.py``).

Licenses (``licensebook.py``) are checked before placement: a job too few of whose
licenses are free, or whose licenses a waiting job ahead asks for, waits with reason
Licenses and, like a job waiting for nodes, blocks its partitions; backfill plans
licenses over time and starts the jobs behind only where they delay no job ahead.

Resources taken by earlier starts in the same pass are tracked locally, so
one plan never allocates a CPU twice. Node choice and partition limits live
in ``placement.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from controller.core import dependency, devices, elastic, hetgroup
from controller.core.backfill import WAITING, Backfill, BackfillParams
from controller.core.flavors import Chooser
from controller.core.licensebook import book_of, needs
from controller.core.limits import Usage
from controller.core.nodeindex import C_BITMAPS, Bitmaps, FreeNodes, NodeOrder
from controller.core.placement import first_fit, partition_reason, partitions_of, take
from controller.core.plan import Draft, Plan, Start
from controller.core.preempt import lent_back, preemptions, suspends
from controller.core.queueplan import QueueLedger, reclaims, suspending
from controller.core.resvwindows import ResvWindows
from controller.core.snapshot import PartitionView, Snapshot
from controller.jobstate import Reason
from controller.model import Job
from corral import arrayspec


def order_key(
    partitions: Mapping[str, PartitionView], priority: Callable[[Job], int]
) -> Callable[[Job], tuple[int, ...]]:
    """Slurm's queue order as a sort key: a higher partition PriorityTier first, then
    priority, then submit order.

    The tier comes first so that a job preempted for a higher tier, requeued and
    eligible again before its preemptor started, cannot take its place back.
    """

    def key(job: Job) -> tuple[int, ...]:
        tier = max((p.priority_tier for n in job.partitions if (p := partitions.get(n))), default=0)
        return -tier, -priority(job), job.submit_time, job.job_id

    return key


def queue_key(snap: Snapshot) -> Callable[[Job], tuple[int, ...]]:
    """``order_key`` of the snapshot's partitions and ranking, taken from
    ``snap.queue_keys`` for the very jobs it was worked out for."""
    worked_out, kept = order_key(snap.partitions, snap.ranking.of), snap.queue_keys

    def key(job: Job) -> tuple[int, ...]:
        entry = kept.get(job.job_id)
        return entry[1] if entry is not None and entry[0] is job else worked_out(job)

    return key


def _order(jobs: list[Job], snap: Snapshot) -> list[Job]:
    return sorted(jobs, key=queue_key(snap))


def _waiting_reason(
    job: Job, snap: Snapshot, deps: dependency.Index, now: int
) -> tuple[Reason | None, list[int] | None]:
    """Why ``job`` cannot be considered at all right now (or None), and for an
    array's record whose tasks wait each for its own counterpart (``aftercorr``)
    the tasks that may start."""
    if job.held:
        held = {
            "admin": Reason.JOB_HELD_ADMIN,
            "resv": Reason.RESERVATION_DELETED,
            "prolog": Reason.LAUNCH_FAILED_REQUEUED_HELD,
        }
        return held.get(job.held, Reason.JOB_HELD_USER), None
    if job.begin_time > now:
        return Reason.BEGIN_TIME, None
    ready = None
    if job.deps is not None:
        args = (job.deps, job.job_id, job.name, job.uid)
        if job.array_pending and any(item.kind == "aftercorr" for item in job.deps.items):
            ready, outcome = dependency.startable_tasks(*args, job.array_pending, deps, now)
        else:
            outcome = dependency.check(*args, deps, now, job.array_task_id)
        if outcome is dependency.Outcome.WAITING:
            return Reason.DEPENDENCY, None
        if outcome is dependency.Outcome.NEVER:
            return Reason.DEPENDENCY_NEVER_SATISFIED, None
    if (
        job.array_max_tasks
        and snap.running_per_array.get(job.array_job_id, 0) >= job.array_max_tasks
    ):
        return Reason.JOB_ARRAY_TASK_LIMIT, None
    return None, ready


def _past_deadline(job: Job, now: int) -> bool:
    """Slurm's ``--deadline``: no start now could end in time (time-min, else the limit)."""
    minutes = job.time_min or max(job.time_limit, 0)
    return bool(job.deadline) and now + minutes * 60 > job.deadline


def held_back(
    job: Job, snap: Snapshot, blocked: set[str], stuck: dict[tuple[str, ...], PartitionView]
) -> Reason | None:
    """What ``first_fit`` answers, without placing, for a job every one of whose
    partitions is blocked by an earlier job of this pass; None when one is not.

    At 100,000 pending jobs behind a full cluster the main pass otherwise places each
    of them in vain. ``first_fit`` answers such a job with its first partition's limit,
    else Priority, whatever the nodes; a job in a reservation is not held back by
    blocked partitions and is placed as usual. ``stuck`` keeps, per partition list
    found all blocked, its first partition by PriorityTier: ``blocked`` only grows
    during the pass, so a list once all blocked stays so.
    """
    if not blocked or job.reservation:
        return None
    first = stuck.get(job.partitions)
    if first is None:
        known = partitions_of(job, snap)
        if not known or any(p.name not in blocked for p in known):
            return None
        first = stuck[job.partitions] = known[0]
    return partition_reason(job, first) or Reason.PRIORITY


def schedule(
    snap: Snapshot,
    now: int,
    backfill: BackfillParams | None = None,
    depth: int | None = None,
    bitmaps: Bitmaps = C_BITMAPS,
) -> Plan:
    """Decide which pending jobs start at ``now`` and why the others wait.

    The main pass tries at most ``depth`` jobs (``default_queue_depth``; all
    when None); then, given ``backfill``, a backfill pass goes over the jobs
    the main pass left waiting for Resources or Priority or did not reach.
    ``bitmaps`` picks the node bitmap behind candidate scans (the C one; the
    benchmark compares its pure-Python twin).
    """
    plan = Draft(now=now)
    nodes = dict(snap.nodes)
    blocked: set[str] = set()
    running_arrays = dict(snap.running_per_array)
    started: list[tuple[Job, Start]] = []
    waiting: list[Job] = []
    # Jobs that cannot be considered get their reason first, so only the rest
    # is sorted: 10,000 held jobs cost one pass, not a sort, per cycle.
    candidates = []
    chosen_tasks: dict[int, list[int]] = {}  # aftercorr arrays: the tasks that may start
    deps = dependency.Index(snap.jobs)  # one walk over the jobs; each reference is a lookup
    for job in snap.pending:
        if _past_deadline(job, now):
            plan.ended[job.job_id] = Reason.DEADLINE
            continue
        reason, ready = _waiting_reason(job, snap, deps, now)
        if reason is None:
            candidates.append(job)
            if job.switches and not job.switch_wait_start:  # its --switches wait begins
                plan.switch_waits[job.job_id] = now
            if ready is not None:
                chosen_tasks[job.job_id] = ready
        elif reason is Reason.DEPENDENCY_NEVER_SATISFIED and job.kill_on_invalid_dep:
            plan.ended[job.job_id] = reason
        else:
            plan.reasons[job.job_id] = reason
    free = FreeNodes(nodes, NodeOrder.of(nodes, snap.partitions.values(), bitmaps))
    queues = QueueLedger(snap.queues)
    chooser = Chooser(snap, queues, plan)  # jobs naming alternatives: core/flavors.py
    ordered = queues.in_quota_first(_order(candidates, snap))
    if depth is not None and len(ordered) > depth:
        ordered, untried = ordered[:depth], ordered[depth:]
    else:
        untried = []
    usage = Usage(snap.usage)
    windows = ResvWindows(snap.reservations)
    licenses = book_of(
        snap.licenses,
        ((r.job_id, r.licenses, r.start_time, r.end_time, r.reservation) for r in snap.running),
        now,
        snap.reservations,
    )
    # Licenses asked for by jobs ahead that wait: a job behind them may not take those
    # now (as a waiting job blocks its partition); backfill lends them when its plans
    # show the jobs ahead are not delayed.
    awaited: set[str] = set()
    stuck: dict[tuple[str, ...], PartitionView] = {}  # see held_back

    def fit_now(asked: Job) -> Start | Reason:
        """Placement now, in the first partition that holds ``asked`` (one alternative)."""
        return first_fit(asked, snap, nodes, blocked, free, windows, now)

    het = hetgroup.groups(candidates)

    def start_group(job: Job) -> None:
        """A heterogeneous job's components, all started now or all left waiting."""
        members = het.pop(job.het_job_id)
        reason: Reason | None = None
        if len(members) < hetgroup.size(job):  # a component cannot be considered now
            ids = range(job.het_job_id, job.het_job_id + hetgroup.size(job))
            known = (plan.reasons.get(i) for i in ids)
            reason = next((r for r in known if r is not None), Reason.RESOURCES)
        for member in members:
            reason = reason or usage.blocked(snap.gates.get(member.job_id, ()))
            resv = windows.of(member) if member.reservation else None
            if reason is None and member.reservation and (resv is None or resv.start > now):
                reason = Reason.RESERVATION_DELETED if resv is None else Reason.RESERVATION
        asked = hetgroup.licenses(needs(m.licenses) for m in members)  # the group's, together
        if reason is None and asked and licenses.short(asked, now, now + 1):
            reason = Reason.LICENSES
        outcome = reason or hetgroup.place(
            members,
            lambda j, n, f: first_fit(j, snap, n, blocked, f, windows, now),
            nodes,
            free.order,
        )
        if isinstance(outcome, Reason):
            for member in members:
                plan.reasons[member.job_id] = outcome
                if outcome in WAITING or outcome is Reason.LICENSES:
                    blocked.update(p for p in member.partitions if p in snap.partitions)
                    queues.stop(member, outcome)
                    waiting.append(member)  # backfill plans when it could start
            return
        for member, start in zip(members, outcome, strict=True):
            plan.starts.append(start)
            started.append((member, start))
            take(nodes, start)
            free.taken(start)
            usage.take(snap.gates.get(member.job_id, ()))
            licenses.hold(member.job_id, needs(member.licenses), now, None)

    for job in ordered:
        if job.het_job_id:  # its group, where its first component comes in the order
            if job.het_job_id in het:
                start_group(job)
            continue
        head = queues.head_of(job)
        if head is not None:  # StrictFIFO: its queue's head could not start; nor may it
            plan.reasons[job.job_id] = Reason.PRIORITY
            plan.behind[job.job_id] = head
            continue
        if job.reservation:
            resv = windows.of(job)
            if resv is None or resv.start > now:
                plan.reasons[job.job_id] = (
                    Reason.RESERVATION_DELETED if resv is None else Reason.RESERVATION
                )
                if resv is not None:
                    waiting.append(job)  # backfill plans its start in the reservation
                continue
        # An array's one pending record may start several tasks in one pass.
        picks = chosen_tasks.get(job.job_id)
        tasks = len(picks) if picks is not None else arrayspec.count(job.array_pending) or 1
        throttle = job.array_max_tasks
        gates = snap.gates.get(job.job_id, ())
        while tasks:
            if throttle and running_arrays.get(job.array_job_id, 0) >= throttle:
                plan.reasons[job.job_id] = Reason.JOB_ARRAY_TASK_LIMIT
                break
            limit = usage.blocked(gates) or chooser.blocked(job)
            if limit is not None:  # held back by a limit or its queue: blocks nothing behind
                plan.reasons[job.job_id] = limit
                queues.stop(job, limit)  # but the rest of a StrictFIFO queue
                break
            asked = needs(job.licenses)
            if asked and (
                licenses.short(asked, now, now + 1, job.reservation)
                or any(n in awaited for n, _ in asked)
            ):
                # As a job waiting for nodes: the jobs behind it in its partitions wait
                # for backfill, which starts them only if they do not delay it.
                plan.reasons[job.job_id] = Reason.LICENSES
                if not job.reservation:
                    blocked.update(p for p in job.partitions if p in snap.partitions)
                awaited.update(name for name, _ in asked)
                queues.stop(job, Reason.LICENSES)
                waiting.append(job)  # backfill plans when its licenses are free
                break
            # A job without alternatives the chooser would place alone: first_fit.
            stuck_at = (
                None
                if job.gres_alternatives or job.prefer
                else held_back(job, snap, blocked, stuck)
            )
            outcome = chooser.choose(job, fit_now, nodes) if stuck_at is None else stuck_at
            if isinstance(outcome, Reason):
                plan.reasons[job.job_id] = outcome
                if outcome in WAITING:
                    if not job.reservation:  # its reservation's nodes hold back no one else
                        if job.partitions not in stuck:
                            blocked.update(p for p in job.partitions if p in snap.partitions)
                        queues.stop(job, outcome)
                    if asked:
                        awaited.update(name for name, _ in asked)
                    waiting.append(job)
                break
            if picks is not None:
                outcome = replace(outcome, task=picks[len(picks) - tasks])
            bound = devices.bind(outcome, nodes)
            if bound is None:  # a share of a GPU this pass gave whole: the next pass
                plan.reasons[job.job_id] = Reason.RESOURCES
                queues.stop(job, Reason.RESOURCES)
                break
            outcome = chooser.stamp(bound)
            plan.starts.append(outcome)
            started.append((job, outcome))
            take(nodes, outcome)
            free.taken(outcome)
            usage.take(gates)
            chooser.take(job)
            licenses.hold(job.job_id, asked, now, None, job.reservation)  # backfill: its end
            if job.array_job_id:
                running_arrays[job.array_job_id] = running_arrays.get(job.array_job_id, 0) + 1
            tasks -= 1
    for leader in [members[0] for members in het.values()]:  # groups the depth cut off
        start_group(leader)
    plan.main_starts = len(plan.starts)
    if backfill is not None:
        plan.backfilled = True
        bf = Backfill(
            snap, plan, nodes, backfill, running_arrays, free, usage, queues, chooser, licenses
        )
        for job, start in started:
            bf.started(job, start)
        # A heterogeneous job's components may be in both (the group tried past the depth).
        bf.run(list({j.job_id: j for j in waiting + untried}.values()), chosen_tasks)
    # Reclaim between queues first, then PreemptType's preemption (docs/design.md,
    # "Queues: division, admission and reclaim"). A reclaimed job is suspended when its
    # PreemptMode is SUSPEND, else requeued when it may be (an evicted workload comes
    # back, as in KAI and Kueue), else cancelled.
    running = {r.job_id: r for r in snap.running}
    # A job that stopped at an alternative it may preempt for asks for that one alone.
    snap, ordered = chooser.awaited(snap, ordered)
    # A job behind its StrictFIFO queue's head makes no room for itself: only the head may.
    heads_only = [job for job in ordered if job.job_id not in plan.behind]
    reclaimed = reclaims(snap, plan, nodes, heads_only)
    suspended = suspending(snap) if reclaimed else frozenset()
    for victim, eviction in reclaimed.items():
        plan.preempted[victim] = eviction.for_job
        plan.why[victim] = eviction.why
        if victim in suspended:
            plan.suspended.add(victim)
        elif running[victim].requeue:
            plan.requeued.add(victim)
    if snap.preempt is not None:
        policy = snap.preempt
        chosen = preemptions(
            snap, plan, nodes, ordered, claimed=set(plan.preempted), licenses=licenses
        )
        plan.preempted.update(chosen)
        for victim in chosen:
            r = running[victim]
            if suspends(policy, r):
                plan.suspended.add(victim)
            elif r.requeue and policy.mode_of(r) == "REQUEUE":
                plan.requeued.add(victim)
    for victim in plan.preempted:
        if running[victim].grace > 0:
            plan.grace[victim] = running[victim].grace
    # Last, elastic jobs (core/elastic.py): what they hold above their minimum goes back
    # to jobs before them in the queue's order that still wait; then they grow onto
    # what no pending job could take.
    key = queue_key(snap)
    lent_back(snap, plan, nodes, ordered, key)
    elastic.grow(snap, plan, nodes, usage, queues, key)
    return plan.freeze()
