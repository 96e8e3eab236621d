"""Preemption: running jobs make room for a waiting job that outranks them.

With ``PreemptType=preempt/qos`` a job may preempt running jobs whose QOS is
in its own QOS's ``Preempt`` list; with ``preempt/partition_prio`` jobs of a
partition with a higher PriorityTier preempt jobs of lower tiers. After the
main pass and backfill, each job still waiting for resources (highest
priority first, at most ``MAX_PREEMPTORS`` a pass) looks for victims among
the running jobs it may preempt, lowest priority and most recently started
first, adding them one at a time until the job would fit on what they free;
only the victims on the nodes it would get are kept. A job is a victim once
per pass. The controller then requeues or cancels them (PreemptMode) and the
waiting job starts when their nodes are free, in a later pass.
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.core import nodefree
from controller.core.placement import first_fit
from controller.core.plan import Draft, Start
from controller.core.snapshot import NodeView, PreemptPolicy, Running, Snapshot
from controller.jobstate import Reason
from controller.model import Job

__all__ = ["MAX_PREEMPTORS", "PreemptPolicy", "preemptions"]

#: Waiting jobs that look for victims in one pass.
MAX_PREEMPTORS = 20


def _released(nodes: dict[str, NodeView], victim: Running) -> None:
    """Give ``victim``'s CPUs (kept or shared), memory and GRES back to ``nodes``."""
    for i, name in enumerate(victim.nodes):
        node = nodes.get(name)
        if node is None:
            continue
        gres = victim.gres[i] if victim.gres else ()
        nodes[name] = nodefree.give(
            node, victim.cpus[i], victim.memory[i], gres, victim.share, victim.partition
        )


def preemptions(
    snap: Snapshot, plan: Draft, nodes: Mapping[str, NodeView], ordered: list[Job]
) -> dict[int, int]:
    """Victims for the waiting jobs of ``plan``: victim job id -> the job it makes room for."""
    policy = snap.preempt
    if policy is None:
        return {}
    chosen: dict[int, int] = {}
    tried = 0
    for job in ordered:
        if plan.reasons.get(job.job_id) is not Reason.RESOURCES or tried >= MAX_PREEMPTORS:
            continue
        tried += 1
        candidates = sorted(
            (
                r
                for r in snap.running
                if r.preemptable and r.job_id not in chosen and policy.may_preempt(job, r)
            ),
            key=lambda r: (r.priority, -r.start_time, -r.job_id),
        )
        if not candidates:
            continue
        trial = dict(nodes)
        taken: list[Running] = []
        for victim in candidates:
            _released(trial, victim)
            taken.append(victim)
            outcome = first_fit(job, snap, trial, set())
            if isinstance(outcome, Start):
                used = set(outcome.nodes)
                for kept in taken:
                    if used & set(kept.nodes):
                        chosen[kept.job_id] = job.job_id
                break
    return chosen
