"""KAI's two-phase division of the cluster among the queue tree, per resource.

The root's share is the capacity (capped by a root limit, if any); level by
level, each parent's fair share is divided among its children:

1. Deserved phase: each child gets ``min(guarantee, demand)``, priority plays
   no part. Should those not fit in the parent's share (nodes down, so the
   capacity is below the guarantees), the share is split in proportion to
   them instead, so children never hold more than their parent.
2. Over-quota phase: what is left goes to priority buckets, highest first; a
   bucket is satisfied before a lower one gets anything ("priority=2,
   weight=1 gets surplus before priority=1, weight=100"). Inside a bucket it
   is shared in rounds, in proportion to ``P_i = max(0, W'_i + k(W'_i -
   U'_i))`` normalised over the queues still unsatisfied, where ``W'`` is the
   over-quota weight and ``U'`` the time-decayed usage, both normalised over
   those queues (KAI's ``calcShareWeights``; k=0 or no usage is plain
   weighting). Each grant is capped by what the queue still asks for and by
   its limit, and rounded down to whole units; when a round grants nothing,
   the units left are handed out one at a time, largest remainder first, then
   by name (KAI: creation time, then UID; names are what Corral has).

A queue's demand is what its leaves ask for (pending plus running), summed up
the tree, each level capped by its limit: a parent is never given what its
children could not take.

When every weight, or every ``P_i``, of a bucket is zero, the bucket is shared
evenly rather than left idle: a queue with weight 0 still runs work nobody
else wants.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from controller.core.quotatree import Amounts, Tree
from corral.queueconf import QueueConf

__all__ = ["Shares", "UsageIn", "divide"]

#: Time-decayed usage, normalised (0..1): per queue one number for every
#: resource, or one per resource. A queue without an entry has its children's sum.
UsageIn = Mapping[str, float | Mapping[str, float]]


@dataclass(frozen=True)
class Shares:
    """What each queue may hold now, per resource, with what it was weighed against.

    ``fair``: queue -> resource -> fair share (the root's is the capacity).
    ``guarantee``: queue -> resource -> its guaranteed quota (the root's: the capacity).
    ``demand``: queue -> resource -> what its subtree asks for, capped by limits.
    """

    fair: Mapping[str, Mapping[str, int]]
    guarantee: Mapping[str, Mapping[str, int]]
    demand: Mapping[str, Mapping[str, int]]

    def fair_of(self, queue: str, resource: str) -> int:
        return self.fair.get(queue, {}).get(resource, 0)

    def guarantee_of(self, queue: str, resource: str) -> int:
        return self.guarantee.get(queue, {}).get(resource, 0)

    @property
    def resources(self) -> tuple[str, ...]:
        """The resources the queues govern (some queue has a quota for them); a
        request's other keys are not counted."""
        return tuple(next(iter(self.fair.values()), {}))


def divide(
    conf: QueueConf,
    capacity: Amounts,
    requested: Mapping[str, Amounts],
    usage: UsageIn,
    k: float = 1.0,
) -> Shares:
    """Fair shares for every queue of ``conf``: ``capacity`` divided down the tree,
    for each resource some queue has a quota for (one without capacity has none).

    ``requested`` is per leaf queue (pending plus running demand); ``usage``
    per queue, normalised (0..1); ``k`` is KAI's kValue (how much usage
    re-weights the over-quota phase).
    """
    tree = Tree(conf)
    resources = tree.resources
    asked = tree.totals(requested)
    used = _usage_totals(tree, usage, resources)
    fair: dict[str, dict[str, int]] = {q: {} for q in conf.queues}
    guarantee: dict[str, dict[str, int]] = {q: {} for q in conf.queues}
    demand: dict[str, dict[str, int]] = {q: {} for q in conf.queues}
    for r in resources:
        want = _demand(tree, asked, r)
        top = capacity.get(r, 0)
        limit = tree.quota(tree.root, r).limit
        fair[tree.root][r] = top if limit is None else min(top, limit)
        for spec in conf.queues.values():
            demand[spec.name][r] = want[spec.name]
            guarantee[spec.name][r] = tree.quota(spec.name, r).guarantee
            kids = tree.children[spec.name]
            if kids:
                got = _split(tree, kids, fair[spec.name][r], r, want, used, k)
                for kid in kids:
                    fair[kid][r] = got[kid]
        guarantee[tree.root][r] = fair[tree.root][r]
    return Shares(fair=fair, guarantee=guarantee, demand=demand)


def _usage_totals(
    tree: Tree, usage: UsageIn, resources: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Usage per queue and resource; a queue without an entry sums its children's."""
    out: dict[str, dict[str, float]] = {}
    for spec in reversed(list(tree.conf.queues.values())):
        given = usage.get(spec.name)
        if isinstance(given, int | float):
            out[spec.name] = dict.fromkeys(resources, float(given))
        elif given is not None:
            out[spec.name] = {r: float(given.get(r, 0.0)) for r in resources}
        else:
            kids = tree.children[spec.name]
            out[spec.name] = {r: sum(out[kid][r] for kid in kids) for r in resources}
    return out


def _demand(tree: Tree, asked: Mapping[str, Mapping[str, int]], r: str) -> dict[str, int]:
    """What each queue can take of ``r``: its own jobs' asks plus what its children can
    take, capped by its limit."""
    want: dict[str, int] = {}
    for spec in reversed(list(tree.conf.queues.values())):
        kids = tree.children[spec.name]
        if kids:
            own = asked[spec.name].get(r, 0) - sum(asked[kid].get(r, 0) for kid in kids)
            total = own + sum(want[kid] for kid in kids)
        else:
            total = asked[spec.name].get(r, 0)
        limit = tree.quota(spec.name, r).limit
        want[spec.name] = total if limit is None else min(total, limit)
    return want


def _split(
    tree: Tree,
    kids: tuple[str, ...],
    share: int,
    r: str,
    want: Mapping[str, int],
    used: Mapping[str, Mapping[str, float]],
    k: float,
) -> dict[str, int]:
    """A parent's ``share`` of ``r`` divided among ``kids``: deserved, then surplus."""
    deserved = {q: min(tree.quota(q, r).guarantee, want[q]) for q in kids}
    if sum(deserved.values()) > share:
        return _proportional(share, deserved)
    got = dict(deserved)
    left = share - sum(deserved.values())
    for level in sorted({tree.spec(q).priority for q in kids}, reverse=True):
        bucket = [q for q in kids if tree.spec(q).priority == level]
        left = _over_quota(tree, bucket, left, got, want, {q: used[q][r] for q in bucket}, k)
    return got


def _whole(x: float) -> int:
    """``x`` rounded down, but not a unit below where float error put it (0.99999...)."""
    return math.floor(x + 1e-9)


def _proportional(share: int, weights: Mapping[str, int]) -> dict[str, int]:
    """``share`` split in proportion to ``weights`` in whole units (exactly, in
    integers), largest remainder then name taking the units rounding left over."""
    total = sum(weights.values())
    got = {q: share * w // total for q, w in weights.items()}
    order = sorted(weights, key=lambda q: (-(share * weights[q] % total), q))
    for q in order[: share - sum(got.values())]:
        got[q] += 1
    return got


def _over_quota(
    tree: Tree,
    bucket: list[str],
    left: int,
    got: dict[str, int],
    want: Mapping[str, int],
    used: Mapping[str, float],
    k: float,
) -> int:
    """Share ``left`` among one priority bucket in rounds; returns what is still left."""
    while left > 0:
        hungry = sorted(q for q in bucket if got[q] < want[q])
        if not hungry:
            break
        weights = _weights(tree, hungry, used, k)
        total = sum(weights.values())
        exact = {q: left * weights[q] / total for q in hungry}
        grants = {q: min(_whole(exact[q]), want[q] - got[q]) for q in hungry}
        if sum(grants.values()) == 0:
            # Rounding left fewer units than queues: one at a time, largest remainder first.
            for q in sorted(hungry, key=lambda q: (-(exact[q] - _whole(exact[q])), q)):
                if left == 0:
                    break
                got[q] += 1
                left -= 1
            continue
        for q in hungry:
            grant = min(grants[q], left)
            got[q] += grant
            left -= grant
    return left


def _weights(
    tree: Tree, hungry: list[str], used: Mapping[str, float], k: float
) -> dict[str, float]:
    """KAI's ``P_i = max(0, W'_i + k(W'_i - U'_i))`` over the unsatisfied queues,
    falling back to even weights when they are all zero."""
    raw = {q: max(tree.spec(q).over_quota_weight, 0.0) for q in hungry}
    total = sum(raw.values())
    if total <= 0:
        return dict.fromkeys(hungry, 1.0)
    norm = {q: w / total for q, w in raw.items()}
    usage = sum(used[q] for q in hungry)
    p = {
        q: max(0.0, norm[q] + k * (norm[q] - (used[q] / usage if usage > 0 else 0.0)))
        for q in hungry
    }
    return p if sum(p.values()) > 0 else norm
