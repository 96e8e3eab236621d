"""``corral queues``' numbers (controller/core/queuestatus.py) from a QueueView made
by hand: what each queue is guaranteed, holds, borrows, lends and waits for."""

from __future__ import annotations

from controller.core.queueplan import QueueEntry, QueueView
from controller.core.queuestatus import QueueStatus, ResourceStatus, statuses
from controller.core.quota import RunningJob, Shares
from corral.queueconf import parse

GPU = "gres/gpu"
#: A department of two teams that lend (b at most 1 of its 2), and a third team
#: beside it: 8 GPUs in all.
QUEUES = """\
QueueName=dept Guarantee=gres/gpu=6 Priority=2
QueueName=a Parent=dept Accounts=a Guarantee=gres/gpu=3 Limit=gres/gpu=7 OverQuotaWeight=2
QueueName=b Parent=dept Accounts=b Guarantee=gres/gpu=2 LendLimit=gres/gpu=1
QueueName=c Accounts=c Guarantee=gres/gpu=2
"""
CONF = parse(QUEUES, "queues.conf", ["gpu"])


def _view(held: dict[str, int], asks: dict[int, tuple[str, int]]) -> QueueView:
    """``held``: GPUs each leaf's running jobs hold (one job per GPU); ``asks``:
    pending job id -> (queue, GPUs)."""
    fair = {"root": 8, "dept": 6, "a": 4, "b": 2, "c": 2}
    guarantee = {"root": 8, "dept": 6, "a": 3, "b": 2, "c": 2}
    shares = Shares(
        fair={q: {GPU: n} for q, n in fair.items()},
        guarantee={q: {GPU: n} for q, n in guarantee.items()},
        demand={q: {GPU: 0} for q in fair},
    )
    running = tuple(
        RunningJob(job_id=100 * i + k, queue=q, priority=1, resources={GPU: 1}, start_time=0)
        for i, (q, n) in enumerate(held.items())
        for k in range(n)
    )
    entries = {job_id: QueueEntry(queue, {GPU: n}, True, 0) for job_id, (queue, n) in asks.items()}
    return QueueView(CONF, shares, {q: {GPU: n} for q, n in held.items()}, entries, running)


def _by_name(view: QueueView) -> dict[str, QueueStatus]:
    return {s.name: s for s in statuses(view)}


def test_the_tree_comes_root_first_and_depth_first_with_each_queues_settings() -> None:
    shown = statuses(_view({}, {}))
    assert [(s.name, s.parent, s.depth) for s in shown] == [
        ("root", "", 0),
        ("dept", "root", 1),
        ("a", "dept", 2),
        ("b", "dept", 2),
        ("c", "root", 1),
    ]
    a = shown[2]
    assert (a.priority, a.over_quota_weight, shown[1].priority) == (0, 2.0, 2)
    assert a.resources == (ResourceStatus(GPU, 3, 7, 4, 0, 0, 0, 0),)
    assert shown[4].resources[0].limit is None


def test_a_borrower_and_the_siblings_that_lend_to_it() -> None:
    # a holds 5 of its 3: it borrows 2. Its sibling b has 2 unused but lends at
    # most 1: b lends 1; the other GPU is dept's own (6 guaranteed, 5 given to its
    # children), which is no queue's lending. c is not a's sibling: dept as a
    # whole holds 5 of its 6 and borrows nothing, so c lends nothing.
    got = _by_name(_view({"a": 5, "b": 0, "c": 1}, {7: ("b", 2), 8: ("c", 1)}))
    a, b, c, dept = (got[q].resources[0] for q in ("a", "b", "c", "dept"))
    assert (a.allocated, a.borrowed, a.lent) == (5, 2, 0)
    assert (b.allocated, b.borrowed, b.lent, b.pending) == (0, 0, 1, 2)
    assert (dept.allocated, dept.borrowed, dept.lent, dept.pending) == (5, 0, 0, 2)
    assert (c.allocated, c.borrowed, c.lent, c.pending) == (1, 0, 0, 1)
    root = got["root"]
    assert (root.resources[0].allocated, root.resources[0].pending) == (6, 3)
    assert (root.running_jobs, root.pending_jobs) == (6, 2)
    assert (got["dept"].running_jobs, got["dept"].pending_jobs) == (5, 1)


def test_lending_is_charged_in_proportion_and_adds_up_to_the_borrowing() -> None:
    # At the top, dept holds 7 of its 6 (borrows 1) while c holds none of its 2;
    # c alone could lend: it lends 1.
    got = _by_name(_view({"a": 7, "b": 0, "c": 0}, {}))
    assert got["dept"].resources[0].borrowed == 1
    assert got["c"].resources[0].lent == 1
    # In dept, a borrows 4 of which b may lend only 1.
    assert (got["a"].resources[0].borrowed, got["b"].resources[0].lent) == (4, 1)


def test_no_borrowing_no_lending() -> None:
    got = _by_name(_view({"a": 3, "b": 1, "c": 2}, {}))
    assert all(r.lent == 0 and r.borrowed == 0 for s in got.values() for r in s.resources)


def test_two_lenders_share_the_borrowing_in_proportion_to_what_each_could_lend() -> None:
    conf = parse(
        "QueueName=x Accounts=x Guarantee=gres/gpu=1\n"
        "QueueName=y Accounts=y Guarantee=gres/gpu=4\n"
        "QueueName=z Accounts=z Guarantee=gres/gpu=2\n",
        "queues.conf",
        ["gpu"],
    )
    guarantee = {"root": 7, "x": 1, "y": 4, "z": 2}
    shares = Shares(
        fair={q: {GPU: n} for q, n in guarantee.items()},
        guarantee={q: {GPU: n} for q, n in guarantee.items()},
        demand={},
    )
    view = QueueView(conf, shares, {"x": {GPU: 4}}, {}, ())
    lent = {s.name: s.resources[0].lent for s in statuses(view)}
    assert lent == {"root": 0, "x": 0, "y": 2, "z": 1}  # x borrows 3: y could 4, z 2
    view = QueueView(conf, shares, {"x": {GPU: 2}}, {}, ())
    lent = {s.name: s.resources[0].lent for s in statuses(view)}
    assert lent == {"root": 0, "x": 0, "y": 1, "z": 0}  # 1 of 6: the larger remainder
