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

* a count of 0 is taken (``-B 0`` shows ``Socks/Node=0``, ``-B 1:0`` a C of 0) and
  sets no task count (``-B 0``, ``-B 0:2``, ``-B 1:0``: NumTasks=1, where ``-B :2``
  is two); a T of 0 is refused at submission ("Requested node configuration is not
  available", exit 1, as ``--threads-per-core=0`` is not: that is a bad number);
* a fourth field and any after it are not read (``1:1:1:1`` and ``1:2:1:x`` are
  ``1:1:1`` and ``1:2:1``).

A count of 0 asks nothing of a node, as "any" does, but is sent apart (JobSpec
``node_info_zeros``) so that scontrol shows it as Slurm does: ``Socks/Node=0``, a C
of 0 in ``ReqB:S:C:T``.
"""

from __future__ import annotations

from cli.failure import Failure, Refused
from cli.sbatch.cnumbers import C_SPACE, clamp, count, is_integer

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: How Slurm's errors name each field of ``-B``.
_ORDINALS = ("first", "second", "third")
#: The job fields each field of ``-B`` sets (0: any).
FIELDS = ("sockets_per_node", "cores_per_socket", "threads_per_core")
#: The settings' key naming the ``FIELDS`` the last ``-B`` gave as 0: Slurm keeps a 0
#: apart from "any", and a job's 0 is "any" in Corral.
ZEROS = "node_info_zeros"
#: What Slurm 22.05's controller answers a T of 0 (``-B 1:1:0``).
_NO_THREADS = "Requested node configuration is not available"


def extra_node_info(text: str | None) -> dict[str, Any]:
    """``-B``'s setter: every count of ``FIELDS``, 0 where ``*``, 0 or left out (its
    ``threads_per_core``, even 0, drops ``--hint`` as ``--threads-per-core`` does), and
    under ``ZEROS`` those given as 0; a fourth field and more are not read."""
    parts = (text or "").split(":")[: len(FIELDS)]
    fields: dict[str, Any] = dict.fromkeys(FIELDS, 0)
    zeros = []
    for field, ordinal, part in zip(FIELDS, _ORDINALS, parts, strict=False):
        fields[field] = _minimum(part, ordinal)
        if not fields[field] and part not in ("", "*"):
            zeros.append(field)
    fields[ZEROS] = tuple(zeros)
    return fields


def zero(fields: Mapping[str, Any], field: str) -> bool:
    """Whether ``-B`` gave ``field`` as 0 and nothing set it since."""
    return field in fields.get(ZEROS, ()) and not fields.get(field)


def check(fields: Mapping[str, Any]) -> None:
    """Refuse a T of 0 as Slurm 22.05's controller refuses it (Refused: each client
    prints it in its own "submission failed" words)."""
    if zero(fields, "threads_per_core"):
        raise Refused(_NO_THREADS)


def _minimum(part: str, ordinal: str) -> int:
    """One field's count: the minimum of ``MIN-MAX`` or of a plain count, 0 for
    ``*``, nothing or a 0."""
    if part in ("", "*"):
        return 0
    low, dash, high = part.partition("-")
    if not low or (dash and not (high.isascii() and high.isdigit())):
        raise Failure(f'Invalid numeric value "{part}" for {ordinal} arg of -B.', status=1)
    if is_integer(low, C_SPACE) and clamp(low) == 0:
        return 0
    return count(f"{ordinal} arg of -B", low)
