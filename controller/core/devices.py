"""Which GPUs, by index, and which CPUs a start gets on each node: part of the plan.

Placement decides how many GPUs of which type a job takes on a node (its GRES
counts); ``bind`` then names them, as the core decides everything a start needs:
the lowest free indices of each type, passing over GPUs given whole or with
shares in use, and, where the node knows which cores are near its GPUs (gres.conf
``Cores=`` or the agent's probe), the free CPUs near them to pin the job to.
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

from controller.core.plan import Start
from controller.core.snapshot import NodeView

__all__ = ["bind", "near_cpus", "pool_gpu", "shared_gpus", "still_free", "take"]

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


def near_cpus(
    near: Mapping[int, tuple[int, ...]],
    gpus: Iterable[int],
    count: int,
    cpus: int,
    pinned: set[int] | frozenset[int],
) -> tuple[int, ...]:
    """``count`` CPUs of a node of ``cpus`` for a job given ``gpus``: free ones near
    them first, lowest first, then the other free ones; () when none of the GPUs has
    known cores, or the free CPUs are too few (the job then runs unpinned)."""
    close = sorted({c for g in gpus for c in near.get(g, ()) if c < cpus} - pinned)
    if not close and not any(g in near for g in gpus):
        return ()
    rest = [c for c in range(cpus) if c not in pinned and c not in set(close)]
    chosen = (close + rest)[:count]
    return tuple(sorted(chosen)) if len(chosen) == count else ()


def gpu_indices(node: NodeView, items: Items) -> tuple[int, ...] | None:
    """The lowest free GPU indices of each allocated type on ``node``; None if it
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
        free = [i for k, i in dev.numbers if k == kind and i not in busy]
        if len(free) < count:
            return None
        chosen += free[:count]
        busy.update(free[:count])
    return tuple(sorted(chosen))


def bind(start: Start, nodes: Mapping[str, NodeView]) -> Start | None:
    """``start`` with its GPU indices and pinned CPUs on each node (both () when it
    has no GPU); None when its GPUs cannot be named in this pass."""
    if not start.gres:
        return start
    gpus = []
    for name, items in zip(start.nodes, start.gres, strict=True):
        ids = gpu_indices(nodes[name], items)
        if ids is None:
            return None
        gpus.append(ids)
    if not any(gpus):
        return start
    cpu_ids = []
    for name, count, ids in zip(start.nodes, start.cpus, gpus, strict=True):
        node = nodes[name]
        dev = node.devices
        near = dict(dev.near) if dev is not None else {}
        pinned = dev.pinned if dev is not None else frozenset()
        cpu_ids.append(near_cpus(near, ids, count, node.cpus, pinned) if near and ids else ())
    return replace(start, gpus=tuple(gpus), cpu_ids=tuple(cpu_ids) if any(cpu_ids) else ())


def still_free(node: NodeView, start: Start, index: int) -> bool:
    """Whether the devices ``start`` names on its ``index``-th node, ``node``, are
    free there (commit's re-check against the node as it is now): no GPU given whole
    or with shares in use, no share of a GPU given whole, no CPU pinned by another job."""
    dev = node.devices
    if dev is None or not start.gres:
        return True
    if shared_gpus(start.gres[index]) & dev.whole:
        return False
    mine = start.gpus[index] if start.gpus else ()
    if not dev.whole.isdisjoint(mine) or not dev.shared.isdisjoint(mine):
        return False
    return not (start.cpu_ids and not dev.pinned.isdisjoint(start.cpu_ids[index]))


def take(nodes: dict[str, NodeView], start: Start) -> None:
    """Mark the devices a bound ``start`` holds in ``nodes`` (the pass's picture)."""
    if not start.gres:
        return
    for i, name in enumerate(start.nodes):
        node = nodes[name]
        dev = node.devices
        whole = start.gpus[i] if start.gpus else ()
        shares = shared_gpus(start.gres[i])
        pinned = start.cpu_ids[i] if start.cpu_ids else ()
        if dev is not None and (whole or shares or pinned):
            nodes[name] = replace(
                node,
                devices=replace(
                    dev,
                    whole=dev.whole | frozenset(whole),
                    shared=dev.shared | shares,
                    pinned=dev.pinned | frozenset(pinned),
                ),
            )
