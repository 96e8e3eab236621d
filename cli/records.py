"""The layout of scontrol's ``Key=Value`` records.

A record is a list of lines of ``Key=Value`` tokens. scontrol prints the lines
joined by a newline and three spaces, and ends the record with a blank line;
with ``-o`` the lines are joined by single spaces and the record ends with
its newline. Job records put one more separator after their last line, which
is why ``show job`` output has a line of three spaces before the blank line
(and ``-o`` a trailing space). Tools split on these, so they are kept exactly.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence

CONTINUATION = "\n   "


def join(lines: Sequence[str], oneliner: bool, *, trailing: bool = False) -> str:
    """One record as scontrol prints it."""
    separator = " " if oneliner else CONTINUATION
    text = separator.join(lines)
    if trailing:
        text += separator
    return text + ("\n" if oneliner else "\n\n")


def null(text: object) -> str:
    """An unset value as scontrol prints it: C's rendering of a NULL string."""
    return str(text) if text else "(null)"
