"""Errors a command reports itself, when the boundary's one-line form is not enough.

Slurm's clients print some errors over several lines (the ``#!`` hint of
sbatch), some as ``fatal:`` rather than ``error:``, and exit with different
statuses depending on where the error came from: ``exit(-1)`` (255) for a bad
option value, ``exit(1)`` for a bad number, ``SLURM_EXIT_ERROR`` (default 1)
for most others. ``Failure`` carries all three; the command catches it and
calls ``report``.
"""

from __future__ import annotations

import os
import sys

from cli.boundary import UsageError


class Failure(UsageError):
    """Lines to print as ``prog: <level>: <line>`` and the status to exit with.

    ``status`` ``None`` means Slurm's ``error_exit``: ``$SLURM_EXIT_ERROR`` or 1.
    """

    def __init__(self, *lines: str, status: int | None = None, level: str = "error") -> None:
        super().__init__(lines[0] if lines else "")
        self.lines = lines
        self.status = status
        self.level = level


class Refused(Failure):
    """A submission a client refuses before sending it, as Slurm's controller would,
    in the controller's ``reason``: sbatch prints it after "Batch job submission
    failed: ", salloc after "Job submit/allocate failed: ", srun after "Unable to
    allocate resources: " (``cli/allocation.py``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Batch job submission failed: {reason}", status=1)
        self.reason = reason


def error_exit() -> int:
    """The status Slurm's clients use for most failures: ``$SLURM_EXIT_ERROR`` or 1."""
    try:
        value = int(os.environ.get("SLURM_EXIT_ERROR", "1"))
    except ValueError:
        return 1
    return value or 1


def report(prog: str, failure: Failure) -> int:
    """Print ``failure`` on stderr and return the status to exit with."""
    for line in failure.lines:
        print(f"{prog}: {failure.level}: {line}", file=sys.stderr)
    return error_exit() if failure.status is None else failure.status
