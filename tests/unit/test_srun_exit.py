"""srun's exit status from its tasks' wait statuses, as Slurm's srun picks it, and
whether one task's bad exit ends the others (-K, slurm.conf's KillOnBadExit)."""

from __future__ import annotations

import pytest

from cli.halt import Halt
from cli.srun.launch import exit_code, kill_on_bad_exit, parse


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], 0),
        ([0, 0], 0),
        ([3 << 8, 1 << 8, 0], 3),  # the highest exit code
        ([200 << 8, 9], 137),  # a signal wins over a higher exit code
        ([9, 15, 2 << 8], 143),  # the highest signal, not the strongest
        ([0x8B], 139),  # a core dump flag does not count
    ],
)
def test_a_signal_wins_over_exit_codes(statuses: list[int], expected: int) -> None:
    assert exit_code(statuses) == expected


@pytest.mark.parametrize(
    ("options", "configured", "expected"),
    [
        ((), False, False),
        ((), True, True),  # KillOnBadExit=1
        (("-K",), False, True),
        (("--kill-on-bad-exit",), False, True),
        (("--kill-on-bad-exit=1",), False, True),
        (("-K0",), True, False),  # turns KillOnBadExit=1 off
        (("--kill-on-bad-exit=0",), True, False),
    ],
)
def test_kill_on_bad_exit_from_the_option_else_slurm_conf(
    options: tuple[str, ...], configured: bool, expected: bool
) -> None:
    assert kill_on_bad_exit(parse([*options, "true"]), configured) is expected


def test_kill_on_bad_exit_takes_0_or_1_only() -> None:
    """``-Kyes`` read as on here and as off by Slurm's strtol: refused instead."""
    with pytest.raises(Halt) as refused:
        kill_on_bad_exit(parse(["--kill-on-bad-exit=yes", "true"]), False)
    assert refused.value.lines == ("srun: error: Invalid --kill-on-bad-exit value: yes",)
