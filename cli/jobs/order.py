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

from operator import itemgetter

from cli.jobs import statenames
from cli.jobs.fields import RUN_SECONDS_READS, run_seconds
from corral.hostlist import expand

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Job = Mapping[str, Any]
    #: A sort key: a function of the job, or of the job and the controller's clock.
    SortKey = tuple[Callable[..., Any], tuple[str, ...], bool]

DEFAULT_SORT = "P,t,-p"
#: squeue --start's default.
START_SORT = "S"

# Slurm's uint32 sentinels, which sort above every real value.
_NO_VAL = 0xFFFFFFFE
_INFINITE = 0xFFFFFFFF


class InvalidSort(ValueError):
    """A sort letter squeue does not know; ``str()`` is the letter."""


def _job_id(job: Job) -> tuple[int, int]:
    task = job["array_task_id"]
    if task is None:
        return int(job["job_id"]), _NO_VAL
    return int(job["array_job_id"]), int(task)


def _time_limit(job: Job) -> int:
    return _INFINITE if job["time_limit"] == -1 else int(job["time_limit"])


def _time_left(job: Job, now: int) -> int:
    if job["time_limit"] == -1:
        return _INFINITE
    return int(job["time_limit"]) * 60 - run_seconds(job, now)


def _first_node(job: Job) -> tuple[str, int]:
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


# Each key is (function, the JobInfo fields it reads, whether it also takes the
# clock). Keys are functions of the job alone where they can be, so that a sort
# of 10,000 records calls one function per record, not a wrapper as well.


def _field(key: str) -> SortKey:
    return itemgetter(key), (key,), False


def _constant(job: Job) -> int:
    return 0


_IGNORED: SortKey = (_constant, (), False)

#: Sort letters; Slurm accepts but ignores c, f, h, n and O.
_KEYS: dict[str, SortKey] = {
    "B": _field("batch_host"),
    "c": _IGNORED,
    "C": _field("num_cpus"),
    "d": _IGNORED,
    "D": _field("num_nodes"),
    "e": _field("end_time"),
    "f": _IGNORED,
    "g": (lambda job: job["group"] or str(job["gid"]), ("group", "gid"), False),
    "G": _field("gid"),
    "h": _IGNORED,
    "H": _IGNORED,
    "i": (_job_id, ("job_id", "array_job_id", "array_task_id"), False),
    "I": _IGNORED,
    "j": _field("name"),
    "J": _IGNORED,
    "l": (_time_limit, ("time_limit",), False),
    "L": (_time_left, ("time_limit", *RUN_SECONDS_READS), True),
    "m": (
        lambda job: job["min_mem_cpu"] or job["min_mem_node"],
        ("min_mem_cpu", "min_mem_node"),
        False,
    ),
    "M": (run_seconds, RUN_SECONDS_READS, True),
    "n": _IGNORED,
    "N": (_first_node, ("nodes",), False),
    "O": _IGNORED,
    "p": _field("priority"),
    "P": _field("partition"),
    "Q": _field("priority"),
    "t": (statenames.compact_name, statenames.READS, False),
    "T": (statenames.long_name, statenames.READS, False),
    "u": (lambda job: job["user"] or str(job["uid"]), ("user", "uid"), False),
    "U": _field("uid"),
    "v": _IGNORED,
    "V": _field("submit_time"),
    "z": _IGNORED,
    "cluster": _field("cluster"),
}

#: Keys worked out for the whole list at once (``statenames``' comprehensions skip
#: a call per job), by letter; the job's key is the value at its index.
_COLUMNS: dict[str, Callable[[list[Job]], list[Any]]] = {
    "t": statenames.compact_names,
    "T": statenames.long_names,
    "u": lambda jobs: [job["user"] or str(job["uid"]) for job in jobs],
}

#: What every sort reads: grouping array tasks and heterogeneous job components
#: (``_units``) and the start-time passes.
_BASE_READS = (
    "job_id", "array_job_id", "array_task_id", "state", "start_time", "het_job_id",
    "het_job_offset",
)  # fmt: skip


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


def sort_reads(spec: str) -> set[str]:
    """The JobInfo fields that sorting by ``spec`` (a valid sort spec) reads."""
    reads = set(_BASE_READS)
    for letter, _ in parse_sort(spec):
        if letter != "S":  # start time and state: read by every sort
            reads.update(_KEYS[letter][1])
    return reads


