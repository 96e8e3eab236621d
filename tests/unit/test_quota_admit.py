"""Admission by quota with Kueue's borrowing rules (controller/core/quotaadmit.py)."""

from __future__ import annotations

import pytest

from controller.core import quota
from controller.core.quota import ADMITTED, Admission, admit, divide
from corral.queueconf import QueueConf
from tests.unit.quotascenario import CPU, GPU, departments, gpus, team, tree

TWO_TEAMS = tree(team("a", gpus(4)), team("b", gpus(4)))
A_BORROWS_LIMIT_1 = tree(team("a", gpus(4, borrow=1)), team("b", gpus(4)))
B_LENDS_1 = tree(team("a", gpus(4)), team("b", gpus(4, lend=1)))


def _admit(
    conf: QueueConf,
    held: dict[str, int],
    queue: str,
    ask: int,
    preemptible: bool = True,
    capacity: int = 8,
) -> Admission:
    shares = divide(conf, {GPU: capacity}, {}, {})
    return admit(
        conf, shares, {q: {GPU: n} for q, n in held.items()}, queue, {GPU: ask}, preemptible
    )


#: What is shown -> (queues, GPUs each holds, the job: "queue GPUs" and "pinned" when it
#: cannot be preempted, the reason, GPUs borrowed). 8 GPUs.
ADMISSIONS = {
    "within its guarantee": (TWO_TEAMS, {"a": 2}, "a 2", ADMITTED, 0),
    "borrowing what the other team does not use": (TWO_TEAMS, {"a": 4}, "a 3", ADMITTED, 3),
    "partly borrowed": (TWO_TEAMS, {"a": 3}, "a 3", ADMITTED, 2),
    "a job that cannot be preempted runs only in quota": (
        TWO_TEAMS,
        {"a": 3},
        "a 2 pinned",
        quota.GUARANTEE,
        0,
    ),
    "a job that cannot be preempted, within quota": (
        TWO_TEAMS,
        {"a": 2, "b": 4},
        "a 2 pinned",
        ADMITTED,
        0,
    ),
    "its own guarantee lent out: the cohort is full until reclaim": (
        TWO_TEAMS,
        {"a": 1, "b": 7},
        "a 2",
        quota.COHORT_FULL,
        0,
    ),
    "everything in use": (TWO_TEAMS, {"a": 4, "b": 4}, "a 1", quota.COHORT_FULL, 0),
    "the limit": (
        tree(team("a", gpus(4, limit=5)), team("b", gpus(4))),
        {"a": 4},
        "a 2",
        quota.LIMIT,
        0,
    ),
    "the borrow limit": (A_BORROWS_LIMIT_1, {"a": 4}, "a 2", quota.BORROW_LIMIT, 0),
    "within the borrow limit": (A_BORROWS_LIMIT_1, {"a": 4}, "a 1", ADMITTED, 1),
    "the lend limit keeps the rest of the lender's guarantee": (
        B_LENDS_1,
        {"a": 4},
        "a 2",
        quota.COHORT_FULL,
        0,
    ),
    "what the lend limit lends": (B_LENDS_1, {"a": 4}, "a 1", ADMITTED, 1),
    "a lender's private quota is its own even when others borrowed the rest": (
        B_LENDS_1,
        {"a": 5},
        "b 3 pinned",
        ADMITTED,
        0,
    ),
    "no such queue": (TWO_TEAMS, {}, "c 1", quota.INVALID_QUEUE, 0),
    "the root takes no jobs": (TWO_TEAMS, {}, "root 1", quota.INVALID_QUEUE, 0),
}


@pytest.mark.parametrize("what", ADMISSIONS)
def test_admission(what: str) -> None:
    conf, held, job, reason, borrowed = ADMISSIONS[what]
    queue, ask, *pinned = job.split()
    got = _admit(conf, held, queue, int(ask), preemptible=not pinned)
    assert (got.reason, dict(got.borrowed)) == (reason, {GPU: borrowed} if borrowed else {})
    assert got.admitted == (reason == ADMITTED)
    assert got.borrows == bool(borrowed)
    assert got.admitted or got.detail


def test_capacity_below_the_guarantees_bounds_even_jobs_in_quota() -> None:
    got = _admit(TWO_TEAMS, {"a": 3}, "b", 2, capacity=4)
    assert (got.admitted, got.reason) == (False, quota.COHORT_FULL)
    assert _admit(TWO_TEAMS, {"a": 3}, "b", 1, capacity=4).admitted


HIERARCHY = departments(d1=gpus(4, limit=6), t1=gpus(2), t2=gpus(2), d2=gpus(4))


def test_a_parent_limit_holds_for_its_whole_subtree() -> None:
    got = _admit(HIERARCHY, {"t1": 4, "t2": 1}, "t2", 2)
    assert (got.reason, got.detail) == (quota.LIMIT, "d1 gres/gpu: 5+2 over limit 6")


def test_borrowing_at_a_parent_counts_as_borrowing() -> None:
    # t2 is within its own guarantee, but d1 goes above its guarantee: d2's lent GPUs.
    got = _admit(HIERARCHY, {"t1": 4}, "t2", 1)
    assert got.admitted and got.borrows and dict(got.borrowed) == {}
    refused = _admit(HIERARCHY, {"t1": 4}, "t2", 1, preemptible=False)
    assert refused.reason == quota.GUARANTEE


def test_a_sibling_borrows_first_from_its_parent() -> None:
    conf = departments(d1=gpus(4, borrow=0), t1=gpus(2), t2=gpus(2), d2=gpus(4))
    assert _admit(conf, {}, "t1", 4).admitted
    assert _admit(conf, {"t1": 4}, "t1", 1).reason == quota.BORROW_LIMIT


def test_only_leaf_queues_take_jobs() -> None:
    got = _admit(HIERARCHY, {}, "d1", 1)
    assert (got.reason, got.detail) == (quota.INVALID_QUEUE, "no leaf queue 'd1'")


def test_only_resources_some_queue_has_a_quota_for_count() -> None:
    shares = divide(TWO_TEAMS, {GPU: 8, CPU: 64}, {}, {})
    assert shares.resources == (GPU,)
    got = admit(TWO_TEAMS, shares, {}, "a", {GPU: 1, CPU: 10_000}, False)
    assert (got.admitted, got.borrows) == (True, False)
