"""srun --het-group and ``:``: the components a step runs in, and Slurm 22.05's
refusals (each checked against real Slurm's srun)."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.hetstep import groups, inherited, job_of, node_spans, split

ENV = {"SLURM_HET_SIZE": "2", "SLURM_JOB_ID_HET_GROUP_0": "7", "SLURM_JOB_ID_HET_GROUP_1": "8"}
NONE = "srun: error: No directives to start application on any available hetjob components"


def test_a_group_names_its_component_job() -> None:
    assert job_of("1", "7", ENV) == ["8"]
    assert job_of("0", "7", ENV) == ["7"]
    assert job_of("0-1", "7", ENV) == ["7", "8"]  # a step spanning both


def test_colon_groups_and_what_carries_to_the_next() -> None:
    assert split(["-l", "-n1", "a", ":", "-n2", "b", "x"]) == [
        ["-l", "-n1", "a"],
        ["-n2", "b", "x"],
    ]
    assert split(["a"]) == [["a"]]
    # -l and -J carry on, as Slurm propagates them between components; -n does not.
    assert inherited({"label": None, "ntasks": "2", "job-name": "j"}) == {
        "label": None,
        "job-name": "j",
    }


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
    ],
)
def test_refusals(text: str, env: dict[str, str], lines: tuple[str, ...]) -> None:
    with pytest.raises(Halt) as caught:
        job_of(text, "7", env)
    assert (caught.value.status, caught.value.lines) == (1, lines)


def test_each_group_in_an_ordinary_job_takes_the_next_nodes() -> None:
    assert node_spans([1, 1], 2) == [range(0, 1), range(1, 2)]
    assert node_spans([2], 3) == [range(0, 2)]
    with pytest.raises(Halt) as caught:  # as Slurm 22.05's srun words it
        node_spans([2, 1], 2)
    assert caught.value.lines == (
        "srun: error: Allocation failure of 1 nodes: job size of 2, already allocated 2 nodes "
        "to previous components.",
    )
