"""Which GPUs, by index, and which CPUs, by id, a start gets on each node: part of the plan.

Placement decides how many CPUs and GPUs of which type a job takes on a node
(counts); ``bind`` then names them, as the core decides everything a start
needs, for the chosen start only (never for every candidate node): the lowest
free GPU indices of each type, passing over GPUs given whole or with shares in
use (or, where gres.conf ``Links=`` or the probe says some are linked, the free
ones best linked among themselves: ``gpulinks``), and free CPU ids by whole cores
as Slurm's distribution takes them from the node's sockets (``cpupick``:
block:cyclic by default), after the free CPUs near its GPUs where the node knows
them (gres.conf ``Cores=`` or the agent's probe); GPUs per task on several nodes
follow the CPUs instead (``cpupick.task_gpus``). Free CPUs are bitmasks on
the node's view (``NodeView.kept_ids``, ``shared_ids``), so naming them is a few
integer operations per core.
``take`` marks what a bound start holds in the pass's picture of the node, so the
next start of the same pass gets other devices. The store commits the plan's
choice after ``still_free`` checks that nothing took those devices meanwhile.

A share pool names its GPU in its type (``a100#1``: GPU 1, an A100): a share of a
GPU given whole in the same pass cannot be bound (the job waits for the next
pass), as a GPU with shares in use is not free to give whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from controller.core import socketspread, taskspersocket
from controller.core.cpupick import pick, socket_room, socket_size, task_gpus
from controller.core.gpulinks import best_linked, link_map
from controller.core.plan import Start
from controller.core.snapshot import NodeDevices, NodeView

__all__ = [
    "bind",
    "cpu_ids",
    "enforced_gpus",
    "lowest_free",
    "mask",
    "near_cpus",
    "pool_gpu",
    "shared_gpus",
    "socket_gpus",
    "sockets_of",
    "still_free",
    "take",
]

Items = tuple[tuple[str, str, int], ...]  # (name, type, count) allocated on one node


def pool_gpu(kind: str) -> tuple[str, int] | None:
    """The (GPU type, index) a pool's type names (``a100#1``), None for a plain type."""
    gpu_type, mark, index = kind.partition("#")
    return (gpu_type, int(index)) if mark else None


def shared_gpus(items: Iterable[tuple[str, str | None, int]]) -> set[int]:
    """The indices of the GPUs some of ``items`` (used GRES) take shares of."""
    out = set()
    for _, kind, count in items:
        gpu = pool_gpu(kind or "")
        if gpu is not None and count > 0:
            out.add(gpu[1])
    return out


def mask(ids: Iterable[int]) -> int:
    """CPU ids as a bitmask (bit c: CPU c), as ``NodeView.kept_ids`` holds them."""
    out = 0
    for c in ids:
        out |= 1 << c
    return out


def near_cpus(
    near: Mapping[int, tuple[int, ...]], gpus: Iterable[int], cpus: int, busy: int
) -> list[int]:
    """The free CPUs of a node of ``cpus`` near ``gpus`` (those not in the ``busy``
    mask), lowest first; [] when none of the GPUs has known cores."""
    return sorted({c for g in gpus for c in near.get(g, ()) if c < cpus and not busy >> c & 1})


def lowest_free(cpus: int, unit: int, busy: int, count: int) -> list[int]:
    """Up to ``count`` CPU ids of a node of ``cpus`` not in the ``busy`` mask, as
    cons_tres picks them: whole cores of ``unit`` CPUs (ThreadsPerCore when cores are
    allocated), lowest first, which fills socket 0's cores before socket 1's; then,
    where whole cores are too few, single free CPUs, lowest first."""
    if count <= 0:
        return []
    if not busy:  # an idle node: the common case, no walk
        return list(range(min(count, cpus)))
    chosen: list[int] = []
    if unit <= 1:  # cores of one CPU: the lowest free bits, one step per CPU taken
        free = ~busy & ((1 << cpus) - 1)
        while free and len(chosen) < count:
            low = free & -free
            chosen.append(low.bit_length() - 1)
            free ^= low
        return chosen
    step = unit
    whole = (1 << step) - 1
    for first in range(0, cpus, step):
        if not busy >> first & whole:
            chosen.extend(range(first, min(first + step, cpus)))
            if len(chosen) >= count:
                return chosen[:count]
    busy |= mask(chosen)
    for c in range(cpus):
        if len(chosen) >= count:
            break
        if not busy >> c & 1:
            chosen.append(c)
    return chosen


