"""The queue tree as the quota core walks it: children, paths, sums and inherited settings.

``QueueConf`` lists the queues root first and every parent before its
children; this module turns that list into the walks the division, admission
and reclaim need (down level by level, up from a leaf to the root, to the
lowest common ancestor of two queues) without any of them re-deriving it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

from corral.queueconf import QueueConf, QueueSpec, ResourceQuota

__all__ = ["ROOT", "Amounts", "Tree", "add", "inherited"]

#: The root queue's name: its share is the cluster's capacity.
ROOT = "root"

#: resource key -> amount (CPUs, MiB, nodes, GPUs), as a job or a queue holds them.
Amounts = Mapping[str, int]

_NO_QUOTA = ResourceQuota()


@dataclass(frozen=True)
class Tree:
    """A ``QueueConf`` with its children and ancestors worked out once."""

    conf: QueueConf

    @cached_property
    def children(self) -> Mapping[str, tuple[str, ...]]:
        kids: dict[str, list[str]] = {name: [] for name in self.conf.queues}
        for spec in self.conf.queues.values():
            if spec.parent is not None:
                kids[spec.parent].append(spec.name)
        return {name: tuple(names) for name, names in kids.items()}

    @cached_property
    def root(self) -> str:
        return next(s.name for s in self.conf.queues.values() if s.parent is None)

    def spec(self, queue: str) -> QueueSpec:
        return self.conf.queues[queue]

    def quota(self, queue: str, resource: str) -> ResourceQuota:
        """The queue's quota for ``resource``; a resource it does not name has none
        guaranteed and no limit."""
        return self.conf.queues[queue].quotas.get(resource, _NO_QUOTA)

    @cached_property
    def _paths(self) -> Mapping[str, tuple[str, ...]]:
        paths: dict[str, tuple[str, ...]] = {}
        for spec in self.conf.queues.values():  # parents come before their children
            up = () if spec.parent is None else paths[spec.parent]
            paths[spec.name] = (spec.name, *up)
        return paths

    def path(self, queue: str) -> tuple[str, ...]:
        """``queue`` and its ancestors, up to and including the root."""
        return self._paths[queue]

    @cached_property
    def lent_privately(self) -> frozenset[str]:
        """The resources some queue keeps part of its guarantee of to itself (a lend
        limit below its guarantee): only for those does admission weigh private quota."""
        return frozenset(
            r
            for spec in self.conf.queues.values()
            for r, quota in spec.quotas.items()
            if quota.lend_limit is not None and quota.lend_limit < quota.guarantee
        )

    def below(self, queue: str, ancestor: str) -> tuple[str, ...]:
        """``queue`` and its ancestors strictly below ``ancestor`` (empty when they are equal)."""
        up = self.path(queue)
        return up[: up.index(ancestor)] if ancestor in up else up

    def common(self, a: str, b: str) -> str:
        """The lowest queue that has both ``a`` and ``b`` in its subtree."""
        mine = set(self.path(a))
        return next(q for q in self.path(b) if q in mine)

    def totals(self, own: Mapping[str, Amounts]) -> dict[str, dict[str, int]]:
        """Each queue's ``own`` amounts plus those of its whole subtree."""
        total: dict[str, dict[str, int]] = {q: dict(own.get(q, {})) for q in self.conf.queues}
        for spec in reversed(list(self.conf.queues.values())):
            if spec.parent is not None:
                add(total[spec.parent], total[spec.name])
        return total

    @cached_property
    def resources(self) -> tuple[str, ...]:
        """The resources the queues govern: those some queue has a quota for, sorted.
        Others (a site that gives queues GPUs only) are placement's alone: a job's
        CPUs then never make it borrow, nor keep one that cannot be preempted out."""
        names: set[str] = set()
        for spec in self.conf.queues.values():
            names.update(spec.quotas)
        return tuple(sorted(names))


def add(into: dict[str, int], amounts: Amounts, sign: int = 1) -> None:
    """Add (or with ``sign`` -1 take away) ``amounts`` to ``into``, in place."""
    for resource, n in amounts.items():
        into[resource] = into.get(resource, 0) + sign * n


def inherited(tree: Tree, queue: str, setting: str) -> int:
    """A per-queue time setting (seconds) as it applies to ``queue``: its own, else
    its nearest ancestor's; 0 when no queue up to the root sets it."""
    for name in tree.path(queue):
        value = getattr(tree.spec(name), setting)
        if value is not None:
            return int(value)
    return 0
