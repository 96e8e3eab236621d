"""The values of srun's honoured options that take a word: which Corral does, and
which it refuses (or warns about) rather than accept and ignore.

``--cpu-bind`` is the one that matters: Corral pins every task of a step to the
CPUs the job holds on the node (``none`` unpins them), so a program that sizes
its thread pool from its affinity sees the job's CPUs. A request for one task per
core, socket or map would be silently something else, with a task seeing far
more CPUs than it asked for: refused. ``quiet`` is what Corral does anyway;
``verbose`` asks only for a report, so it is warned about.
"""

from __future__ import annotations

import sys

from cli.halt import Halt

#: Binding types Slurm documents that Corral does not do.
_BIND_TYPES = frozenset({"rank", "rank_ldom", "sockets", "cores", "threads", "ldoms", "boards"})
_BIND_MAPS = ("map_cpu:", "mask_cpu:", "map_ldom:", "mask_ldom:")
_BIND_NOTE = "tasks are bound to the job's CPUs on the node; only none is implemented"


def cpu_bind_none(prog: str, value: str) -> bool:
    """``--cpu-bind`` (or SLURM_CPU_BIND): whether it asks for ``none``. Halt for a
    binding Corral does not do or a word Slurm does not know."""
    none = False
    for word in (w for w in value.split(",") if w):
        lower = word.lower()
        if lower in ("q", "quiet"):
            continue
        if lower in ("v", "verbose"):
            print(
                f"{prog}: warning: --cpu-bind=verbose has no effect: no binding report is printed",
                file=sys.stderr,
            )
        elif lower in ("no", "none"):
            none = True
        elif lower in _BIND_TYPES or lower.startswith(_BIND_MAPS):
            raise Halt(1, f"{prog}: error: --cpu-bind={word} is not supported: {_BIND_NOTE}")
        else:
            raise Halt(1, f"{prog}: error: Invalid --cpu-bind argument: {word}")
    return none


def open_mode_append(prog: str, value: str) -> bool:
    """``--open-mode`` (or SLURM_OPEN_MODE): append (``a``...) or truncate (``t``...),
    as sbatch reads it; empty is the default, truncate. Halt for anything else."""
    first = value[:1].lower()
    if first not in ("", "a", "t"):
        raise Halt(1, f"{prog}: error: Invalid --open-mode specification")
    return first == "a"
