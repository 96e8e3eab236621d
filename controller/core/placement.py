"""Where a job fits: node choice for one job in one partition, and partition limits.

``place`` is cons_tres-style selection over the free resources it is given:
the scheduler's main pass gives it the resources free now, backfill the ones
free at a future moment (with reserved nodes masked off), and admission an
empty cluster ("could this ever run?").
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from contextlib import suppress
from itertools import islice
from operator import attrgetter

from controller.core import (
    cpupick,
    devices,
    features,
    gpuplace,
    gpus,
    gpusocketcap,
    gpusockets,
    nodefree,
    threads,
    topology,
)
from controller.core.nodeindex import FreeNodes, selection_sorted
from controller.core.plan import Start
from controller.core.request import (
    Fit,
    NodeFit,
    cpus_per_node,
    fitter,
    gres_request,
    node_fits,
    share,
    socket_tasks,
)
from controller.core.resvwindows import ResvWindows, run_end
from controller.core.snapshot import NodeView, PartitionView, Snapshot
from controller.core.topomodel import Topology
from controller.jobstate import Reason
from controller.model import Job

Alloc = tuple[str, Fit]  # node name, what the job gets there


def partition_reason(job: Job, part: PartitionView) -> Reason | None:
    if part.state == "DOWN":
        return Reason.PARTITION_DOWN
    if part.state == "INACTIVE":
        return Reason.PARTITION_INACTIVE
    if part.max_time >= 0 and (job.time_limit < 0 or job.time_limit > part.max_time):
        return Reason.PARTITION_TIME_LIMIT
    if part.max_nodes is not None and job.min_nodes > part.max_nodes:
        return Reason.PARTITION_NODE_LIMIT
    if job.min_nodes < part.min_nodes:
        return Reason.PARTITION_NODE_LIMIT
    return None


def _fixed(
    job: Job,
    part: PartitionView,
    candidates: Sequence[NodeView],
    stacking: bool,
    gpu: gpus.GpuAsk | None,
) -> list[Alloc]:
    """Exactly ``min_nodes`` nodes, tasks spread evenly (``-N k`` alone, or with
    ``--ntasks-per-node``)."""
    cpus = cpus_per_node(job, job.min_nodes)
    fits = fitter(job, part, stacking=stacking, gpu=gpu)
    chosen: list[Alloc] = []
    for node in candidates:
        fit = fits(node, cpus)
        if fit is not None:
            chosen.append((node.name, fit))
            if len(chosen) == job.min_nodes:
                return chosen
    return []


def _fixed_count(job: Job) -> bool:
    """Whether ``job`` gets exactly ``min_nodes`` nodes: ``-N k`` (or ``-N k-k``), and an
    elastic job, which starts as -N min would (core/elastic.py then grows it)."""
    return job.nodes_given and (job.max_nodes in (0, job.min_nodes) or job.elastic_signal > 0)


def packs(job: Job) -> bool:
    """Whether ``job``'s tasks fill its nodes in order rather than spread evenly over
    them: all but a fixed ``-N k`` with no ``-n``, or with ``--ntasks-per-node`` or
    ``--ntasks-per-gpu`` (so many on each node). Slurm's
    cons_tres fills each node in turn with what its free CPUs hold, keeping a task
    for each node still to come: ``-N2 -n6`` on idle 8-CPU nodes is 5 + 1 tasks."""
    return not _fixed_count(job) or (
        job.tasks_given and not (job.ntasks_per_node or job.ntasks_per_gpu)
    )


#: How many of the best nodes ahead ``_packed``'s second pass sums exactly (beyond, a
#: bound: no node ahead holds more than the smallest of those).
AHEAD = 64


def _packed(
    job: Job,
    part: PartitionView,
    candidates: Sequence[NodeView],
    least: int,
    stacking: bool,
    gpu: gpus.GpuAsk | None,
    most: int | None = None,
) -> list[Alloc]:
    """As few nodes as the tasks fit on, in node order (``-n`` without a fixed ``-N``;
    with ``-N k``, ``least`` and ``most`` are k).

    Required nodes (``-w``, and those a constraint count forces in) come first
    among the candidates and each gets at least one task; the node count stays
    within ``least`` (at least ``-N`` min and the required nodes), ``most`` (``-N``
    max) and MaxNodes. Where filling the nodes in order runs out of nodes before
    tasks (``-N1 -n2`` with the first node's CPUs half taken), nodes are passed over
    that leave more tasks than the best of the nodes after them could hold.
    """
    most = min(most or job.max_nodes or len(candidates), part.max_nodes or len(candidates))
    fits = fitter(job, part, stacking=stacking, gpu=gpu)
    want = _gpus_per_node(job, part)
    if want is not None:  # first with the tasks on the sockets of each node's GPUs
        confined = _Rooms(job, part, stacking, want)
        chosen = _fill(job, candidates, least, most, fits, confined, None)
        if chosen:
            return chosen
    rooms = _Rooms(job, part, stacking)
    chosen = _fill(job, candidates, least, most, fits, rooms, None)
    if chosen or most >= len(candidates):
        return chosen
    ahead = _room_ahead([rooms.of(node) for node in candidates], most - 1)
    return _fill(job, candidates, least, most, fits, rooms, ahead)


def _gpus_per_node(job: Job, part: PartitionView) -> tuple[str, int] | None:
    """The GPU type and count ``job`` asks on every node (``--gres=gpu:1``), where
    Slurm first tries its tasks on the sockets of those GPUs (``gpusocketcap``); None
    for a job without, or that takes whole nodes."""
    if "gpu" not in job.gres or job.exclusive or part.exclusive or job.ntasks_per_gpu:
        return None
    try:
        return gpusocketcap.per_node_want(gpus.gpu_items(job.gres)[0])
    except ValueError:
        return None


class _Rooms:
    """How many of ``job``'s tasks each node's free CPUs hold in ``part`` (with
    ``want``, a GPU type and count per node: those of the sockets such GPUs need)."""

    def __init__(
        self,
        job: Job,
        part: PartitionView,
        stacking: bool,
        want: tuple[str, int] | None = None,
    ) -> None:
        self.job, self.part, self.stacking = job, part, stacking
        self.exclusive = job.exclusive or part.exclusive
        self.shares = share(job, part)
        self.want = want

    def of(self, node: NodeView) -> int:
        job, part = self.job, self.part
        if self.exclusive:
            free = node.cpus
        elif self.shares or node.shared:
            free = nodefree.cpus_free(node, part.name, self.shares, self.stacking)
        else:
            free = node.free_cpus
        if part.max_cpus_per_node is not None:
            free = min(free, part.max_cpus_per_node)
        if self.want is not None:
            confined = gpusocketcap.socket_cpus(node, *self.want)
            if confined is not None:
                free = min(free, confined)
        if job.threads_per_core:  # whole cores, of which it uses some threads
            free = threads.usable(free - free % node.unit, node.unit, job.threads_per_core)
        if job.ntasks_per_socket:  # at most so many on each socket (core/taskspersocket.py)
            free = min(free, socket_tasks(job, node, self.exclusive))
        return free // job.cpus_per_task


def _room_ahead(rooms: Sequence[int], most: int) -> list[list[int]]:
    """For each position, the tasks the best 0..k nodes after it hold in all, k at most
    ``AHEAD``: a running sum of the largest rooms behind it, nodes taken from the end."""
    keep = min(most, AHEAD)
    ahead: list[list[int]] = [[0]] * len(rooms)
    best: list[int] = []  # the largest rooms seen so far, smallest first
    for i in range(len(rooms) - 1, -1, -1):
        sums = [0]
        for room in reversed(best):
            sums.append(sums[-1] + room)
        ahead[i] = sums
        if keep:
            insort(best, rooms[i])
            del best[:-keep]
    return ahead


def _held_ahead(sums: Sequence[int], slots: int) -> int:
    """The most tasks ``slots`` nodes after a position hold (``_room_ahead``'s sums;
    past its depth, each further node at most as many as the smallest counted)."""
    depth = len(sums) - 1
    if slots <= depth:
        return sums[slots]
    return sums[depth] + (slots - depth) * (sums[depth] - sums[depth - 1])


def _fill(
    job: Job,
    candidates: Sequence[NodeView],
    least: int,
    most: int,
    fits: NodeFit,
    rooms: _Rooms,
    ahead: Sequence[Sequence[int]] | None,
) -> list[Alloc]:
    """``_packed``'s pass over the nodes in order; with ``ahead``, a node is passed
    over when the nodes after it could not hold the tasks it would leave. ``fits`` is
    ``node_fits`` for the job (``request.fitter``: made once, not per node)."""
    remaining = job.num_tasks
    chosen: list[Alloc] = []
    per_task, least_cpus = job.cpus_per_task, job.min_cpus
    # Comparisons rather than min() and max() calls: this loop runs per node per job.
    for i, node in enumerate(candidates):
        if len(chosen) == most or (remaining == 0 and len(chosen) >= least):
            break
        room = rooms.of(node)
        later = least - len(chosen) - 1  # nodes that must still get a task
        if later < 0:
            later = 0
        tasks = remaining - later
        if room < tasks:
            tasks = room
        if tasks < 1 and not (remaining <= later and room >= 1):
            continue
        given = tasks if tasks > 0 else 0
        if ahead is not None and remaining - given > _held_ahead(ahead[i], most - len(chosen) - 1):
            continue
        cpus = (tasks if tasks > 1 else 1) * per_task
        if cpus < least_cpus:
            cpus = least_cpus
        fit = fits(node, cpus)
        if fit is None:
            continue
        chosen.append((node.name, fit))
        remaining -= given
    if remaining > 0 or len(chosen) < least:
        return []
    return chosen


def _counted(
    job: Job,
    part: PartitionView,
    pool: Sequence[NodeView],
    constraint: features.Constraint,
    fixed: bool,
    stacking: bool,
    gpu: gpus.GpuAsk | None,
) -> list[str] | None:
    """The nodes constraint counts (``a*2``, ``[a*2&b*4]``) force in, or None if too few.

    As Slurm's ``_get_req_features``: each counted set is picked in node order
    among nodes that have its features and could take the job; after a set
    joined by ``&`` in brackets, later sets avoid the nodes already picked and
    the ``-w`` ones.
    """
    cpus = cpus_per_node(job, job.min_nodes) if fixed else max(job.cpus_per_task, job.min_cpus)
    picked: list[str] = []
    distinct = False
    for count in constraint.counts:
        got: list[str] = []
        for node in pool:
            if len(got) == count.nodes:
                break
            if distinct and (node.name in picked or node.name in job.req_nodes):
                continue
            if not count.clause.matches(node.features):
                continue
            dealt = 1 if gpu is not None and gpu.dealt else 0
            if node_fits(job, part, node, cpus, stacking=stacking, gpu=gpu, gpus=dealt):
                got.append(node.name)
        if len(got) < count.nodes:
            return None
        picked += [name for name in got if name not in picked]
        distinct = distinct or count.xand
    return picked


def _choose(
    job: Job,
    part: PartitionView,
    pool: list[NodeView],
    constraint: features.Constraint,
    stacking: bool,
) -> list[Alloc]:
    fixed = _fixed_count(job)
    gpu = gpus.ask(job, part)
    forced = _counted(job, part, pool, constraint, fixed, stacking, gpu)
    if forced is None:
        return []
    required = set(job.req_nodes) | set(forced)
    if gpu is not None and job.gpus_per_socket:
        pool = gpusockets.most_first(pool, gpu)
    if forced or (required and gpu is not None and job.gpus_per_socket):
        pool = sorted(pool, key=lambda n: n.name not in required)
    least = max(job.min_nodes, len(required))
    if gpu is not None and gpu.dealt:
        chosen = gpuplace.choose(job, part, pool, gpu, fixed, least, stacking)
    elif not packs(job):
        chosen = _fixed(job, part, pool, stacking, gpu)
    else:
        chosen = _packed(job, part, pool, least, stacking, gpu, least if fixed else None)
    if not required <= {name for name, _ in chosen}:
        return []
    return chosen


def selection_order(
    names: Iterable[str], weight: Mapping[str, int], rank: Mapping[str, int]
) -> tuple[str, ...]:
    """``names`` (a partition's nodes) by Weight, lowest first, then by ``rank``
    (their place in the configuration): the order of Slurm's node bitmap,
    whatever order the partition lists them in (see nodeindex.NodeOrder)."""
    return tuple(sorted(names, key=lambda n: (weight[n], rank[n])))


def _selection_order(part: PartitionView, nodes: Mapping[str, NodeView]) -> tuple[str, ...]:
    """For views without a precomputed ``order`` (tests, ad hoc snapshots): as
    ``NodeOrder`` numbers the snapshot's nodes."""
    members = set(part.nodes)
    return tuple(n for n in selection_sorted(nodes) if n in members)


def place(
    job: Job,
    part: PartitionView,
    nodes: Mapping[str, NodeView],
    blocked: AbstractSet[str] = frozenset(),
    free: FreeNodes | None = None,
    after: str | None = None,
    only: AbstractSet[str] | None = None,
    avoid: AbstractSet[str] = frozenset(),
    at: int | None = None,
    prefer: AbstractSet[str] = frozenset(),
) -> Start | Reason:
    """Choose nodes for ``job`` in ``part`` from the free resources in ``nodes``.

    Nodes in ``blocked`` (reserved by backfill for jobs ahead) are not candidates,
    nor are those in ``avoid`` (advance reservations the job is not in) or, when
    ``only`` is given (the job's own reservation), those outside it.
    ``free``, when given, lists the nodes with free CPUs, so that a pass over a
    big, busy cluster does not walk the full ones for every job. ``after`` is
    the first node an identical request got earlier in the pass (against
    resources that have only shrunk since): the nodes before it cannot fit.
    ``at`` is when the job would start (None: some day, for admission), for the
    topology's time-bound rules (``--switches``' wait). ``prefer``'s nodes come
    before the others (each group in selection order; after required nodes, and
    not within a switch or block, which the topology chooses first): backfill
    plans a future start on the nodes busy now first.

    The steps, in Slurm's order: the constraint's filter limits the
    candidates; each alternative of a matching OR (``[a|b]``) is tried in
    turn on the nodes that have it; counted features force their nodes in;
    a job that shares CPUs first tries idle CPUs only, then CPUs its
    partition's other sharing jobs use (cons_tres tries test 1 before rows).
    """
    for required in job.req_nodes:
        node = nodes.get(required)
        if node is None or required not in part.nodes or not node.usable:
            return Reason.REQ_NODE_NOT_AVAIL
        if only is not None and required not in only:
            return Reason.REQ_NODE_NOT_AVAIL
        if required in blocked or required in avoid:
            return Reason.RESOURCES
    try:
        constraint = features.parse(job.constraint)
        gres_request(job.gres)
    except ValueError:
        return Reason.BAD_CONSTRAINTS
    # A node without a task's worth of free CPUs is no candidate, unless the
    # job may stack on CPUs others use (OverSubscribe) or must have the node (-w).
    enough = 0 if share(job, part) else job.cpus_per_task
    plain = not (job.req_nodes or constraint.terms or share(job, part))
    topo = part.topology if part.topology is not None and part.topology.spans(job) else None
    if plain and free is not None and not job.exc_nodes:
        get = nodes.get
        if topo is not None:  # every candidate with a node's share: the switch is chosen first
            enough, after = max(enough, _node_share(job)), None
        # The candidates are among the scan's nodes (less ``avoid``'s and those
        # outside ``only``) with the same free CPUs: with fewer in all than any
        # allocation needs, _first_candidates would walk them all and try none.
        scanned: Iterator[str]
        need = 0 if topo is not None else _least_cpus(job, part)
        scanned, holds = free.candidates(part, enough, blocked, after, need)
        if not holds:
            return Reason.RESOURCES
        if prefer and topo is None:  # by name: views are made only of the nodes tried
            scanned = iter(_preferred_first(scanned, prefer))
        if only is not None or avoid:
            scanned = (n for n in scanned if n not in avoid and (only is None or n in only))
        found = filter(None, map(get, scanned))  # no Python frame per node: views are truthy
        if topo is not None:
            chosen = _choose_in(topo, job, part, list(found), constraint, False, at)
            return _start(job, part, chosen, 0, nodes) if chosen else Reason.RESOURCES
        return _first_candidates(job, part, found, constraint, nodes)
    names: Sequence[str]
    if free is None:
        names = part.order or _selection_order(part, nodes)
    elif enough:
        names = free.names(part)
    else:  # a job that stacks on busy CPUs sees them all
        names = free.order.partition(part)
    if plain and after is not None and topo is None:
        with suppress(ValueError):  # gone from the list: start from the top
            names = names[names.index(after) :]
    if plain and prefer and topo is None:
        names = _preferred_first(names, prefer)
    # Locals, not attribute lookups, in this hot loop.
    get = nodes.get
    asked = job.req_nodes
    excluded = job.exc_nodes
    wanted = (
        node
        for n in names
        if (node := get(n)) is not None
        and (node.free_cpus >= enough or n in asked)
        and n not in excluded
        and n not in blocked
        and n not in avoid
        and (only is None or n in only)
    )
    shares = share(job, part)
    if plain and topo is None:
        return _first_candidates(job, part, wanted, constraint, nodes)
    candidates = list(wanted)
    if job.req_nodes or (prefer and topo is None):
        # Required nodes first, then preferred ones, each group still in selection order.
        candidates.sort(
            key=lambda n: (n.name not in job.req_nodes, topo is None and n.name not in prefer)
        )
    if constraint.terms:
        candidates = [n for n in candidates if constraint.allows(n.features)]
    for choice in constraint.choices() or (None,):
        pool = (
            candidates if choice is None else [n for n in candidates if choice.matches(n.features)]
        )
        for stacking in (False, True) if shares else (False,):
            chosen = _choose_in(topo, job, part, pool, constraint, stacking, at)
            if chosen:
                return _start(job, part, chosen, shares, nodes)
    return Reason.RESOURCES


def _preferred_first(names: Iterable[str], prefer: AbstractSet[str]) -> list[str]:
    """``names`` with ``prefer``'s first, each group in its order: placement's order of
    candidates for a backfill plan (the nodes busy now first). By name, before the
    candidates are filtered, so views are made only of the nodes tried (a filter
    keeps the order of what it passes, so ordering first changes nothing)."""
    listed = list(names)
    return [n for n in listed if n in prefer] + [n for n in listed if n not in prefer]


def _node_share(job: Job) -> int:
    """CPUs each node must have free: its share of a fixed node count the tasks spread
    evenly over, else one task's."""
    if not packs(job):
        return cpus_per_node(job, job.min_nodes)
    return max(job.cpus_per_task, job.min_cpus)


def _choose_in(
    topo: Topology | None,
    job: Job,
    part: PartitionView,
    pool: list[NodeView],
    constraint: features.Constraint,
    stacking: bool,
    at: int | None,
) -> list[Alloc]:
    """``_choose`` on ``pool``, or on the switch or block ``topo`` chooses in it."""
    if topo is None:
        return _choose(job, part, pool, constraint, stacking)
    cpus = _node_share(job)
    return topology.choose(
        topo,
        job,
        pool,
        lambda ordered: _choose(job, part, ordered, constraint, stacking),
        lambda node: node_fits(job, part, node, cpus, stacking=stacking) is not None,
        at,
    )


def _first_candidates(
    job: Job,
    part: PartitionView,
    wanted: Iterator[NodeView],
    constraint: features.Constraint,
    nodes: Mapping[str, NodeView],
) -> Start | Reason:
    """The plain case (no -w, constraint or sharing): try the first candidates only.

    Node choice is greedy in selection order, so an allocation found among the
    first candidates is the one the whole list gives; only a job the first
    ones cannot hold looks further (four times as many each time). On a big
    cluster most jobs need a few nodes, and a pass no longer walks them all.
    """
    size = max(16, 4 * max(job.min_nodes, 1))
    pool: list[NodeView] = []
    need = _least_cpus(job, part)
    free = 0  # the pool's free CPUs, while they matter
    while True:
        more = list(islice(wanted, size - len(pool)))
        pool.extend(more)
        if free < need:
            free += sum(map(_free_cpus, more))
        if free >= need:  # else no choice among the pool could hold the job
            chosen = _choose(job, part, pool, constraint, False)
            if chosen:
                return _start(job, part, chosen, 0, nodes)
        if len(pool) < size:  # every candidate was tried
            return Reason.RESOURCES
        size *= 4


_free_cpus = attrgetter("free_cpus")  # a node's, without a Python call per node


def _least_cpus(job: Job, part: PartitionView) -> int:
    """CPUs free in all that any allocation of ``job`` needs (0: no bound known): a
    job that packs its tasks and neither takes whole nodes nor asks for GPUs gets
    at least its tasks' CPUs, each node no more than it has free (the plain case:
    no sharing). Placement skips the candidate pools that have fewer."""
    if job.exclusive or part.exclusive or not packs(job):
        return 0
    if (
        job.gres
        or job.gpus_per_job
        or job.gpus_per_task
        or job.gpus_per_socket
        or job.ntasks_per_gpu
    ):
        return 0
    return job.num_tasks * job.cpus_per_task


def _start(
    job: Job,
    part: PartitionView,
    chosen: list[Alloc],
    shares: int,
    nodes: Mapping[str, NodeView],
) -> Start:
    return Start(
        job_id=job.job_id,
        partition=part.name,
        nodes=tuple(name for name, _ in chosen),
        cpus=tuple(fit.cpus for _, fit in chosen),
        memory=tuple(fit.memory for _, fit in chosen),
        gres=tuple(fit.gres for _, fit in chosen) if any(fit.gres for _, fit in chosen) else (),
        share=shares,
        enforce=job.gres_flags == "enforce-binding",
        sockets=job.sockets_per_node if job.gpus_per_socket else 0,
        cpt=job.cpus_per_task,
        dist=cpupick.method_of(job.distribution),
        task_gpus=_follows_tasks(job),
        used=_used(chosen),
        spread=_spread(job, part, chosen, nodes),
        socket_cores=job.cores_per_socket if job.cores_per_socket > 1 else 0,
        socket_gpus=_socket_gpus(job, part),
        socket_tasks=job.ntasks_per_socket,
    )


def _socket_gpus(job: Job, part: PartitionView) -> int:
    """The job's GPUs per socket where they are all its GPUs (``core/socketspread.py``),
    else 0."""
    if not job.gpus_per_socket:
        return 0
    gpu = gpus.ask(job, part)
    return job.gpus_per_socket if gpu is not None and gpusockets.alone(gpu) else 0


def _spread(
    job: Job, part: PartitionView, chosen: list[Alloc], nodes: Mapping[str, NodeView]
) -> tuple[bool, ...]:
    """On which chosen nodes Slurm lays a GPU total's or GPUs per node's CPUs out by the
    distribution alone, not near the node's GPUs first (measured, GPUs 0-1 near cores
    0-3): where its GPUs need every socket (``--gpus=3 -n6 -N2``: CPU_IDs=0-2,4-5),
    and on every node where its tasks (``-n``) did not fit the sockets of its GPUs
    (``--gpus=2 -n10 -N2``: 0-7 and 0,4); a single task that did not (``--gres=gpu:1
    -c6``: 0-5) still fills the GPUs' socket first. () where none is."""
    if (
        job.gres_flags == "enforce-binding"
        or job.ntasks_per_gpu
        or "gpu" not in (job.gres + ("gpu" if job.gpus_per_job else ""))
    ):
        return ()
    gpu = gpus.ask(job, part)
    want: tuple[str, int] | None
    if gpu is not None and gpu.dealt:
        if not gpu.per_job or gpu.also or gpu.per_node or gpu.per_task:
            return ()
        want = (gpu.kind, gpu.per_job)
    else:
        want = _gpus_per_node(job, part)
    if want is None:
        return ()
    confined = [gpusocketcap.socket_cpus(nodes[name], *want) for name, _ in chosen]
    wider = job.tasks_given and any(
        cap is not None and fit.cpus > cap for cap, (_, fit) in zip(confined, chosen, strict=True)
    )
    out = tuple(
        wider or (cap is None and gpusocketcap.spans_sockets(nodes[name], *want))
        for cap, (name, _) in zip(confined, chosen, strict=True)
    )
    return out if any(out) else ()


def _used(chosen: list[Alloc]) -> tuple[int, ...]:
    """The CPUs the job may use on each node, where on any that is fewer than it holds
    (``core/threads.py``); () when it uses all it holds."""
    if all(fit.used in (0, fit.cpus) for _, fit in chosen):
        return ()
    return tuple(fit.used or fit.cpus for _, fit in chosen)


def _follows_tasks(job: Job) -> int:
    """--gpus-per-task when it alone deals the job's GPUs (no GPUs per node, per
    socket or in total), whose GPUs then follow its tasks' CPUs (``core/cpupick.py``)."""
    if not job.gpus_per_task or job.gpus_per_job or job.gpus_per_socket:
        return 0
    return 0 if gpus.gpu_items(job.gres)[1] else job.gpus_per_task


def take(nodes: dict[str, NodeView], start: Start) -> None:
    """Mark what ``start`` takes in ``nodes`` (the free resources of one pass): its
    CPUs, memory and GRES, and the devices it was bound to (``devices.take``)."""
    for i, (name, cpus, memory) in enumerate(
        zip(start.nodes, start.cpus, start.memory, strict=True)
    ):
        gres = start.gres[i] if start.gres else ()
        ids = devices.mask(start.cpu_ids[i]) if start.cpu_ids else 0
        nodes[name] = nodefree.take(
            nodes[name], cpus, memory, gres, start.share, start.partition, ids
        )
    devices.take(nodes, start)


def partitions_of(job: Job, snap: Snapshot) -> list[PartitionView]:
    """The job's partitions that exist, highest PriorityTier first."""
    return sorted(
        (snap.partitions[p] for p in job.partitions if p in snap.partitions),
        key=lambda p: -p.priority_tier,
    )


def first_fit(
    job: Job,
    snap: Snapshot,
    nodes: Mapping[str, NodeView],
    blocked: set[str],
    free: FreeNodes | None = None,
    windows: ResvWindows | None = None,
    now: int = 0,
) -> Start | Reason:
    """Where ``job`` starts now (the first partition by PriorityTier), or why not.

    A job in an advance reservation is placed on its nodes alone and is not
    held back by the jobs of ``blocked`` partitions, which cannot use them;
    any other job avoids the reservations its run would overlap."""
    first_reason: Reason | None = None
    resv = windows.confine(job) if windows is not None else None
    for part in partitions_of(job, snap):
        limit = partition_reason(job, part)
        if limit is not None:
            first_reason = first_reason or limit
            continue
        if part.name in blocked and resv is None:
            first_reason = first_reason or Reason.PRIORITY
            continue
        if resv is not None:
            outcome = place(job, part, nodes, free=free, only=resv.nodes, at=now)
        elif windows is not None and windows.by_name:
            avoid = windows.avoid(now, run_end(job, part, now), job.reservation)
            outcome = place(job, part, nodes, free=free, avoid=avoid, at=now)
        else:
            outcome = place(job, part, nodes, free=free, at=now)
        if isinstance(outcome, Start):
            return outcome
        first_reason = first_reason if first_reason not in (None, Reason.PRIORITY) else outcome
    return first_reason or Reason.RESOURCES
