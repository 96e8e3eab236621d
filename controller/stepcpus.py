"""The CPUs of a step without ``--exact`` that asks for GPUs.

Such a step gets all of the job's CPUs on each of its nodes (``steps.step_cpus``),
but when it asks for GPUs Slurm 22.05 gives it only the job's CPUs there near
the GPUs it got (gres.conf ``Cores=``, else what the node's agent probed):
measured with ``slurmd -N`` nodes of 2 sockets x 4 cores, GPUs 0-1 near cores
0-3 and 2-3 near 4-7, a job of CPUs 0-7 and GPUs 0 and 2 runs ``srun --gpus=1
-n1`` with SLURM_CPUS_ON_NODE=4 and ``srun --gpus=2 -n1`` with 8, and a job of
CPUs 0-2,4-6 and four GPUs ``srun --gpus=1`` with 3 (``srun -n1`` without GPUs:
6). Where a GPU's near CPUs are not known, or none of the job's is near, the
step has all of the job's CPUs there, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["near_cpus", "pinned"]


def near_cpus(
    cpu_ids: Sequence[int], gpus: Sequence[int], near: Mapping[int, Sequence[int]]
) -> tuple[int, ...]:
    """Of a job's CPUs on a node (``cpu_ids``), those near any of the step's ``gpus``
    there (``near``: GPU index -> its CPUs); () when not known for every GPU or
    when none is near."""
    if not gpus or not cpu_ids or any(gpu not in near for gpu in gpus):
        return ()
    close = {cpu for gpu in gpus for cpu in near[gpu]}
    return tuple(cpu for cpu in cpu_ids if cpu in close)


def pinned(
    cpu_ids: Sequence[int], gpus: Sequence[int], near: Mapping[int, Sequence[int]], count: int
) -> tuple[int, ...]:
    """The CPU ids a step with ``gpus`` and ``count`` CPUs on a node runs on: the
    job's near its GPUs first, then the job's others, ``count`` of them."""
    first = near_cpus(cpu_ids, gpus, near)
    rest = tuple(cpu for cpu in cpu_ids if cpu not in first)
    return (first + rest)[: max(count, 1)]
