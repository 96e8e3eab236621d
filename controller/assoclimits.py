"""Accounting limits as the scheduling core counts them (AccountingStorageEnforce=limits).

A pure function of the jobs, dbd's associations and fair share's decayed usage:
per pending job the ``Gate``s its association and QOS limits put on it, and what
the running jobs already use of each counted limit. The snapshot carries both;
the main pass and backfill count starts against them (``core/limits.py``).
Apart from the store, so that the arithmetic of who has spent what is read
and tested on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from controller import associations
from controller.associations import NOTHING_SPENT, Assoc, AssocSet, Spent
from controller.core.fairshare import Usage
from controller.core.limits import Gate
from controller.jobstate import JobState
from controller.model import Job


def limits(
    jobs: Iterable[Job],
    pending: Iterable[Job],
    assocs: AssocSet | None,
    enforce: frozenset[str],
    usage: Usage,
) -> tuple[dict[int, tuple[Gate, ...]], dict[str, int]]:
    """Per pending job its accounting limits, and what running jobs use of them."""
    if assocs is None or "limits" not in enforce:
        return {}, {}
    counted: dict[str, int] = {}
    for job in jobs:
        if job.state in (JobState.RUNNING, JobState.SUSPENDED):  # suspended ones count too
            for gate in associations.gates(job, assocs):
                if gate.key:
                    counted[gate.key] = counted.get(gate.key, 0) + gate.amount
    used = used_by(assocs, usage)
    safe = "safe" in enforce
    qos_used = qos_used_by(usage)
    gates = {
        job.job_id: g
        for job in pending
        if (g := associations.gates(job, assocs, used, safe, qos_used))
    }
    return gates, counted


def used_by(assocs: AssocSet, usage: Usage) -> Callable[[Assoc], Spent]:
    """Each association's decayed usage from fair share's (``associations.Spent``),
    an account's including every account and user below it: what GrpTRESMins
    and GrpWall limit."""
    held = usage.held()
    parents = {a.account: a.parent for a in assocs.assocs if not a.user}
    times: dict[str, list[float]] = {}  # account -> [billing, wall] below it
    tres: dict[str, dict[str, float]] = {}  # account -> TRES-seconds below it
    for key, billing in usage.raw.items():
        wall, mine = usage.wall.get(key, 0.0), held.get(key, {})
        name, seen = key[0], set()
        while name and name not in seen:
            pair = times.setdefault(name, [0.0, 0.0])
            pair[0] += billing
            pair[1] += wall
            sums = tres.setdefault(name, {})
            for tres_name, seconds in mine.items():
                sums[tres_name] = sums.get(tres_name, 0.0) + seconds
            seen.add(name)
            name = parents.get(name, "")

    def used(assoc: Assoc) -> Spent:
        if assoc.user:
            key = (assoc.account, assoc.user)
            return Spent(usage.raw.get(key, 0.0), usage.wall.get(key, 0.0), held.get(key, {}))
        if assoc.account not in times:
            return NOTHING_SPENT
        billing, wall = times[assoc.account]
        return Spent(billing, wall, tres[assoc.account])

    return used


def qos_used_by(usage: Usage) -> Callable[[str], Spent]:
    """Each QOS's decayed usage, for its own GrpTRESMins and GrpWall."""
    held = usage.qos_held()

    def qos_used(name: str) -> Spent:
        key = ("", name)
        return Spent(usage.qos.get(key, 0.0), usage.qos_wall.get(key, 0.0), held.get(name, {}))

    return qos_used
