"""Admission by quota, with Kueue's borrowing rules on the queue tree.

A job of queue Q asking ``n`` of a resource may start when, at every level
from Q up to (not including) the root, with ``a`` what that queue's subtree
holds now:

* ``a + n <= limit`` (else ``QueueLimit``);
* ``a + n <= guarantee + borrow_limit`` (else ``QueueBorrowLimit``);
* and ``n`` is within what is available to Q (else ``QueueCohortFull``):
  Q's own unused private quota plus what its parent has available, up to the
  root, whose pool is the capacity. A queue's *private* quota is the part of
  its guarantee it does not lend (``guarantee - lend_limit``; none without a
  lend limit): its parent counts it as held whether used or not, so no
  sibling can borrow it. This is Kueue's ``available()`` on a cohort tree,
  with a parent's guarantee including its children's as in KAI. The root
  also never holds more than the capacity.

The job *borrows* when some level ends above its guarantee (``a + n >
guarantee``): it runs on quota another queue lent and is what reclaim may
take back. A job that cannot be preempted may not borrow: it starts only
within its queues' guarantees (``QueueGuarantee``), so it is never a victim
of reclaim (KAI: non-preemptible workloads run only in quota).

Only the resources the queues govern count (those ``Shares`` has); a request's
other keys are for placement, not for quota.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.quotadivide import Shares
from controller.core.quotatree import Amounts, Tree
from corral.queueconf import QueueConf

__all__ = [
    "ADMITTED",
    "BORROW_LIMIT",
    "COHORT_FULL",
    "GUARANTEE",
    "INVALID_QUEUE",
    "LIMIT",
    "Admission",
    "admit",
    "admit_totals",
]

#: Reasons, as squeue shows a pending job's (Slurm's words for the first).
ADMITTED = "None"
LIMIT = "QueueLimit"
BORROW_LIMIT = "QueueBorrowLimit"
GUARANTEE = "QueueGuarantee"
COHORT_FULL = "QueueCohortFull"
INVALID_QUEUE = "InvalidQueue"


@dataclass(frozen=True)
class Admission:
    """Whether a job may start by quota, and on what terms.

    ``borrowed``: per resource, how much of the request lies beyond its
    queue's guarantee (empty when it does not borrow). ``detail`` says, in
    one line, which queue and resource decided.
    """

    admitted: bool
    reason: str
    borrows: bool = False
    borrowed: Mapping[str, int] = field(default_factory=dict)
    detail: str = ""


def admit(
    conf: QueueConf,
    shares: Shares,
    allocated: Mapping[str, Amounts],
    queue: str,
    request: Amounts,
    preemptible: bool,
) -> Admission:
    """May a job of ``queue`` asking ``request`` start, given what ``allocated``
    (leaf queue -> resource -> in use) already holds?"""
    tree = Tree(conf)
    return admit_totals(tree, shares, tree.totals(allocated), queue, request, preemptible)


def admit_totals(
    tree: Tree,
    shares: Shares,
    totals: Mapping[str, Mapping[str, int]],
    queue: str,
    request: Amounts,
    preemptible: bool,
) -> Admission:
    """``admit`` on subtree totals already summed (``Tree.totals``): reclaim keeps
    them up to date as it evicts, rather than summing again per job."""
    if queue not in tree.conf.queues or tree.children[queue]:
        # Only leaf queues take jobs (KAI's rule): a parent's share is its children's.
        return Admission(False, INVALID_QUEUE, detail=f"no leaf queue {queue!r}")
    borrowed: dict[str, int] = {}
    for r in shares.resources:
        n = request.get(r, 0)
        if n <= 0:
            continue
        have = totals[queue].get(r, 0)
        beyond = have + n - max(have, shares.guarantee_of(queue, r))
        if beyond > 0:
            borrowed[r] = beyond
        elif _borrows_above(tree, shares, totals, queue, r, n):
            borrowed[r] = 0
        if r in borrowed and not preemptible:
            # Said first: it is why the job waits, whatever the cohort has unused.
            return Admission(
                False, GUARANTEE, detail=f"{r}: a job that cannot be preempted runs only in quota"
            )
        refused = _refused(tree, shares, totals, queue, r, n)
        if refused is not None:
            return refused
    return Admission(
        True,
        ADMITTED,
        borrows=bool(borrowed),
        borrowed={r: n for r, n in borrowed.items() if n > 0},
    )


def _refused(
    tree: Tree,
    shares: Shares,
    totals: Mapping[str, Mapping[str, int]],
    queue: str,
    r: str,
    n: int,
) -> Admission | None:
    """Why ``n`` of ``r`` cannot be admitted to ``queue``, or None."""
    for q in tree.below(queue, tree.root):
        have = totals[q].get(r, 0)
        quota = tree.quota(q, r)
        if quota.limit is not None and have + n > quota.limit:
            return Admission(False, LIMIT, detail=f"{q} {r}: {have}+{n} over limit {quota.limit}")
        if quota.borrow_limit is not None and have + n > quota.guarantee + quota.borrow_limit:
            cap = quota.guarantee + quota.borrow_limit
            return Admission(
                False, BORROW_LIMIT, detail=f"{q} {r}: {have}+{n} over guarantee+borrow {cap}"
            )
    pool = shares.fair_of(tree.root, r)
    free = _available(tree, totals, queue, r, pool)
    if n > free or totals[tree.root].get(r, 0) + n > pool:
        return Admission(
            False, COHORT_FULL, detail=f"{queue} {r}: asks {n}, the cohort has {max(free, 0)}"
        )
    return None


def _borrows_above(
    tree: Tree, shares: Shares, totals: Mapping[str, Mapping[str, int]], queue: str, r: str, n: int
) -> bool:
    """Whether some ancestor of ``queue`` (below the root) would end above its guarantee."""
    return any(
        totals[q].get(r, 0) + n > shares.guarantee_of(q, r)
        for q in tree.below(queue, tree.root)[1:]
    )


def _private(tree: Tree, queue: str, r: str) -> int:
    """The part of ``queue``'s guarantee of ``r`` it never lends."""
    quota = tree.quota(queue, r)
    return 0 if quota.lend_limit is None else max(0, quota.guarantee - quota.lend_limit)


def _held(tree: Tree, totals: Mapping[str, Mapping[str, int]], r: str) -> dict[str, int]:
    """What each queue's pool has taken of ``r``: its own jobs, and per child the more
    of what it holds and its private quota (kept for it whether used or not)."""
    held: dict[str, int] = {}
    for spec in reversed(list(tree.conf.queues.values())):
        kids = tree.children[spec.name]
        own = totals[spec.name].get(r, 0) - sum(totals[kid].get(r, 0) for kid in kids)
        held[spec.name] = own + sum(max(_private(tree, kid, r), held[kid]) for kid in kids)
    return held


def _available(
    tree: Tree, totals: Mapping[str, Mapping[str, int]], queue: str, r: str, pool: int
) -> int:
    """What ``queue`` may still take of ``r``: its and its ancestors' unused private
    quota, plus what the root's pool has left."""
    if r not in tree.lent_privately:  # no private quota: the root's pool is all there is
        return pool - totals[tree.root].get(r, 0)
    held = _held(tree, totals, r)
    free = pool - held[tree.root]
    for q in tree.below(queue, tree.root):
        free += max(0, _private(tree, q, r) - held[q])
    return free
