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


def test_ntasks_per_core_and_socket_cap_each_nodes_tasks() -> None:
    """A job holding CPUs 0-3 (cores 0 and 1 of socket 0) and 4-5 (core 2, socket 1)
    on each of two nodes: at most N tasks per core (socket) there."""
    from dataclasses import replace

    from controller.jobstate import JobState
    from controller.steps import StepRequest, layout
    from corral import errors
    from corral.errors import SlurmError
    from tests.unit.scenario import NOW, job

    running = replace(
        job(1, num_tasks=2), state=JobState.RUNNING, start_time=NOW, nodes=("a", "b"),
        cpus=(6, 6), cpu_ids=((0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 4, 5)),
    )  # fmt: skip

    def shape(node: str) -> cpubind.Shape:
        return SHAPE

    per_core = StepRequest(ntasks=6, ntasks_per_core=1)
    assert layout(running, per_core, shape) == (("a", "b"), (3, 3))
    per_socket = StepRequest(ntasks=4, ntasks_per_socket=1, min_nodes=2)
    assert layout(running, per_socket, shape) == (("a", "b"), (2, 2))
    with pytest.raises(SlurmError) as caught:
        layout(running, StepRequest(ntasks=5, ntasks_per_socket=1), shape)
    assert caught.value.code == errors.ESLURM_TOO_MANY_REQUESTED_CPUS


def test_hint_is_a_binding_and_yields_to_cpu_bind(capsys: pytest.CaptureFixture[str]) -> None:
    from cli.halt import Halt
    from cli.srun import placement

    assert placement.hint({"hint": "compute_bound"}, {}, "") == {"cpu_bind": "cores"}
    assert placement.hint({}, {"SLURM_HINT": "nomultithread"}, "verbose") == {
        "cpu_bind": "verbose,threads"
    }
    assert placement.hint({"hint": "multithread"}, {}, "") == {
        "cpu_bind": "threads",
        "distribution": "*:*:block",
    }
    assert placement.hint({"hint": "memory_bound"}, {}, "none") == {}
    assert capsys.readouterr().err == ""  # Slurm 22.05's srun says so only under -v
    from cli.sbatch.hintopts import DROPPED

    for key in ("threads-per-core", "ntasks-per-core"):
        assert placement.hint({"hint": "nomultithread", key: "1", "verbose": None}, {}, "") == {}
        assert capsys.readouterr().err == f"srun: {DROPPED}\n"
    with pytest.raises(Halt) as caught:
        placement.hint({"hint": "fast"}, {}, "")
    assert caught.value.lines == (
        'srun: error: unrecognized --hint argument "fast", see --hint=help',
    )


def test_the_verbose_report_is_task_affinitys_line() -> None:
    """Written by the task itself before exec: its own affinity, in hex."""
    import os

    from nodeagent.runner import Task
    from nodeagent.spool import StepSpec
    from nodeagent.steprunner import cpu_bind_line

    mask = f"{sum(1 << cpu for cpu in os.sched_getaffinity(0)):x}"
    pid = os.getpid()
    spec = StepSpec(job_id=1, step_id=0, node="n1", uid=0, gid=0, user="u", cpu_kind="cores")
    assert cpu_bind_line(spec, Task(1, 12), True) == (
        f"cpu-bind-cores=MASK - n1, task 12  1 [{pid}]: mask 0x{mask} set\n"
    )
    mapped = StepSpec(job_id=1, step_id=0, node="n1", uid=0, gid=0, user="u", cpu_kind="map_cpu")
    assert cpu_bind_line(mapped, Task(0, 0), True).startswith("cpu-bind=MAP  - n1, task  0  0 [")
    assert cpu_bind_line(spec, Task(0, 0), False).endswith(f"mask 0x{mask}\n")  # NONE: no "set"
