"""Advance reservations in a scheduling pass: which nodes a job may use, and until when.

A job in a reservation (``--reservation``) may use only the reservation's
nodes, from its start, and its run is cut at the reservation's end (the
controller times it out there). Any other job may not use a reservation's
nodes for any moment of ``[start, end)``: a start now, or a backfill plan
for later, avoids the nodes of every reservation its run would overlap.
Reservations do not share nodes in time (``controller/reservations.py``
refuses that), so a job in one never meets another.

A reservation with Flags=ANY_NODES (Slurm 22.05's reservation of licenses, also
spelt LICENSE_ONLY) keeps its licenses, not nodes, for its jobs: they run in its
window on any node, its own included, and avoid the other reservations' nodes as
any job does (``confine`` is None for them; ``avoid`` leaves their own out).
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

    def confine(self, job: Job) -> ResvView | None:
        """The reservation to whose nodes ``job`` is held: its own, unless that lets it
        use any node (ANY_NODES) or it has none."""
        resv = self.of(job)
        return None if resv is None or resv.any_nodes else resv

    def avoid(self, begin: int, end: int, own: str = "") -> frozenset[str]:
        """The nodes of reservations overlapping ``[begin, end)`` but ``own`` (for jobs
        outside them, or in an ANY_NODES reservation ``own``)."""
        if not self.by_name:
            return NOTHING
        hit = [
            v.nodes
            for v in self.by_name.values()
            if v.start < end and begin < v.end and v.name != own
        ]
        return frozenset().union(*hit) if hit else NOTHING
