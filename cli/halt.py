"""Early ends of squeue, sinfo and scancel, with Slurm's exact stderr lines.

These commands stop before contacting the controller when an option is bad,
and Slurm words each such message its own way (``squeue: error: ...``,
``Unknown job signal: ...`` with no prefix, two-line hints), so a halt
carries its complete lines and exit status rather than one message.
"""

from __future__ import annotations

import sys


class Halt(Exception):
    """End the command with ``status`` after printing ``lines`` on stderr."""

    def __init__(self, status: int, *lines: str) -> None:
        super().__init__(status)
        self.status = status
        self.lines = lines

    def report(self) -> int:
        """Print the lines and return the exit status."""
        for text in self.lines:
            print(text, file=sys.stderr)
        return self.status
