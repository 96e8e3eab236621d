"""Each step task's own CPUs on a node under ``--cpu-bind``, as Slurm's task/affinity
gives them, within the job's CPUs there.

CPUs are numbered as Slurm numbers them (``controller/gpuaffinity.py``): core
``c`` holds CPUs ``c*ThreadsPerCore`` to ``c*ThreadsPerCore+ThreadsPerCore-1``
and socket ``s`` cores ``s*CoresPerSocket`` onwards. A task takes as many
units as its ``--cpus-per-task`` needs (threads; cores: enough whole cores;
sockets and ldoms: the sockets of such cores), the units dealt to tasks by the
distribution's second level: ``block`` fills socket 0 before socket 1,
``cyclic`` (the default) takes each task's units from one socket and the next
task's from the next socket, ``fcyclic`` each unit from the next socket. Its
third level orders a socket's threads: ``block`` a core's threads together,
``cyclic``/``fcyclic`` the first thread of every core first. Tasks beyond the
units start over (oversubscribed). ``rank`` binds local task i to the job's
i-th CPU there; ``map_cpu`` and ``mask_cpu`` name each task's CPUs (lists
repeat), which must be the job's (Slurm's "Unable to satisfy cpu bind
request" otherwise). ``none`` or nothing: () (each task has the job's CPUs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from corral.cpubind import CpuBind
from corral.distribution import Distribution

__all__ = ["Shape", "fits", "masks_text", "task_cpus"]

Cpus = tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Shape:
    """A node's CPU layout, as slurm.conf gives it."""

    cores_per_socket: int = 1
    threads_per_core: int = 1

    def core(self, cpu: int) -> int:
        return cpu // max(self.threads_per_core, 1)

    def socket(self, cpu: int) -> int:
        return self.core(cpu) // max(self.cores_per_socket, 1)


def _listed(bind: CpuBind, task: int) -> Cpus:
    """map_cpu's or mask_cpu's CPUs for local task ``task``."""
    item = bind.items[task % len(bind.items)]
    if bind.kind == "map_cpu":
        return (item,)
    return tuple(bit for bit in range(item.bit_length()) if item >> bit & 1)


def fits(bind: CpuBind, cpus: Sequence[int], tasks: int) -> bool:
    """Whether map_cpu's or mask_cpu's CPUs are all among the job's ``cpus`` (any
    binding by type fits)."""
    if bind.kind not in ("map_cpu", "mask_cpu") or not cpus:
        return True
    mine = set(cpus)
    return all(set(_listed(bind, t)) <= mine for t in range(max(tasks, len(bind.items))))


def _units(cpus: Sequence[int], shape: Shape, by_core: bool, core_order: str) -> list[list[Cpus]]:
    """The job's CPUs as units (whole cores, or threads) per socket, socket by socket."""
    sockets: dict[int, list[Cpus]] = {}
    if by_core:
        cores: dict[int, list[int]] = {}
        for cpu in sorted(cpus):
            cores.setdefault(shape.core(cpu), []).append(cpu)
        for _, members in sorted(cores.items()):
            sockets.setdefault(shape.socket(members[0]), []).append(tuple(members))
        return [sockets[s] for s in sorted(sockets)]
    tpc = max(shape.threads_per_core, 1)
    if core_order == "block":
        order = sorted(cpus)
    else:  # the first thread of every core first
        order = sorted(cpus, key=lambda c: (shape.socket(c), c % tpc, c))
    for cpu in order:
        sockets.setdefault(shape.socket(cpu), []).append((cpu,))
    return [sockets[s] for s in sorted(sockets)]


def _deal(sockets: list[list[Cpus]], tasks: int, need: int, method: str) -> list[list[Cpus]]:
    """``need`` units to each task from the sockets by ``method``."""
    flat = [unit for socket in sockets for unit in socket]
    if method == "block" or len(sockets) == 1:
        return [[flat[(t * need + k) % len(flat)] for k in range(need)] for t in range(tasks)]
    left = [list(socket) for socket in sockets]
    out: list[list[Cpus]] = []
    turn = 0
    for _ in range(tasks):
        if not any(left):  # every unit dealt: start over
            left = [list(socket) for socket in sockets]
        mine: list[Cpus] = []
        while len(mine) < need and any(left):
            while not left[turn % len(left)]:
                turn += 1
            mine.append(left[turn % len(left)].pop(0))
            if method == "fcyclic":
                turn += 1
        if method != "fcyclic":
            turn += 1
        out.append(mine or [flat[0]])
    return out


def task_cpus(
    bind: CpuBind, cpus: Sequence[int], tasks: int, cpt: int, shape: Shape, dist: Distribution
) -> tuple[Cpus, ...]:
    """Each of ``tasks`` local tasks' CPUs among the job's ``cpus`` on a node; ()
    when none is bound (each has them all)."""
    if not bind.binds or tasks < 1 or not cpus:
        return ()
    if bind.kind in ("map_cpu", "mask_cpu"):
        return tuple(_listed(bind, t) for t in range(tasks))
    ordered = sorted(cpus)
    if bind.kind == "rank":
        return tuple((ordered[t % len(ordered)],) for t in range(tasks))
    by_core = bind.kind != "threads"
    sockets = _units(ordered, shape, by_core, dist.core_method)
    tpc = max(shape.threads_per_core, 1)
    need = max(-(-max(cpt, 1) // tpc), 1) if by_core else max(cpt, 1)
    dealt = _deal(sockets, tasks, need, dist.socket_method)
    out = []
    for units in dealt:
        mine = sorted({cpu for unit in units for cpu in unit})
        if bind.kind in ("sockets", "ldoms"):  # the whole sockets of its cores
            held = {shape.socket(cpu) for cpu in mine}
            mine = [cpu for cpu in ordered if shape.socket(cpu) in held]
        out.append(tuple(mine))
    return tuple(out)


def mask(cpus: Sequence[int]) -> str:
    """``0x``-less hex mask of ``cpus``."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    return f"{value:x}"


def masks_text(bound: Sequence[Cpus]) -> str:
    """SLURM_CPU_BIND_LIST's value: each local task's mask, ``0x`` hex, comma-separated."""
    return ",".join(f"0x{mask(cpus)}" for cpus in bound)
