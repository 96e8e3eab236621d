"""The simulated cluster of ``corral sim -f slurm.conf``: a site's nodes, partitions,
priorities and accounting limits around the replay's ``SimCluster``.

``SiteCluster`` keeps the replay's event handling (``replay.SimCluster``) and
changes what the core is shown, as the controller shows it:

* nodes and partitions from slurm.conf (``Site.node_views``/``partition_views``);
* each job as its trace user's identity (``Site.identity``): user, account,
  partition, QOS, eligible (so accruing age) from its submission;
* priorities: the controller's ``PriorityKeeper`` gives a job its priority at
  submission and ranks every pending job each PriorityCalcPeriod of simulated
  time (``advance``), charging fair share with what the replay's jobs held,
  decayed over PriorityDecayHalfLife; the core orders the queue by that ranking;
* accounting limits (when AccountingStorageEnforce has ``limits``): per pending
  job its gates and what running jobs hold of them (``controller/assoclimits``).
  A job's gates depend on usage only through GrpTRESMins and GrpWall, and usage
  changes only at a calculation, so they are worked out at submission and again
  at each calculation, and what running jobs hold is counted as they start and end.

The core is shown every pending job and node at every event (the main
scheduler's shortcuts assume one FIFO partition).
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType

from controller import associations, assoclimits
from controller.core import NodeView, Plan, Snapshot
from controller.core.limits import Gate
from controller.core.priority import NO_RANKING
from controller.jobstate import JobState
from controller.model import Job
from controller.priorities import PriorityKeeper
from controller.sim.replay import SimCluster
from controller.sim.siteconf import Site
from controller.sim.swf import Record

__all__ = ["SiteCluster"]


class SiteCluster(SimCluster):
    def __init__(self, site: Site, records: list[Record]) -> None:
        self._templates = site.node_views()  # before the base's __init__ makes its own node
        super().__init__(1, 1, records)
        self.site = site
        views = self._templates
        self._views = {(name, view.cpus): view for name, view in views.items()}
        self.nodes = dict(views)
        self._nodes_view = MappingProxyType(self.nodes)
        self.free_nodes = dict(views)
        self._free_view = MappingProxyType(self.free_nodes)
        self.partitions = MappingProxyType(site.partition_views())
        self._free_cpus = site.total_cpus
        self.node_ends = None  # its own nodes: the Python core decides every pass
        self.keeper = PriorityKeeper(site.conf)
        self.keeper.associations = site.assocs
        self.keeper.apply_config(site.conf, len(views))
        self.ranking = NO_RANKING
        self.holding: dict[int, Job] = {}  # running jobs as the controller's store has them
        self.limited = site.assocs is not None and "limits" in site.enforce
        self.gates: dict[int, tuple[Gate, ...]] = {}  # pending job -> its limits
        self.counted: dict[str, int] = {}  # limit key -> what running jobs hold of it
        self.now = 0

    def _view(self, name: str, free: int) -> NodeView:
        template = self._templates.get(name)
        if template is None:  # the base's own first node, replaced at once
            return super()._view(name, free)
        key = (name, free)
        view = self._views.get(key)
        if view is None:
            view = replace(template, free_cpus=free, idle=free == template.cpus)
            self._views[key] = view
        return view

    # ---- the replay loop's events

    def advance(self, now: int) -> None:
        """Simulated time is ``now``: rank the pending jobs when PriorityCalcPeriod is due."""
        self.now = now
        if self.keeper.due(now):
            self.ranking = self.keeper.recalculate(
                now, self.holding.values(), self.pending.values(), len(self.nodes)
            )
            if self.limited:
                assocs = self.site.assocs
                gates, counted = assoclimits.limits(
                    self.holding.values(),
                    self.pending.values(),
                    assocs,
                    self.site.enforce,
                    self.keeper.usage,
                )
                self.gates, self.counted = gates, counted

    def submit(self, job_id: int) -> None:
        super().submit(job_id)
        record = self.records[job_id - 1]
        job = self.site.dress(self.pending[job_id], record)
        job = replace(job, calc_priority=self.keeper.initial(job, record.submit))
        self.pending[job_id] = job
        if self.limited and (gates := self._gates(job)):
            self.gates[job_id] = gates

    def _gates(self, job: Job) -> tuple[Gate, ...]:
        """``job``'s limits with the usage of the last calculation."""
        assocs, usage = self.site.assocs, self.keeper.usage
        assert assocs is not None
        return associations.gates(
            job,
            assocs,
            assoclimits.used_by(assocs, usage),
            "safe" in self.site.enforce,
            assoclimits.qos_used_by(usage),
        )

    def _count(self, job: Job, sign: int) -> None:
        """Add (1) or take away (-1) what running ``job`` holds of its limits."""
        assert self.site.assocs is not None
        for gate in associations.gates(job, self.site.assocs):
            if gate.key:
                self.counted[gate.key] = self.counted.get(gate.key, 0) + sign * gate.amount

    def commit(self, plan: Plan) -> None:
        started = {start.job_id: self.pending[start.job_id] for start in plan.starts}
        super().commit(plan)
        for start in plan.starts:
            self.gates.pop(start.job_id, None)
            job = self.holding[start.job_id] = replace(
                started[start.job_id],
                state=JobState.RUNNING,
                partition=start.partition,
                nodes=start.nodes,
                cpus=start.cpus,
                start_time=plan.now,
                end_time=plan.now + 60 * math.ceil(self.records[start.job_id - 1].limit / 60),
            )
            if self.limited:
                self._count(job, 1)

    def finish(self, job_id: int, run: int) -> bool:
        if not super().finish(job_id, run):
            return False
        job = self.holding.pop(job_id)
        self.keeper.ended(job, job.start_time + self.records[job_id - 1].run)
        if self.limited:
            self._count(job, -1)
        return True

    # ---- policy.Cluster

    def snapshot(self, pending: tuple[Job, ...], busy: bool = True) -> Snapshot:
        snap = super().snapshot(pending, busy)
        return replace(snap, ranking=self.ranking, gates=self.gates, usage=dict(self.counted))
