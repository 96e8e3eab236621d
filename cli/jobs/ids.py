"""Job ids as users type them and as Slurm's clients print them.

Printed forms (squeue ``%i``): ``123``, an array task ``123_4``, a pending
array remainder ``123_[5-10%2]``. Typed forms (scancel, squeue ``-j``): the
same plus ``123_[1-3,5]`` and ``123_*``, checked the way Slurm's clients check
them before anything is sent to the controller.
"""

from __future__ import annotations

from corral.hostlist import expand

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: Longest array range squeue shows unless SLURM_BITSTR_LEN says otherwise.
_DEFAULT_BITSTR_LEN = 64
_MAX_BITSTR_LEN = 4096
#: squeue formats %i into a 32-byte buffer unless SLURM_BITSTR_LEN is set.
_ID_BUFFER = 31


class InvalidJobId(ValueError):
    """A typed job id Slurm's clients reject; ``str()`` is the text as typed."""


def task_range(job: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """The pending remainder ``5-10%2``, its range cut to SLURM_BITSTR_LEN with ``...``."""
    text = str(job["array_task_str"])
    ranges, percent, throttle = text.partition("%")
    try:
        limit = int(env.get("SLURM_BITSTR_LEN", "-1"))
    except ValueError:
        limit = 0
    limit = _DEFAULT_BITSTR_LEN if limit < 0 else min(limit, _MAX_BITSTR_LEN)
    if limit and len(ranges) > limit - 3:
        ranges = ranges[: limit - 4] + "..."
    return ranges + percent + throttle


#: The JobInfo fields ``display_id`` reads.
DISPLAY_ID_READS = (
    "array_task_str", "array_job_id", "array_task_id", "job_id", "het_job_id", "het_job_offset"
)  # fmt: skip


def display_id(job: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """squeue's JOBID: ``123``, ``123_4``, ``123_[5-10%2]`` or a heterogeneous job's
    component ``123+1``."""
    if job.get("het_job_id"):
        return f"{job['het_job_id']}+{job['het_job_offset']}"
    if job["array_task_str"]:
        text = f"{job['array_job_id']}_[{task_range(job, env)}]"
        return text if "SLURM_BITSTR_LEN" in env else text[:_ID_BUFFER]
    if job["array_task_id"] is not None:
        return f"{job['array_job_id']}_{job['array_task_id']}"
    return str(job["job_id"])


def _leading_int(text: str) -> tuple[int | None, str]:
    """``strtol``: the number at the start of ``text`` (spaces and sign allowed) and the rest."""
    stripped = text.lstrip(" \t\n\r\f\v")
    end = 1 if stripped[:1] in ("+", "-") else 0
    digits = end
    while digits < len(stripped) and stripped[digits].isascii() and stripped[digits].isdigit():
        digits += 1
    if digits == end:
        return None, text
    return int(stripped[:digits]), stripped[digits:]


def squeue_job_id(text: str) -> str:
    """One ``squeue -j`` id, as squeue checks it (the number must be positive)."""
    number, _ = _leading_int(text)
    if number is None or number <= 0:
        raise InvalidJobId(text)
    return text


def cancel_ids(operands: list[str]) -> list[str]:
    """The job ids scancel's operands name, one string per id to signal.

    Ids may be comma separated within an operand, except that an array range
    in brackets (``123_[1-3,5]``) must be an operand of its own.
    """
    pending = list(operands)
    ids: list[str] = []
    while pending:
        text = pending.pop(0)
        number, rest = _leading_int(text)
        if number is None or number <= 0:
            raise InvalidJobId(text)
        if rest.startswith("_["):
            close = rest.find("]")
            if close < 0 or close != len(rest) - 1:
                raise InvalidJobId(text)
            try:
                tasks = expand(rest[1:])
            except ValueError:
                raise InvalidJobId(text) from None
            if not tasks or any(_leading_int(task)[0] is None for task in tasks):
                raise InvalidJobId(text)
            ids.append(text)
            continue
        rest = _after_suffix(rest, text)
        if rest.startswith(","):
            ids.append(text[: len(text) - len(rest)])
            pending.insert(0, rest[1:])
        elif rest:
            raise InvalidJobId(text)
        else:
            ids.append(text)
    return ids


def _after_suffix(rest: str, text: str) -> str:
    """Skip an array task (``_4``, ``_*``), het component (``+1``) and step (``.0``)."""
    if rest.startswith("_*"):
        rest = rest[2:]
    elif rest.startswith(("_", "+")):
        number, after = _leading_int(rest[1:])
        if number is not None and number < 0:
            raise InvalidJobId(text)
        rest = after
    if rest.startswith("."):
        number, after = _leading_int(rest[1:])
        if number is not None and number < 0:
            raise InvalidJobId(text)
        rest = after
    return rest


def job_id_list(text: str) -> list[str] | None:
    """The ids of a scontrol job list (``12,13_[1-3] 14+1``); None if it is not one.

    Accepts what scontrol accepts: digits, one ``_`` and one ``+`` per id,
    ``-`` only within an array part, brackets balanced, ids separated by
    commas or spaces outside brackets.
    """
    ids: list[str] = []
    depth = 0
    start = 0
    plus = under = False
    for index, char in enumerate(text):
        if char == "+":
            if plus:
                return None
            plus = True
        elif char == "_":
            if under:
                return None
            under = True
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "-":
            if depth == 0 and not under:
                return None
        elif char in ", ":
            if depth == 0:
                ids.append(text[start:index])
                start = index + 1
                plus = under = False
        elif not ("0" <= char <= "9"):
            return None
    if depth != 0:
        return None
    ids.append(text[start:])
    return [item for item in ids if item]


def leader_step(text: str) -> str:
    """A step id typed with a heterogeneous job component (``123+1.0``) as Slurm
    22.05's scancel, sstat and sattach read it: the component dropped, so it names
    the leader's step (``123.0``; measured on a real 22.05: ``scancel -v -s USR1
    123+1.0`` says and signals ``step 123.0``, sstat and sattach show component 0's
    part). A later component's part is named by its own job id (``124.0``). Text
    without a ``+`` and a number after it, or whose ``+`` follows the step (``123.1+1``,
    a part of ``srun a : b`` in an ordinary job), is returned as it is, for the caller
    to check."""
    job, plus, rest = text.partition("+")
    if "." in job:
        return text
    offset = len(rest) - len(rest.lstrip("0123456789"))
    return job + rest[offset:] if plus and offset else text
