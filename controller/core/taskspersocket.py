"""A job's tasks and CPUs on a node under ``--ntasks-per-socket=N``, as Slurm 22.05's
cons_tres gives them to a job (sbatch, salloc), measured on nodes of two 4-core
sockets (tests/unit/test_tasks_per_socket.py):

* Each socket gives the job at most N tasks' worth of its free CPUs (N times ``-c``),
  and a node holds the whole tasks those CPUs make: ``-n4 --ntasks-per-socket=1``
  spreads over two nodes (0,4 on each), ``-n3 --ntasks-per-socket=1 -N1`` is refused
  ("Requested node configuration is not available"), as is ``--ntasks-per-node=3``
  beside it; with one socket's cores all held, ``-N1 -n2 --ntasks-per-socket=1``
  waits; a task wider than a socket spans two (``-n1 -c5``: 0-2,4-5).
* Its CPUs come from the fewest sockets whose share holds them, those with the most
  free cores first (of equals the higher): ``-n2 --ntasks-per-socket=2`` is CPUs 4-5
  on an idle node, 5-6 with 0-1 and 4 held; ``-n2 -c2`` 4-7; ``-n4
  --ntasks-per-socket=4`` 4-7.
* Within those sockets' shares (their lowest free cores), the job's distribution
  takes them (``cpupick.pick``): ``-n3 --ntasks-per-socket=2`` is 0-1,4, ``-n2 -c3
  --ntasks-per-socket=1`` 0-2,4-6, ``-n4`` with 0-1 and 4 held 2-3,5-6.
"""

from __future__ import annotations

from controller.core import cpupick
from controller.core.cpupick import free_cores

__all__ = ["pick", "room"]


def _shares(cores: list[list[int]], unit: int, cpt: int, per_socket: int) -> list[list[int]]:
    """Each socket's lowest free ``cores`` that make its share: ``per_socket`` tasks
    of ``cpt`` CPUs, in whole cores of ``unit`` CPUs."""
    most = -(-per_socket * max(cpt, 1) // unit)
    return [socket[:most] for socket in cores]


def room(free: int, cpus: int, sockets: int, unit: int, cpt: int, per_socket: int) -> int:
    """How many tasks of ``cpt`` CPUs a node of ``cpus`` CPUs over ``sockets`` sockets
    holds in its ``free`` mask, each socket giving at most ``per_socket`` tasks' CPUs."""
    unit = max(unit, 1)
    shares = _shares(free_cores(free, cpus, sockets, unit), unit, cpt, per_socket)
    return sum(len(share) for share in shares) * unit // max(cpt, 1)


def pick(
    free: int,
    cpus: int,
    sockets: int,
    unit: int,
    count: int,
    cpt: int,
    per_socket: int,
    dist: str = "",
) -> list[int]:
    """Up to ``count`` CPU ids of the ``free`` mask for tasks of ``cpt`` CPUs, each
    socket giving at most ``per_socket`` tasks' CPUs, as the module says; beyond its
    tasks' CPUs (``--mincpus``), the lowest free ones."""
    unit = max(unit, 1)
    cores = free_cores(free, cpus, sockets, unit)
    shares = _shares(cores, unit, cpt, per_socket)
    within = 0
    held = 0
    for s in sorted(range(len(cores)), key=lambda s: (-len(cores[s]), -s)):
        if held >= count or not shares[s]:
            break
        held += len(shares[s]) * unit
        for first in shares[s]:
            within |= ((1 << unit) - 1) << first
    chosen = cpupick.pick(free & within, cpus, sockets, unit, count, cpt, dist)
    rest = free & ~sum(1 << c for c in chosen)
    while rest and len(chosen) < count:
        low = rest & -rest
        chosen.append(low.bit_length() - 1)
        rest ^= low
    return sorted(chosen)
