"""Why a pending job waits, and what would let it start sooner (``corral why``).

Everything here reads one scheduling pass, its snapshot and its plan, and
changes neither: the answer is the plan's own view of the job (its reason, its
place in the queue, the jobs and reservations between it and its resources,
the expected start that ``squeue --start`` shows), put in numbers.

Suggestions are what-ifs: ``schedule`` runs again on a copy of the snapshot in
which only this job's request differs (fewer nodes, a shorter time limit,
another partition), and a change is suggested only if that plan starts the job
sooner. A job's outcome depends only on the jobs ahead of it in the queue
(backfill's promise, tested as a property), so each copy holds those jobs and
this one: a what-if costs what the job's place in the queue costs, not the
whole queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from controller.core import topology
from controller.core.alternatives import flavors_of, fungible
from controller.core.backfill import BackfillParams, duration
from controller.core.licensebook import book_of, needs
from controller.core.placement import partitions_of, take
from controller.core.plan import Choice, Expected, Plan
from controller.core.request import cpus_per_node, features_match, mem_per_node, node_fits
from controller.core.resvwindows import FOREVER, ResvWindows
from controller.core.schedule import queue_key, schedule
from controller.core.snapshot import NodeView, PartitionView, Snapshot
from controller.core.topomodel import asks
from controller.jobstate import Reason
from controller.model import Job

#: Reasons a changed request can cure; held jobs, dependencies, begin times and
#: accounting limits wait whatever the job asks for.
CURABLE = frozenset(
    {
        Reason.RESOURCES,
        Reason.PRIORITY,
        Reason.PARTITION_TIME_LIMIT,
        Reason.PARTITION_NODE_LIMIT,
        Reason.PARTITION_DOWN,
        Reason.PARTITION_INACTIVE,
    }
)
#: What-ifs tried per kind of change (each is one scheduling pass over the jobs ahead).
TRIES = 3


@dataclass(frozen=True, slots=True)
class Needs:
    """What the job asks for, per node."""

    nodes: int
    cpus_per_node: int
    memory_per_node: int  # MiB; 0: no request
    gres: str  # as --gres gave it, per node
    minutes: int  # its time limit, else its partition's; -1: unlimited
    exclusive: bool


@dataclass(frozen=True, slots=True)
class Blocker:
    """A job that holds, or is planned to take, nodes this job could use."""

    job_id: int
    user: str
    priority: int
    nodes: tuple[str, ...]  # those of its nodes this job could use
    start: int  # running since, or planned start
    end: int  # when its time limit frees the nodes (0: no limit)
    running: bool  # False: a job ahead in the queue, starting now or planned


@dataclass(frozen=True, slots=True)
class Reserved:
    """An advance reservation over nodes this job could use."""

    name: str
    nodes: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Head:
    """The head of a StrictFIFO queue, which the job waits behind (queues.conf)."""

    job_id: int
    user: str
    reason: Reason  # why the head waits; NONE: it starts in this pass


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A change to the request (as sbatch's option) and where the plan would then start it."""

    option: str  # "--nodes=1", "--time=30", "-p other"
    start: int  # epoch; the pass's ``now`` means at once
    nodes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopologyAsk:
    """What the job asks of the network (core/topology.py), and whether that is what
    keeps it waiting: ``held`` when a pass without the bound starts it sooner (the
    suggestions then say with what)."""

    switches: int  # --switches (0: none)
    wait_end: int  # when its --switches bound lapses (0: lapsed, or none)
    required: int  # --topology-level's levels (-1: none)
    preferred: int
    segment: int
    held: bool


@dataclass(frozen=True, slots=True)
class LicenseNeed:
    """A license the job asks for: how many, the cluster's total, and how many are
    free now (not held by running jobs nor by this pass's starts)."""

    name: str
    asked: int
    total: int
    free: int


