"""Textbook EASY backfilling (Lifka 1995; Mu'alem and Feitelson 2001), independent of Corral.

Processors are one pool of ``total`` (as SWF counts them); a job's estimate is
its run time (perfect estimates). At each time, ends first, then arrivals,
then one decision: jobs start in arrival order while they fit; the first that
does not fit gets the one reservation, at the shadow time (the earliest end of
running jobs by which enough processors are free); every later job starts now
if it fits the free processors and either ends by the shadow time or needs no
more than the extra processors (those the reservation leaves at the shadow
time, with every job that ends then, less what earlier backfilled jobs running past
it took). The jobs started now end too: the shadow time may be one of their ends.
"""

from __future__ import annotations

import heapq
import math


def easy(jobs: list[tuple[int, int, int]], total: int) -> list[int]:
    """Start times of ``jobs`` given as (submit, processors, run time), in submit order."""
    starts = [-1] * len(jobs)
    running: list[tuple[int, int]] = []  # heap of (end, processors)
    queue: list[int] = []  # indexes of waiting jobs, in arrival order
    free = total
    i = 0
    while i < len(jobs) or running:
        now = min(jobs[i][0] if i < len(jobs) else math.inf, running[0][0] if running else math.inf)
        while running and running[0][0] == now:
            free += heapq.heappop(running)[1]
        while i < len(jobs) and jobs[i][0] == now:
            queue.append(i)
            i += 1
        while queue and jobs[queue[0]][1] <= free:
            free -= _start(jobs, queue.pop(0), now, starts, running)
        if queue:
            need = jobs[queue[0]][1]
            avail, shadow = free, now
            for end, procs in sorted(running):  # the jobs just started end too
                if avail >= need:
                    break
                avail += procs
                shadow = end
            # Extra: all that is free at the shadow time, with every job ending then.
            extra = free + sum(procs for end, procs in running if end <= shadow) - need
            for k in queue[1:]:
                procs, run = jobs[k][1:]
                if procs > free or (now + run > shadow and procs > extra):
                    continue
                if now + run > shadow:
                    extra -= procs
                queue.remove(k)
                free -= _start(jobs, k, now, starts, running)
    return starts


def _start(
    jobs: list[tuple[int, int, int]],
    k: int,
    now: float,
    starts: list[int],
    running: list[tuple[int, int]],
) -> int:
    """Start job ``k`` now; its processors."""
    starts[k] = int(now)
    heapq.heappush(running, (int(now) + jobs[k][2], jobs[k][1]))
    return jobs[k][1]
