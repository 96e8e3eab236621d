"""Job steps in the controller: where srun's tasks go, and how a step ends."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import steps
from controller.jobstate import JobState
from controller.model import Job, Step
from controller.steps import StepRequest, layout, new_step, node_done
from corral import errors
from corral.errors import SlurmError
from tests.unit.scenario import NOW, job

#: A running job: 4 tasks on n1..n3 with 4, 2 and 2 CPUs.
JOB = replace(
    job(1, num_tasks=4),
    state=JobState.RUNNING,
    nodes=("n1", "n2", "n3"),
    cpus=(4, 2, 2),
    start_time=NOW,
)


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (StepRequest(), (("n1", "n2", "n3"), (2, 1, 1))),  # the job's own task slots
        (StepRequest(ntasks=1), (("n1",), (1,))),
        # Slurm's block: dealt a round at a time over every node with room, then
        # numbered node by node; a step without -N spreads over the job's nodes
        (StepRequest(ntasks=5), (("n1", "n2", "n3"), (2, 2, 1))),
        (StepRequest(ntasks=7), (("n1", "n2", "n3"), (3, 2, 2))),
        (StepRequest(ntasks=2), (("n1", "n2"), (1, 1))),
        (StepRequest(min_nodes=2, ntasks=3), (("n1", "n2"), (2, 1))),
        (StepRequest(min_nodes=3), (("n1", "n2", "n3"), (1, 1, 1))),  # one per node
        (StepRequest(ntasks_per_node=2), (("n1", "n2", "n3"), (2, 2, 2))),
        (StepRequest(nodelist=("n2",), ntasks=2), (("n2",), (2,))),
        (StepRequest(exclude=("n1",), ntasks=3), (("n2", "n3"), (2, 1))),
        (StepRequest(ntasks=3, cpus_per_task=2), (("n1", "n2", "n3"), (1, 1, 1))),
        (StepRequest(ntasks=4, cpus_per_task=2), (("n1", "n2", "n3"), (2, 1, 1))),
        (StepRequest(ntasks=20, overcommit=True), (("n1", "n2", "n3"), (7, 7, 6))),
        (StepRequest(ntasks=6, distribution="block,Pack"), (("n1", "n2", "n3"), (4, 1, 1))),
        (StepRequest(ntasks=3, relative=1), (("n2", "n3"), (2, 1))),
    ],
)
def test_tasks_go_to_nodes_in_block_order(
    request_: StepRequest, expected: tuple[tuple[str, ...], tuple[int, ...]]
) -> None:
    assert layout(JOB, request_) == expected


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (StepRequest(ntasks=9), errors.ESLURM_TOO_MANY_REQUESTED_CPUS),
        (
            StepRequest(ntasks=2, cpus_per_task=3, min_nodes=2),
            errors.ESLURM_TOO_MANY_REQUESTED_CPUS,
        ),
        (StepRequest(nodelist=("n9",)), errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
        (StepRequest(min_nodes=4), errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE),
    ],
)
def test_steps_the_allocation_cannot_hold_are_refused(request_: StepRequest, code: int) -> None:
    with pytest.raises(SlurmError) as caught:
        layout(JOB, request_)
    assert caught.value.code == code


def test_running_steps_hold_their_cpus_unless_one_overlaps() -> None:
    first = new_step(JOB, StepRequest(ntasks=6, exact=True), "a", NOW, -1, "")
    assert (first.nodes, first.cpus) == (("n1", "n2", "n3"), (2, 2, 2))
    busy = replace(JOB, steps=(first,))
    assert layout(busy, StepRequest(ntasks=2)) == (("n1",), (2,))
    with pytest.raises(SlurmError) as caught:
        layout(busy, StepRequest(ntasks=3))
    assert caught.value.code == errors.ESLURM_NODES_BUSY  # srun waits and retries
    assert layout(busy, StepRequest(ntasks=4, overlap=True)) == (("n1", "n2", "n3"), (2, 1, 1))
    done = replace(first, state="COMPLETED")
    assert layout(replace(busy, steps=(done,)), StepRequest(ntasks=5))[1] == (2, 2, 1)


def test_a_step_without_exact_has_all_the_cpus_other_steps_leave() -> None:
    """srun(1) since Slurm 21.08: "By default, all non-GRES resources on each node in
    the step allocation will be used", so a second step waits for the first unless
    one of them asks --exact (-c and --exclusive imply it) or --overlap."""
    whole = new_step(JOB, StepRequest(ntasks=1), "a", NOW, -1, "")
    assert (whole.nodes, whole.cpus) == (("n1",), (4,))
    second = new_step(replace(JOB, steps=(whole,)), StepRequest(ntasks=1), "b", NOW, -1, "")
    assert (second.nodes, second.cpus) == (("n2",), (2,))  # the next node with room
    with pytest.raises(SlurmError) as caught:
        new_step(replace(JOB, steps=(whole,)), StepRequest(nodelist=("n1",)), "b", NOW, -1, "")
    assert caught.value.code == errors.ESLURM_NODES_BUSY  # srun waits and retries
    exact = new_step(JOB, StepRequest(ntasks=1, exact=True), "c", NOW, -1, "")
    assert exact.cpus == (1,)
    rest = new_step(replace(JOB, steps=(exact,)), StepRequest(ntasks=2), "d", NOW, -1, "")
    assert (rest.nodes, rest.cpus) == (("n1", "n2"), (3, 2))  # what the exact one left
    shared = StepRequest(ntasks=1, overlap=True)
    assert new_step(replace(JOB, steps=(whole,)), shared, "e", NOW, -1, "").cpus == (4,)


def test_a_step_ends_once_every_node_reported_with_the_worst_status() -> None:
    step = Step(0, "x", ("n1", "n2"), (1, 1), (1, 1), NOW)
    half = node_done(step, "n1", [0], (100, 5, 1), NOW + 3)
    assert half.running and half.usage == (100, 5, 1)
    assert node_done(half, "n1", [9], (0, 0, 0), NOW + 4) == half  # reported twice: once
    ended = node_done(half, "n2", [3 << 8], (200, 5, 1), NOW + 5)
    assert (ended.state, ended.exit_status, ended.end_time) == ("FAILED", 3 << 8, NOW + 5)
    assert ended.usage == (200, 10, 2)
    killed = node_done(node_done(step, "n1", [9], (0, 0, 0), NOW), "n2", [0], (0, 0, 0), NOW)
    assert killed.state == "CANCELLED"
    ok = node_done(node_done(step, "n1", [0], (0, 0, 0), NOW), "n2", [0], (0, 0, 0), NOW)
    assert ok.state == "COMPLETED"


def test_a_step_with_an_oom_kill_on_any_node_ends_out_of_memory() -> None:
    step = Step(0, "x", ("n1", "n2"), (1, 1), (1, 1), NOW)
    half = node_done(step, "n1", [9], (0, 0, 0), NOW, oom_kills=2)
    assert half.running and half.oom_kills == 2
    ended = node_done(half, "n2", [0], (0, 0, 0), NOW + 1)
    assert (ended.state, ended.oom_kills, ended.end_time) == ("OUT_OF_MEMORY", 2, NOW + 1)


def test_steps_end_with_their_job_and_srun_codes() -> None:
    running = Step(0, "x", ("n1",), (1,), (1,), NOW)
    over = replace(JOB, state=JobState.TIMEOUT, steps=(running,))
    assert [s.state for s in steps.ended_with_job(over, NOW + 9)] == ["TIMEOUT"]
    # Slurm's precedence: any signal over any exit code, a task that never ran lowest.
    ranked = sorted([200 << 8, 15, 9, 3 << 8, -1], key=steps.severity)
    assert ranked == [-1, 3 << 8, 200 << 8, 9, 15]
    step = Step(0, "x", ("n1", "n2"), (1, 1), (1, 1), NOW)
    both = node_done(node_done(step, "n1", [200 << 8], (0, 0, 0), NOW), "n2", [15], (0, 0, 0), NOW)
    assert both.exit_status == 15  # as srun reports it: 128 + 15, not 200


def test_a_steps_environment_describes_it() -> None:
    step = new_step(JOB, StepRequest(min_nodes=2, ntasks=3), "x", NOW, -1, "")
    env = steps.step_environment(JOB, step, {"HOME": "/root"})
    assert env["HOME"] == "/root"
    assert env["SLURM_STEP_NODELIST"] == "n[1-2]"
    assert env["SLURM_STEP_TASKS_PER_NODE"] == "2,1"
    assert env["SLURM_STEP_NUM_TASKS"] == env["SLURM_NTASKS"] == "3"
    assert env["SLURM_JOB_NODELIST"] == "n[1-3]"


def test_a_report_after_the_job_ended_gives_the_step_its_real_end() -> None:
    """srun's exit can end the batch script before its node's report arrives."""
    step = Step(0, "x", ("n1",), (1,), (1,), NOW)
    over = replace(JOB, state=JobState.FAILED, steps=(step,))
    (ended,) = steps.ended_with_job(over, NOW + 5)
    assert ended.state == "CANCELLED"
    late = node_done(ended, "n1", [4 << 8], (10, 1, 1), NOW + 4)
    assert (late.state, late.exit_status, late.end_time) == ("FAILED", 4 << 8, NOW + 5)
    killed = node_done(ended, "n1", [15], (10, 1, 1), NOW + 4)
    assert killed.state == "CANCELLED"  # killed with its job: the job's word stands


def test_steps_take_some_of_the_jobs_gpus_and_not_each_others() -> None:
    gpus = replace(JOB, gpus=((0, 1, 2, 3), (4, 5), ()))
    req = StepRequest(ntasks=1, gpus=2)
    assert steps.step_gpus(gpus, req, ("n1",), (1,)) == ((0, 1),)
    first = replace(new_step(gpus, req, "a", NOW, -1, ""), gpus=((0, 1),))
    busy = replace(gpus, steps=(first,))
    assert steps.step_gpus(busy, req, ("n1",), (1,)) == ((2, 3),)
    per_task = StepRequest(ntasks=3, gpus_per_task=1)
    assert steps.step_gpus(gpus, per_task, ("n1", "n2"), (2, 1)) == ((0, 1), (4,))
    with pytest.raises(SlurmError) as caught:
        steps.step_gpus(busy, StepRequest(gpus=3), ("n1",), (1,))
    assert caught.value.code == errors.ESLURM_NODES_BUSY  # the job has them: srun waits
    with pytest.raises(SlurmError) as caught:
        steps.step_gpus(gpus, StepRequest(gpus=5), ("n1",), (1,))
    assert caught.value.code == errors.ESLURM_INVALID_GRES


def test_a_gpu_total_below_the_steps_node_count_is_refused_in_slurms_words() -> None:
    """A plain srun in ``sbatch --gpus=1 -n10`` (8 + 2 CPUs, the GPU on the second node)
    reads SLURM_GPUS=1 and runs on both nodes: Slurm 22.05 refused it, "Step requested
    gres=gpu:1 is less than the requested min nodes=2" before the errno's words. A step
    on the GPU's node alone gets it here, where Slurm 22.05 refused every GPU step of
    that job (``srun -w n2 -N1 -n1 --gpus=1`` too: "Invalid generic resource (gres)
    specification"), a defect not copied."""
    one = replace(JOB, nodes=("n1", "n2"), gpus=((), (0,)))
    with pytest.raises(SlurmError) as caught:
        steps.step_gpus(one, StepRequest(ntasks=10, gpus=1), ("n1", "n2"), (8, 2))
    assert (caught.value.code, caught.value.detail) == (
        errors.ESLURM_INVALID_GRES,
        "Step requested gres=gpu:1 is less than the requested min nodes=2",
    )
    assert steps.step_gpus(one, StepRequest(ntasks=1, gpus=1), ("n2",), (1,)) == ((0,),)


def test_a_step_takes_the_jobs_free_gpus_with_most_nvlink_between_them() -> None:
    """As a job's start does (core/gpulinks.py): of the job's GPUs 0-3 where only 1-2
    and 2-3 are linked (1-2 with more lanes), two are 1 and 2, and with 2 held by
    another step, 0 and 1 (no link left among the free: the lowest)."""
    gpus = replace(JOB, gpus=((0, 1, 2, 3), (4, 5), ()))
    lanes = {1: {2: 4}, 2: {1: 4, 3: 2}, 3: {2: 2}}

    def links(node: str) -> dict[int, dict[int, int]]:
        return lanes if node == "n1" else {}

    req = StepRequest(ntasks=1, gpus=2)
    assert steps.step_gpus(gpus, req, ("n1",), (1,), links) == ((1, 2),)
    assert steps.step_gpus(gpus, req, ("n1",), (1,)) == ((0, 1),)  # no links known
    other = replace(new_step(gpus, StepRequest(ntasks=1, gpus=1), "a", NOW, -1, ""), gpus=((2,),))
    busy = replace(gpus, steps=(other,))
    assert steps.step_gpus(busy, req, ("n1",), (1,), links) == ((0, 1),)


def test_a_steps_own_memory_is_held_within_the_jobs() -> None:
    """srun --mem (per node), --mem-per-cpu (times its CPUs there), --mem-per-gpu (times
    its GPUs): more than the job has on a node is refused, more than the job's other
    steps leave waits, none asked is the job's memory and holds nothing."""
    mem = replace(JOB, alloc_mem=(1000, 500, 500), gpus=((0, 1), (2,), (3,)))
    assert new_step(mem, StepRequest(ntasks=1), "a", NOW, -1, "").mem == ()
    per_cpu = new_step(mem, StepRequest(ntasks=5, mem_per_cpu=100, exact=True), "b", NOW, -1, "")
    assert (per_cpu.cpus, per_cpu.mem) == ((2, 2, 1), (200, 200, 100))
    every_cpu = new_step(mem, StepRequest(ntasks=5, mem_per_cpu=100), "b", NOW, -1, "")
    assert (every_cpu.cpus, every_cpu.mem) == ((4, 2, 2), (400, 200, 200))
    per_gpu = new_step(mem, StepRequest(ntasks=1, mem_per_gpu=300), "c", NOW, -1, "")
    assert per_gpu.mem == (600,)  # both of the job's GPUs on n1

    def refused(job: Job, req: StepRequest) -> int:
        with pytest.raises(SlurmError) as caught:
            new_step(job, req, "x", NOW, -1, "")
        return caught.value.code

    assert refused(mem, StepRequest(ntasks=6, mem_per_node=600)) == (
        errors.ESLURM_INVALID_TASK_MEMORY  # n2 has 500
    )
    assert errors.MESSAGES[errors.ESLURM_INVALID_TASK_MEMORY] == (
        "Memory required by task is not available"
    )
    held = new_step(mem, StepRequest(ntasks=1, mem_per_node=700, exact=True), "a", NOW, -1, "")
    busy = replace(mem, steps=(held,))
    assert held.mem == (700,)
    assert refused(busy, StepRequest(ntasks=1, mem_per_node=400)) == errors.ESLURM_NODES_BUSY
    exact = StepRequest(ntasks=1, mem_per_node=300, exact=True)
    assert new_step(busy, exact, "b", NOW, -1, "").mem == (300,)
    assert new_step(busy, StepRequest(ntasks=1, exact=True), "b", NOW, -1, "").mem == ()
    overlap = StepRequest(ntasks=1, mem_per_node=400, overlap=True)
    assert new_step(busy, overlap, "b", NOW, -1, "").mem == (400,)
    unlimited = replace(JOB, alloc_mem=(0, 0, 0))  # no memory of its own: only the limit
    assert new_step(unlimited, StepRequest(ntasks=1, mem_per_node=9999), "a", NOW, -1, "").mem == (
        9999,
    )


def test_a_steps_cpus_follow_its_gpus_within_the_jobs() -> None:
    gpu_job = replace(
        JOB, nodes=("n1",), cpus=(8,), gpus=((0, 1, 2, 3),), num_tasks=2, cpus_per_gpu=2
    )
    # srun in ``sbatch --gpus=4 -n2 --cpus-per-gpu=2`` (SLURM_CPUS_PER_GPU=2): 4 x 2 CPUs.
    step = new_step(gpu_job, StepRequest(ntasks=2, cpus_per_gpu=2), "s", NOW, -1, "")
    assert step.cpus == (8,)
    one = StepRequest(ntasks=1, gpus=1, cpus_per_gpu=1, exact=True)
    assert new_step(gpu_job, one, "s", NOW, -1, "").cpus == (1,)
    assert new_step(gpu_job, replace(one, exact=False), "s", NOW, -1, "").cpus == (8,)
    # Slurm: "Step requested cpus_per_gres=3 is more than the job's cpu_per_gres=2".
    with pytest.raises(SlurmError) as caught:
        new_step(gpu_job, StepRequest(ntasks=2, cpus_per_gpu=3), "s", NOW, -1, "")
    assert caught.value.code == errors.ESLURM_INVALID_GRES


def test_a_steps_task_ids_follow_its_distribution_and_survive_the_journal() -> None:
    from controller import journal

    cyclic = new_step(JOB, StepRequest(ntasks=5, distribution="cyclic"), "c", NOW, -1, "")
    assert (cyclic.tasks, cyclic.ids) == ((2, 2, 1), ((0, 3), (1, 4), (2,)))
    block = new_step(JOB, StepRequest(ntasks=5), "b", NOW, -1, "")
    assert block.task_ids == () and block.ids == ((0, 1), (2, 3), (4,))  # block: not stored
    plane = new_step(JOB, StepRequest(ntasks=6, distribution="plane=2"), "p", NOW, -1, "")
    assert plane.ids == ((0, 1), (2, 3), (4, 5))
    placed = ("n3", "n1", "n3")
    arbitrary = StepRequest(ntasks=3, distribution="arbitrary", task_nodes=placed)
    step = new_step(JOB, arbitrary, "a", NOW, -1, "")
    assert (step.nodes, step.ids) == (("n1", "n3"), ((1,), (0, 2)))
    with pytest.raises(SlurmError) as caught:
        layout(JOB, StepRequest(distribution="arbitrary", task_nodes=("n2",) * 3))
    assert caught.value.code == errors.ESLURM_TOO_MANY_REQUESTED_CPUS  # n2 has 2 CPUs
    with pytest.raises(SlurmError) as caught:
        layout(JOB, StepRequest(ntasks=2, distribution="diagonal"))
    assert caught.value.code == errors.ESLURM_BAD_DIST
    again = journal.job_from_row(journal.job_to_row(replace(JOB, steps=(cyclic,))))
    assert again.steps[0].ids == cyclic.ids
