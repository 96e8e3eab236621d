"""A step without ``--exact`` that asks for GPUs has the job's CPUs near them only.

Measured on Slurm 22.05 (Debian's slurm-wlm 22.05.8) with three ``slurmd -N``
nodes of 2 sockets x 4 cores and ``Gres=gpu:4``, gres.conf ``File=/dev/nvidia[0-1]
Cores=0-3`` and ``File=/dev/nvidia[2-3] Cores=4-7`` (fake char devices),
SelectType=select/cons_tres with CR_Core_Memory; each row's job was ``sbatch -N1
<job>`` running ``srun <step> bash -c 'echo $SLURM_CPUS_ON_NODE'``, its CPUs read
from ``scontrol show job -d`` (CPU_IDs).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import stepcpus
from controller.jobstate import JobState
from controller.model import Job
from controller.steps import StepRequest, new_step
from tests.unit.scenario import NOW, job

NEAR = {0: (0, 1, 2, 3), 1: (0, 1, 2, 3), 2: (4, 5, 6, 7), 3: (4, 5, 6, 7)}


def near(node: str) -> dict[int, tuple[int, ...]]:
    return NEAR


def running(cpu_ids: tuple[int, ...], gpus: tuple[int, ...]) -> Job:
    return replace(
        job(1, num_tasks=len(cpu_ids)),
        state=JobState.RUNNING,
        nodes=("n1",),
        cpus=(len(cpu_ids),),
        cpu_ids=(cpu_ids,),
        gpus=(gpus,),
        start_time=NOW,
    )


# (job's CPU ids, job's GPUs, step, SLURM_CPUS_ON_NODE Slurm gave the step)
ROWS = [
    # -n8 --gpus-per-socket=1 --sockets-per-node=2: CPU_IDs=0-7, GPUs 0 and 2
    ((0, 1, 2, 3, 4, 5, 6, 7), (0, 2), StepRequest(ntasks=1, gpus=1), 4),
    ((0, 1, 2, 3, 4, 5, 6, 7), (0, 2), StepRequest(ntasks=1, gpus=2), 8),
    ((0, 1, 2, 3, 4, 5, 6, 7), (0, 2), StepRequest(ntasks=2, gpus=1), 4),
    ((0, 1, 2, 3, 4, 5, 6, 7), (0, 2), StepRequest(ntasks=1), 8),  # no GPUs asked
    # -n6 --gres=gpu:4: CPU_IDs=0-2,4-6
    ((0, 1, 2, 4, 5, 6), (0, 1, 2, 3), StepRequest(ntasks=1, gpus=1), 3),
    ((0, 1, 2, 4, 5, 6), (0, 1, 2, 3), StepRequest(ntasks=1, gpus=2), 3),  # GPUs 0-1
    ((0, 1, 2, 4, 5, 6), (0, 1, 2, 3), StepRequest(ntasks=1), 6),
    # -n3 --gres=gpu:1: CPU_IDs=0-2, all near GPU 0
    ((0, 1, 2), (0,), StepRequest(ntasks=1, gpus=1), 3),
    # -c8 --gres=gpu:4 (CPU_IDs=0-7): --gpus=1 has 4
    ((0, 1, 2, 3, 4, 5, 6, 7), (0, 1, 2, 3), StepRequest(ntasks=1, gpus=1), 4),
]


@pytest.mark.parametrize(("cpu_ids", "gpus", "req", "cpus"), ROWS)
def test_a_gpu_step_without_exact_has_the_jobs_cpus_near_its_gpus(
    cpu_ids: tuple[int, ...], gpus: tuple[int, ...], req: StepRequest, cpus: int
) -> None:
    step = new_step(running(cpu_ids, gpus), req, "s", NOW, -1, "", near=near)
    assert step.cpus == (cpus,)


def test_exact_steps_and_unknown_cores_keep_their_cpus() -> None:
    whole = running((0, 1, 2, 3, 4, 5, 6, 7), (0, 2))
    exact = StepRequest(ntasks=1, gpus=1, exact=True)
    assert new_step(whole, exact, "s", NOW, -1, "", near=near).cpus == (1,)
    # no gres.conf Cores= (nor probed): all of the job's CPUs, as before
    assert new_step(whole, StepRequest(ntasks=1, gpus=1), "s", NOW, -1, "").cpus == (8,)


def test_a_second_gpu_step_gets_the_other_sockets_cpus() -> None:
    """Two non-exact steps on GPUs 0 and 2 run side by side, 4 CPUs each."""
    whole = running((0, 1, 2, 3, 4, 5, 6, 7), (0, 2))
    first = new_step(whole, StepRequest(ntasks=1, gpus=1), "a", NOW, -1, "", near=near)
    assert first.gpus == ((0,),) and first.cpus == (4,)
    busy = replace(whole, steps=(first,))
    second = new_step(busy, StepRequest(ntasks=1, gpus=1), "b", NOW, -1, "", near=near)
    assert second.gpus == ((2,),) and second.cpus == (4,)


def test_a_gpu_step_is_pinned_to_the_cpus_near_its_gpus_first() -> None:
    cpu_ids = (0, 1, 2, 4, 5, 6)
    assert stepcpus.near_cpus(cpu_ids, (2,), NEAR) == (4, 5, 6)
    assert stepcpus.pinned(cpu_ids, (2,), NEAR, 3) == (4, 5, 6)
    assert stepcpus.pinned(cpu_ids, (2,), NEAR, 4) == (4, 5, 6, 0)
    assert stepcpus.near_cpus(cpu_ids, (2,), {}) == ()  # unknown: not narrowed
    assert stepcpus.pinned(cpu_ids, (2,), {}, 6) == cpu_ids
