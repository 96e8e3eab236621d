"""--gpus-per-socket on a node whose GPUs of the type asked have no known cores.

Where gres.conf gives the GPUs ``Cores=`` (or the agent's probe found the CPUs near
them), ``--gpus-per-socket=G --sockets-per-node=S`` asks G GPUs near each of S
sockets, G times S on the node (``gpus.ask``). Where it does not, Slurm 22.05 cannot
tell a GPU's socket and gives G for each socket the job's CPUs there are on, as
many as the node has free: ``--gres=gpu:a100:1 --gpus-per-socket=v100:1
--sockets-per-node=2`` is one V100 for a job of one CPU, two for ``-n2`` (CPUs 0
and 4) or ``-c5``, one for ``-n2 -m block:block`` (CPUs 0-1) and for ``-c2``, and
``--gpus-per-socket=v100:2 -n2`` on a node of two V100s is those two (measured:
tests/unit/test_gpu_semantics.py). A node with fewer than G free is no use.

Such a job also tries the nodes with the most free GPUs of the type first (in node
order among equals): of n1 (two A100s, two V100s), n2 (three A100s), n3 (four) and
n4 (two), ``--gpus-per-socket=a100:1 --sockets-per-node=2`` went to n3, to n2
without n3, and to n1 without both (measured), where ``--gpus-per-node=a100:1`` and
``--gpus=a100:1`` take n1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller.core import socketspread
from controller.core.cpupick import pick, socket_size
from controller.core.gpus import GpuAsk, free_gpus
from controller.core.snapshot import NodeView

__all__ = ["alone", "most_first", "on_node"]


def alone(gpu: GpuAsk) -> bool:
    """Whether the GPUs per socket are all the GPUs ``gpu`` asks (the case this module
    places)."""
    return bool(
        gpu.per_socket
        and len(gpu.items) == 1
        and not (gpu.per_job or gpu.also or gpu.per_task or gpu.tasks_per_gpu)
    )


def _cores_unknown(gpu: GpuAsk, node: NodeView) -> bool:
    """Whether ``node`` knows the cores of none of its GPUs of ``gpu``'s type."""
    dev = node.devices
    if dev is None:
        return True
    near = dict(dev.near)
    return not any(i in near for kind, i in dev.numbers if not gpu.kind or kind == gpu.kind)


def most_first(pool: Sequence[NodeView], gpu: GpuAsk) -> list[NodeView]:
    """``pool`` with the nodes of most free GPUs of the type first (stable), where no
    node of it knows their cores (as Slurm 22.05 chose nodes for such a job)."""
    if not all(_cores_unknown(gpu, node) for node in pool):
        return list(pool)
    return sorted(pool, key=lambda node: -free_gpus(node.gres, gpu.kind))


def on_node(
    gpu: GpuAsk,
    node: NodeView,
    cpus: int,
    cpt: int,
    dist: str,
    one_task: bool,
    socket_tasks: int = 0,
) -> GpuAsk | None:
    """``gpu`` (with GPUs per socket) as ``node`` gives it to a job of ``cpus`` CPUs
    there, in tasks of ``cpt`` taken as ``dist`` takes them (``cpupick.pick``;
    ``one_task``: the job is one task; ``socket_tasks``: at most that many on each
    socket, ``taskspersocket.pick``): the per-socket GPUs counted over the sockets
    those CPUs are on, where the node knows no cores of the type's GPUs (here) or
    where they are all the job's GPUs (``socketspread``); None when the node cannot
    give them."""
    if alone(gpu) and socketspread.knows_cores(node, gpu.kind):
        laid = socketspread.lay_out(
            node, gpu.kind, gpu.per_socket, cpus, cpt, dist, one_task, socket_tasks
        )
        if laid is None:
            return None
        if socketspread.gpus_for(node, gpu.kind, gpu.per_socket, gpu.sockets, laid) is None:
            return None
        return _counted(gpu, gpu.per_socket * socketspread.socket_count(node, laid, gpu.sockets))
    dev = node.devices
    if dev is None:
        return gpu
    near = dict(dev.near)
    if any(index in near for kind, index in dev.numbers if not gpu.kind or kind == gpu.kind):
        return gpu
    free = free_gpus(node.gres, gpu.kind)
    if free < gpu.per_socket:
        return None
    busy = node.busy_ids
    idle = ~busy & ((1 << node.cpus) - 1)
    ids = pick(idle, node.cpus, node.sockets, node.unit, cpus, cpt, dist)
    size = socket_size(node.cpus, node.sockets)
    spanned = len({cpu // size for cpu in ids}) or 1
    return _counted(gpu, min(gpu.per_socket * spanned, free))


def _counted(gpu: GpuAsk, count: int) -> GpuAsk:
    """``gpu`` with ``count`` GPUs per socket in all on the node."""
    asked = gpu.per_socket * max(gpu.sockets, 1)
    *items, last = gpu.items  # gpus.ask puts the per-socket GPUs last
    change = count - asked
    return replace(
        gpu,
        items=(*items, (last[0], last[1], count)),
        per_node=gpu.per_node + change,
        same=gpu.same + change,
    )