@dataclass(frozen=True, slots=True)
class Why:
    job_id: int
    user: str
    partition: str
    position: int  # 1: the next job of its partition
    queued: int  # pending jobs in the partition
    reason: Reason
    needs: Needs
    max_time: int  # the partition's MaxTime in minutes, -1 UNLIMITED
    max_nodes: int  # the partition's MaxNodes, 0 UNLIMITED
    free_nodes: tuple[str, ...]  # usable now for one node's worth of the job
    blockers: tuple[Blocker, ...]
    reservations: tuple[Reserved, ...]
    expected_start: int  # 0: no estimate (past bf_window, or no backfill)
    expected_nodes: tuple[str, ...]
    suggestions: tuple[Suggestion, ...]
    now: int
    queue_head: Head | None = None  # StrictFIFO: the head it waits behind
    topology: TopologyAsk | None = None
    # A job naming alternatives (core/flavors.py): what the pass found for each, and
    # the one it starts on or waits for (the needs, free nodes and blockers are that
    # one's); None for a plain job.
    flavors: Choice | None = None
    licenses: tuple[LicenseNeed, ...] = ()  # each license it asks for (-L)


def explain(
    snap: Snapshot,
    now: int,
    job_id: int,
    params: BackfillParams,
    plan: Plan | None = None,
    others: Iterable[str] = (),
) -> Why:
    """Why pending job ``job_id`` of ``snap`` waits at ``now``.

    ``plan`` is the plan ``schedule(snap, now, params)`` made (the loop's last
    backfill pass, so the expected start is the one the store recorded); without
    it a plan of the jobs ahead is made here. ``others`` are partitions the
    job's user may also use, tried as ``-p``. KeyError if the job is not pending.
    """
    job = next((j for j in snap.pending if j.job_id == job_id), None)
    if job is None:
        raise KeyError(job_id)
    if plan is None:
        plan = _plan_ahead(snap, now, params, job)
    expected = _expected(plan, job_id)
    choice = _choice(plan, job_id)
    asked, job = job, _awaited(job, choice)  # suggestions change what it asked
    parts = partitions_of(job, snap)
    part = next((p for p in parts if expected and p.name == expected.partition), None)
    part = part or (parts[0] if parts else _missing(job))
    needs = _needs(job, part, snap, expected)
    starts_now = expected is not None and expected.start_time <= now
    reason = Reason.NONE if starts_now else plan.reasons.get(job_id, job.reason)
    free_now = dict(snap.nodes)
    for start in plan.starts:
        if start.job_id != job_id:
            take(free_now, start)
    usable = _usable_nodes(job, part, snap)
    windows = ResvWindows(snap.reservations)
    confined = windows.confine(job) is not None
    reserved_now = windows.avoid(now, now + 1, job.reservation) if not confined else frozenset()
    free = tuple(
        n
        for n in usable
        if n not in reserved_now
        and node_fits(job, part, free_now[n], needs.cpus_per_node) is not None
    )
    blockers = () if starts_now else tuple(_blockers(snap, plan, params, job, usable, expected))
    length = needs.minutes * 60 if needs.minutes > 0 else FOREVER
    until = expected.start_time + length if expected else None
    reservations = tuple(
        Reserved(v.name, tuple(n for n in usable if n in v.nodes), v.start, v.end)
        for v in snap.reservations
        if v.end > now
        and (v.name == job.reservation or not job.reservation)
        and v.nodes.intersection(usable)
        and (until is None or v.start < until)
    )
    same = sorted((j for j in snap.pending if part.name in j.partitions), key=queue_key(snap))
    position = next((i for i, j in enumerate(same, 1) if j.job_id == job_id), len(same))
    head = None if starts_now else _head(snap, plan, plan.behind.get(job_id))
    suggestions: tuple[Suggestion, ...] = ()
    if reason in CURABLE and not starts_now and head is None:  # no request passes its head
        best = expected.start_time if expected else None
        suggestions = _suggestions(
            snap, now, params, asked, part, needs, free, blockers, reservations, best, others
        )
    network, relaxed = _topology(snap, now, params, job, part, expected, starts_now)
    suggestions += relaxed
    return Why(
        job_id=job_id,
        user=job.user,
        partition=part.name,
        position=position,
        queued=len(same),
        reason=reason,
        needs=needs,
        max_time=part.max_time,
        max_nodes=part.max_nodes or 0,
        free_nodes=free,
        blockers=blockers,
        reservations=reservations,
        expected_start=expected.start_time if expected else 0,
        expected_nodes=expected.nodes if expected else (),
        suggestions=suggestions,
        now=now,
        queue_head=head,
        topology=network,
        flavors=choice,
        licenses=_licenses(snap, plan, job, now),
    )


