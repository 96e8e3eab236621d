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
