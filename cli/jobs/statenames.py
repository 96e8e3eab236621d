"""Job state names as Slurm's clients print and accept them.

The controller reports a long base state (``PENDING``) plus flags
(``COMPLETING``, ``REQUEUED``...). What squeue and scontrol show is the first
set flag in Slurm's precedence order, else the base state, in long (``STATE``,
``JobState=``) or compact (``ST``) form. Workflow tools map the compact codes,
so the table is exact.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

#: Base states in Slurm's numeric order, with their compact codes.
BASE_STATES: dict[str, str] = {
    "PENDING": "PD",
    "RUNNING": "R",
    "SUSPENDED": "S",
    "COMPLETED": "CD",
    "CANCELLED": "CA",
    "FAILED": "F",
    "TIMEOUT": "TO",
    "NODE_FAIL": "NF",
    "PREEMPTED": "PR",
    "BOOT_FAIL": "BF",
    "DEADLINE": "DL",
    "OUT_OF_MEMORY": "OOM",
}

#: State flags in the order in which they override the base name.
FLAG_STATES: dict[str, str] = {
    "COMPLETING": "CG",
    "STAGE_OUT": "SO",
    "CONFIGURING": "CF",
    "RESIZING": "RS",
    "REQUEUED": "RQ",
    "REQUEUE_FED": "RF",
    "REQUEUE_HOLD": "RH",
    "SPECIAL_EXIT": "SE",
    "STOPPED": "ST",
    "REVOKED": "RV",
    "RESV_DEL_HOLD": "RD",
    "SIGNALING": "SI",
}

#: The flags in the order ``squeue --helpstate`` and the invalid-state error list them.
_FLAG_LISTING = (
    "COMPLETING",
    "CONFIGURING",
    "RESIZING",
    "RESV_DEL_HOLD",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "REVOKED",
    "SIGNALING",
    "SPECIAL_EXIT",
    "STAGE_OUT",
    "STOPPED",
)

_BY_NAME: dict[str, str] = {}
for _long, _compact in (*BASE_STATES.items(), *FLAG_STATES.items()):
    _BY_NAME[_long] = _long
    _BY_NAME.setdefault(_compact, _long)


#: The JobInfo fields ``long_name`` and ``compact_name`` read.
READS = ("state", "state_flags")

_COMPACT = {**BASE_STATES, **FLAG_STATES}


def long_name(job: Mapping[str, Any]) -> str:
    """``STATE`` / ``JobState=``: the overriding flag, else the base state."""
    flags = job["state_flags"]
    if flags:  # most jobs have none: squeue asks this of every job, twice
        for flag in FLAG_STATES:
            if flag in flags:
                return flag
    return str(job["state"]) or "?"


def compact_name(job: Mapping[str, Any]) -> str:
    """``ST``: the compact code of :func:`long_name`."""
    if job["state_flags"]:
        return _COMPACT.get(long_name(job), "?")
    return _COMPACT.get(str(job["state"]), "?")


def long_names(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """``long_name`` of each job, without a call for those with no flag (nearly all).

    One pass over the records: a pass over 100,000 dicts costs more in memory
    traffic than the few operations per record it saves to split it up.
    """
    return [
        (str(job["state"]) or "?") if not job["state_flags"] else long_name(job) for job in jobs
    ]


def compact_names(jobs: Sequence[Mapping[str, Any]]) -> list[str]:
    """``compact_name`` of each job, as ``long_names`` works out the long ones."""
    compact = _COMPACT
    return [
        compact.get(str(job["state"]), "?") if not job["state_flags"] else compact_name(job)
        for job in jobs
    ]


def parse_state(text: str) -> str | None:
    """The long name for a state typed as long or compact, any case; None if unknown."""
    return _BY_NAME.get(text.upper())


def state_listing() -> list[str]:
    """Every state a filter accepts, in Slurm's order, lower case."""
    return [name.lower() for name in (*BASE_STATES, *_FLAG_LISTING)]
