"""srun's exit status from its tasks' wait statuses, as Slurm's srun picks it."""

from __future__ import annotations

import pytest

from cli.srun import exit_code


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
