"""Numbers as Slurm's clients scan them (C's strtol and its parse_int checks), for
sbatch's settings and the option parsers beside them (``-B``).

The numbers are scanned with string methods rather than ``re``, which with the
``enum`` it imports costs about 5 ms of every sbatch's start-up.
"""

from __future__ import annotations

from cli.failure import Failure

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
C_SPACE = " \t\n\v\f\r"
DIGITS = "0123456789"


def digit_run(text: str) -> str:
    """The ASCII digits ``text`` starts with (``[0-9]*``)."""
    return text[: len(text) - len(text.lstrip(DIGITS))]


def is_digits(text: str) -> bool:
    """``[0-9]+``: one or more ASCII digits and nothing else."""
    return text != "" and not text.strip(DIGITS)


def signed(text: str, spaces: str = "") -> tuple[str, str]:
    """(sign, rest) of ``text`` after leading ``spaces``: ``[spaces]*([+-]?)(.*)``."""
    body = text.lstrip(spaces)
    return (body[:1], body[1:]) if body[:1] in ("+", "-") else ("", body)


def is_integer(text: str, spaces: str = "") -> bool:
    """``[spaces]*[+-]?[0-9]+`` and nothing else."""
    return is_digits(signed(text, spaces)[1])


def strtol(text: str) -> int:
    """C's strtol: the leading integer of ``text``, 0 if there is none."""
    sign, rest = signed(text, C_SPACE)
    digits = digit_run(rest)
    return clamp(sign + digits) if digits else 0


def clamp(digits: str) -> int:
    """A signed decimal as C's strtol sees it: saturated at the 64-bit limits.

    Saturating first also keeps ``int()`` away from digit strings too long to convert.
    """
    magnitude = digits.strip(C_SPACE).lstrip("+-").lstrip("0") or "0"
    value = int(magnitude) if len(magnitude) <= 19 else LONG_MAX + 1
    value = -value if digits.strip(C_SPACE).startswith("-") else value
    return max(-LONG_MAX - 1, min(value, LONG_MAX))


def count(option: str, text: str) -> int:
    """A positive count, checked like Slurm's ``parse_int`` (message, exit 1)."""
    value = clamp(text) if is_integer(text, C_SPACE) else 0
    if value <= 0:
        raise Failure(f'Invalid numeric value "{text}" for {option}.', status=1)
    if value >= INT_MAX:
        raise Failure(f"Numeric argument ({value}) too large for {option}.", status=1)
    return value
