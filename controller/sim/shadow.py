"""EASY's reservation for the head of the queue, by counting, on nodes of one CPU.

On the trace's own cluster with one CPU per node, every sim job asks for tasks
of one CPU and no memory, and every node holds at most one job, so what the
core's backfill pass decides about the head of the queue under ``easy`` can be
bounded from counts alone, without placing anything (``controller/core/
backfill.py``, ``Backfill._earliest`` and ``_sooner``):

* the head is tried at trial times on the ``bf_resolution`` grid, the first one
  ``ceil(now + resolution)``; the free CPUs at ``t`` are those free now plus
  every release (a running job's time limit, or that of a job the main pass
  just started) at or before ``t`` that is inside the window. Nothing is
  reserved ahead of the head, so it fits at the first trial time where that
  count reaches its size: ``latest``, the grid point at or after the release
  that makes the count (or the first trial time), if inside the window;
* its nodes are the nodes released by then first (the nodes busy now, each a
  whole node: one job per node), then nodes free now, each group in selection
  order, so ``max(0, size - released by latest)`` of the nodes free now are
  planned and the rest, ``extra``, are not;
* its start moves back to ``max(ceil(ready), now + resolution)`` where ready is
  the last release of the chosen busy nodes (nothing else claims them): at
  least the ``m``-th earliest release, ``m`` the busy nodes chosen. That bound
  is ``earliest``; the start lies in ``[earliest, latest]``.

A job behind the head that would run into the plan (its run from now, rounded
up to the resolution as backfill rounds it, ends after ``latest``) starts now
only on free nodes outside the plan, so not when it needs more than ``extra``.
Starts only take free nodes, so such a job cannot start later in the same pass
either: ``Backfilling`` leaves it out (it neither starts nor reserves), and
makes no call when nothing is left that could start.

Where the plan cannot touch the jobs left (no plan in the window; a plan on
nodes busy now only, since starts take free nodes; or jobs that each end, by
the same rounding, before ``earliest``), backfill places them as the main pass
does, one after the other where they fit, on nodes no reservation blocks: the
main pass is asked to start them, and the head's reservation is not made.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from controller.core import BackfillParams
from controller.core.timeline import ceil_to
from controller.model import Job


@dataclass(frozen=True, slots=True)
class Shadow:
    """Bounds on the head's planned start, and the free CPUs its plan leaves."""

    earliest: int
    latest: int
    extra: int

    def blocks(self, job: Job, now: int, params: BackfillParams) -> bool:
        """Whether ``job`` started now certainly runs into the head's plan."""
        return ceil_to(now + run_length(job, params), params.resolution) > self.latest

    def clear(self, job: Job, now: int, params: BackfillParams) -> bool:
        """Whether ``job`` started now certainly ends before the head's plan begins."""
        return ceil_to(now + run_length(job, params), params.resolution) <= self.earliest


def run_length(job: Job, params: BackfillParams) -> int:
    """Seconds backfill takes ``job`` to run for (``backfill.duration`` in the sim's
    one partition, which has no MaxTime): its limit, else the window."""
    return job.time_limit * 60 if job.time_limit > 0 else params.window


def shadow(
    releases: Iterable[tuple[int, int]],
    free: int,
    size: int,
    now: int,
    params: BackfillParams,
) -> Shadow | None:
    """The head's plan for a head of ``size`` CPUs with ``free`` CPUs free now (after
    the main pass's starts) and ``releases`` as (time limit, CPUs), past ones
    included; None when it gets no plan inside the window (nothing then is blocked)."""
    res = params.resolution
    horizon = now + params.window
    ordered = sorted((at, cpus) for at, cpus in releases if at and at < horizon)
    first = ceil_to(now + res, res)
    count = free
    latest = None
    for at, cpus in ordered:
        count += cpus
        if count >= size:
            latest = max(ceil_to(at, res), first)
            break
    if latest is None or latest >= horizon:
        return None
    released = 0  # CPUs given back by ``latest``: whole nodes the plan takes first
    ready = now  # the earliest any ``chosen`` of those nodes can all be back
    chosen = min(size, sum(cpus for at, cpus in ordered if at <= latest))
    for at, cpus in ordered:
        if released >= chosen:
            break
        released += cpus
        ready = max(ready, at)
    earliest = min(latest, max(ceil_to(ready, res), now + res))
    return Shadow(earliest, latest, free - max(0, size - chosen))
