"""``--array`` specifications: ``0-15``, ``0,6,16-32``, ``0-15:4``, ``1-9:2%3``.

One parser for sbatch (checks before submitting) and the controller (expands
the tasks). Brackets around the list are tolerated, as Slurm does. Imports
nothing: it sits on sbatch's start-up path.
"""

from __future__ import annotations


def _number(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"not a number: {text!r}")
    return int(text)


def parse(text: str, max_size: int | None = None) -> tuple[list[int], int]:
    """Sorted unique task ids and the throttle (0 = none); ValueError if malformed.

    ``max_size`` is MaxArraySize: every index must be below it.
    """
    body, percent, throttle_text = text.strip().partition("%")
    throttle = _number(throttle_text) if percent else 0
    if body.startswith("[") != body.endswith("]"):
        raise ValueError("unbalanced brackets")
    body = body.removeprefix("[").removesuffix("]")
    indices: set[int] = set()
    for item in body.split(","):
        span, colon, step_text = item.partition(":")
        lo_text, dash, hi_text = span.partition("-")
        lo = _number(lo_text)
        hi = _number(hi_text) if dash else lo
        step = _number(step_text) if colon else 1
        if hi < lo or step < 1 or (colon and not dash):
            raise ValueError(f"bad range {item!r}")
        if max_size is not None and hi >= max_size:
            raise ValueError(f"index {hi} not below MaxArraySize {max_size}")
        indices.update(range(lo, hi + 1, step))
    return sorted(indices), throttle


# ---------------------------------------------------------------- task sets
#
# An array's tasks that have not started yet are kept as one compact string,
# ``1-3,5,9-12`` (ascending, disjoint, no steps: how Slurm prints them), so
# that the array's one pending record stays small however many tasks it has.
# Every operation below walks the ranges, never the individual tasks.


def _spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        spans.append((int(lo), int(hi or lo)))
    return spans


def _join(spans: list[tuple[int, int]]) -> str:
    return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in spans)


def compress(indices: list[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``1-3,5`` (``indices`` sorted and unique)."""
    spans: list[tuple[int, int]] = []
    for value in indices:
        if spans and value == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], value)
        else:
            spans.append((value, value))
    return _join(spans)


def expand(text: str) -> list[int]:
    """``1-3,5`` -> ``[1, 2, 3, 5]``; the empty set for ``""``."""
    if not text:
        return []
    return [i for lo, hi in _spans(text) for i in range(lo, hi + 1)]


def count(text: str) -> int:
    """How many tasks ``text`` holds."""
    if not text:
        return 0
    return sum(hi - lo + 1 for lo, hi in _spans(text))


def first(text: str) -> int:
    """The lowest task of a non-empty set."""
    head = text.split(",", 1)[0]
    return int(head.partition("-")[0])


def contains(text: str, index: int) -> bool:
    return bool(text) and any(lo <= index <= hi for lo, hi in _spans(text))


def without(text: str, index: int) -> str:
    """The set less ``index`` (unchanged when it is not there)."""
    out: list[tuple[int, int]] = []
    for lo, hi in _spans(text) if text else []:
        if lo <= index <= hi:
            if lo < index:
                out.append((lo, index - 1))
            if index < hi:
                out.append((index + 1, hi))
        else:
            out.append((lo, hi))
    return _join(out)


def intersection(text: str, indices: frozenset[int]) -> list[int]:
    """The tasks of ``text`` that are also in ``indices``, ascending."""
    return sorted(i for i in indices if contains(text, i))