def cpu_ids(
    node: NodeView,
    count: int,
    share: int,
    gpus: tuple[int, ...],
    only_near: bool = False,
    cpt: int = 1,
    dist: str = "",
    least: int = 0,
    socket_tasks: int = 0,
) -> tuple[int, ...] | None:
    """The ``count`` CPU ids a start gets on ``node``; None when too few are free.

    Free CPUs are taken as Slurm's distribution ``dist`` over sockets takes them for
    tasks of ``cpt`` CPUs (``cpupick.pick``: block:cyclic's one core per socket a
    round by default). A job that keeps its CPUs takes CPUs no job holds. A job that
    shares them (OverSubscribe) takes CPUs no job holds first, then CPUs other
    sharing jobs hold, those given to the fewest first, never those of a job that
    keeps them: so sharing jobs are given the same CPUs only once the idle ones are
    gone, as cons_tres fills one row of a shared partition before the next. A job
    given GPUs with known cores takes the free CPUs near them first (Slurm narrows
    its cores to its GPUs' sockets), and with ``only_near``
    (--gres-flags=enforce-binding) those alone. A job asking ``least`` cores per socket
    above one takes CPUs of the sockets with that many free cores alone
    (``cpupick.socket_room``). A job of at most ``socket_tasks`` tasks on each socket
    takes them as ``taskspersocket.pick`` lays them out.
    """
    kept = node.kept_ids
    loads = node.shared_ids
    busy = kept | (loads[0] if loads else 0)
    dev = node.devices
    whole = (1 << node.cpus) - 1
    if least > 1:
        _, whole = socket_room(~busy & whole, node.cpus, node.sockets, node.unit, least)

    def more(taken: int, wanted: int, within: int = whole) -> list[int]:
        free = ~taken & within & whole
        if socket_tasks:
            return taskspersocket.pick(
                free, node.cpus, node.sockets, node.unit, wanted, cpt, socket_tasks, dist
            )
        return pick(free, node.cpus, node.sockets, node.unit, wanted, cpt, dist)

    if not share and not (dev and gpus):  # the common case: no GPU, no sharing
        chosen = more(busy, count)
        return tuple(sorted(chosen)) if len(chosen) == count else None
    chosen = []
    if dev and gpus:
        close = mask(near_cpus(dict(dev.near), gpus, node.cpus, busy))
        chosen = more(busy, min(count, close.bit_count()), close)
    if only_near and dev and all(g in dict(dev.near) for g in gpus):
        return tuple(sorted(chosen)) if len(chosen) == count else None
    chosen += more(busy | mask(chosen), count - len(chosen))
    if share:  # then the CPUs fewest sharing jobs were given
        for level in (*loads[1:], 0):
            if len(chosen) >= count:
                break
            chosen += more(kept | level | mask(chosen), count - len(chosen))
    return tuple(sorted(chosen)) if len(chosen) == count else None


def _free_of(dev: NodeDevices, kind: str, busy: set[int]) -> list[int]:
    return [i for k, i in dev.numbers if k == kind and i not in busy]


def gpu_indices(
    node: NodeView, items: Items, enforce: bool = False, sockets: int = 0
) -> tuple[int, ...] | None:
    """The GPU indices of each allocated type on ``node``: the lowest free ones, or
    with ``enforce`` those near the most free CPUs (``enforced_gpus``), or with
    ``sockets`` as many near each of that many sockets (``socket_gpus``); None if it
    lacks them, or a share is asked of a GPU given whole. A node the snapshot gives
    no devices (``corral sim`` and the core's own tests do not model them; a live
    node with GPUs always has them, numbered by gres.conf or ``Gres=``) names none."""
    dev = node.devices
    if dev is None:
        return ()
    taken = set(dev.whole)
    if shared_gpus(items) & taken:
        return None
    busy = taken | dev.shared
    chosen: list[int] = []
    for name, kind, count in items:
        if name != "gpu":
            continue
        free = _free_of(dev, kind, busy)
        if sockets:
            picked = socket_gpus(dev, free, count, sockets, _idle_cpus(node))
        elif enforce:
            picked = _nearest(node, dev, free, count)
        else:
            picked = best_linked(free, count, link_map(dev.links))
        if picked is None:
            return None
        chosen += picked
        busy.update(picked)
    return tuple(sorted(chosen))


