"""The queue tree's types (queues.conf): per-queue quotas and preemption policies.

A stub holding only the dataclasses; the parser of queues.conf is written
separately and replaces this file when the branches meet, with these names.
``controller/core/quota.py`` divides, admits and reclaims by them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["QueueConf", "QueueSpec", "ResourceQuota"]


@dataclass(frozen=True)
class ResourceQuota:
    guarantee: int = 0  # KAI's deserved, Kueue's nominalQuota
    limit: int | None = None  # None: no limit
    borrow_limit: int | None = None  # None: may borrow whatever the cohort has unused
    lend_limit: int | None = None  # None: all of its unused guarantee may be lent


@dataclass(frozen=True)
class QueueSpec:
    name: str
    parent: str | None  # None only for the root queue "root"
    # resource key -> quota: "cpu", "mem" (MiB), "node", "gres/gpu", "gres/gpu:a100"
    quotas: Mapping[str, ResourceQuota]
    over_quota_weight: float = 1.0
    priority: int = 0
    accounts: tuple[str, ...] = ()
    qos: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    preemptible: bool = True
    reclaim_min_runtime: int | None = None  # seconds; None: inherited (root: 0)
    preempt_min_runtime: int | None = None
    preemption_delay: int | None = None
    within_queue: str = "Never"  # Never | LowerPriority | LowerOrNewerEqualPriority
    reclaim_within_cohort: str = "Any"  # Never | LowerPriority | Any
    borrow_within_cohort: str = "Never"  # Never | LowerPriority
    borrow_priority_threshold: int | None = None
    file: str = ""
    line: int = 0


@dataclass(frozen=True)
class QueueConf:
    queues: Mapping[str, QueueSpec]  # the root first, every parent before its children
