"""Column layouts shared by squeue and sinfo: ``-o "%.18i %9P"`` and ``-O name:[.]size``.

Both commands print each line by walking a list of columns: a value padded or
cut to a width, right-justified when the width had a leading ``.``, then the
literal text that followed the field. Scripts parse these lines by position, so
the padding and cutting rules are Slurm's (``_print_str`` in its print.c).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

# The records below are plain classes with __slots__, not dataclasses: importing
# ``dataclasses`` (with the ``inspect`` and ``re`` it pulls in) costs more than
# 10 ms of a client's start-up. They are immutable by convention.

_DIGITS = "0123456789"

#: Width of an ``-O`` field given without ``:size``.
DEFAULT_NAME_WIDTH = 20


class Column:
    """One field of a format: ``key`` is the ``-o`` letter or the ``-O`` name as typed."""

    __slots__ = ("key", "right", "suffix", "width")

    def __init__(self, key: str, width: int, right: bool, suffix: str) -> None:
        self.key = key
        self.width = width
        self.right = right
        self.suffix = suffix

    def _fields(self) -> tuple[str, int, bool, str]:
        return self.key, self.width, self.right, self.suffix

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Column):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "Column({!r}, {!r}, {!r}, {!r})".format(*self._fields())


def parse_letters(spec: str) -> tuple[str, list[Column]]:
    """The literal prefix and the columns of a ``-o`` format.

    Text before the first ``%`` is printed at the start of every line; each
    ``%[.][width]letter`` is a column whose suffix is the text up to the next
    ``%``. Empty fields (``%%``) are skipped, as ``strtok`` skips them.
    """
    first = spec.find("%")
    if first < 0:
        return spec, []
    columns = []
    for token in spec[first + 1 :].split("%"):
        if not token:
            continue
        right = token.startswith(".")
        start = 1 if right else 0
        end = start
        while end < len(token) and token[end] in _DIGITS:
            end += 1
        width = int(token[start:end]) if end > start else 0
        columns.append(Column(token[end : end + 1], width, right, token[end + 1 :]))
    return spec[:first], columns


def parse_names(spec: str) -> list[Column]:
    """The columns of a ``-O`` format: ``name[:[.][width][suffix]]`` separated by commas."""
    columns = []
    for token in spec.split(","):
        if not token:
            continue
        name, colon, rest = token.partition(":")
        if not colon:
            columns.append(Column(name, DEFAULT_NAME_WIDTH, False, ""))
            continue
        right = rest.startswith(".")
        if right:
            rest = rest[1:]
        end = 0
        while end < len(rest) and rest[end] in _DIGITS:
            end += 1
        width = int(rest[:end]) if end else 0
        columns.append(Column(name, width, right, rest[end:]))
    return columns


def cell(text: str, width: int, right: bool, cut: bool = True) -> str:
    """``text`` laid out in ``width`` characters the way Slurm's clients do it.

    Width 0 prints the text as is. Left-justified text is always cut to the
    width; right-justified text is cut (keeping its start) only when ``cut``,
    which is why long run times and node lists can overflow their columns.
    """
    if width <= 0:
        return text
    if right:
        padded = text.rjust(width)
        return padded[:width] if cut else padded
    return text[:width].ljust(width)


class Field:
    """What a column shows: its header and how to get its text from a record.

    ``cut`` is Slurm's choice of whether a right-justified value may overflow
    its width (clocks and node lists may); ``header_cut`` the same for the
    header (NODELIST-like headers may). ``reads`` names the record fields the
    value uses, so that a command can ask the daemon for those alone.
    ``column``, where given, is the same text for a whole list of records at
    once (``value`` of each, in order): a listing of 100,000 jobs pays a
    Python call per record and column otherwise, and most columns can be
    worked out with C-level ``map``/``itemgetter`` or one comprehension.
    """

    __slots__ = ("column", "cut", "header", "header_cut", "reads", "value")

    def __init__(
        self,
        header: str,
        value: Callable[[Any, Any], str],
        cut: bool = True,
        header_cut: bool = True,
        reads: tuple[str, ...] = (),
        column: Callable[[Sequence[Any], Any], list[str]] | None = None,
    ) -> None:
        self.header = header
        self.value = value
        self.cut = cut
        self.header_cut = header_cut
        self.reads = reads
        self.column = column

    def __repr__(self) -> str:
        return (
            f"Field({self.header!r}, {self.value!r}, {self.cut!r}, {self.header_cut!r},"
            f" {self.reads!r})"
        )


class Bound:
    """A column and its field; without a field it prints ``literal``, as Slurm does."""

    __slots__ = ("column", "field", "literal")

    def __init__(self, column: Column, field: Field | None, literal: str = "") -> None:
        self.column = column
        self.field = field
        self.literal = literal

    def __repr__(self) -> str:
        return f"Bound({self.column!r}, {self.field!r}, {self.literal!r})"


def line(prefix: str, bound: Sequence[Bound], record: Any, context: Any) -> str:
    """One output line: the header when ``record`` is None, else the record's values."""
    parts = [prefix]
    for item in bound:
        column, field = item.column, item.field
        if field is None:
            parts.append(item.literal)
            continue
        if record is None:
            text = cell(field.header, column.width, column.right, field.header_cut)
        else:
            text = cell(field.value(record, context), column.width, column.right, field.cut)
        parts.append(text)
        parts.append(column.suffix)
    return "".join(parts)


def lines(prefix: str, bound: Sequence[Bound], records: Sequence[Any], context: Any) -> list[str]:
    """Every record's ``line``, computed a column at a time.

    squeue prints tens of thousands of lines, so rather than laying them out
    cell by cell, each field's values come from one comprehension and each line
    from one ``%`` of a template that holds the literal text, widths, sides and
    cuts: ``"%9.9s" % text`` is ``cell(text, 9, True)``, ``"%-9.9s"`` the
    left-justified cell (always cut) and ``"%9s"`` a right one that may overflow.
    """
    template = [_literal(prefix)]
    columns = []
    for item in bound:
        field = item.field
        if field is None:
            template.append(_literal(item.literal))
            continue
        column = item.column
        width = column.width
        if width <= 0:
            template.append("%s")
        elif not column.right:
            template.append(f"%-{width}.{width}s")
        elif field.cut:
            template.append(f"%{width}.{width}s")
        else:
            template.append(f"%{width}s")
        template.append(_literal(column.suffix))
        if field.column is not None:
            columns.append(field.column(records, context))
        else:
            value = field.value
            columns.append([value(record, context) for record in records])
    layout = "".join(template)
    if not columns:
        return [layout % ()] * len(records)
    return list(map(layout.__mod__, zip(*columns, strict=True)))


def _literal(text: str) -> str:
    """``text`` as literal text of a ``%`` template."""
    return text.replace("%", "%%")