def sockets_of(dev: NodeDevices, free: list[int]) -> list[list[int]]:
    """``free`` GPUs grouped by the CPUs near them (a socket's GPUs share gres.conf's
    Cores=), groups in the order of their lowest GPU; [] when no GPU's cores are known."""
    near = dict(dev.near)
    if not any(i in near for i in free):
        return []
    groups: dict[tuple[int, ...], list[int]] = {}
    for index in free:
        groups.setdefault(near.get(index, ()), []).append(index)
    return list(groups.values())


def _idle_cpus(node: NodeView) -> int:
    """The CPUs of ``node`` no job holds, as a bitmask."""
    busy = node.busy_ids
    return ~busy & ((1 << node.cpus) - 1)


def socket_gpus(
    dev: NodeDevices, free: list[int], count: int, sockets: int, idle: int = -1
) -> list[int] | None:
    """``count`` of the ``free`` GPUs, an equal part near each of ``sockets`` sockets
    (--gpus-per-socket) with a CPU of ``idle`` (a bitmask) near them, the highest
    sockets first; the lowest free GPUs where no cores are known; None when too few
    sockets have their part free.

    The highest first because Slurm 22.05 places a one-CPU job so (nodes of two 4-core
    sockets, GPUs 0-1 near cores 0-3, 2-3 near 4-7: ``--gpus-per-socket=1
    --sockets-per-node=1`` is CPU 4 and GPU 2 on an idle node, CPU 5 and GPU 3 beside
    one holding them, CPU 0 and GPU 0 once GPUs 2-3 or cores 4-7 are taken)."""
    links = link_map(dev.links)
    groups = sockets_of(dev, free)
    if not groups:
        return best_linked(free, count, links)
    near = dict(dev.near)
    part = count // sockets
    full = [
        best_linked(group, part, links)
        for group in reversed(groups)
        if len(group) >= part and any(idle >> cpu & 1 for cpu in near.get(group[0], ()))
    ][:sockets]
    if len(full) < sockets:
        return None
    return [i for group in full if group is not None for i in group]


def _free_cpus(node: NodeView) -> int:
    """The CPUs no job holds on ``node``, as a bitmask."""
    busy = node.busy_ids
    return ~busy & ((1 << node.cpus) - 1)


def _nearest(node: NodeView, dev: NodeDevices, free: list[int], count: int) -> list[int] | None:
    """``count`` of the ``free`` GPUs, a socket's at a time, the socket with the most
    free CPUs near it first (--gres-flags=enforce-binding); in the last socket
    needed, those best linked among themselves (``gpulinks``)."""
    if len(free) < count:
        return None
    near = dict(dev.near)
    idle = _free_cpus(node)
    groups = sockets_of(dev, free) or [free]
    groups.sort(key=lambda g: -(mask(near.get(g[0], ())) & idle).bit_count())
    chosen: list[int] = []
    for group in groups:
        if len(chosen) + len(group) > count:
            return chosen + (best_linked(group, count - len(chosen), link_map(dev.links)) or [])
        chosen += group
    return chosen


def enforced_gpus(node: NodeView, items: Items, cpus: int) -> tuple[int, ...] | None:
    """The GPUs a --gres-flags=enforce-binding job takes for ``items`` on ``node`` when
    ``cpus`` free CPUs are near them (any CPUs where a GPU's cores are not known);
    None when no choice has that many."""
    chosen = gpu_indices(node, items, enforce=True)
    if chosen is None:
        return None
    dev = node.devices
    if dev is None or not chosen:
        return chosen
    near = dict(dev.near)
    if any(g not in near for g in chosen):
        return chosen
    close = mask(c for g in chosen for c in near[g]) & _free_cpus(node)
    return chosen if close.bit_count() >= cpus else None