def _licenses(snap: Snapshot, plan: Plan, job: Job, now: int) -> tuple[LicenseNeed, ...]:
    """Each license ``job`` asks for, with what is free of it now."""
    asked = needs(job.licenses)
    if not asked:
        return ()
    held = [(r.job_id, r.licenses, r.start_time, r.end_time, r.reservation) for r in snap.running]
    pending = {j.job_id: j for j in snap.pending}
    held += [
        (s.job_id, pending[s.job_id].licenses, now, 0, pending[s.job_id].reservation)
        for s in plan.starts
        if s.job_id in pending and s.job_id != job.job_id
    ]
    used = book_of(snap.licenses, held, now).used(now)
    total = dict(snap.licenses)
    return tuple(
        LicenseNeed(name, count, total.get(name, 0), max(total.get(name, 0) - used.get(name, 0), 0))
        for name, count in asked
    )


def _choice(plan: Plan, job_id: int) -> Choice | None:
    """What the plan chose among the job's alternatives: to start it, or to wait for."""
    start = next((s for s in plan.starts if s.job_id == job_id), None)
    return start.flavor if start is not None else plan.choices.get(job_id)


def _awaited(job: Job, choice: Choice | None) -> Job:
    """The job as the alternative it starts on or waits for asks (itself when plain)."""
    if choice is None or not fungible(job):
        return job
    flavors = flavors_of(job)
    return flavors[choice.chosen].job if choice.chosen < len(flavors) else job


def _head(snap: Snapshot, plan: Plan, head_id: int | None) -> Head | None:
    """The StrictFIFO head ``head_id`` as the plan leaves it (None: no head)."""
    head = next((j for j in snap.pending if j.job_id == head_id), None)
    if head is None:
        return None
    starts = any(s.job_id == head.job_id for s in plan.starts)
    reason = Reason.NONE if starts else plan.reasons.get(head.job_id, head.reason)
    return Head(head.job_id, head.user, reason)


def _topology(
    snap: Snapshot,
    now: int,
    params: BackfillParams,
    job: Job,
    part: PartitionView,
    expected: Expected | None,
    starts_now: bool,
) -> tuple[TopologyAsk | None, tuple[Suggestion, ...]]:
    """The job's topology request (None: it makes none), and the looser ones that
    would start it sooner: ``--switches`` with as many leaves as it would then span,
    ``--topology-level`` one level up."""
    if not asks(job):
        return None, ()
    wait = topology.wait_end(job, now)
    relaxed: list[Suggestion] = []
    view = part.topology
    if not starts_now and view is not None:
        best = expected.start_time if expected else None
        variants: list[tuple[str, Job]] = []
        if wait:
            variants.append(("--switches", replace(job, switches=0)))
        if 0 <= job.topology_required < view.top:
            level = job.topology_required + 1
            preferred = f":{job.topology_preferred}" if job.topology_preferred >= 0 else ""
            variants.append(
                (f"--topology-level={level}{preferred}", replace(job, topology_required=level))
            )
        for option, variant in variants:
            got = _start_of(snap, now, params, variant)
            if got is not None and (best is None or got.start_time < best):
                if option == "--switches":
                    option = f"--switches={topology.leaves_of(view, got.nodes)}"
                relaxed.append(Suggestion(option, got.start_time, got.nodes))
    asked = TopologyAsk(
        switches=job.switches,
        wait_end=wait,
        required=job.topology_required,
        preferred=job.topology_preferred,
        segment=job.segment,
        held=bool(relaxed),
    )
    return asked, tuple(relaxed)


