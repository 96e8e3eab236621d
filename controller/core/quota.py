"""Queues' quotas: how the cluster is divided among a queue tree, which jobs may
start, and which running jobs give resources back (issue 17).

Pure functions of their arguments, as the rest of the core: no clock (``now``
is passed), no I/O, no controller state, and their own small job types so that
the simulator and the controller can both feed them.

* ``divide`` (``quotadivide.py``): KAI's two-phase division, per resource, level
  by level: guarantees first, then the surplus by priority and over-quota
  weight re-weighted by usage.
* ``admit`` (``quotaadmit.py``): Kueue's borrowing rules on the tree: within
  the queue's guarantee, or borrowing what the cohort has unused and lendable,
  within borrow limits and limits at every level. A pass that admits many jobs
  builds the ``Tree`` and its ``totals`` once and calls ``admit_totals``,
  adding each started job to the totals itself.
* ``reclaim`` and ``preempt_within`` (``quotareclaim.py``): KAI's reclaim
  between queues (MaintainFairShare, then GuaranteeDeservedQuota) and
  preemption inside one queue, with Kueue's per-queue policies.

A cycle runs them in that order (docs/design.md, "Queues: division, admission
and reclaim"): allocate what admission accepts, then reclaim for the waiting
jobs left, then preempt within a queue for those still left.
"""

from controller.core.quotaadmit import (
    ADMITTED,
    BORROW_LIMIT,
    COHORT_FULL,
    GUARANTEE,
    INVALID_QUEUE,
    LIMIT,
    Admission,
    admit,
    admit_totals,
)
from controller.core.quotadivide import Shares, UsageIn, divide
from controller.core.quotareclaim import (
    GUARANTEE_DESERVED_QUOTA,
    MAINTAIN_FAIR_SHARE,
    MAX_RECLAIMERS,
    Eviction,
    QueueJob,
    RunningJob,
    WaitingJob,
    kept,
    preempt_within,
    reclaim,
)
from controller.core.quotatree import ROOT, Amounts, Tree

__all__ = [
    "ADMITTED",
    "BORROW_LIMIT",
    "COHORT_FULL",
    "GUARANTEE",
    "GUARANTEE_DESERVED_QUOTA",
    "INVALID_QUEUE",
    "LIMIT",
    "MAINTAIN_FAIR_SHARE",
    "MAX_RECLAIMERS",
    "ROOT",
    "Admission",
    "Amounts",
    "Eviction",
    "QueueJob",
    "RunningJob",
    "Shares",
    "Tree",
    "UsageIn",
    "WaitingJob",
    "admit",
    "admit_totals",
    "divide",
    "kept",
    "preempt_within",
    "reclaim",
]
