"""What each queue holds, is owed and lends now: the numbers ``corral queues`` shows.

A pure function of the pass's ``QueueView`` (``core/queueplan.py``), so the
table, the REST document and the Prometheus gauges are the scheduler's own
numbers, not a second reckoning. Per queue and governed resource:

- guarantee, limit: the configuration (the root's guarantee is the capacity,
  as the division takes it);
- fair share: what the division of this pass gives the queue;
- allocated: what the running jobs of its subtree hold (a job being preempted
  no longer counts, as in the pass);
- borrowed: allocated above the guarantee;
- lent: the part of the queue's unused guarantee that its siblings' borrowing
  uses now. What a queue could lend is its unused guarantee
  (``guarantee - allocated``), capped by its lend limit; the borrowing of the
  parent's children (the sum of their ``borrowed``) is charged to the children
  that could lend in proportion to what each could lend, never more than that.
  Borrowing beyond what the siblings could lend (the parent's own unassigned
  share) is no one's lending. So ``lent`` answers "how much of what this queue
  is guaranteed would come back if its jobs asked for it", and the lent sums at
  one level never exceed the borrowing at that level;
- pending: what the subtree's pending jobs ask for at their smallest.

The counts of running and pending jobs are per queue (subtree), for all resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.queueplan import QueueView
from controller.core.quotatree import Tree, add

__all__ = ["QueueStatus", "ResourceStatus", "statuses"]


@dataclass(frozen=True, slots=True)
class ResourceStatus:
    """One resource of one queue (see the module for each number)."""

    resource: str
    guarantee: int
    limit: int | None  # None: no limit
    fair_share: int
    allocated: int
    borrowed: int
    lent: int
    pending: int


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """One queue: its place in the tree, its settings and its resources."""

    name: str
    parent: str  # "" for the root
    depth: int  # 0 for the root
    priority: int
    over_quota_weight: float
    running_jobs: int
    pending_jobs: int
    resources: tuple[ResourceStatus, ...]


def statuses(view: QueueView) -> list[QueueStatus]:
    """Every queue of ``view``, root first and each parent before its children
    (depth first, as sshare lists accounts), with its numbers now."""
    tree = Tree(view.conf)
    allocated = tree.totals(view.allocated)
    asked: dict[str, dict[str, int]] = {}
    pending_own: dict[str, int] = {}
    for entry in view.entries.values():
        add(asked.setdefault(entry.queue, {}), entry.request)
        pending_own[entry.queue] = pending_own.get(entry.queue, 0) + 1
    pending = tree.totals(asked)
    running_own: dict[str, int] = {}
    for job in view.running:
        running_own[job.queue] = running_own.get(job.queue, 0) + 1
    running_jobs = _subtree_counts(tree, running_own)
    pending_jobs = _subtree_counts(tree, pending_own)
    resources = view.shares.resources
    lent = {r: _lent(tree, view, allocated, r) for r in resources}
    out = []
    for name, depth in _depth_first(tree):
        spec = tree.spec(name)
        rows = []
        for r in resources:
            guarantee = view.shares.guarantee_of(name, r)
            held = allocated[name].get(r, 0)
            rows.append(
                ResourceStatus(
                    resource=r,
                    guarantee=guarantee,
                    limit=tree.quota(name, r).limit,
                    fair_share=view.shares.fair_of(name, r),
                    allocated=held,
                    borrowed=max(0, held - guarantee),
                    lent=lent[r].get(name, 0),
                    pending=pending[name].get(r, 0),
                )
            )
        out.append(
            QueueStatus(
                name=name,
                parent=spec.parent or "",
                depth=depth,
                priority=spec.priority,
                over_quota_weight=spec.over_quota_weight,
                running_jobs=running_jobs[name],
                pending_jobs=pending_jobs[name],
                resources=tuple(rows),
            )
        )
    return out


def _depth_first(tree: Tree) -> list[tuple[str, int]]:
    order: list[tuple[str, int]] = []
    stack = [(tree.root, 0)]
    while stack:
        name, depth = stack.pop()
        order.append((name, depth))
        stack.extend((kid, depth + 1) for kid in reversed(tree.children[name]))
    return order


def _subtree_counts(tree: Tree, own: Mapping[str, int]) -> dict[str, int]:
    totals = tree.totals({q: {"n": n} for q, n in own.items()})
    return {q: t.get("n", 0) for q, t in totals.items()}


def _lent(
    tree: Tree, view: QueueView, allocated: Mapping[str, Mapping[str, int]], r: str
) -> dict[str, int]:
    """Each queue's lent amount of ``r`` (see the module), level by level."""
    lent: dict[str, int] = {}
    for kids in tree.children.values():
        if not kids:
            continue
        borrowed = 0
        could: dict[str, int] = {}
        for kid in kids:
            guarantee = view.shares.guarantee_of(kid, r)
            held = allocated[kid].get(r, 0)
            borrowed += max(0, held - guarantee)
            spare = max(0, guarantee - held)
            cap = tree.quota(kid, r).lend_limit
            could[kid] = spare if cap is None else min(spare, cap)
        pool = sum(could.values())
        if borrowed >= pool:
            lent.update(could)
        else:
            lent.update(_apportion(borrowed, could, pool))
    return lent


def _apportion(total: int, weights: Mapping[str, int], pool: int) -> dict[str, int]:
    """``total`` (below ``pool``, the weights' sum) in whole units in proportion to
    ``weights``: each its floor, the rest one each to the largest remainders (ties
    in the tree's order), so the parts add up to ``total``."""
    parts = {q: w * total // pool for q, w in weights.items()}
    rest = total - sum(parts.values())
    by_remainder = sorted(weights, key=lambda q: -(weights[q] * total % pool))
    for q in by_remainder[:rest]:
        parts[q] += 1
    return parts