def _missing(job: Job) -> PartitionView:
    """A stand-in for a partition no longer configured (the job waits for nothing it has)."""
    return PartitionView(job.partitions[0], (), "INACTIVE", -1, None, 0, 0, 0, 0, 0, False)


def _expected(plan: Plan, job_id: int) -> Expected | None:
    """Where the plan starts the job: now (a start), later (backfill's estimate), or None."""
    start = next((s for s in plan.starts if s.job_id == job_id), None)
    if start is not None:
        return Expected(plan.now, start.partition, start.nodes)
    return plan.expected.get(job_id)


def _needs(job: Job, part: PartitionView, snap: Snapshot, expected: Expected | None) -> Needs:
    nodes = len(expected.nodes) if expected else max(job.min_nodes, 1)
    cpus = cpus_per_node(job, nodes)
    largest = max((snap.nodes[n].real_memory for n in part.nodes if n in snap.nodes), default=0)
    minutes = job.time_limit if job.time_limit > 0 else part.max_time
    exclusive = job.exclusive or part.exclusive
    return Needs(nodes, cpus, mem_per_node(job, part, cpus, largest), job.gres, minutes, exclusive)


def _usable_nodes(job: Job, part: PartitionView, snap: Snapshot) -> tuple[str, ...]:
    """The partition's nodes (its reservation's, for a job in one) that could ever hold
    one node's worth of the job: up, with its features, big enough when empty."""
    resv = ResvWindows(snap.reservations).confine(job)
    cpus = cpus_per_node(job, max(job.min_nodes, 1))
    out = []
    for name in part.order or part.nodes:
        node = snap.nodes.get(name)
        if node is None or not node.usable or name in job.exc_nodes:
            continue
        if resv is not None and name not in resv.nodes:
            continue
        if job.constraint and not features_match(job.constraint, node.features):
            continue
        if node_fits(job, part, _empty(node), cpus) is not None:
            out.append(name)
    return tuple(out)


def _empty(node: NodeView) -> NodeView:
    """``node`` with nothing running (GRES as free now: the view keeps no totals)."""
    return replace(
        node,
        free_cpus=node.cpus,
        free_memory=node.real_memory,
        idle=True,
        unshared=False,
        shared=(),
    )


def _blockers(
    snap: Snapshot,
    plan: Plan,
    params: BackfillParams,
    job: Job,
    usable: tuple[str, ...],
    expected: Expected | None,
) -> Iterator[Blocker]:
    """Running jobs on the nodes the job waits for (all it could use, without an
    estimate) that free them by its expected start, then the jobs ahead of it that
    this pass starts or plans there before it."""
    wanted = set(expected.nodes) if expected else set(usable)
    begin = expected.start_time if expected else None
    for r in sorted(snap.running, key=lambda r: (r.end_time or FOREVER, r.job_id)):
        held = tuple(n for n in r.nodes if n in wanted)
        if held and (begin is None or 0 < r.end_time <= begin):
            yield Blocker(r.job_id, r.user, r.priority, held, r.start_time, r.end_time, True)
    key = queue_key(snap)
    mine = key(job)
    pending = {j.job_id: j for j in snap.pending}
    planned = [(plan.now, s.job_id, s.partition, s.nodes) for s in plan.starts]
    planned += [(e.start_time, i, e.partition, e.nodes) for i, e in plan.expected.items()]
    for at, other_id, name, nodes in sorted(planned):
        other = pending.get(other_id)
        held = tuple(n for n in nodes if n in wanted)
        if other is None or other_id == job.job_id or not held or key(other) >= mine:
            continue
        if begin is not None and at >= begin:
            continue
        end = at + duration(other, snap.partitions[name], params.window)
        yield Blocker(other_id, other.user, snap.ranking.of(other), held, at, end, False)


