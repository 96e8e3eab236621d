"""Heterogeneous jobs in a pass: all components start at the same moment, or none.

Slurm co-schedules a heterogeneous job: no component starts until every one can
(``controller/hetjobs.py`` has the records). A pass meets the components as pending
jobs of their own; ``groups`` gathers them under their leader, and ``place`` tries
each in turn on a copy of the pass's free resources, later components seeing what
earlier ones took, so the group either fits whole (its starts, to be taken from
the real pass) or waits whole (the first reason a component could not start). The
copy is thrown away either way: a failed group changes nothing for the jobs behind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from controller.core import devices
from controller.core.nodeindex import FreeNodes, NodeOrder
from controller.core.placement import take
from controller.core.plan import Start
from controller.core.snapshot import NodeView
from controller.jobstate import Reason
from controller.model import Job

#: Where one component starts now on the given free resources, or why it cannot.
Fit = Callable[[Job, Mapping[str, NodeView], FreeNodes], Start | Reason]


def groups(pending: Iterable[Job]) -> dict[int, list[Job]]:
    """The pending components of each heterogeneous job, by leader id, in offset order."""
    found: dict[int, list[Job]] = {}
    for job in pending:
        if job.het_job_id:
            found.setdefault(job.het_job_id, []).append(job)
    for members in found.values():
        members.sort(key=lambda j: j.het_job_offset)
    return found


def licenses(asks: Iterable[Sequence[tuple[str, int]]]) -> tuple[tuple[str, int], ...]:
    """The components' license requests as one: what the group holds from its start."""
    total: dict[str, int] = {}
    for ask in asks:
        for name, count in ask:
            total[name] = total.get(name, 0) + count
    return tuple(sorted(total.items()))


def size(job: Job) -> int:
    """How many components ``job``'s heterogeneous job has (its id set ``123-125``)."""
    first, _, last = job.het_job_id_set.partition("-")
    return int(last or first) - int(first) + 1


def place(
    members: Sequence[Job], fit: Fit, nodes: Mapping[str, NodeView], order: NodeOrder
) -> list[Start] | Reason:
    """Every component's start now, each on what the ones before it left; or the first
    reason one cannot start (then none does)."""
    trial = dict(nodes)
    free = FreeNodes(trial, order)
    starts: list[Start] = []
    for job in members:
        outcome = fit(job, trial, free)
        if isinstance(outcome, Reason):
            return outcome
        bound = devices.bind(outcome, trial)
        if bound is None:  # a GPU share this pass gave whole: the next pass
            return Reason.RESOURCES
        take(trial, bound)
        free.taken(bound)
        starts.append(bound)
    return starts
