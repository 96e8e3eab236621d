"""Slurm hostlist expressions: ``node[001-003,15]`` to names and back.

Every node list a user types or reads (``-w``, ``NodeName=``, squeue's
NODELIST, ``SLURM_JOB_NODELIST``) is in this form, and client programs such as
submitit parse what we print, so both directions follow Slurm exactly:

* items are separated by commas outside brackets, or by whitespace;
* ``prefix[ranges]suffix`` with ranges ``N`` or ``LO-HI``, zero-padded to the
  width of ``LO`` (``n[05-7]`` is n05 n06 n07, ``n[1-010]`` is n1 ... n10);
* several bracket groups form a cartesian product, leftmost slowest;
* compression merges consecutive numbers that share a prefix and a compatible
  padding width (``n8,n9,n10,n11,n099,n100`` is ``n[8-11,099-100]``).
"""

from __future__ import annotations

import itertools

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Iterable

#: Most hosts one range, or one bracketed item, may name (Slurm's MAX_SLURM_NODES);
#: it also keeps a hostile expression such as ``a[0-99999][0-99999]`` from eating memory.
MAX_RANGE = 65536

# Every client command prints node lists, so this module scans strings itself
# rather than importing ``re`` (about 5 ms of start-up with the ``enum`` it pulls in).
_DIGITS = "0123456789"


def expand(expr: str) -> list[str]:
    """Every host an expression names, in order, duplicates kept."""
    hosts: list[str] = []
    for item in _items(expr):
        hosts.extend(_expand_item(item, expr))
    return hosts


def _items(expr: str) -> list[str]:
    """The items of ``expr``: runs of text and ``[...]`` groups between separators.

    Separators (commas and whitespace) inside brackets belong to the item;
    an unmatched or nested bracket makes the whole expression invalid.
    """
    if "[" not in expr:
        if "]" in expr:
            raise ValueError(f"Invalid hostlist: {expr}")
        return expr.replace(",", " ").split()
    items: list[str] = []
    start = -1  # where the current item began; -1 between items
    pos, end = 0, len(expr)
    while pos < end:
        char = expr[pos]
        if char == "[":
            close = expr.find("]", pos + 1)
            if close < 0 or "[" in expr[pos + 1 : close]:
                raise ValueError(f"Invalid hostlist: {expr}")
            start = pos if start < 0 else start
            pos = close + 1
            continue
        if char == "]":
            raise ValueError(f"Invalid hostlist: {expr}")
        if char == "," or char.isspace():
            if start >= 0:
                items.append(expr[start:pos])
                start = -1
        elif start < 0:
            start = pos
        pos += 1
    if start >= 0:
        items.append(expr[start:])
    return items


def _expand_item(item: str, expr: str) -> list[str]:
    """The hosts of one item: the product of its literal text and its bracket contents."""
    if "[" not in item:
        return [item]
    choices: list[list[str]] = []
    total = 1
    pos = 0
    while (open_at := item.find("[", pos)) >= 0:
        close = item.find("]", open_at)
        numbers = _range_numbers(item[open_at + 1 : close], expr)
        total *= len(numbers)
        if total > MAX_RANGE:
            raise ValueError(f"Invalid hostlist: {expr}")
        choices += [[item[pos:open_at]], numbers]
        pos = close + 1
    choices.append([item[pos:]])
    return ["".join(combo) for combo in itertools.product(*choices)]


def _is_number(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits."""
    return text != "" and not text.strip(_DIGITS)


def _range_numbers(ranges: str, expr: str) -> list[str]:
    """The zero-padded numbers of one bracket's ``N`` and ``LO-HI`` list."""
    numbers: list[str] = []
    for text in ranges.split(","):
        low_text, dash, high_text = text.partition("-")
        if not _is_number(low_text) or (dash and not _is_number(high_text)):
            raise ValueError(f"Invalid hostlist: {expr}")
        low = int(low_text)
        high = int(high_text) if dash else low
        if high < low or high - low + 1 > MAX_RANGE:
            raise ValueError(f"Invalid hostlist: {expr}")
        width = len(low_text)
        numbers.extend(f"{n:0{width}d}" for n in range(low, high + 1))
    return numbers


def compress(names: Iterable[str], *, sort: bool = True) -> str:
    """Slurm's ranged string for ``names``.

    ``sort=True`` is what squeue, sinfo and scontrol print for node lists:
    sorted by prefix then number, duplicates dropped. ``sort=False`` keeps the
    input order and duplicates, as ``scontrol show hostlist`` does.
    """
    split = [_split_name(name) for name in names]
    if sort:
        split = sorted(set(split), key=_sort_key)
    out: list[str] = []
    prefix: str | None = None
    ranges: list[list[int]] = []  # [low, high, width]
    for name_prefix, digits in split:
        if digits == "":
            if prefix is not None:
                out.append(_group(prefix, ranges))
                prefix, ranges = None, []
            out.append(name_prefix)
            continue
        number = int(digits)
        if name_prefix != prefix:
            if prefix is not None:
                out.append(_group(prefix, ranges))
            prefix, ranges = name_prefix, []
        last = ranges[-1] if ranges else None
        if last is not None and number == last[1] + 1 and f"{number:0{last[2]}d}" == digits:
            last[1] = number
        else:
            ranges.append([number, number, len(digits)])
    if prefix is not None:
        out.append(_group(prefix, ranges))
    return ",".join(out)


def _split_name(name: str) -> tuple[str, str]:
    """``("node", "007")`` for node007; ``(name, "")`` when it ends in no digit."""
    prefix = name.rstrip(_DIGITS)
    return prefix, name[len(prefix) :]


def _sort_key(split: tuple[str, str]) -> tuple[str, int, int]:
    prefix, digits = split
    return prefix, int(digits) if digits else -1, len(digits)


def _group(prefix: str, ranges: list[list[int]]) -> str:
    """``prefix[lo-hi,...]``, or the bare name when the group is one host."""
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        low, _, width = ranges[0]
        return f"{prefix}{low:0{width}d}"
    body = ",".join(
        f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}"
        for low, high, width in ranges
    )
    return f"{prefix}[{body}]"
