"""The CPUs a GPU total may use on a node in Slurm's first try: those of the sockets
its GPUs need.

Slurm 22.05's cons_tres first tries a job that asks GPUs with only the cores of the
sockets whose GPUs it needs on each node: sockets are taken by most free cores
(lowest first among equals) while the GPUs near those taken so far fall short of the
job's total, and the cores of the others are left out; only where no allocation
comes of that does it try again with every free core. So ``--gpus=2 -n6 -N2`` on
nodes of two 4-core sockets with two GPUs near each is 4 + 2 CPUs (socket 0 holds
both GPUs a node might get), and ``--gpus=2 -n10 -N2`` 8 + 2 (4 + 4 does not hold
ten tasks); ``--gpus=3`` needs both sockets, so nothing is left out. GPUs per node
are confined alike, by their count on the node: ``--gres=gpu:1 -n6`` is two nodes of
4 + 2 CPUs, ``--gpus-per-node=3 -n6 -N2`` 5 + 1, and ``--gres=gpu:1 -c6``, which no
socket holds, six CPUs on one node (measured: tests/unit/test_gpu_semantics.py). A
node whose GPUs of the type have no known cores is never confined: Slurm cannot tell
their sockets.
"""

from __future__ import annotations

from controller.core.cpupick import socket_size
from controller.core.gpus import GpuAsk
from controller.core.snapshot import Gres, NodeView

__all__ = ["confined_cpus", "per_node_want", "socket_cpus", "spans_sockets"]


def confined_cpus(node: NodeView, gpu: GpuAsk) -> int | None:
    """The free CPUs of ``node`` on the sockets the job's GPU total needs, or None
    when that leaves none of its free CPUs out (or the sockets cannot be told)."""
    if not gpu.per_job or gpu.also or gpu.per_node:
        return None
    return socket_cpus(node, gpu.kind, gpu.per_job)


def per_node_want(items: Gres) -> tuple[str, int] | None:
    """The GPU type and count a ``--gres`` (or ``--gpus-per-node``) asks on each node
    where it asks GPUs of one type only; None otherwise."""
    gpus = [(kind, count) for name, kind, count in items if name == "gpu" and count]
    return gpus[0] if len(gpus) == 1 else None


def socket_cpus(node: NodeView, kind: str, want: int) -> int | None:
    """The free CPUs of ``node`` on the sockets (most free cores first) whose free
    ``kind`` GPUs ("" any) reach ``want``; None when that leaves none of its free CPUs
    out, or where a GPU's cores are not known."""
    sockets = _sockets(node, kind, want)
    if sockets is None:
        return None
    needed, idle = sockets
    if all(s in needed for s in range(len(idle)) if idle[s]):
        return None
    return sum(idle[s] for s in needed)


def spans_sockets(node: NodeView, kind: str, want: int) -> bool:
    """Whether ``want`` free ``kind`` GPUs of ``node`` need every socket with free
    cores, of several (their cores known): a job that may have them is never confined."""
    sockets = _sockets(node, kind, want)
    if sockets is None:
        return False
    needed, idle = sockets
    busy = [s for s in range(len(idle)) if idle[s]]
    return len(busy) > 1 and all(s in needed for s in busy)


def _sockets(node: NodeView, kind: str, want: int) -> tuple[set[int], list[int]] | None:
    """The sockets of ``node`` whose free ``kind`` GPUs reach ``want`` (most free cores
    first, while short), and each socket's free CPUs; None where a GPU's cores are not
    known."""
    dev = node.devices
    if dev is None or not dev.near or want < 1:
        return None
    near = dict(dev.near)
    taken = dev.whole | dev.shared
    free = [i for own, i in dev.numbers if i not in taken and (not kind or own == kind)]
    if not free or any(i not in near or not near[i] for i in free):
        return None
    sockets = max(node.sockets, 1)
    size = socket_size(node.cpus, sockets)
    busy = node.busy_ids
    idle = [0] * sockets
    for cpu in range(min(node.cpus, size * sockets)):
        if not busy >> cpu & 1:
            idle[cpu // size] += 1
    gpus_on = [0] * sockets
    for i in free:
        gpus_on[min(near[i][0] // size, sockets - 1)] += 1
    order = sorted(range(sockets), key=lambda s: (-idle[s], s))
    needed: set[int] = set()
    counted = 0
    for s in order:
        if not idle[s]:
            continue
        if counted < want and gpus_on[s]:
            needed.add(s)
            counted += gpus_on[s]
    return needed, idle
