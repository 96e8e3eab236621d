"""--gpu-bind: each task's GPUs on a node, as slurmstepd 22.05 binds them.

The rows marked SLURM were run on this machine's Slurm 22.05 (the cluster of
tests/unit/test_gpu_semantics.py; ``srun`` in ``sbatch --gpus=4 -n4 ...`` printing
each task's CUDA_VISIBLE_DEVICES). TaskPlugin=task/none there, so every task's
affinity was the whole node, as Corral's tasks are pinned to all of the job's CPUs
on the node: ``closest`` then gives each task every GPU near those.
"""

from __future__ import annotations

import pytest

from controller.gpubind import implicit, task_gpus

NEAR = {0: (0, 1, 2, 3), 1: (0, 1, 2, 3), 2: (4, 5, 6, 7), 3: (4, 5, 6, 7)}
ALL = tuple(range(8))
FOUR = (0, 1, 2, 3)


@pytest.mark.parametrize(
    ("bind", "gpus", "tasks", "cpus", "expected"),
    [
        ("per_task:1", FOUR, 4, ALL, ((0,), (1,), (2,), (3,))),  # SLURM
        ("single:2", FOUR, 4, ALL, ((0,), (0,), (1,), (1,))),  # SLURM
        ("map_gpu:3,1", FOUR, 4, ALL, ((3,), (1,), (3,), (1,))),  # SLURM
        ("mask_gpu:0x3,0xc", FOUR, 4, ALL, ((0, 1), (2, 3), (0, 1), (2, 3))),  # SLURM
        ("map_gpu:1", (0, 1), 1, ALL, ()),  # SLURM: one task, no binding
        ("map_gpu:3,0", (0, 1), 2, ALL, ((0,), (0,))),  # SLURM: 3 not the step's: its first
        ("verbose,single:1", FOUR, 2, ALL, ((0,), (1,))),  # SLURM
        ("per_task:2", (0, 1, 2), 2, ALL, ((0, 1), (2,))),  # SLURM
        ("closest", FOUR, 2, ALL, (FOUR, FOUR)),  # SLURM
        ("closest", FOUR, 2, (0, 1), ((0, 1), (0, 1))),
        ("single:1", FOUR, 3, (4, 5), ((2,), (3,), (2,))),
        ("map_gpu:0*2,1*2", FOUR, 4, ALL, ((0,), (0,), (1,), (1,))),
        ("map_gpu:0x2", FOUR, 2, ALL, ((2,), (2,))),
        ("mask_gpu:8", FOUR, 2, ALL, ((3,), (3,))),
        ("none", FOUR, 4, ALL, ()),  # 22.05: no GPU at all; its manual and 24.11: all
        ("c", FOUR, 4, ALL, ()),  # accepted by the client, binds nothing
    ],
    ids=[
        "per-task",
        "single-2",
        "map",
        "mask",
        "one-task-unbound",
        "map-outside-the-step",
        "verbose-single",
        "per-task-short",
        "closest-node-wide",
        "closest-socket-0",
        "single-near-socket-1",
        "map-repeats",
        "map-hex",
        "mask-without-0x",
        "none",
        "prefix-word",
    ],
)
def test_each_task_sees_the_gpus_slurm_binds_it_to(
    bind: str,
    gpus: tuple[int, ...],
    tasks: int,
    cpus: tuple[int, ...],
    expected: tuple[tuple[int, ...], ...],
) -> None:
    assert task_gpus(bind, gpus, tasks, NEAR, cpus) == expected


@pytest.mark.parametrize(
    ("bind", "per_task", "per_gpu", "expected"),
    [
        ("", 0, 0, ""),
        ("", 2, 0, "per_task:2"),  # SLURM: --gpus-per-task binds per task
        ("", 0, 2, "single:2"),  # SLURM: --ntasks-per-gpu binds single
        ("map_gpu:1", 2, 0, "map_gpu:1"),  # an explicit --gpu-bind wins
    ],
)
def test_srun_binds_implicitly_without_gpu_bind(
    bind: str, per_task: int, per_gpu: int, expected: str
) -> None:
    assert implicit(bind, per_task, per_gpu) == expected


def test_the_agent_sets_each_tasks_binding_variables() -> None:
    from nodeagent.gpubinding import task_bindings

    bound = task_bindings("n1", [[0], [1, 2]], None, {"n1": {1: "MIG-aaa"}})
    assert bound[0] == {
        "CUDA_VISIBLE_DEVICES": "0",
        "GPU_DEVICE_ORDINAL": "0",
        "ROCR_VISIBLE_DEVICES": "0",
        "ZE_AFFINITY_MASK": "0",
        "SLURM_STEP_GPUS": "0",
    }
    assert bound[1]["CUDA_VISIBLE_DEVICES"] == "MIG-aaa,2"  # a MIG instance by its UUID
    assert bound[1]["SLURM_STEP_GPUS"] == "1,2"
