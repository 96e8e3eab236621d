"""CPUs and GPUs of a job with GPUs per socket on a node that knows its GPUs' cores.

Slurm's man pages read ``--gpus-per-socket=G`` as "GPUs required for the job on each
socket included in the job's resource allocation", and Slurm 22.05 does so whatever
``--sockets-per-node`` says: it lays the job's CPUs out over the node's sockets and
gives G GPUs near each socket they landed on (measured on nodes of two 4-core
sockets, GPUs 0-1 near cores 0-3 and 2-3 near 4-7, ``--gpus-per-socket=1
--sockets-per-node=1 -w n1``: ``-n2`` CPUs 0,4 with GPUs 0,2, ``-n3`` 0-1,4 and
``-c4`` 0-1,4-5 with the same two; tests/unit/test_gpu_semantics.py). So:

* The job may use the sockets with a free core and G free GPUs of the type near them
  (with cores 4-7 held or GPUs 2-3 taken, ``-n2`` is CPUs 0-1 and GPU 0).
* Its CPUs come from those sockets as its distribution takes them
  (``cpupick.pick``: ``-n2 -c2`` CPUs 0-3, ``-n2 -m block:block`` 0-1, each with
  GPU 0 alone), but a job of one task takes a core from each socket a round, the
  highest socket first (``-c3``: 4, 0, 5; ``-c1``: CPU 4; with CPUs 0-2 held ``-c4``
  is 3-6).
* It gets G GPUs near each socket its CPUs are on and, where those are fewer than
  ``--sockets-per-node``, near further sockets, highest first (``-n1
  --sockets-per-node=2``: CPU 4 with GPUs 0,2).

A job asking further GPUs beside those per socket (``gpusockets.alone``) keeps the
older rule of G near each of ``--sockets-per-node`` sockets (``devices.socket_gpus``);
a node whose GPUs of the type have no known cores has its own (``gpusockets``).
"""

from __future__ import annotations

from controller.core import taskspersocket
from controller.core.cpupick import free_cores, pick, socket_size
from controller.core.gpulinks import best_linked, link_map
from controller.core.snapshot import NodeView

__all__ = ["gpus_for", "knows_cores", "lay_out", "socket_count", "spanned"]


def _idle(node: NodeView) -> int:
    busy = node.busy_ids
    return ~busy & ((1 << node.cpus) - 1)


def _socket_gpus(node: NodeView, kind: str) -> dict[int, list[int]] | None:
    """The free GPUs of ``kind`` ("" any) by the socket of their cores, lowest first;
    None when no GPU of the kind on ``node`` has known cores."""
    dev = node.devices
    if dev is None:
        return None
    near = dict(dev.near)
    mine = [i for k, i in dev.numbers if not kind or k == kind]
    if not any(i in near for i in mine):
        return None
    size = socket_size(node.cpus, node.sockets)
    last = max(node.sockets, 1) - 1
    taken = dev.whole | dev.shared
    out: dict[int, list[int]] = {}
    for index in sorted(mine):
        if index in near and near[index] and index not in taken:
            out.setdefault(min(near[index][0] // size, last), []).append(index)
    return out


def knows_cores(node: NodeView, kind: str) -> bool:
    """Whether ``node`` knows the cores of any of its GPUs of ``kind``."""
    return _socket_gpus(node, kind) is not None


def _usable(node: NodeView, kind: str, per_socket: int) -> int:
    """The idle CPUs of the sockets with ``per_socket`` free GPUs of ``kind`` near."""
    by_socket = _socket_gpus(node, kind) or {}
    size = socket_size(node.cpus, node.sockets)
    within = 0
    for socket, free in by_socket.items():
        if len(free) >= per_socket:
            within |= ((1 << size) - 1) << (socket * size)
    return _idle(node) & within


def _highest_first(free: int, node: NodeView, count: int) -> list[int]:
    """``count`` CPUs of the ``free`` mask, a whole core from each socket a round, the
    highest socket first (a job of one task)."""
    unit = max(node.unit, 1)
    cores = free_cores(free, node.cpus, node.sockets, unit)
    taken: list[int] = []
    nxt = [0] * len(cores)
    while len(taken) < count:
        before = len(taken)
        for s in reversed(range(len(cores))):
            if len(taken) >= count:
                break
            if nxt[s] < len(cores[s]):
                first = cores[s][nxt[s]]
                taken.extend(range(first, first + unit))
                nxt[s] += 1
        if len(taken) == before:
            break
    return sorted(taken)[:count]


def lay_out(
    node: NodeView,
    kind: str,
    per_socket: int,
    cpus: int,
    cpt: int,
    dist: str,
    one_task: bool,
    socket_tasks: int = 0,
) -> tuple[int, ...] | None:
    """The ``cpus`` CPU ids a job of ``per_socket`` GPUs of ``kind`` per socket gets
    on ``node``, in tasks of ``cpt`` CPUs taken as ``dist`` takes them (``one_task``:
    the job is a single task; ``socket_tasks``: at most that many tasks on each socket,
    as ``taskspersocket.pick`` lays them out: ``-n2 --ntasks-per-socket=2`` is CPUs
    4-5 with GPU 2 alone, measured); None when its usable sockets lack them."""
    free = _usable(node, kind, per_socket)
    if socket_tasks and not one_task:
        ids = taskspersocket.pick(
            free, node.cpus, node.sockets, node.unit, cpus, cpt, socket_tasks, dist
        )
    elif one_task:
        ids = _highest_first(free, node, cpus)
    else:
        ids = pick(free, node.cpus, node.sockets, node.unit, cpus, cpt, dist)
    return tuple(sorted(ids)) if len(ids) == cpus else None


def spanned(node: NodeView, ids: tuple[int, ...]) -> list[int]:
    """The sockets of ``node`` the CPU ``ids`` are on, lowest first."""
    size = socket_size(node.cpus, node.sockets)
    last = max(node.sockets, 1) - 1
    return sorted({min(cpu // size, last) for cpu in ids})


def socket_count(node: NodeView, ids: tuple[int, ...], sockets: int) -> int:
    """How many sockets' worth of GPUs a job on CPU ``ids`` gets: those its CPUs are
    on, at least ``sockets`` (--sockets-per-node)."""
    return max(len(spanned(node, ids)), sockets, 1)


def gpus_for(
    node: NodeView, kind: str, per_socket: int, sockets: int, ids: tuple[int, ...]
) -> list[int] | None:
    """The GPUs of ``kind`` a job on CPU ``ids`` gets: ``per_socket`` free ones near
    each socket of its CPUs (the lowest, or the best linked: ``gpulinks``), then near
    further sockets with a free CPU, highest first, up to ``sockets``; None when a
    socket lacks them."""
    links = link_map(node.devices.links) if node.devices else {}
    by_socket = _socket_gpus(node, kind) or {}
    mine = spanned(node, ids)
    size = socket_size(node.cpus, node.sockets)
    idle = _idle(node)
    others = [
        s
        for s in sorted(by_socket, reverse=True)
        if s not in mine and idle >> (s * size) & ((1 << size) - 1)
    ]
    chosen: list[int] = []
    for socket in (*mine, *others[: max(sockets - len(mine), 0)]):
        picked = best_linked(by_socket.get(socket, []), per_socket, links)
        if picked is None:
            return None
        chosen += picked
    return sorted(chosen) if len(chosen) == per_socket * socket_count(node, ids, sockets) else None