def _suggestions(
    snap: Snapshot,
    now: int,
    params: BackfillParams,
    job: Job,
    part: PartitionView,
    needs: Needs,
    free: tuple[str, ...],
    blockers: tuple[Blocker, ...],
    reservations: tuple[Reserved, ...],
    best: int | None,
    others: Iterable[str],
) -> tuple[Suggestion, ...]:
    """Changes that the plan says start the job sooner than ``best`` (None: never).

    Fewer nodes and shorter limits are tried from the smallest change down; one is
    kept only if it starts sooner than every smaller change kept before it.
    """
    out: list[Suggestion] = []
    for kind in (
        _fewer_nodes(job, needs, free),
        _shorter(job, part, needs, now, blockers, reservations),
    ):
        bar = best
        for option, variant in kind[:TRIES]:
            got = _start_of(snap, now, params, variant)
            if got is not None and (bar is None or got.start_time < bar):
                out.append(Suggestion(option, got.start_time, got.nodes))
                bar = got.start_time
    for name in others:
        if name in job.partitions or name not in snap.partitions:
            continue
        got = _start_of(snap, now, params, replace(job, partitions=(name,)))
        if got is not None and (best is None or got.start_time < best):
            out.append(Suggestion(f"-p {name}", got.start_time, got.nodes))
    return tuple(out)


def _fewer_nodes(job: Job, needs: Needs, free: tuple[str, ...]) -> list[tuple[str, Job]]:
    """``--nodes=N`` for as many nodes as are free now, half as many, and one."""
    if job.req_nodes or needs.nodes <= 1:
        return []
    counts = sorted({n for n in (len(free), needs.nodes // 2, 1) if 0 < n < needs.nodes})
    out = []
    for n in reversed(counts):
        tasks = job.ntasks_per_node * n if job.ntasks_per_node and not job.tasks_given else 0
        variant = replace(
            job, min_nodes=n, max_nodes=0, nodes_given=True, num_tasks=tasks or job.num_tasks
        )
        out.append((f"--nodes={n}", variant))
    return out


def _shorter(
    job: Job,
    part: PartitionView,
    needs: Needs,
    now: int,
    blockers: tuple[Blocker, ...],
    reservations: tuple[Reserved, ...],
) -> list[tuple[str, Job]]:
    """``--time=M`` for the partition's MaxTime (when the limit is over it), for runs that
    end before a planned job or a reservation takes the nodes, and for half the limit."""
    limit = needs.minutes
    if limit <= 1:
        return []
    minutes = {limit // 2}
    if part.max_time > 0:
        minutes.add(part.max_time)
    for at in [b.start for b in blockers if not b.running] + [r.start for r in reservations]:
        if at > now:
            minutes.add((at - now) // 60 - 1)  # a minute of margin: plans round up
    out = []
    for m in sorted((m for m in minutes if 0 < m < limit), reverse=True):
        variant = replace(job, time_limit=m, time_min=min(job.time_min, m))
        out.append((f"--time={_duration(m)}", variant))
    return out


def _duration(minutes: int) -> str:
    """A time limit as sbatch takes it: minutes below an hour, else ``H:MM:00``."""
    hours, rest = divmod(minutes, 60)
    return f"{hours}:{rest:02d}:00" if hours else str(minutes)


def _start_of(snap: Snapshot, now: int, params: BackfillParams, job: Job) -> Expected | None:
    """Where a pass of the jobs ahead of ``job`` (and ``job``) would start it."""
    return _expected(_plan_ahead(snap, now, params, job), job.job_id)


def _plan_ahead(snap: Snapshot, now: int, params: BackfillParams, job: Job) -> Plan:
    """The plan of a copy of ``snap`` whose queue is ``job`` and the jobs ahead of it."""
    key = queue_key(snap)
    mine = key(job)
    ahead = tuple(j for j in snap.pending if j.job_id != job.job_id and key(j) < mine)
    return schedule(replace(snap, pending=(*ahead, job), preempt=None), now, params)
