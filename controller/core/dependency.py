"""``--dependency``: is a job free to start, still waiting, or never going to?

A job's list arrives resolved (``controller/depspec.py``: job ids and task
references, made once when the text was set). A pass builds one ``Index`` of
the jobs the controller knows, in one walk over them, and then looks each
reference up by id, so a job's check costs O(its references), not O(its
references x all jobs). Better still, a reference to a job it does not know is
satisfied outright, so only the known ones are looked at: the plain ids of a
list are matched against ``Index.known`` by one set intersection (in C), and a
120 KB list of ids nobody submitted costs a pass a fraction of a millisecond.

An id the controller does not know (never submitted, or ended and purged
after MinJobAge) counts as a job that has already ended: the dependency on it
is satisfied, as Slurm drops a dependency on a job no longer in its memory;
but ``expand:id`` on such a job can never be met (there is nothing to expand).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping, Sequence

from controller.core.snapshot import JobFacts
from controller.depspec import ALL_TASKS, TYPES, Deps, Item, parse, resolve
from corral import arrayspec

__all__ = [
    "TYPES",
    "Index",
    "Outcome",
    "check",
    "evaluate",
    "parse",
    "shown",
    "startable_tasks",
]

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


class Outcome(enum.Enum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


class Index:
    """The jobs a pass knows, keyed the ways dependency references name them."""

    def __init__(self, jobs: Mapping[int, JobFacts]) -> None:
        self.jobs = jobs
        self.members: dict[int, list[JobFacts]] = {}  # array id -> its task records
        self.tasks: dict[tuple[int, int], list[JobFacts]] = {}  # (array id, task) -> records
        self.alive: dict[tuple[str, int], list[tuple[int, JobFacts]]] = {}  # singleton
        # Every id a reference can name and find records for: a job's or an array's.
        self.known: set[int] = set(jobs)
        for job_id, facts in jobs.items():
            if facts.array_job_id:
                self.known.add(facts.array_job_id)
                self.members.setdefault(facts.array_job_id, []).append(facts)
                if facts.array_task_id is not None:
                    key = (facts.array_job_id, facts.array_task_id)
                    self.tasks.setdefault(key, []).append(facts)
            if facts.state not in _FINISHED:
                self.alive.setdefault((facts.name, facts.uid), []).append((job_id, facts))

    def is_array(self, job_id: int) -> bool:
        """Whether ``job_id`` names a job array (its tasks, or its pending record)."""
        own = self.jobs.get(job_id)
        return job_id in self.members or (own is not None and own.array_job_id == job_id)

    def targets(self, job_id: int, task: int | None) -> Sequence[JobFacts]:
        """The records a reference names (empty: a job the controller does not know)."""
        if task is not None and task != ALL_TASKS:
            # A task id names the array task whose (array_job_id, task) match, or
            # the array's own record while that task has not started.
            found = list(self.tasks.get((job_id, task), ()))
            own = self.jobs.get(job_id)
            if (
                own is not None
                and own.array_job_id == job_id
                and own.array_task_id != task
                and arrayspec.contains(own.array_pending, task)
            ):
                found.append(own)
            return found
        members = self.members.get(job_id)
        if members:
            return members
        own = self.jobs.get(job_id)
        return [own] if own is not None else []


def _one(
    kind: str, ref: tuple[int, int | None, int], index: Index, now: int, task: int | None
) -> Outcome:
    job_id, target_task, delay = ref
    if kind == "aftercorr" and task is not None and target_task is None:
        # Task-wise: task N waits for task N of the other array (if it has one).
        target_task = task
    targets = index.targets(job_id, target_task)
    if not targets:
        return Outcome.SATISFIED  # not known (purged long ago): it ended
    results = set()
    for facts in targets:
        if kind == "after":
            results.add(Outcome.WAITING if facts.state == "PENDING" else Outcome.SATISFIED)
        elif kind == "expand":  # Slurm's: it may start while the job it expands runs
            ended = facts.state in _FINISHED
            results.add(
                Outcome.WAITING
                if facts.state == "PENDING"
                else Outcome.NEVER
                if ended
                else Outcome.SATISFIED
            )
        elif facts.state not in _FINISHED:
            results.add(Outcome.WAITING)
        elif kind == "afterany":
            results.add(Outcome.SATISFIED)
        elif kind in ("afterok", "aftercorr"):
            ok = facts.state == "COMPLETED" and facts.exit_status == 0
            results.add(Outcome.SATISFIED if ok else Outcome.NEVER)
        else:  # afternotok
            ok = facts.state != "COMPLETED" or facts.exit_status != 0
            results.add(Outcome.SATISFIED if ok else Outcome.NEVER)
    if Outcome.NEVER in results:
        return Outcome.NEVER
    if Outcome.WAITING in results:
        return Outcome.WAITING
    if kind == "after" and delay:
        start = max(f.start_time for f in targets)
        if start and now < start + delay * 60:
            return Outcome.WAITING
    return Outcome.SATISFIED


def _known_references(item: Item, index: Index) -> Iterator[tuple[int, int | None, int]]:
    """``item``'s references that name records ``index`` has; any other is satisfied
    (``targets`` finds nothing for it, whatever its task), so it cannot change the
    item's outcome. Plain ids are matched in one set intersection."""
    for job_id in index.known.intersection(memoryview(item.ids).cast("Q")):
        yield job_id, None, 0
    for ref in item.refs:
        if ref.job_id in index.known:
            yield ref.job_id, ref.task, ref.delay


