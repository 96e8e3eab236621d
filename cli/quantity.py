"""Sizes in Slurm's unit notation: ``6000M``, ``2G``, ``1.50G``.

Slurm scales a size up by 1024 while the result stays exact to the half unit
and appends the unit letter; memory is counted in MiB, so 2048 prints as
``2G`` and 6000 stays ``6000M``. Zero prints as a bare ``0``.
"""

from __future__ import annotations

_UNITS = ("", "K", "M", "G", "T", "P")


def scaled(value: float, unit: int = 0) -> str:
    """``value`` in unit index ``unit`` (0 none, 2 MiB), scaled up while exact."""
    if int(value) == 0:
        return "0"
    while value >= 1024 and int(value) % 512 == 0:
        value /= 1024
        unit += 1
    letter = _UNITS[unit] if unit < len(_UNITS) else "?"
    if value == int(value):
        return f"{int(value)}{letter}"
    return f"{value:.2f}{letter}"


def mebibytes(mib: int) -> str:
    """A memory size given in MiB: ``0``, ``500M``, ``2G``."""
    return scaled(mib, 2)
