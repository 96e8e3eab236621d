"""The scheduling cycle.

Each cycle, in order:
  1. ``check_nodes``  nodes silent past SlurmdTimeout go DOWN, their jobs end or requeue
  2. ``snapshot``     an immutable picture of nodes, partitions and pending jobs
                      (first, every PriorityCalcPeriod, fair-share usage advances
                      and pending jobs are re-ranked: ``priorities.py``)
  3. ``schedule``     the pure core decides starts and pending reasons: the main
                      pass (``default_queue_depth`` jobs, the whole queue every
                      ``sched_interval``), plus backfill every ``bf_interval``
  4. ``commit``       starts re-checked against live state and applied; elastic
                      jobs grown or shrunk (``elastic.py``); then
                      preemption (``preemption.py``: victims warned, ended or
                      suspended), suspended victims whose CPUs are free again
                      resumed (``preemptresume.py``), and the gang scheduler's
                      time slices (``gang.py``: every SchedulerTimeSlice)
  5. ``purge``        finished jobs older than MinJobAge forgotten
  6. ``flush``        all of it made durable; only then are the node agents told
                      what it causes (launches, kills, signals: ``effects.py``)
A cycle runs when something changed (``kick``) and at least once a second,
never sooner after the previous one than twice its duration. No cycle runs
while the journal cannot be written: what it decided could not be kept, and
running jobs need no cycle to go on and end (the agents' results still come in).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from controller import elastic, gang, hetjobs, preemption, preemptresume, reboots
from controller.agentlink import AgentLink
from controller.core import schedule
from controller.diag import SchedulerStats
from controller.journal import JournalWriteError
from controller.schedparams import SchedulerSettings, scheduler_settings
from controller.store import JobStore

log = logging.getLogger(__name__)

PERIOD = 1.0  # seconds between cycles when nothing happens
MIN_GAP = 0.01  # seconds between cycles, so bursts of events share one cycle


class SchedulerLoop:
    def __init__(
        self, store: JobStore, link: AgentLink, clock: Callable[[], float] = time.time
    ) -> None:
        self.store = store
        self.link = link
        self.clock = clock
        self.stats = SchedulerStats()
        self._wake = asyncio.Event()
        self._conf = store.conf
        self.settings: SchedulerSettings = scheduler_settings(store.conf)
        self.last_backfill = 0
        self.last_full_pass = 0
        self.last_slice = 0  # when the gang scheduler last rotated (gang.py)

    def kick(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=PERIOD)
            self._wake.clear()
            try:
                await self.cycle()
            except JournalWriteError:
                pass  # logged once by Durability, which retries and ends the failure
            except Exception:
                log.exception("scheduling cycle failed")
            # Let a busy controller serve RPCs too: cycles take at most a third
            # of its time, however long the queue.
            await asyncio.sleep(max(MIN_GAP, 2 * self.stats.last_us / 1e6))

    async def cycle(self) -> None:
        if self.store.durable.failure is not None:
            return
        began = time.perf_counter()
        now = int(self.clock())
        changed = self.link.check_nodes(now)
        changed = bool(self.store.end_reservations(now)) or changed
        changed = reboots.advance(self.store, now) or changed
        self.store.recalculate_priorities(now)
        snap = self.store.snapshot()
        if self._conf is not self.store.conf:  # reconfigured
            self._conf = self.store.conf
            self.settings = scheduler_settings(self._conf)
        settings = self.settings
        backfill = settings.backfill
        if backfill is not None and now - self.last_backfill < settings.bf_interval:
            backfill = None
        full = backfill is not None or now - self.last_full_pass >= settings.sched_interval
        depth = None if full else settings.default_queue_depth
        planning = time.perf_counter()
        plan = schedule(snap, now, backfill, depth)
        planned = int((time.perf_counter() - planning) * 1e6)
        if backfill is not None:
            self.last_backfill = now
            self.store.backfill_pass = (snap, plan, backfill)
        if full:
            self.last_full_pass = now
        started = self.store.commit(plan)
        changed = self.link.power.advance(now) or changed  # resumes the nodes just given
        resized = elastic.apply(self.store, plan)
        preempted = preemption.begin(self.store, plan) + preemption.due(self.store, now)
        resumed = preemptresume.due(self.store, snap, now)
        rotate = now - self.last_slice >= self._conf.preemption.time_slice
        sliced = gang.run(self.store, now, rotate)
        if rotate:
            self.last_slice = now
        purged = self.store.purge(now)
        timed_out = self.store.end_interactive_past_limit(now)
        timed_out += hetjobs.orphans(self.store, now)  # components end with their leader
        signalled = self.store.signals_due(now)
        mailed = self.store.mail_due(now)
        for job, _ in preempted:
            if job.interactive:  # no agent reports an allocation's end
                self.store.end_interactive(job, now, 0x9, "cancelled")
        # victims told to end or suspended: their signals go out on the flush
        warned = bool(plan.grace) or bool(plan.suspended) or bool(resumed) or bool(sliced)
        if (
            started
            or resized
            or changed
            or purged
            or plan.ended
            or timed_out
            or signalled
            or mailed
            or preempted
            or warned
        ):
            await self.store.flush()
        took = int((time.perf_counter() - began) * 1e6)
        queue = len(snap.pending)
        self.stats.cycle(took, queue, min(queue, depth or queue), len(plan.starts))
        if backfill is not None:
            tried = min(queue, backfill.max_job_test)
            self.stats.backfill(now, planned, queue, tried, len(plan.starts) - plan.main_starts)
        if started or purged:
            log.info(
                "cycle=%d pending=%d started=%d purged=%d took=%dus",
                self.stats.cycles,
                len(snap.pending),
                len(started),
                len(purged),
                took,
            )
