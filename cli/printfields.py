"""Slurm's ``print_fields``: the tables of sshare, sacct, sacctmgr and sreport.

Each value is printed in its column's width, right-justified for a positive
width and left-justified for a negative one, followed by a space; a text too
wide ends in ``+``, and numbers Slurm leaves unset print blank. With
``--parsable`` (``-p``) each value ends in ``|`` instead, and with
``--parsable2`` (``-P``) so does each but the last. Scripts split these
lines, so the rules are Slurm's to the character.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Sequence

#: print_fields' parsable modes.
NOT_PARSABLE, PARSABLE, PARSABLE2 = 0, 1, 2
#: What Slurm's unsigned printers leave blank (NO_VAL, INFINITE and their 64-bit forms).
_BLANK_DOUBLES = (float(0xFFFFFFFFFFFFFFFE), float(0xFFFFFFFFFFFFFFFF), 4294967294.0, 4294967295.0)


class Printer:
    """Slurm's ``print_fields`` for one report: padding, ``+`` cut marks, ``|`` forms."""

    __slots__ = ("parsable",)

    def __init__(self, parsable: int) -> None:
        self.parsable = parsable

    def _end(self, text: str, last: bool) -> str:
        if self.parsable == PARSABLE2 and last:
            return text
        return text + "|"

    def header(self, fields: Sequence[tuple[str, int, str]]) -> str:
        if self.parsable:
            names = [
                self._end(name, index == len(fields) - 1)
                for index, (name, _, _) in enumerate(fields)
            ]
            return "".join(names) + "\n"
        titles = "".join(_justify(name[: abs(width)], width) + " " for name, width, _ in fields)
        dashes = "".join("-" * abs(width) + " " for _, width, _ in fields)
        return titles + "\n" + dashes + "\n"

    def text(self, value: str | None, width: int, last: bool) -> str:
        """``print_fields_str``: None prints blank; a long value ends in ``+``."""
        if self.parsable:
            return self._end(value or "", last)
        size = abs(width)
        if value is None:
            shown = " "
        elif len(value) > size:
            shown = value[: size - 1] + "+" if size else ""
        else:
            shown = value
        return _justify(shown[:size], width) + " "

    def unsigned(self, value: int | None, width: int, last: bool) -> str:
        """``print_fields_uint32``/``uint64``: None (NO_VAL) prints blank."""
        if value is None:
            if self.parsable:
                return "" if self.parsable == PARSABLE2 and last else "|"
            return " " * abs(width) + " "
        if self.parsable:
            return self._end(str(value), last)
        return _justify(str(value), width) + " "

    def double(self, value: float | None, width: int, last: bool) -> str:
        """``print_fields_double``: ``%f``, or ``%e`` narrowed to fit the column."""
        if value is None or value in _BLANK_DOUBLES:
            if self.parsable:
                return "" if self.parsable == PARSABLE2 and last else "|"
            return " " * abs(width) + " "
        if self.parsable:
            return self._end(_c_float(value, "f"), last)
        size = abs(width)
        fixed = _c_float(value, "f").rjust(size)
        if len(fixed) <= size:
            return _justify(_c_float(value, "f"), width) + " "
        narrowed = size
        scientific = _c_float(value, "e", size).rjust(size)
        if len(scientific) > size:
            narrowed -= len(scientific) - size
        return _justify(_c_float(value, "e", max(narrowed, 0)), width, narrowed) + " "


def _justify(text: str, width: int, size: int | None = None) -> str:
    """``%*s`` with Slurm's sign convention: positive widths right-justify."""
    size = abs(width) if size is None else size
    return text.rjust(size) if width > 0 else text.ljust(size)


def _c_float(value: float, kind: str, precision: int = 6) -> str:
    """C's ``%f``/``%.*e`` (``inf``, ``nan`` spelled as C spells them)."""
    if value != value:
        return "-nan" if str(value).startswith("-") else "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{precision}{kind}}"
