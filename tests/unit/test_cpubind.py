"""--cpu-bind: each task's CPUs (controller/cpubind.py), the variables that tell it,
and --gpu-bind=closest from each task's own CPUs."""

from __future__ import annotations

import pytest

from controller import cpubind, gpubind
from controller.steps import cpu_bind_environment
from corral.cpubind import parse
from corral.distribution import Distribution
from corral.distribution import parse as dist

#: Two sockets of two cores of two threads: CPUs 0-3 on socket 0, 4-7 on socket 1.
SHAPE = cpubind.Shape(cores_per_socket=2, threads_per_core=2)
ALL = tuple(range(8))
BLOCK = Distribution()


def bound(
    text: str, tasks: int, cpt: int = 1, d: Distribution = BLOCK, cpus: tuple[int, ...] = ALL
) -> tuple[tuple[int, ...], ...]:
    return cpubind.task_cpus(parse(text), cpus, tasks, cpt, SHAPE, d)


@pytest.mark.parametrize(
    ("text", "tasks", "cpt", "distribution", "expected"),
    [
        ("none", 2, 1, "", ()),
        ("", 2, 1, "", ()),
        ("verbose", 2, 1, "", ()),
        # cores, sockets dealt cyclically by default: task 1 on socket 1
        ("cores", 2, 1, "", ((0, 1), (4, 5))),
        ("cores", 4, 1, "", ((0, 1), (4, 5), (2, 3), (6, 7))),
        ("cores", 2, 1, "block:block", ((0, 1), (2, 3))),
        ("cores", 2, 3, "", ((0, 1, 2, 3), (4, 5, 6, 7))),  # 3 CPUs: two whole cores
        ("threads", 2, 1, "block:block:block", ((0,), (1,))),
        ("threads", 2, 1, "block:block:cyclic", ((0,), (2,))),  # first thread of each core
        ("threads", 2, 2, "block:fcyclic:block", ((0, 4), (1, 5))),
        ("sockets", 2, 1, "", ((0, 1, 2, 3), (4, 5, 6, 7))),
        ("ldoms", 2, 1, "block:block", ((0, 1, 2, 3), (0, 1, 2, 3))),
        ("rank", 3, 1, "", ((0,), (1,), (2,))),
        ("map_cpu:5,2", 3, 1, "", ((5,), (2,), (5,))),
        ("mask_cpu:0x3,0xc0", 2, 1, "", ((0, 1), (6, 7))),
        ("cores", 5, 1, "block:block", ((0, 1), (2, 3), (4, 5), (6, 7), (0, 1))),  # over: again
    ],
)
def test_each_task_gets_its_own_cpus(
    text: str, tasks: int, cpt: int, distribution: str, expected: tuple[tuple[int, ...], ...]
) -> None:
    d = dist(distribution) if distribution else BLOCK
    assert bound(text, tasks, cpt, d) == expected


def test_binding_stays_within_the_jobs_cpus() -> None:
    assert bound("cores", 2, cpus=(2, 3, 6, 7)) == ((2, 3), (6, 7))
    assert bound("sockets", 1, cpus=(2, 3, 6)) == ((2, 3),)
    assert cpubind.fits(parse("map_cpu:2,3"), (2, 3), 2)
    assert not cpubind.fits(parse("map_cpu:2,9"), (2, 3), 2)
    assert not cpubind.fits(parse("mask_cpu:0x3"), (2, 3), 1)


def test_the_variables_say_each_tasks_mask() -> None:
    masks = cpu_bind_environment("verbose,cores", ((0, 1), (4, 5)))
    assert masks == {
        "SLURM_CPU_BIND": "verbose,mask_cpu:0x3,0x30",
        "SLURM_CPU_BIND_VERBOSE": "verbose",
        "SLURM_CPU_BIND_TYPE": "mask_cpu:",
        "SLURM_CPU_BIND_LIST": "0x3,0x30",
    }
    assert cpu_bind_environment("", ())["SLURM_CPU_BIND"] == "quiet,none"
    assert cpu_bind_environment("", ())["SLURM_CPU_BIND_TYPE"] == "none"


def test_gpu_bind_closest_follows_each_tasks_socket() -> None:
    """GPU 0 near socket 0's CPUs, GPU 1 near socket 1's: a task bound to socket 1's
    cores sees GPU 1 alone, where the job's CPUs would reach both."""
    near = {0: (0, 1, 2, 3), 1: (4, 5, 6, 7)}
    tasks = bound("cores", 2)
    assert gpubind.task_gpus("closest", (0, 1), 2, near, ALL, tasks) == ((0,), (1,))
    assert gpubind.task_gpus("closest", (0, 1), 2, near, ALL) == ((0, 1), (0, 1))
