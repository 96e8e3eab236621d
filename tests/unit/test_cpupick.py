"""The CPU ids a job gets on a node (``controller.core.cpupick``), as Slurm 22.05 gave
them: each row was submitted to Debian's slurm-wlm 22.05.8 (slurmctld and ``slurmd -N``
daemons on this machine, select/cons_tres, CR_Core_Memory) as ``sbatch --mem=100
<options>`` on node n1 (2 sockets x 4 cores, 1 thread) or h1 (2 x 2 x 2 threads),
after the jobs that hold the ``busy`` CPUs, and read from ``scontrol show job -d``
(``CPU_IDs=``)."""

from __future__ import annotations

import pytest

from controller.core.cpupick import pick, task_gpus
from controller.core.devices import mask

FULL = (1 << 8) - 1

# (id, busy CPUs, CPUs asked, -c, -m's second level, node threads a core, CPU_IDs)
ROWS = [
    ("n1", set(), 1, 1, "", 1, [0]),
    ("n2-a-core-per-socket", set(), 2, 1, "", 1, [0, 4]),
    ("n3", set(), 3, 1, "", 1, [0, 1, 4]),
    ("n5", set(), 5, 1, "", 1, [0, 1, 2, 4, 5]),
    ("c2-one-socket", set(), 2, 2, "", 1, [0, 1]),
    ("c3", set(), 3, 3, "", 1, [0, 1, 2]),
    ("c5-over-both", set(), 5, 5, "", 1, [0, 1, 2, 4, 5]),
    ("n2-c2-tasks-whole-on-socket-0", set(), 4, 2, "", 1, [0, 1, 2, 3]),
    ("n2-c3-a-task-a-socket", set(), 6, 3, "", 1, [0, 1, 2, 4, 5, 6]),
    ("n3-c2", set(), 6, 2, "", 1, [0, 1, 2, 3, 4, 5]),
    ("n4-c2", set(), 8, 2, "", 1, list(range(8))),
    ("block-n3", set(), 3, 1, "block", 1, [0, 1, 2]),
    ("fcyclic-n3-c2", set(), 6, 2, "fcyclic", 1, [0, 1, 2, 3, 4, 5]),
    ("busy-0-n2", {0}, 2, 1, "", 1, [1, 4]),
    ("busy-0-1-4-c2", {0, 1, 4}, 2, 2, "", 1, [2, 3]),
    ("busy-0-4-c3", {0, 1, 2, 3, 4}, 3, 3, "", 1, [5, 6, 7]),
    ("busy-0-2-n3", {0, 1, 2}, 3, 1, "", 1, [3, 4, 5]),
    ("block-busy-0-2-best-fit-socket", {0, 1, 2}, 2, 1, "block", 1, [4, 5]),
    ("block-busy-0-5", {0, 1, 2, 4, 5}, 2, 1, "block", 1, [6, 7]),
    ("ht-c1-whole-core", set(), 2, 1, "", 2, [0, 1]),
    ("ht-busy-core-0-c2", {0, 1}, 2, 2, "", 2, [2, 3]),
    ("ht-busy-socket-0-c4", {0, 1, 2, 3}, 4, 4, "", 2, [4, 5, 6, 7]),
    ("ht-n2-one-core", set(), 2, 1, "", 2, [0, 1]),
    ("ht-n3-two-cores", set(), 4, 1, "", 2, [0, 1, 4, 5]),
]


@pytest.mark.parametrize(
    ("busy", "count", "cpt", "method", "threads", "ids"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_cpus_are_picked_as_slurm_picks_them(
    busy: set[int], count: int, cpt: int, method: str, threads: int, ids: list[int]
) -> None:
    free = FULL & ~mask(busy)
    assert sorted(pick(free, 8, 2, threads, count, cpt, method)) == ids


def test_single_free_cpus_make_up_for_too_few_whole_cores() -> None:
    free = FULL & ~mask({1, 3, 5, 7})  # a thread of every core held (OverSubscribe)
    assert sorted(pick(free, 8, 2, 2, 2)) == [0, 2]
    assert pick(0, 8, 2, 1, 2) == []  # none free: the caller refuses


NEAR = {0: (0, 1, 2, 3), 1: (0, 1, 2, 3), 2: (4, 5, 6, 7), 3: (4, 5, 6, 7)}


def test_gpus_per_task_follow_each_tasks_socket() -> None:
    # -N2 -n6 --gpus-per-task=1: the node with two tasks, CPUs 0 and 4.
    assert task_gpus([0, 1, 2, 3], NEAR, [0, 4], 4, 2, 1, 1) == [0, 2]
    assert task_gpus([0, 1, 2, 3], NEAR, [0, 1, 4], 4, 3, 1, 1) == [0, 1, 2]
    # Socket 1's GPUs taken: its task takes any free one.
    assert task_gpus([0, 1], NEAR, [0, 4], 4, 2, 1, 1) == [0, 1]
    assert task_gpus([0], NEAR, [0, 4], 4, 2, 1, 1) is None
