"""``--dependency``: is a job free to start, still waiting, or never going to?

Grammar (sbatch.1): items joined by ``,`` (all must hold) or ``?`` (any);
an item is ``type:id[:id...]`` with ``after`` ids allowing ``+minutes``,
``singleton``, or a bare id meaning ``afterany``. An id names a job or a
whole array (``123``), one task (``123_4``) or all tasks (``123_*``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

from controller.core.snapshot import JobFacts
from corral import arrayspec

_FINISHED = frozenset(
    {
        "COMPLETED",
        "CANCELLED",
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "BOOT_FAIL",
        "DEADLINE",
        "OUT_OF_MEMORY",
    }
)
TYPES = ("after", "afterany", "afterok", "afternotok", "aftercorr", "singleton")


class Outcome(enum.Enum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


def _digits(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _check_id(ident: str, kind: str) -> None:
    """``123``, ``123_4``, ``123_*``, and for ``after`` a ``+minutes`` delay."""
    base, plus, delay = ident.partition("+")
    if plus and (kind != "after" or not _digits(delay)):
        raise ValueError(f"bad delay in {ident!r}")
    head, underscore, task = base.partition("_")
    if not _digits(head) or (underscore and task != "*" and not _digits(task)):
        raise ValueError(f"bad job id {ident!r}")


def parse(text: str) -> tuple[str, list[tuple[str, list[str]]]]:
    """Split into the joiner (``,`` or ``?``) and ``(type, ids)`` items; ValueError if bad.

    Everything ``evaluate`` later reads is checked here, so a stored
    dependency can never make a scheduling pass fail.
    """
    text = text.strip()
    if not text or text == "0":
        return ",", []
    if "," in text and "?" in text:
        raise ValueError("mixed separators")
    joiner = "?" if "?" in text else ","
    items: list[tuple[str, list[str]]] = []
    for raw in text.split(joiner):
        kind, _, rest = raw.partition(":")
        kind = kind.strip().lower()
        if not rest and kind and (kind[0].isdigit() or kind[0] == "_"):
            _check_id(kind, "afterany")  # a bare id is the old form of afterany
            items.append(("afterany", [kind]))
            continue
        matches = [t for t in TYPES if t == kind] or [t for t in TYPES if t.startswith(kind)]
        if not kind or len(matches) != 1:
            raise ValueError(f"unknown dependency type {kind!r}")
        kind = matches[0]
        ids = [i for i in rest.split(":") if i] if rest else []
        if (kind == "singleton") != (not ids):
            raise ValueError("bad dependency ids")
        for ident in ids:
            _check_id(ident, kind)
        items.append((kind, ids))
    return joiner, items


def _targets(ident: str, jobs: Mapping[int, JobFacts]) -> Iterable[JobFacts]:
    base = ident.split("+", 1)[0]
    head, _, task = base.partition("_")
    job_id = int(head)
    if task and task != "*":
        # A task id names the array task whose (array_job_id, task) match, or
        # the array's own record while that task has not started.
        index = int(task)
        return [
            f
            for f in jobs.values()
            if f.array_job_id == job_id
            and (f.array_task_id == index or arrayspec.contains(f.array_pending, index))
        ]
    members = [f for f in jobs.values() if f.array_job_id == job_id]
    if members:
        return members
    own = jobs.get(job_id)
    return [own] if own is not None else []


def _one(
    kind: str, ident: str, jobs: Mapping[int, JobFacts], now: int, task: int | None
) -> Outcome:
    if kind == "aftercorr" and task is not None and "_" not in ident:
        # Task-wise: task N waits for task N of the other array (if it has one).
        ident = f"{ident.split('+', 1)[0]}_{task}"
    targets = list(_targets(ident, jobs))
    if not targets:
        return Outcome.SATISFIED  # purged long ago: it ended
    results = []
    for facts in targets:
        if kind == "after":
            results.append(Outcome.WAITING if facts.state == "PENDING" else Outcome.SATISFIED)
        elif facts.state not in _FINISHED:
            results.append(Outcome.WAITING)
        elif kind == "afterany":
            results.append(Outcome.SATISFIED)
        elif kind in ("afterok", "aftercorr"):
            ok = facts.state == "COMPLETED" and facts.exit_status == 0
            results.append(Outcome.SATISFIED if ok else Outcome.NEVER)
        else:  # afternotok
            ok = facts.state != "COMPLETED" or facts.exit_status != 0
            results.append(Outcome.SATISFIED if ok else Outcome.NEVER)
    if Outcome.NEVER in results:
        return Outcome.NEVER
    if Outcome.WAITING in results:
        return Outcome.WAITING
    if kind == "after" and "+" in ident:
        delay = int(ident.split("+", 1)[1] or 0) * 60
        start = max(f.start_time for f in targets)
        if start and now < start + delay:
            return Outcome.WAITING
    return Outcome.SATISFIED


def evaluate(
    text: str,
    job_id: int,
    name: str,
    uid: int,
    jobs: Mapping[int, JobFacts],
    now: int,
    task: int | None = None,
) -> Outcome:
    """Where a job with dependency ``text`` stands right now.

    ``task`` is the array task index of the job asking, for ``aftercorr``.
    """
    try:
        joiner, items = parse(text)
    except ValueError:
        return Outcome.NEVER
    outcomes = []
    for kind, ids in items:
        if kind == "singleton":
            busy = any(
                jid != job_id
                and f.name == name
                and f.uid == uid
                and f.state not in _FINISHED
                and (f.state != "PENDING" or jid < job_id)
                for jid, f in jobs.items()
            )
            outcomes.append(Outcome.WAITING if busy else Outcome.SATISFIED)
            continue
        parts = [_one(kind, ident, jobs, now, task) for ident in ids]
        if Outcome.NEVER in parts:
            outcomes.append(Outcome.NEVER)
        elif Outcome.WAITING in parts:
            outcomes.append(Outcome.WAITING)
        else:
            outcomes.append(Outcome.SATISFIED)
    if not outcomes:
        return Outcome.SATISFIED
    if joiner == "?":
        if Outcome.SATISFIED in outcomes:
            return Outcome.SATISFIED
        return Outcome.NEVER if all(o is Outcome.NEVER for o in outcomes) else Outcome.WAITING
    if Outcome.NEVER in outcomes:
        return Outcome.NEVER
    return Outcome.WAITING if Outcome.WAITING in outcomes else Outcome.SATISFIED


def startable_tasks(
    text: str,
    job_id: int,
    name: str,
    uid: int,
    pending: str,
    jobs: Mapping[int, JobFacts],
    now: int,
) -> tuple[list[int], Outcome]:
    """For an array's record with ``aftercorr``: the pending tasks free to start.

    Each task waits for its own counterpart, so some may start while others
    wait. The outcome is SATISFIED when some may start, else WAITING, or
    NEVER when none ever will.
    """
    ready, waiting = [], False
    for index in arrayspec.expand(pending):
        outcome = evaluate(text, job_id, name, uid, jobs, now, index)
        if outcome is Outcome.SATISFIED:
            ready.append(index)
        elif outcome is Outcome.WAITING:
            waiting = True
    if ready:
        return ready, Outcome.SATISFIED
    return ready, Outcome.WAITING if waiting else Outcome.NEVER
