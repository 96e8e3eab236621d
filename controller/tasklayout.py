"""Which tasks go to which node: Slurm's task distributions, written once.

A job's batch environment (``SLURM_TASKS_PER_NODE``) and every step (``srun``)
lay their tasks out by these rules. Each node has *room*, the tasks its CPUs
hold (its CPUs over ``--cpus-per-task``):

* ``block`` (the default) deals tasks as cards, one to each node with room left
  per round, until all are dealt; once no node has room left the rest go round
  robin over every node (oversubscription). Tasks are then numbered node by node
  (node 0's first). This is how Slurm spreads a block layout over nodes of
  unequal size: CPUs 3,3 with 6 tasks give 3,3; 5,1 give 5,1; 8,8 give 3,3.
* ``block`` with ``Pack`` fills each node to its room before the next (after one
  task on each, so that every node of the step has a task).
* ``cyclic`` deals as ``block`` and numbers the tasks in the order dealt: task
  i is on node i mod N among the nodes with room left.
* ``plane=N`` deals blocks of N consecutive tasks per node per round.
* ``arbitrary`` places task i on the i-th node of a given list.

The result is the global task ids on each node, ascending (SLURM_GTIDS).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["arbitrary", "block_counts", "by_block", "deal", "layout"]

#: Global task ids on each node, node by node.
Layout = tuple[tuple[int, ...], ...]


def deal(room: Sequence[int], ntasks: int, chunk: int = 1) -> Layout:
    """Tasks dealt round after round: each node with room left takes up to ``chunk``
    of them a round (within its room); once none has room, every node takes
    ``chunk`` a round. Ids in the order dealt."""
    nodes = len(room)
    if not nodes:
        return ()
    got: list[list[int]] = [[] for _ in range(nodes)]
    task = 0
    oversubscribe = False
    while task < ntasks:
        dealt = False
        for i in range(nodes):
            if task >= ntasks:
                break
            left = chunk if oversubscribe else min(chunk, room[i] - len(got[i]))
            take = min(max(left, 0), ntasks - task)
            if take:
                got[i].extend(range(task, task + take))
                task += take
                dealt = True
        if not dealt:
            oversubscribe = True
    return tuple(tuple(ids) for ids in got)


def block_counts(room: Sequence[int], ntasks: int, pack: bool = False) -> tuple[int, ...]:
    """Tasks on each node under ``block`` (``pack``: Slurm's ``,Pack``)."""
    if not pack:
        return tuple(len(ids) for ids in deal(room, ntasks))
    counts = [1 if i < ntasks else 0 for i in range(len(room))]
    left = ntasks - sum(counts)
    for i, space in enumerate(room):
        take = min(max(space - counts[i], 0), left)
        counts[i] += take
        left -= take
    i = 0
    while left and room:  # beyond every node's room: round robin
        counts[i % len(room)] += 1
        left -= 1
        i += 1
    return tuple(counts)


def by_block(counts: Sequence[int]) -> Layout:
    """Ids numbered node by node for ``counts`` tasks on each."""
    out, first = [], 0
    for count in counts:
        out.append(tuple(range(first, first + count)))
        first += count
    return tuple(out)


def arbitrary(nodes: Sequence[str], sequence: Sequence[str]) -> Layout:
    """Task i on ``sequence[i]``: each of ``nodes``' ids."""
    index = {name: i for i, name in enumerate(nodes)}
    got: list[list[int]] = [[] for _ in nodes]
    for task, name in enumerate(sequence):
        got[index[name]].append(task)
    return tuple(tuple(ids) for ids in got)


def layout(room: Sequence[int], ntasks: int, method: str = "block", plane: int = 1,
           pack: bool = False) -> Layout:  # fmt: skip
    """The ids on each node under ``method`` (block, cyclic or plane)."""
    if method == "cyclic":
        return deal(room, ntasks)
    if method == "plane":
        return deal(room, ntasks, max(plane, 1))
    return by_block(block_counts(room, ntasks, pack))
