"""srun's --cpu-bind and --open-mode: each value Slurm documents is done, warned
about, or refused; none is accepted and ignored."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.values import cpu_bind_none, open_mode_append


@pytest.mark.parametrize(
    ("value", "none"),
    [("", False), ("q", False), ("quiet", False), ("none", True), ("quiet,none", True),
     ("NO", True)],
)  # fmt: skip
def test_cpu_bind_values_corral_does(value: str, none: bool) -> None:
    assert cpu_bind_none("srun", value) is none


@pytest.mark.parametrize(
    "value", ["cores", "threads", "sockets", "ldoms", "rank", "map_cpu:0,1", "mask_cpu:0x3"]
)
def test_cpu_bind_values_corral_does_not_are_refused(value: str) -> None:
    with pytest.raises(Halt) as refused:
        cpu_bind_none("srun", f"quiet,{value}")
    word = value.split(",")[0]
    assert refused.value.lines[0].startswith(
        f"srun: error: --cpu-bind={word} is not supported: tasks are bound to the job's CPUs"
    )


def test_cpu_bind_verbose_is_warned_about_and_nonsense_is_invalid(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cpu_bind_none("srun", "verbose,none") is True
    assert "srun: warning: --cpu-bind=verbose has no effect" in capsys.readouterr().err
    with pytest.raises(Halt) as invalid:
        cpu_bind_none("srun", "sideways")
    assert invalid.value.lines == ("srun: error: Invalid --cpu-bind argument: sideways",)


def test_open_mode_is_append_or_truncate() -> None:
    assert [open_mode_append("srun", v) for v in ("", "a", "Append", "t", "truncate")] == [
        False,
        True,
        True,
        False,
        False,
    ]
    with pytest.raises(Halt) as invalid:
        open_mode_append("srun", "overwrite")
    assert invalid.value.lines == ("srun: error: Invalid --open-mode specification",)
