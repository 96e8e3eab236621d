"""Which of a node's free CPUs a job gets, and which of its GPUs follow its tasks, as
Slurm 22.05's cons_tres picks them (``dist_tasks.c``), measured on Slurm 22.05 (the
rows of ``tests/unit/test_cpupick.py`` and ``test_gpu_semantics.py``).

A job's distribution names how its CPUs are taken from a node's sockets (the
second level of ``-m``; block:cyclic by default):

* ``cyclic`` (the default) and ``fcyclic``: with ``-c`` above 1, each socket in turn
  first gives whole tasks' worth of its free cores (``-n2 -c2``: 0-3 on one socket;
  ``-n2 -c3``: 0-2 and 4-6); then each socket in turn gives one free core a round
  (``-n2``: 0 and 4; ``-n3``: 0, 1 and 4; ``-c5``: 0-2 and 4-5).
* ``block``: the socket that fits best (the fullest of those too small, else the
  emptiest of those that hold all) gives its free cores lowest first, then the next
  best (``-n3``: 0-2).

Cores are ``unit`` CPUs (ThreadsPerCore when cores are allocated): core ``k`` holds
CPUs ``k*unit`` onwards, and socket ``s`` the node's CPUs ``s*cpus/sockets``
onwards, as Slurm numbers them. Where whole free cores are too few (CPUs shared by
OverSubscribe), the lowest free single CPUs make up the rest.

GPUs per task (``--gpus-per-task`` alone) on a job of several nodes follow the
tasks: a node's tasks are counted per socket from its CPUs (whole ``-c``'s worth
each, a socket at a time), and each socket's tasks take the free GPUs near that
socket, lowest first, then any free ones (``-N2 -n6 --gpus-per-task=1``: the node
with two tasks has CPUs 0 and 4 and GPUs 0 and 2, one per socket). On one node,
Slurm first narrows the job's cores to the sockets its GPUs need, so there its
CPUs follow its GPUs (``core/devices.py``'s near-first rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from corral import distribution

__all__ = ["free_cores", "method_of", "pick", "socket_room", "socket_size", "task_gpus"]


def method_of(text: str) -> str:
    """How a job of ``-m text`` takes its CPUs: "block" for a second level of block
    and for plane (Slurm syncs both by block), else "" (cyclic; fcyclic takes them
    as cyclic does)."""
    if not text:
        return ""
    dist = distribution.parse(text)
    return "block" if dist.nodes == "plane" or dist.sockets == "block" else ""


def socket_size(cpus: int, sockets: int) -> int:
    """CPUs per socket of a node of ``cpus`` CPUs over ``sockets`` sockets."""
    return max(cpus // max(sockets, 1), 1)


def socket_room(free: int, cpus: int, sockets: int, unit: int, least: int) -> tuple[int, int]:
    """How many sockets of a node of ``cpus`` CPUs over ``sockets`` sockets have at
    least ``least`` wholly free cores in the ``free`` mask, and the mask of those
    sockets' CPUs: a job asking cores per socket (or sockets) uses those alone, as
    cons_tres leaves out a socket with fewer free cores than the job's
    --cores-per-socket (measured on Slurm 22.05, nodes of two 4-core sockets: with
    CPUs 0-2 and 4-5 held, ``-B 1:2`` got 6-7 and ``-B 2:1`` then waited; with 0-2 and
    4-6 held ``--cores-per-socket=2`` waited where ``-B 1:1`` got 3)."""
    size = socket_size(cpus, sockets)
    each = free_cores(free, cpus, sockets, max(unit, 1))
    count = mask = 0
    for s, cores in enumerate(each):
        if len(cores) >= max(least, 1):
            count += 1
            top = cpus if s == len(each) - 1 else (s + 1) * size
            mask |= (1 << top) - (1 << s * size)
    return count, mask


def free_cores(free: int, cpus: int, sockets: int, unit: int) -> list[list[int]]:
    """Each socket's wholly free cores (by first CPU id), lowest first."""
    size = socket_size(cpus, sockets)
    whole = (1 << unit) - 1
    out: list[list[int]] = [[] for _ in range(max(cpus // size, 1))]
    for first in range(0, cpus - unit + 1, unit):
        if free >> first & whole == whole:
            out[min(first // size, len(out) - 1)].append(first)
    return out


def _cyclic(cores: list[list[int]], need: int, unit: int, cpt: int) -> list[int]:
    taken: list[int] = []
    nxt = [0] * len(cores)
    if cpt > 1:  # whole tasks a socket at a time
        for s, socket in enumerate(cores):
            room = len(socket) * unit
            room -= room % cpt
            while nxt[s] < len(socket) and room > 0 and need > 0:
                taken.append(socket[nxt[s]])
                nxt[s] += 1
                room -= unit
                need -= unit
    while need > 0:  # then a core from each socket a round
        before = need
        for s, socket in enumerate(cores):
            if need <= 0:
                break
            if nxt[s] < len(socket):
                taken.append(socket[nxt[s]])
                nxt[s] += 1
                need -= unit
        if need == before:
            break
    return taken


def _best_socket(counts: list[int], wanted: int) -> int:
    """The socket whose free cores fit ``wanted`` best (``_block_sync_core_bitmap``):
    of those that hold them all the emptiest, else the fullest; -1 when none is free."""
    best = -1
    for s, count in enumerate(counts):
        if not count:
            continue
        if best < 0:
            best = s
            continue
        fits, best_fits = count >= wanted, counts[best] >= wanted
        smaller_fit = fits and (not best_fits or count < counts[best])
        if smaller_fit or (not fits and not best_fits and count > counts[best]):
            best = s
    return best


def _block(cores: list[list[int]], need: int, unit: int) -> list[int]:
    counts = [len(socket) for socket in cores]
    wanted = -(-need // unit)
    taken: list[int] = []
    while need > 0:
        best = _best_socket(counts, wanted)
        if best < 0:
            break
        socket = cores[best]
        start = len(socket) - counts[best]
        while counts[best] and need > 0:
            taken.append(socket[start])
            start += 1
            counts[best] -= 1
            need -= unit
    return taken


def pick(
    free: int, cpus: int, sockets: int, unit: int, count: int, cpt: int = 1, method: str = ""
) -> list[int]:
    """Up to ``count`` of the CPU ids in the ``free`` mask of a node of ``cpus`` CPUs
    over ``sockets`` sockets, as the job's distribution ``method`` over sockets
    (block, cyclic or fcyclic; "" for cyclic) takes them for tasks of ``cpt`` CPUs."""
    if count <= 0:
        return []
    unit = max(unit, 1)
    if free == (1 << cpus) - 1:  # an idle node, the common case: one answer per shape
        return list(_idle(cpus, sockets, unit, count, cpt, method))
    return _picked(free, cpus, sockets, unit, count, cpt, method)


@lru_cache(maxsize=4096)
def _idle(cpus: int, sockets: int, unit: int, count: int, cpt: int, method: str) -> tuple[int, ...]:
    return tuple(_picked((1 << cpus) - 1, cpus, sockets, unit, count, cpt, method))


def _picked(
    free: int, cpus: int, sockets: int, unit: int, count: int, cpt: int, method: str
) -> list[int]:
    cores = free_cores(free, cpus, sockets, unit)
    if method == "block":
        firsts = _block(cores, count, unit)
    else:
        firsts = _cyclic(cores, count, unit, max(cpt, 1))
    chosen = sorted(c for first in firsts for c in range(first, first + unit))[:count]
    if len(chosen) < count:  # too few whole cores: single free CPUs, lowest first
        rest = free & ~sum(1 << c for c in chosen)
        while rest and len(chosen) < count:
            low = rest & -rest
            chosen.append(low.bit_length() - 1)
            rest ^= low
    return chosen


def _tasks_per_socket(ids: Sequence[int], size: int, tasks: int, cpt: int) -> dict[int, int]:
    """A node's ``tasks`` over the sockets of its CPU ``ids``: each socket's whole
    ``cpt``s, a socket at a time; any left over on the sockets in order."""
    per: dict[int, int] = {}
    for cpu in ids:
        per[cpu // size] = per.get(cpu // size, 0) + 1
    out: dict[int, int] = {}
    left = tasks
    for socket in sorted(per):
        out[socket] = min(per[socket] // max(cpt, 1), left)
        left -= out[socket]
    for socket in sorted(per):
        if left <= 0:
            break
        out[socket] += 1
        left -= 1
    return out


def task_gpus(
    free: Sequence[int],
    near: Mapping[int, tuple[int, ...]],
    ids: Sequence[int],
    size: int,
    want: int,
    per_task: int,
    cpt: int,
) -> list[int] | None:
    """``want`` of the ``free`` GPUs, ``per_task`` for each of the node's tasks, whose
    CPUs are ``ids`` (sockets of ``size`` CPUs), near each task's socket first; None
    when too few are free."""
    tasks = max(want // max(per_task, 1), 1)
    if len(free) < want:
        return None
    chosen: list[int] = []
    for socket, count in sorted(_tasks_per_socket(ids, size, tasks, cpt).items()):
        close = [
            g for g in free if g not in chosen and any(c // size == socket for c in near.get(g, ()))
        ]
        chosen += close[: count * per_task]
    chosen += [g for g in free if g not in chosen][: want - len(chosen)]
    return sorted(chosen)
