"""srun's --cpu-bind and --open-mode: each value Slurm documents is done, warned
about, or refused; none is accepted and ignored."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.values import cpu_bind, open_mode_append


@pytest.mark.parametrize(
    ("value", "none"),
    [("", False), ("q", False), ("quiet", False), ("none", True), ("quiet,none", True),
     ("NO", True), ("cores", False), ("verbose,map_cpu:0,1", False), ("mask_cpu:0x3,c", False),
     ("rank", False), ("sockets", False), ("ldoms", False), ("threads", False)],
)  # fmt: skip
def test_cpu_bind_values_slurm_documents_are_taken(value: str, none: bool) -> None:
    assert cpu_bind("srun", value) == (value, none)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("sideways", 'srun: error: unrecognized --cpu-bind argument "sideways"'),
        ("map_cpu", 'srun: error: missing list for "--cpu-bind=map_cpu:<list>"'),
        ("map_cpu:x", "srun: error: Failed to validate number: x, the offending character is x"),
        ("mask_cpu:zz", "srun: error: Failed to validate number: zz, the offending character is z"),
    ],
)
def test_cpu_bind_nonsense_is_refused_in_slurms_words(value: str, error: str) -> None:
    with pytest.raises(Halt) as invalid:
        cpu_bind("srun", value)
    assert invalid.value.lines == (error, "srun: fatal: Failed to parse --cpu-bind= values.")


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