def _singleton(job_id: int, name: str, uid: int, index: Index) -> Outcome:
    busy = any(
        jid != job_id and (f.state != "PENDING" or jid < job_id)
        for jid, f in index.alive.get((name, uid), ())
    )
    return Outcome.WAITING if busy else Outcome.SATISFIED


def check(
    deps: Deps,
    job_id: int,
    name: str,
    uid: int,
    index: Index,
    now: int,
    task: int | None = None,
) -> Outcome:
    """Where a job with the resolved list ``deps`` stands right now.

    ``task`` is the array task index of the job asking, for ``aftercorr``.
    """
    if not deps.valid:
        return Outcome.NEVER
    outcomes = set()
    for item in deps.items:
        if item.kind == "singleton":
            outcomes.add(_singleton(job_id, name, uid, index))
            continue
        if item.kind == "expand" and not index.known.intersection(
            ref[0] for ref in item.references()
        ):
            outcomes.add(Outcome.NEVER)  # the job to expand is gone: it ended
            continue
        parts = set()
        for ref in _known_references(item, index):
            part = _one(item.kind, ref, index, now, task)
            parts.add(part)
            if part is Outcome.NEVER:
                break
        if Outcome.NEVER in parts:
            outcomes.add(Outcome.NEVER)
        elif Outcome.WAITING in parts:
            outcomes.add(Outcome.WAITING)
        else:
            outcomes.add(Outcome.SATISFIED)
    if not outcomes:
        return Outcome.SATISFIED
    if deps.any_of:
        if Outcome.SATISFIED in outcomes:
            return Outcome.SATISFIED
        return Outcome.NEVER if outcomes == {Outcome.NEVER} else Outcome.WAITING
    if Outcome.NEVER in outcomes:
        return Outcome.NEVER
    return Outcome.WAITING if Outcome.WAITING in outcomes else Outcome.SATISFIED


def evaluate(
    text: str,
    job_id: int,
    name: str,
    uid: int,
    jobs: Mapping[int, JobFacts],
    now: int,
    task: int | None = None,
) -> Outcome:
    """``check`` for a dependency text against ``jobs``: resolves and indexes for one question."""
    return check(resolve(text), job_id, name, uid, Index(jobs), now, task)


def startable_tasks(
    deps: Deps,
    job_id: int,
    name: str,
    uid: int,
    pending: str,
    index: Index,
    now: int,
) -> tuple[list[int], Outcome]:
    """For an array's record with ``aftercorr``: the pending tasks free to start.

    Each task waits for its own counterpart, so some may start while others
    wait. The outcome is SATISFIED when some may start, else WAITING, or
    NEVER when none ever will.
    """
    ready, waiting = [], False
    for task in arrayspec.expand(pending):
        outcome = check(deps, job_id, name, uid, index, now, task)
        if outcome is Outcome.SATISFIED:
            ready.append(task)
        elif outcome is Outcome.WAITING:
            waiting = True
    if ready:
        return ready, Outcome.SATISFIED
    return ready, Outcome.WAITING if waiting else Outcome.NEVER


def _ident(job_id: int, task: int | None, delay: int) -> str:
    """A reference as ``--dependency`` spells it: ``16``, ``16_4``, ``16_*``, ``16+5``."""
    tail = "" if task is None else "_*" if task == ALL_TASKS else f"_{task}"
    return f"{job_id}{tail}" + (f"+{delay}" if delay else "")


def shown(
    deps: Deps,
    job_id: int,
    name: str,
    uid: int,
    index: Index,
    now: int,
    task: int | None = None,
) -> str:
    """The list as Slurm shows it (``scontrol show job`` ``Dependency=``, squeue ``%E``).

    Each reference not yet satisfied, one per id, marked ``(unfulfilled)`` or, when
    it can never be met, ``(failed)``: ``afterok:16(unfulfilled),afterok:17(failed)``;
    a whole array as ``123_*``.
    Satisfied references are dropped, and with ``?`` one satisfied reference
    satisfies the whole list; "" (Slurm's ``(null)``) when nothing is left.
    """
    if not deps.valid:
        return f"{deps.text}(failed)"
    parts: list[str] = []
    for item in deps.items:
        if item.kind == "singleton":
            if _singleton(job_id, name, uid, index) is Outcome.SATISFIED:
                if deps.any_of:
                    return ""
                continue
            parts.append("singleton(unfulfilled)")
            continue
        for ref in item.references():
            if ref[0] not in index.known:
                outcome = Outcome.SATISFIED  # not known (purged): it ended
            else:
                outcome = _one(item.kind, ref, index, now, task)
            if outcome is Outcome.SATISFIED:
                if deps.any_of:
                    return ""
                continue
            mark = "failed" if outcome is Outcome.NEVER else "unfulfilled"
            job, target, delay = ref
            if target is None and index.is_array(job):
                target = ALL_TASKS  # Slurm shows a whole array as 123_*
            parts.append(f"{item.kind}:{_ident(job, target, delay)}({mark})")
    return ("?" if deps.any_of else ",").join(parts)
