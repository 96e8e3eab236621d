"""The threads of each core a job's tasks use, apart from the CPUs it holds.

``sbatch --hint=nomultithread`` (and ``compute_bound``, ``memory_bound``) or
``--threads-per-core=N`` ask for one (N) thread of each core: Slurm 22.05 then gives
the job whole cores, as cons_tres always does under CR_Core, but counts only the
threads it uses. Measured on Slurm 22.05 (nodes of 2 sockets x 2 cores x 2 threads,
``tests/unit/test_threads.py``): ``-n2 --hint=nomultithread`` holds ``CPU_IDs=0-1,4-5``
(NumCPUs=4, TRES cpu=4, what accounting bills) and may use 2 (SLURM_JOB_CPUS_PER_NODE=2,
SLURM_CPUS_ON_NODE=2, the room its steps have); ``-n5`` packs 4 tasks on the first
node (its four cores) and 1 on the next. ``--hint=multithread`` changes nothing.

One number carries this, the job's ``threads_per_core`` (0: all of them), and these
three functions are all that read it (``joined`` keeps the count over an elastic
job's growth and shrinking): placement asks how many CPUs a need holds
(``held``), and the start records how many of them the job may use (``usable``),
which its environment, its steps and ``scontrol show job``'s task layout read back.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["held", "joined", "per_core", "usable"]


def per_core(wanted: int, unit: int) -> int:
    """Threads of each core a job that wants ``wanted`` (0: all) uses on a node whose
    cores are ``unit`` CPUs (ThreadsPerCore under CR_Core; 1 where CPUs are allocated
    one at a time, when every CPU is usable)."""
    unit = max(unit, 1)
    return unit if wanted <= 0 else min(wanted, unit)


def held(cpus: int, unit: int, wanted: int) -> int:
    """CPUs a job holds on a node for ``cpus`` usable ones: whole cores of ``unit``
    CPUs, each giving it ``per_core`` threads."""
    unit = max(unit, 1)
    return -(-cpus // per_core(wanted, unit)) * unit


def usable(cpus: int, unit: int, wanted: int) -> int:
    """The CPUs a job may use of ``cpus`` held on a node: ``per_core`` threads of each
    whole core (all of them where its cores are not whole: shared CPUs)."""
    unit = max(unit, 1)
    if cpus % unit:
        return cpus
    return cpus // unit * per_core(wanted, unit)


def joined(parts: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]) -> tuple[int, ...]:
    """The CPUs an allocation made of ``parts`` end to end may use on each node, each
    part its CPUs held and may use per node (``()``: all it holds), as a start records
    them: ``()`` where it may use all. An elastic job that grows or gives nodes back
    keeps using one thread of each core on every node it has."""
    held = tuple(c for cpus, _ in parts for c in cpus)
    used = tuple(c for cpus, part in parts for c in (part if len(part) == len(cpus) else cpus))
    return () if used == held else used
