"""The task count sbatch and salloc set from a job's socket, core and thread counts.

Slurm 22.05's sbatch and salloc give a job without ``-n`` or ``--ntasks-per-node``,
on a fixed number of nodes (``-N k``, ``-N k-k`` or ``-w``), that asks for sockets,
cores or threads per node, a task for each of them: nodes x sockets x cores x
threads, each count not asked for being 1. They send it as the job's ``-n``, so
SLURM_NTASKS is set and NumTasks, the CPUs and any GPUs per task or per socket
follow it. Measured on nodes of two 4-core sockets (``scontrol show job -d``):

* ``--sockets-per-node=2 -w n1`` (or ``-N1``): NumTasks=2, CPU_IDs=0,4,
  SLURM_NTASKS=2; with ``--gpus-per-socket=1`` also two GPUs (IDX:0,2), each task
  seeing both; with ``-c3`` two tasks of three CPUs; with ``--gpus-per-task=1`` two
  GPUs;
* ``--sockets-per-node=2 -N2``: NumTasks=4, laid out 3 + 1;
* ``--threads-per-core=1``, ``--hint=nomultithread``, ``compute_bound`` or
  ``memory_bound`` with ``-w n1``: one task, but SLURM_NTASKS=1 (set), where ``-w n1``
  alone and ``--hint=multithread`` (no thread count) leave it unset;
* not applied: without a fixed node count (``--sockets-per-node=2`` alone, or
  ``-N1-2``: one task a node), beside ``-n`` or ``--ntasks-per-node``, nor by srun
  (``srun --sockets-per-node=2 -w n1`` runs one task, in or outside an allocation).

``--cores-per-socket`` and ``-B`` (cli/sbatch/nodeinfo.py) count the same way:
``--cores-per-socket=2 -w n1`` runs two tasks (CPU_IDs=0,4), ``-B 1:3 -w n1`` three
(0-1,4: a minimum of one socket, not a bound), ``-B 2:2`` four, ``-B 1-2:2`` two (a
range's minimum), ``-N2 -w n1 -B 1:2`` four laid out 3 + 1. A hint's one core per
socket (memory_bound) counts as Slurm counts it, and a hint that holds drops the
sockets and cores asked for (cli/sbatch/hintopts.py).
"""

from __future__ import annotations

from cli.sbatch import hintopts, nodeinfo

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def implied_tasks(fields: Mapping[str, Any], min_nodes: int, max_nodes: int) -> int | None:
    """The ``-n`` Slurm's sbatch and salloc give a job of ``fields`` on ``min_nodes`` to
    ``max_nodes`` nodes (0: no maximum), or None where they give none."""
    if "num_tasks" in fields or "ntasks_per_node" in fields:
        return None
    if min_nodes < 1 or max_nodes not in (0, min_nodes):
        return None
    if any(nodeinfo.zero(fields, field) for field in nodeinfo.FIELDS):
        return None  # a count of 0 from -B: Slurm's product is 0, no task count
    counts = (
        hintopts.sockets(fields),
        hintopts.cores(fields),
        hintopts.threads(fields),
    )
    if not any(counts):
        return None
    tasks = min_nodes
    for count in counts:
        tasks *= max(count, 1)
    return tasks
