"""The values of srun's honoured options that take a word: which Corral does, and
which it refuses rather than accept and ignore.

``--cpu-bind``'s grammar is corral/cpubind.py's; srun checks it here, in Slurm's
words (``srun: error: unrecognized --cpu-bind argument "x"`` then ``srun: fatal:
Failed to parse --cpu-bind= values.``), and sends its text to the controller,
which gives each task its CPUs (controller/cpubind.py).
"""

from __future__ import annotations

from cli.halt import Halt


def cpu_bind(prog: str, value: str) -> tuple[str, bool]:
    """``--cpu-bind`` (or SLURM_CPU_BIND): (its text, whether it asks for ``none``).
    Halt for a word Slurm does not know or a bad list."""
    from corral.cpubind import parse

    try:
        bind = parse(value)
    except ValueError as exc:
        raise Halt(1, *(f"{prog}: {line}" for line in str(exc).splitlines())) from None
    return value, bind.kind == "none"


def open_mode_append(prog: str, value: str) -> bool:
    """``--open-mode`` (or SLURM_OPEN_MODE): append (``a``...) or truncate (``t``...),
    as sbatch reads it; empty is the default, truncate. Halt for anything else."""
    first = value[:1].lower()
    if first not in ("", "a", "t"):
        raise Halt(1, f"{prog}: error: Invalid --open-mode specification")
    return first == "a"
