"""srun --het-group: the component a step runs in, and Slurm's refusals of bad values."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.hetstep import groups, job_of

ENV = {"SLURM_HET_SIZE": "2", "SLURM_JOB_ID_HET_GROUP_0": "7", "SLURM_JOB_ID_HET_GROUP_1": "8"}


def test_a_group_names_its_component_job() -> None:
    assert job_of("1", "7", ENV) == "8"
    assert job_of("0", "7", ENV) == "7"
    assert job_of("0", "5", {}) == "5"  # not heterogeneous: component 0 is the job


def test_indexes() -> None:
    assert groups("0,2-3") == [0, 2, 3]


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        ("x", ENV, "srun: fatal: Invalid --het-group value: x"),
        ("1-", ENV, "srun: fatal: Invalid --het-group value: 1-"),
        ("1,1", ENV, "srun: fatal: Duplicate het groups in single srun not supported"),
        (
            "2",
            ENV,
            "srun: fatal: Attempt to run a job step with het group value of 2, "
            "but the job allocation has maximum value of 1",
        ),
        (
            "1",
            {},
            "srun: fatal: Attempt to run a job step with het group value of 1, "
            "but the job allocation has maximum value of 0",
        ),
        (
            "0,1",
            ENV,
            "srun: fatal: --het-group=0,1: a step spanning several heterogeneous job "
            "components is not supported",
        ),
    ],
)
def test_refusals(text: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(Halt) as caught:
        job_of(text, "7", env)
    assert caught.value.lines == (message,)
