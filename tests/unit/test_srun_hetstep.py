"""srun --het-group: the component a step runs in, and Slurm 22.05's refusals (each
checked against real Slurm's srun)."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.hetstep import groups, job_of

ENV = {"SLURM_HET_SIZE": "2", "SLURM_JOB_ID_HET_GROUP_0": "7", "SLURM_JOB_ID_HET_GROUP_1": "8"}
NONE = "srun: error: No directives to start application on any available hetjob components"


def test_a_group_names_its_component_job() -> None:
    assert job_of("1", "7", ENV) == "8"
    assert job_of("0", "7", ENV) == "7"


def test_indexes() -> None:
    assert groups("0,2-3") == [0, 2, 3]


@pytest.mark.parametrize(
    ("text", "env", "lines"),
    [
        (
            "x",
            ENV,
            (
                "srun: error: _parse_single_range: Invalid range: `x'",
                "srun: error: Invalid --het-group value: x",
            ),
        ),
        (
            "2",
            ENV,
            ("srun: error: Requested het-group offset exceeds highest hetjob index (2 > 1)",),
        ),
        (
            "1",
            {},
            ("srun: error: Requested het-group offset exceeds highest hetjob index (1 > 0)",),
        ),
        ("0", {}, (NONE,)),
        ("0,0", {}, (NONE,)),
        ("1,1", ENV, ("srun: error: Duplicate het groups in single srun not supported",)),
        (
            "0,1",
            ENV,
            (
                "srun: error: --het-group=0,1: a step spanning several heterogeneous job "
                "components is not supported",
            ),
        ),
    ],
)
def test_refusals(text: str, env: dict[str, str], lines: tuple[str, ...]) -> None:
    with pytest.raises(Halt) as caught:
        job_of(text, "7", env)
    assert (caught.value.status, caught.value.lines) == (1, lines)
