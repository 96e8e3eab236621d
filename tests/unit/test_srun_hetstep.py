"""srun --het-group and ``:``: the components a step runs in, and Slurm 22.05's
refusals (each checked against real Slurm's srun)."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.hetstep import groups, inherited, job_of, split
from cli.srun.launch import srun

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


def test_a_spanning_step_needs_a_heterogeneous_allocation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # An ordinary job's (22.05 would run it); outside a job srun makes one (integration).
    for name in ("SLURM_JOBID", "SLURM_HET_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert srun(["-n1", "true", ":", "-n2", "true"]) == 1
    assert capsys.readouterr().err == (
        "srun: error: srun ... : ...: a step spanning several components needs a "
        "heterogeneous job allocation\n"
    )
