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
import re
from collections.abc import Iterable

#: Most hosts one range, or one bracketed item, may name (Slurm's MAX_SLURM_NODES);
#: it also keeps a hostile expression such as ``a[0-99999][0-99999]`` from eating memory.
MAX_RANGE = 65536

_ITEM = r"(?:[^\s,\[\]]|\[[^\[\]]*\])+"
_WHOLE = re.compile(rf"[\s,]*(?:{_ITEM}(?:[\s,]+{_ITEM})*[\s,]*)?")
_ITEMS = re.compile(_ITEM)
_BRACKETS = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(r"(\d+)(?:-(\d+))?", re.ASCII)
_NUMBERED = re.compile(r"(.*?)(\d+)", re.ASCII | re.DOTALL)


def expand(expr: str) -> list[str]:
    """Every host an expression names, in order, duplicates kept."""
    if _WHOLE.fullmatch(expr) is None:
        raise ValueError(f"Invalid hostlist: {expr}")
    hosts: list[str] = []
    for item in _ITEMS.findall(expr):
        hosts.extend(_expand_item(item, expr))
    return hosts


def _expand_item(item: str, expr: str) -> list[str]:
    """The hosts of one item; ``re.split`` alternates literal text and bracket contents."""
    parts = _BRACKETS.split(item)
    if len(parts) == 1:
        return [item]
    choices: list[list[str]] = []
    total = 1
    for index, part in enumerate(parts):
        if index % 2 == 0:
            choices.append([part])
            continue
        numbers = _range_numbers(part, expr)
        total *= len(numbers)
        if total > MAX_RANGE:
            raise ValueError(f"Invalid hostlist: {expr}")
        choices.append(numbers)
    return ["".join(combo) for combo in itertools.product(*choices)]


def _range_numbers(ranges: str, expr: str) -> list[str]:
    """The zero-padded numbers of one bracket's ``N`` and ``LO-HI`` list."""
    numbers: list[str] = []
    for text in ranges.split(","):
        match = _RANGE.fullmatch(text)
        if match is None:
            raise ValueError(f"Invalid hostlist: {expr}")
        low_text, high_text = match.group(1), match.group(2)
        low = int(low_text)
        high = low if high_text is None else int(high_text)
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
    match = _NUMBERED.fullmatch(name)
    if match is None:
        return name, ""
    return match.group(1), match.group(2)


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
