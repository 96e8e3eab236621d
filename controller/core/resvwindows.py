"""Advance reservations in a scheduling pass: which nodes a job may use, and until when.

A job in a reservation (``--reservation``) may use only the reservation's
nodes, from its start, and its run is cut at the reservation's end (the
controller times it out there). Any other job may not use a reservation's
nodes for any moment of ``[start, end)``: a start now, or a backfill plan
for later, avoids the nodes of every reservation its run would overlap.
Reservations do not share nodes in time (``controller/reservations.py``
refuses that), so a job in one never meets another.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.core.snapshot import PartitionView, ResvView
from controller.model import Job

NOTHING: frozenset[str] = frozenset()
#: How far a job without any time limit is taken to run.
FOREVER = 10 * 365 * 86400


def run_end(job: Job, part: PartitionView, begin: int) -> int:
    """When a run of ``job`` in ``part`` from ``begin`` reaches its time limit."""
    minutes = job.time_limit if job.time_limit > 0 else part.max_time
    return begin + (minutes * 60 if minutes > 0 else FOREVER)


class ResvWindows:
    """The pass's reservations, by name and in time."""

    def __init__(self, views: Iterable[ResvView]) -> None:
        self.by_name = {v.name: v for v in views}

    def of(self, job: Job) -> ResvView | None:
        return self.by_name.get(job.reservation) if job.reservation else None

    def avoid(self, begin: int, end: int) -> frozenset[str]:
        """The nodes of reservations overlapping ``[begin, end)`` (for jobs outside them)."""
        if not self.by_name:
            return NOTHING
        hit = [v.nodes for v in self.by_name.values() if v.start < end and begin < v.end]
        return frozenset().union(*hit) if hit else NOTHING
