"""srun inside an allocation: each job option is honoured by the step, warned about
(Slurm ignores it for a step), or refused (the step cannot do what it asks); none
is dropped without a word."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.launch import TABLE, _memory_fields, parse
from cli.srun.step_options import check

JOB = {"SLURM_JOB_ID": "7", "SLURM_JOB_ACCOUNT": "physics", "SLURM_JOB_PARTITION": "debug",
       "SLURM_JOB_QOS": "normal"}  # fmt: skip


def refused(options: dict[str, str | None], env: dict[str, str] = JOB) -> str:
    with pytest.raises(Halt) as halt:
        check(options, 7, env)
    assert halt.value.status == 1
    (line,) = halt.value.lines
    return line


@pytest.mark.parametrize("key", ["mem", "mem-per-cpu", "mem-per-gpu"])
@pytest.mark.parametrize("value", ["1", "4G", "512M", "1K", "0"])
def test_a_step_memory_is_honoured(key: str, value: str) -> None:
    assert check({key: value}, 7, JOB) == []


@pytest.mark.parametrize(
    ("argv", "fields"),
    [
        (["--mem=4G"], {"mem_per_node": 4096}),
        (["--mem-per-cpu=100"], {"mem_per_cpu": 100}),
        (["--mem-per-gpu=1K"], {"mem_per_gpu": 1}),
        (["--mem=0"], {"mem_per_node": 0}),  # the job's memory
        ([], {}),
    ],
)
def test_a_step_memory_reaches_the_step_request(argv: list[str], fields: dict[str, int]) -> None:
    assert _memory_fields(parse([*argv, "true"])) == fields


def test_a_bad_memory_size_is_slurms_error() -> None:
    assert refused({"mem-per-cpu": "lots"}) == "srun: error: Invalid --mem-per-cpu specification"


@pytest.mark.parametrize("value", ["tmpdisk:10", "gpu:1,nic:1", "gres/bandwidth:fast:2", "nic"])
def test_a_non_gpu_gres_is_refused(value: str) -> None:
    assert refused({"gres": value}) == (
        f"srun: error: --gres={value} is not supported in a job step: "
        "only GPUs are divided among a job's steps"
    )


@pytest.mark.parametrize("value", ["gpu:2", "gres/gpu:1", "none", "nic:0", "gpu"])
def test_gpus_and_nothing_are_honoured_as_gres(value: str) -> None:
    assert check({"gres": value}, 7, JOB) == []


@pytest.mark.parametrize(
    ("key", "value"),
    [("gpus", "a100:2"), ("gpus-per-node", "h100:1"), ("gpus-per-task", "v100:1"),
     ("gres", "gpu:a100:1"), ("gres", "gpu:a100")],
)  # fmt: skip
def test_a_gpu_type_is_warned_about(key: str, value: str) -> None:
    """The step takes GPUs of the job's: of another type Slurm would refuse it."""
    assert check({key: value}, 7, JOB) == [
        f"srun: warning: the GPU type of --{key}={value} has no effect in a job step: "
        "it takes the job's GPUs, whatever their type"
    ]


@pytest.mark.parametrize(("key", "value"), [("gpus", "2"), ("gres", "gpu:1"), ("gres", "gpu")])
def test_a_gpu_count_alone_passes_without_a_word(key: str, value: str) -> None:
    assert check({key: value}, 7, JOB) == []


def test_plain_exclusive_is_a_steps_default() -> None:
    assert check({"exclusive": None}, 7, JOB) == []
    assert check({"exclusive": "exclusive"}, 7, JOB) == []


@pytest.mark.parametrize("value", ["user", "mcs", "topo", "oversubscribe", "USER"])
def test_job_level_exclusive_is_warned_about(value: str) -> None:
    assert check({"exclusive": value}, 7, JOB) == [
        f"srun: warning: --exclusive={value} has no effect in a job step: it applies to the "
        "job's nodes (the step's CPUs are its own unless --overlap)"
    ]


def test_an_unknown_exclusive_value_is_slurms_error() -> None:
    assert refused({"exclusive": "nodes"}) == "srun: error: Invalid --exclusive specification"


def test_the_jobs_own_account_partition_and_qos_pass_without_a_word() -> None:
    options: dict[str, str | None] = {"account": "physics", "partition": "batch,debug",
                                      "qos": "normal"}  # fmt: skip
    assert check(options, 7, JOB) == []


def test_another_account_partition_or_qos_is_warned_about_naming_the_jobs() -> None:
    options: dict[str, str | None] = {"account": "chem", "partition": "gpu", "qos": "high"}
    assert check(options, 7, JOB) == [
        "srun: warning: --account=chem has no effect in a job step: job 7's account "
        "(physics) applies",
        "srun: warning: --partition=gpu has no effect in a job step: job 7's partition "
        "(debug) applies",
        "srun: warning: --qos=high has no effect in a job step: job 7's qos (normal) applies",
    ]


def test_another_jobs_environment_tells_nothing_of_this_one() -> None:
    """``srun --jobid=9`` from inside job 7: job 7's partition says nothing of job 9's."""
    with_jobid = check({"partition": "debug"}, 9, JOB)
    assert with_jobid == [
        "srun: warning: --partition=debug has no effect in a job step: job 9's partition applies"
    ]


def test_every_option_srun_has_is_classified_for_a_step() -> None:
    """The options that shape a job say in srun's table what a step does with them."""
    for key in ("account", "partition", "qos", "mem", "mem-per-cpu", "mem-per-gpu", "gres",
                "exclusive", "gpus", "gpus-per-node", "gpus-per-task"):  # fmt: skip
        (option,) = [opt for opt in TABLE.options if opt.key == key]
        assert "job step" in option.note, key


OVERLAP = "srun: error: --exclusive and --overlap are mutually exclusive"


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--exclusive", "--overlap"], OVERLAP),
        (["--overlap", "--exclusive=user"], OVERLAP),
        (["--mem=0", "--mem-per-cpu=0"],
         "srun: fatal: --mem, --mem-per-cpu, and --mem-per-gpu are mutually exclusive."),
    ],
)  # fmt: skip
def test_options_that_contradict_each_other_stop_srun(argv: list[str], line: str) -> None:
    """--overlap used to win over --exclusive without a word; Slurm's srun refuses both."""
    with pytest.raises(Halt) as halt:
        parse([*argv, "true"])
    assert (halt.value.status, halt.value.lines) == (1, (line,))
