"""Memory sizes as Slurm writes them: ``954M``, ``1GB``, ``1g``, ``500k``, ``2048``.

Slurm keeps memory in MiB and reads sizes with binary suffixes: a plain number
is MiB, ``K`` rounds up to whole MiB, ``G`` and ``T`` multiply by 1024 and
1024². Client programs send every spelling (dask ``15G``, submitit ``1GB``,
parsl ``1g``), so the suffix is case-insensitive and may be followed by ``B``.
"""

from __future__ import annotations

import re

_SIZE = re.compile(r"([0-9]+)(?:([KMGT])B?)?", re.IGNORECASE)
_MIB_PER_UNIT = {"M": 1, "G": 1024, "T": 1024 * 1024}


def parse_memory(text: str) -> int:
    """Return ``text`` in MiB; raise ``ValueError`` if it is not a size.

    ``0`` is valid (Slurm's "all the memory of the node" for ``--mem``).
    Kibibytes are rounded up, so ``1K`` is 1 MiB, like Slurm.
    """
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid memory size {text!r}")
    value = int(match[1])
    unit = (match[2] or "M").upper()
    if unit == "K":
        return -(-value // 1024)
    return value * _MIB_PER_UNIT[unit]