def _follow_tasks(
    node: NodeView, items: Items, ids: tuple[int, ...], start: Start
) -> tuple[int, ...] | None:
    """The GPUs of ``items`` on ``node`` for tasks of ``start.task_gpus`` each whose CPUs
    are ``ids``: near each task's socket first (``cpupick.task_gpus``)."""
    dev = node.devices
    if dev is None:
        return ()
    busy = set(dev.whole) | dev.shared
    chosen: list[int] = []
    for name, kind, count in items:
        if name != "gpu":
            continue
        picked = task_gpus(
            _free_of(dev, kind, busy | set(chosen)),
            dict(dev.near),
            ids,
            socket_size(node.cpus, node.sockets),
            count,
            start.task_gpus,
            start.cpt,
        )
        if picked is None:
            return None
        chosen += picked
    return tuple(sorted(chosen))


def bind(start: Start, nodes: Mapping[str, NodeView]) -> Start | None:
    """``start`` with its GPU indices (() when it has no GPU) and its CPU ids on each
    node; None when its GPUs or CPUs cannot be named in this pass. GPUs per task on
    several nodes follow the CPUs (``cpupick``); other GPUs come first, and the CPUs
    near them."""
    if start.task_gpus and len(start.nodes) > 1 and start.gres:
        return _bind_by_tasks(start, nodes)
    gpus: list[tuple[int, ...]] = []
    laid: dict[int, tuple[int, ...]] = {}
    for i, (name, items) in enumerate(zip(start.nodes, start.gres, strict=False)):
        kind = _spread_kind(nodes[name], items, start)
        if kind is not None:  # CPUs first, then GPUs near their sockets
            spread = _socket_spread(nodes[name], items, start, kind, start.cpus[i])
            if spread is None:
                return None
            laid[i], given = spread
        else:
            found = gpu_indices(nodes[name], items, start.enforce, start.sockets)
            if found is None:
                return None
            given = found
        gpus.append(given)
    named = []
    for i, (name, count) in enumerate(zip(start.nodes, start.cpus, strict=True)):
        node, mine = nodes[name], gpus[i] if gpus else ()
        if start.spread and start.spread[i]:  # its CPUs by the distribution alone
            mine = ()
        ids: tuple[int, ...] | None
        if i in laid:
            ids = laid[i]
        elif start.sockets and start.cpus == (1,) and not start.share:
            ids = _last_socket_cpu(node, mine)
        else:
            ids = cpu_ids(
                node,
                count,
                start.share,
                mine,
                start.enforce,
                start.cpt,
                start.dist,
                start.socket_cores,
                start.socket_tasks,
            )
        if ids is None:
            return None
        named.append(ids)
    return _named(start, gpus, named)


def _spread_kind(node: NodeView, items: Items, start: Start) -> str | None:
    """The GPU type whose GPUs per socket ``start`` gets on ``node`` after its CPUs
    (``socketspread``: they are all its GPUs, and the node knows their cores); None
    where its GPUs come first."""
    if not start.socket_gpus or start.share:
        return None
    kinds = [kind for name, kind, _ in items if name == "gpu"]
    if len(kinds) != 1 or not socketspread.knows_cores(node, kinds[0]):
        return None
    return kinds[0]


