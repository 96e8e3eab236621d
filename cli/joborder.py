"""The order of squeue's rows: ``-S``/``SQUEUE_SORT`` keys, default ``P,t,-p``.

Slurm sorts the controller's job list (creation order) once by start time,
latest first, then once per sort key from the last key to the first, each
sort stable. Its start-time comparison ranks every job with an unknown start
time last and, among themselves, in reverse of their current order, so ties
come out in a particular order (squeue lists equal-priority pending jobs
newest first). Reproducing that exactly keeps Corral's output byte-identical.

The pending tasks of one job array (squeue ``-r``) are one record to Slurm and
print in task order, so they sort as one unit here.
"""

from __future__ import annotations

from cli import jobstate
from cli.jobfields import run_seconds
from corral.hostlist import expand

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Job = Mapping[str, Any]
    Unit = list[Job]
    SortKey = Callable[[Job, int], Any]

DEFAULT_SORT = "P,t,-p"
#: squeue --start's default.
START_SORT = "S"

# Slurm's uint32 sentinels, which sort above every real value.
_NO_VAL = 0xFFFFFFFE
_INFINITE = 0xFFFFFFFF


class InvalidSort(ValueError):
    """A sort letter squeue does not know; ``str()`` is the letter."""


def _job_id(job: Job, now: int) -> tuple[int, int]:
    task = job["array_task_id"]
    if task is None:
        return int(job["job_id"]), _NO_VAL
    return int(job["array_job_id"]), int(task)


def _time_limit(job: Job, now: int) -> int:
    return _INFINITE if job["time_limit"] == -1 else int(job["time_limit"])


def _time_left(job: Job, now: int) -> int:
    if job["time_limit"] == -1:
        return _INFINITE
    return int(job["time_limit"]) * 60 - run_seconds(job, now)


def _first_node(job: Job, now: int) -> tuple[str, int]:
    """The lowest host of the job's nodes, as prefix and number (Slurm's hostlist order)."""
    try:
        names = expand(job["nodes"]) if job["nodes"] else []
    except ValueError:
        names = [job["nodes"]]
    if not names:
        return "", -1
    return min(_split_host(name) for name in names)


def _split_host(name: str) -> tuple[str, int]:
    end = len(name)
    while end and name[end - 1].isdigit():
        end -= 1
    return name[:end], int(name[end:]) if end < len(name) else -1


def _field(key: str) -> SortKey:
    return lambda job, now: job[key]


def _constant(job: Job, now: int) -> int:
    return 0


#: Sort letters; Slurm accepts but ignores c, f, h, n and O.
_KEYS: dict[str, SortKey] = {
    "B": _field("batch_host"),
    "c": _constant,
    "C": _field("num_cpus"),
    "d": _constant,
    "D": _field("num_nodes"),
    "e": _field("end_time"),
    "f": _constant,
    "g": lambda job, now: job["group"] or str(job["gid"]),
    "G": _field("gid"),
    "h": _constant,
    "H": _constant,
    "i": _job_id,
    "I": _constant,
    "j": _field("name"),
    "J": _constant,
    "l": _time_limit,
    "L": _time_left,
    "m": lambda job, now: job["min_mem_cpu"] or job["min_mem_node"],
    "M": lambda job, now: run_seconds(job, now),
    "n": _constant,
    "N": _first_node,
    "O": _constant,
    "p": _field("priority"),
    "P": _field("partition"),
    "Q": _field("priority"),
    "t": lambda job, now: jobstate.compact_name(job),
    "T": lambda job, now: jobstate.long_name(job),
    "u": lambda job, now: job["user"] or str(job["uid"]),
    "U": _field("uid"),
    "v": _constant,
    "V": _field("submit_time"),
    "z": _constant,
}


def parse_sort(spec: str) -> list[tuple[str, bool]]:
    """The ``(letter, descending)`` keys of a sort spec, most significant first.

    ``-`` before a letter reverses it; ``,`` and ``+`` separate. ``b`` (an old
    GRES key) is dropped; any other unknown letter raises ``InvalidSort``.
    """
    keys: list[tuple[str, bool]] = []
    index = 0
    while index < len(spec):
        char = spec[index]
        descending = index > 0 and spec[index - 1] == "-"
        if char in ",+-":
            index += 1
            continue
        if spec[index : index + 7].lower() == "cluster":
            keys.append(("cluster", descending))
            index += 7
            continue
        if char != "b":
            if char != "S" and char not in _KEYS:
                raise InvalidSort(char)
            keys.append((char, descending))
        index += 1
    return keys


def units(jobs: list[Job]) -> list[Unit]:
    """Records grouped as Slurm sorts them: an array's pending tasks together, in task order."""
    ordered = sorted(jobs, key=lambda job: (int(job["job_id"]), _job_id(job, 0)))
    grouped: list[Unit] = []
    arrays: dict[int, Unit] = {}
    for job in ordered:
        pending_task = (
            job["array_task_id"] is not None and job["array_job_id"] and job["state"] == "PENDING"
        )
        if not pending_task:
            grouped.append([job])
            continue
        unit = arrays.get(job["array_job_id"])
        if unit is None:
            unit = arrays[job["array_job_id"]] = []
            grouped.append(unit)
        unit.append(job)
    for unit in arrays.values():
        unit.sort(key=lambda job: int(job["array_task_id"]))
    return grouped


def _by_start(items: list[Unit], now: int | None, descending: bool) -> list[Unit]:
    """Slurm's start-time sort: unknown starts last, in reverse of their current order.

    ``now`` None is the first pass, before squeue has read its clock; later
    passes count a pending job whose start time has passed as starting now.
    """

    def key(position_unit: tuple[int, Unit]) -> tuple[int, int]:
        position, unit = position_unit
        job = unit[0]
        start = int(job["start_time"])
        if start == 0:
            return 1, -position
        if now is not None and job["state"] == "PENDING" and start < now:
            start = now
        return 0, -start if descending else start

    return [unit for _, unit in sorted(enumerate(items), key=key)]


def _unit_key(key: SortKey, now: int) -> Callable[[Unit], Any]:
    return lambda unit: key(unit[0], now)


def sort_jobs(jobs: list[Job], spec: str, now: int) -> list[Job]:
    """``jobs`` in the order squeue prints them for sort spec ``spec``."""
    keys = parse_sort(spec)
    items = _by_start(units(jobs), None, True)
    for letter, descending in reversed(keys):
        if letter == "S":
            items = _by_start(items, now, descending)
        elif letter == "cluster":
            items.sort(key=lambda unit: unit[0]["cluster"], reverse=descending)
        else:
            items.sort(key=_unit_key(_KEYS[letter], now), reverse=descending)
    return [job for unit in items for job in unit]
