"""``-B``/``--extra-node-info=S[:C[:T]]``: the sockets of each node, cores of each
socket and threads of each core a job asks for, as Slurm 22.05's sbatch, salloc and
srun read it.

Measured on Slurm 22.05 (nodes of two 4-core sockets, one thread a core):

* each of S, C and T is a count, ``MIN-MAX`` (the minimum is asked for: ``-B 1-2:2``
  shows Socks/Node=1 and runs two tasks; ``-B 1-3`` runs on a node of two sockets, so
  the maximum is nothing to the job and Corral keeps none), or ``*`` or nothing for
  "any" (``-B :2`` is ``--cores-per-socket=2`` alone);
* each sets its own count and ``*`` clears it: ``--cores-per-socket=3 -B 2`` asks for
  two sockets and any cores, ``-B 2:2 --cores-per-socket=3`` for two sockets of three;
* ``-B`` drops ``--hint`` (``hintopts.DROPPED``);
* a value that is not a count is refused in Slurm's words (``Invalid numeric value
  "x" for second arg of -B.``), exit 1.

Where Corral refuses what Slurm takes: a count of 0 (Slurm shows ``Socks/Node=0`` and
sets no task count from it) and a fourth field (Slurm reads ``1:1:1:1`` as
``1:1:1``).
"""

from __future__ import annotations

from cli.failure import Failure
from cli.sbatch.cnumbers import count

#: How Slurm's errors name each field of ``-B``.
_ORDINALS = ("first", "second", "third")
#: The job fields each field of ``-B`` sets (0: any).
FIELDS = ("sockets_per_node", "cores_per_socket", "threads_per_core")


def extra_node_info(text: str | None) -> dict[str, int]:
    """``-B``'s setter: every count of ``FIELDS``, 0 where ``*`` or left out (its
    ``threads_per_core``, even 0, drops ``--hint`` as ``--threads-per-core`` does)."""
    parts = (text or "").split(":", len(_ORDINALS) - 1)
    fields = dict.fromkeys(FIELDS, 0)
    for field, ordinal, part in zip(FIELDS, _ORDINALS, parts, strict=False):
        fields[field] = _minimum(part, ordinal)
    return fields


def _minimum(part: str, ordinal: str) -> int:
    """One field's count: the minimum of ``MIN-MAX`` or of a plain count, 0 for
    ``*`` or nothing."""
    if part in ("", "*"):
        return 0
    low, dash, high = part.partition("-")
    if not low or (dash and not (high.isascii() and high.isdigit())):
        raise Failure(f'Invalid numeric value "{part}" for {ordinal} arg of -B.', status=1)
    return count(f"{ordinal} arg of -B", low)