def _socket_spread(
    node: NodeView, items: Items, start: Start, kind: str, count: int
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The CPU ids and GPU indices of ``start`` on ``node`` (``count`` CPUs) as
    ``socketspread`` lays them out; None when they are not free, or no longer make
    the GPU count placement gave it."""
    per_socket = start.socket_gpus
    one_task = len(start.nodes) == 1 and count <= start.cpt
    ids = socketspread.lay_out(
        node, kind, per_socket, count, start.cpt, start.dist, one_task, start.socket_tasks
    )
    if ids is None:
        return None
    chosen = socketspread.gpus_for(node, kind, per_socket, start.sockets, ids)
    asked = sum(n for name, _, n in items if name == "gpu")
    if chosen is None or len(chosen) != asked:
        return None
    return ids, tuple(chosen)


def _last_socket_cpu(node: NodeView, gpus: tuple[int, ...]) -> tuple[int, ...] | None:
    """The CPU of a job of one CPU with GPUs per socket that ``socketspread`` does not
    lay out (no GPU's cores known, or further GPUs asked): the lowest free CPU of the
    highest socket near its GPUs (of any socket where their cores are not known), as
    Slurm 22.05 took it (nodes of two 4-core sockets: CPU 4 on an idle node without
    gres.conf ``Cores=``; CPU 0 once 4-7 are held; measured,
    tests/unit/test_gpu_semantics.py). None when no CPU is free."""
    idle = _idle_cpus(node)
    dev = node.devices
    close = mask(near_cpus(dict(dev.near), gpus, node.cpus, ~idle)) if dev and gpus else 0
    within = idle & close if close else idle
    if not within:
        return None
    size = socket_size(node.cpus, node.sockets)
    last = (within.bit_length() - 1) // size
    on_socket = within >> (last * size) & ((1 << size) - 1)
    return (last * size + (on_socket & -on_socket).bit_length() - 1,)


def _bind_by_tasks(start: Start, nodes: Mapping[str, NodeView]) -> Start | None:
    """``bind`` for GPUs per task over several nodes: CPUs first, GPUs after them."""
    gpus: list[tuple[int, ...]] = []
    named = []
    for name, count, items in zip(start.nodes, start.cpus, start.gres, strict=True):
        node = nodes[name]
        ids = cpu_ids(
            node,
            count,
            start.share,
            (),
            False,
            start.cpt,
            start.dist,
            start.socket_cores,
            start.socket_tasks,
        )
        if ids is None:
            return None
        given = _follow_tasks(node, items, ids, start)
        if given is None:
            return None
        named.append(ids)
        gpus.append(given)
    return _named(start, gpus, named)


def _named(start: Start, gpus: list[tuple[int, ...]], named: list[tuple[int, ...]]) -> Start:
    # Made, not ``replace``d: every start of a pass comes here, and replace() costs
    # several times a constructor call.
    return Start(
        start.job_id,
        start.partition,
        start.nodes,
        start.cpus,
        start.memory,
        start.gres,
        start.share,
        start.task,
        tuple(gpus) if any(gpus) else (),
        tuple(named),
        start.enforce,
        start.sockets,
        start.flavor,
        start.cpt,
        start.dist,
        start.task_gpus,
        start.used,
        start.spread,
        socket_cores=start.socket_cores,
        socket_gpus=start.socket_gpus,
    )


def ids_free(node: NodeView, ids: tuple[int, ...], share: int) -> bool:
    """Whether no job that keeps its CPUs holds any of the CPU ``ids`` on ``node``
    (nor, for a job that keeps its own, ``share`` 0, any sharing job)."""
    loads = node.shared_ids
    busy = node.kept_ids if share or not loads else node.kept_ids | loads[0]
    return not busy & mask(ids)


def still_free(node: NodeView, start: Start, index: int) -> bool:
    """Whether the devices ``start`` names on its ``index``-th node, ``node``, are
    free there (commit's re-check against the node as it is now): no GPU given whole
    or with shares in use, no share of a GPU given whole, none of its CPUs held by a
    job that keeps them (nor, if it keeps its own, by a sharing job)."""
    if start.cpu_ids and not ids_free(node, start.cpu_ids[index], start.share):
        return False
    dev = node.devices
    if dev is None or not start.gres:
        return True
    if shared_gpus(start.gres[index]) & dev.whole:
        return False
    mine = start.gpus[index] if start.gpus else ()
    return dev.whole.isdisjoint(mine) and dev.shared.isdisjoint(mine)


def take(nodes: dict[str, NodeView], start: Start) -> None:
    """Mark the GPUs a bound ``start`` holds in ``nodes`` (the pass's picture); its
    CPU ids are marked with its counts (``nodefree.take``, one copy of each view)."""
    if not start.gres:
        return
    for i, name in enumerate(start.nodes):
        node = nodes[name]
        dev = node.devices
        whole = start.gpus[i] if start.gpus else ()
        shares = shared_gpus(start.gres[i])
        if dev is not None and (whole or shares):
            nodes[name] = replace(
                node,
                devices=replace(
                    dev, whole=dev.whole | frozenset(whole), shared=dev.shared | shares
                ),
            )
