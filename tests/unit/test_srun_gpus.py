"""srun's GPU options: its command line, else the variables its job set (srun(1)'s
input environment), checked and sent in the step request."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun import gpuinput, step_options


def test_the_jobs_variables_are_srun_options_the_command_line_leaves_open() -> None:
    env = {
        "SLURM_GPUS": "a100:3",
        "SLURM_GPUS_PER_TASK": "1",
        "SLURM_GPU_BIND": "closest",
        "SLURM_NTASKS_PER_GPU": "2",
        "SLURM_CPUS_PER_GPU": "4",
        "SLURM_MEM_PER_GPU": "100",
        "SLURM_GPUS_PER_SOCKET": "1",  # not one of srun's input variables
    }
    options: dict[str, str | None] = {"gpus": "2"}
    gpuinput.inherit(options, env)
    assert options == {
        "gpus": "2",
        "gpus-per-task": "1",
        "gpu-bind": "closest",
        "ntasks-per-gpu": "2",
        "cpus-per-gpu": "4",
        "mem-per-gpu": "100",
    }
    given: dict[str, str | None] = {"mem": "1G"}
    gpuinput.inherit(given, {"SLURM_MEM_PER_GPU": "100"})
    assert given == {"mem": "1G"}  # a memory option given leaves the job's alone


def test_a_steps_gpu_request_and_binding() -> None:
    fields = gpuinput.step_fields(
        {"gpus": "a100:3", "gres": "gpu:2", "gpu-bind": "map_gpu:0,1", "cpus-per-gpu": "2"}
    )
    assert fields == {"gpus": 3, "gpus_per_node": 2, "gpu_bind": "map_gpu:0,1", "cpus_per_gpu": 2}
    with pytest.raises(Halt) as caught:
        gpuinput.step_fields({"gpu-bind": "foo"})
    assert caught.value.lines == ("srun: error: Invalid --gpu-bind argument: gpu:foo",)


def test_job_only_gpu_options_in_a_step() -> None:
    warnings = step_options.check({"gres-flags": "enforce-binding"}, 7, {})
    assert warnings == [
        "srun: warning: --gres-flags=enforce-binding has no effect in a job step: it applies "
        "to the job's allocation"
    ]
    with pytest.raises(Halt) as caught:
        step_options.check({"gpus-per-socket": "1"}, 7, {})
    assert caught.value.lines == ("srun: error: --gpus-per-socket is not supported in a job step",)


def test_a_list_of_gpu_types_asks_them_all() -> None:
    """``sbatch --gpus-per-node=a100:1,v100:1`` tells its steps SLURM_GPUS_PER_NODE as
    given: a step asks both GPUs, as Slurm's (a step takes the job's, of any type)."""
    fields = gpuinput.step_fields({"gpus-per-node": "a100:1,v100:1"})
    assert fields == {"gpus_per_node": 2}
    with pytest.raises(Halt):
        gpuinput.step_fields({"gpus-per-node": "a100:1,v100:x"})


def test_a_type_named_again_counts_once() -> None:
    """Slurm 22.05: a step of ``sbatch --gpus=1,2`` (SLURM_GPUS=1,2 read back) gets two
    GPUs, 0 and 1, the last count of the one type, as the job did."""
    assert gpuinput.step_fields({"gpus": "1,2"}) == {"gpus": 2}
    assert gpuinput.step_fields({"gpus": "a100:1,v100:1,a100:2"}) == {"gpus": 3}