def _units(jobs: list[Job]) -> tuple[list[Job], dict[int, list[Job]]]:
    """Records grouped as Slurm sorts them: an array's pending tasks together, in task
    order, and a pending heterogeneous job's components, in offset order (``2+0``
    before ``2+1``, as Slurm 22.05's squeue lists them).

    Each unit is represented by its first record (most are single records);
    the second value maps ``id()`` of such a first task to all tasks of its unit.
    """
    if not any(task is not None for task in map(_TASK, jobs)):
        # No array task: creation order is job id order (one record per id, or
        # equal ids kept in their order, as by ``_record_order``), with a C-level key.
        ordered = sorted(jobs, key=_JOB_ID)
        if not any(job.get("het_job_id") for job in jobs):
            return ordered, {}
    else:
        ordered = sorted(jobs, key=_record_order)
    heads: list[Job] = []
    # (kind, array or leader id) -> (index in heads, its records)
    arrays: dict[tuple[str, int], tuple[int, list[Job]]] = {}
    for job in ordered:
        if job["state"] != "PENDING":
            heads.append(job)
            continue
        if job.get("het_job_id"):
            key = ("het", int(job["het_job_id"]))
        elif job["array_task_id"] is not None and job["array_job_id"]:
            key = ("array", int(job["array_job_id"]))
        else:
            heads.append(job)
            continue
        array = arrays.get(key)
        if array is None:
            arrays[key] = (len(heads), [job])
            heads.append(job)
        else:
            array[1].append(job)
    tasks: dict[int, list[Job]] = {}
    for index, unit in arrays.values():
        unit.sort(key=_unit_order)
        heads[index] = unit[0]
        tasks[id(unit[0])] = unit
    return heads, tasks


_TASK = itemgetter("array_task_id")
_JOB_ID = itemgetter("job_id")
_START = itemgetter("start_time")
_STATE = itemgetter("state")


def _unit_order(job: Job) -> int:
    """A record's place in its unit: its array task id, or its component offset."""
    if job.get("het_job_id"):
        return int(job["het_job_offset"])
    return int(job["array_task_id"])


def _record_order(job: Job) -> tuple[int, int, int]:
    """The controller's creation order: job id, then (for array tasks) array id and task."""
    job_id = int(job["job_id"])
    task = job["array_task_id"]
    if task is None:
        return job_id, job_id, _NO_VAL
    return job_id, int(job["array_job_id"]), int(task)


def _by_start(heads: list[Job], now: int | None, descending: bool) -> list[Job]:
    """Slurm's start-time sort: unknown starts last, in reverse of their current order.

    ``now`` None is the first pass, before squeue has read its clock; later
    passes count a pending job whose start time has passed as starting now.
    """
    starts = list(map(int, map(_START, heads)))
    if now is not None:
        starts = [
            now if start != 0 and start < now and state == "PENDING" else start
            for start, state in zip(starts, map(_STATE, heads), strict=True)
        ]
    known = [index for index, start in enumerate(starts) if start != 0]
    known.sort(key=starts.__getitem__, reverse=descending)
    unknown = [index for index, start in enumerate(starts) if start == 0]
    unknown.reverse()
    return [heads[index] for index in known + unknown]


def _at(function: Callable[[Job, int], Any], now: int) -> Callable[[Job], Any]:
    """A clock-dependent key as a key of the job alone."""
    return lambda job: function(job, now)


def sort_jobs(jobs: list[Job], spec: str, now: int) -> list[Job]:
    """``jobs`` in the order squeue prints them for sort spec ``spec``."""
    keys = parse_sort(spec)
    heads, tasks = _units(jobs)
    heads = _by_start(heads, None, True)
    for letter, descending in reversed(keys):
        if letter == "S":
            heads = _by_start(heads, now, descending)
            continue
        column = _COLUMNS.get(letter)
        if column is not None:
            keys_of = column(heads)
            order = sorted(range(len(heads)), key=keys_of.__getitem__, reverse=descending)
            heads = [heads[index] for index in order]
            continue
        function, _, clocked = _KEYS[letter]
        heads.sort(key=_at(function, now) if clocked else function, reverse=descending)
    if not tasks:
        return heads
    return [job for head in heads for job in tasks.get(id(head), (head,))]
