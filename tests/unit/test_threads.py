"""Threads used per core (``--hint``, ``--threads-per-core``; ``controller/core/threads.py``)
as Slurm 22.05 gave them: each row was submitted to Debian's slurm-wlm 22.05.8 (slurmctld
and three ``slurmd -N`` daemons on this machine, select/cons_tres, CR_Core, nodes of
Sockets=2 CoresPerSocket=2 ThreadsPerCore=2) as ``sbatch <options>`` on idle nodes, and
read from ``scontrol show job -d`` (NumCPUs, ``CPU_IDs=`` per node) and the batch
script's environment (SLURM_JOB_CPUS_PER_NODE, SLURM_TASKS_PER_NODE)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from controller.core import schedule, threads
from controller.jobenv import tasks_per_node
from tests.unit.scenario import NOW, cluster, job, node, partition

HT = cluster(
    [replace(node(n, cpus=8), unit=2, sockets=2) for n in ("h1", "h2", "h3")],
    [partition("batch", ("h1", "h2", "h3"))],
)

# (id, job fields, CPU_IDs per node, SLURM_JOB_CPUS_PER_NODE, SLURM_TASKS_PER_NODE)
ROWS: list[tuple[str, dict[str, Any], list[list[int]], list[int], list[int]]] = [
    ("n2-nomultithread", {"num_tasks": 2, "threads_per_core": 1}, [[0, 1, 4, 5]], [2], [2]),
    ("n2-compute-bound", {"num_tasks": 2, "threads_per_core": 1}, [[0, 1, 4, 5]], [2], [2]),
    ("n2-multithread", {"num_tasks": 2}, [[0, 1]], [2], [2]),
    ("n1-nomultithread", {"num_tasks": 1, "threads_per_core": 1}, [[0, 1]], [1], [1]),
    ("n3-nomultithread", {"num_tasks": 3, "threads_per_core": 1}, [list(range(6))], [3], [3]),
    ("n3-memory-bound", {"num_tasks": 3, "threads_per_core": 1}, [list(range(6))], [3], [3]),
    ("n4-nomultithread", {"num_tasks": 4, "threads_per_core": 1}, [list(range(8))], [4], [4]),
    (
        "c2-nomultithread",
        {"num_tasks": 1, "cpus_per_task": 2, "min_cpus": 2, "threads_per_core": 1},
        [[0, 1, 2, 3]],
        [2],
        [1],
    ),
    (
        "c3-nomultithread",
        {"num_tasks": 1, "cpus_per_task": 3, "min_cpus": 3, "threads_per_core": 1},
        [list(range(6))],
        [3],
        [1],
    ),
    (
        "n2-c2-threads-per-core-1",
        {"num_tasks": 2, "cpus_per_task": 2, "min_cpus": 2, "threads_per_core": 1},
        [list(range(8))],
        [4],
        [2],
    ),
    (
        "n5-packs-four-cores-then-one",
        {"num_tasks": 5, "threads_per_core": 1},
        [list(range(8)), [0, 1]],
        [4, 1],
        [4, 1],
    ),
    (
        "n2-block-block",
        {"num_tasks": 2, "threads_per_core": 1, "distribution": "block:block"},
        [[0, 1, 2, 3]],
        [2],
        [2],
    ),
    (
        "N2-n2-nomultithread",
        {"num_tasks": 2, "min_nodes": 2, "nodes_given": True, "tasks_given": True}
        | {"threads_per_core": 1},
        [[0, 1], [0, 1]],
        [1, 1],
        [1, 1],
    ),
]


@pytest.mark.parametrize(
    ("fields", "ids", "used", "tasks"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_jobs_hold_whole_cores_and_use_a_thread_of_each_as_slurm_does(
    fields: dict[str, Any], ids: list[list[int]], used: list[int], tasks: list[int]
) -> None:
    fields = {"tasks_given": True, **fields}
    plan = schedule(HT.snapshot([job(1, **fields)]), NOW)
    (start,) = plan.starts
    assert [sorted(c) for c in start.cpu_ids] == ids
    assert start.cpus == tuple(len(c) for c in ids)  # NumCPUs, TRES cpu: what it holds
    started = replace(job(1, **fields), nodes=start.nodes, cpus=start.cpus, cpus_used=start.used)
    assert list(started.usable_cpus) == used
    assert tasks_per_node(started) == tasks


def test_a_job_using_every_thread_records_no_separate_count() -> None:
    plan = schedule(HT.snapshot([job(1, num_tasks=3, tasks_given=True)]), NOW)
    assert plan.starts[0].cpus == (4,)
    assert plan.starts[0].used == ()


@pytest.mark.parametrize(
    ("cpus", "unit", "wanted", "held", "usable"),
    [(2, 2, 1, 4, 2), (3, 2, 1, 6, 3), (1, 2, 0, 2, 2), (3, 1, 1, 3, 3), (3, 4, 2, 8, 4)],
)
def test_held_and_usable_counts(cpus: int, unit: int, wanted: int, held: int, usable: int) -> None:
    assert threads.held(cpus, unit, wanted) == held
    assert threads.usable(held, unit, wanted) == usable
