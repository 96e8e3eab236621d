"""Memory sizes as Slurm writes them: ``954M``, ``1GB``, ``1g``, ``500k``, ``2048``.

Slurm keeps memory in MiB and reads sizes with binary suffixes: a plain number
is MiB, ``K`` rounds up to whole MiB, ``G`` and ``T`` multiply by 1024 and
1024². Client programs send every spelling (dask ``15G``, submitit ``1GB``,
parsl ``1g``), so the suffix is case-insensitive and may be followed by ``B``.
"""

from __future__ import annotations

_DIGITS = "0123456789"
_MIB_PER_UNIT = {"M": 1, "G": 1024, "T": 1024 * 1024}


def parse_memory(text: str) -> int:
    """Return ``text`` in MiB; raise ``ValueError`` if it is not a size.

    ``0`` is valid (Slurm's "all the memory of the node" for ``--mem``).
    Kibibytes are rounded up, so ``1K`` is 1 MiB, like Slurm.
    """
    suffix = text.lstrip(_DIGITS)
    digits = text[: len(text) - len(suffix)]
    unit = suffix[:1].upper() or "M"
    if not digits or unit not in ("K", "M", "G", "T") or suffix[1:] not in ("", "B", "b"):
        raise ValueError(f"invalid memory size {text!r}")
    value = int(digits)
    if unit == "K":
        return -(-value // 1024)
    return value * _MIB_PER_UNIT[unit]


def parse_tres_limits(text: str) -> dict[str, int]:
    """A TRES limit list as sacctmgr keeps it (``cpu=4,mem=1G,gres/gpu=2``) as
    {TRES: limit}, memory in MiB.

    dbd checked the list when it was set; an item it could not have stored
    (no ``=``, not a number) is left out rather than guessed.
    """
    limits: dict[str, int] = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        name, value = name.strip().lower(), value.strip()
        if not name or not value:
            continue
        try:
            limits[name] = tres_amount(name, value)
        except ValueError:
            continue
    return limits


def tres_amount(name: str, value: str) -> int:
    """One TRES amount as a limit list writes it: memory (``mem``) a size in MiB,
    anything else a whole number; ValueError for neither."""
    return parse_memory(value) if name == "mem" else int(value)
