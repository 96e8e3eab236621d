"""QueueingStrategy=StrictFIFO in the scheduling pass (core/queueplan.py): a queue's
head that cannot start holds back the queue's later jobs, in the main pass and in
backfill, and nobody else's; ``corral why`` names the head.

Scenes are test_queueplan's: nodes of 8 CPUs and 2 GPUs, teams by account.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.why import text
from controller import whyviews
from controller.core import BackfillParams, schedule
from controller.core.queueplan import WAITING_FOR_ROOM
from controller.core.schedule import queue_key
from controller.core.why import explain
from controller.jobstate import Reason
from corral.queueconf import QueueConf
from corral.whydoc import why_document
from corral.wire import codec
from tests.unit.quotascenario import gpus, team, tree
from tests.unit.scenario import NOW
from tests.unit.test_queueplan import Scene, asking, holding, scenes


def two_teams(b_strategy: str | None, **b_fields: Any) -> QueueConf:
    """a and b, each guaranteed 4 of the 8 GPUs; b's QueueingStrategy as given."""
    return tree(
        team("a", gpus(4), accounts=("a",)),
        team("b", gpus(4), accounts=("b",), queueing_strategy=b_strategy, **b_fields),
    )


#: a holds n1's GPUs, b one of n2's. Job 1, b's oldest, wants three whole nodes' GPUs:
#: it would borrow 3 and only 2 of a's are unused. Job 2 (b) and job 3 (a) fit within
#: their guarantees.
RUNNING = (holding(10, "a", ["n1"], 2), holding(20, "b", ["n2"], 1))
PENDING = (asking(1, "b", 2, nodes=3), asking(2, "b", 1), asking(3, "a", 1))


@pytest.mark.parametrize(
    ("strategy", "backfill", "starts", "reasons"),
    [
        pytest.param(
            None,
            False,
            [2, 3],
            {1: Reason.QUEUE_COHORT_FULL},
            id="default BestEffortFIFO: the small job passes the borrower",
        ),
        pytest.param(
            "BestEffortFIFO",
            True,
            [2, 3],
            {1: Reason.QUEUE_COHORT_FULL},
            id="BestEffortFIFO with backfill: the same",
        ),
        pytest.param(
            "StrictFIFO",
            False,
            [3],
            {1: Reason.QUEUE_COHORT_FULL, 2: Reason.PRIORITY},
            id="StrictFIFO: the small job waits behind the borrower, a's job starts",
        ),
        pytest.param(
            "StrictFIFO",
            True,
            [3],
            {1: Reason.QUEUE_COHORT_FULL, 2: Reason.PRIORITY},
            id="StrictFIFO with backfill: backfill does not pass the head either",
        ),
    ],
)
def test_a_strict_queues_big_borrower_holds_back_its_small_jobs(
    strategy: str | None, backfill: bool, starts: list[int], reasons: dict[int, Reason]
) -> None:
    plan = Scene(two_teams(strategy), RUNNING, PENDING).plan(backfill=backfill)
    assert sorted(s.job_id for s in plan.starts) == starts
    assert {j: plan.reasons[j] for j in reasons} == reasons
    assert dict(plan.behind) == ({2: 1} if strategy == "StrictFIFO" else {})


def test_a_head_without_room_holds_back_its_queue_and_only_its_queue() -> None:
    """Job 1 is within b's guarantee but no node has 2 GPUs free (Resources), and the
    main pass stops at it for every queue (Slurm's partition order). Backfill starts
    a's job 3 and, unless b is StrictFIFO, b's job 2, which one GPU starts."""
    running = (
        holding(10, "a", ["n1"], 1),
        holding(11, "a", ["n2"], 1),
        holding(20, "b", ["n3"], 1),
        holding(21, "b", ["n4"], 1),
    )
    pending = (asking(1, "b", 2), asking(2, "b", 1), asking(3, "a", 1))
    best = Scene(two_teams(None), running, pending).plan(backfill=True)
    assert [s.job_id for s in best.starts] == [2, 3]
    strict = Scene(two_teams("StrictFIFO"), running, pending).plan(backfill=True)
    assert [s.job_id for s in strict.starts] == [3]
    assert strict.reasons[1] is Reason.RESOURCES
    assert strict.reasons[2] is Reason.PRIORITY and strict.behind == {2: 1}
    assert 2 not in strict.expected  # no plan ahead of its head either
    main = Scene(two_teams("StrictFIFO"), running, pending).plan()
    assert main.starts == () and main.behind == {2: 1}  # job 3: Priority, by partition


def test_a_job_held_by_a_limit_of_its_own_does_not_stop_its_queue() -> None:
    """Only a refusal by the queue or want of room makes a head: job 1's time limit is
    past its partition's, which waiting never cures, so job 2 goes on; job 3 wants
    more GPUs than are free, and job 4 waits behind it."""
    pending = (
        asking(1, "b", 1, time_limit=10_000),
        asking(2, "b", 1),
        asking(3, "b", 2, nodes=4),
        asking(4, "b", 1),
    )
    scene = Scene(two_teams("StrictFIFO"), RUNNING, pending)
    snap = scene.snapshot()
    batch = replace(snap.partitions["batch"], max_time=60)
    plan = schedule(replace(snap, partitions={"batch": batch}), NOW)
    assert plan.reasons[1] is Reason.PARTITION_TIME_LIMIT
    assert [s.job_id for s in plan.starts] == [2]
    assert plan.behind == {4: 3}


def test_jobs_behind_the_head_reclaim_nothing() -> None:
    """a borrows n3 and n4. b's head borrows (no reclaim for it: BorrowWithinCohort
    Never); b's job 2 is within b's guarantee and, in a BestEffortFIFO queue, takes a
    borrowed node back. Behind a StrictFIFO head it evicts nobody."""
    running = tuple(holding(10 + i, "a", [f"n{i}"], 2, start_time=NOW - i) for i in (1, 2, 3))
    running += (holding(20, "b", ["n4"], 2),)
    pending = (asking(1, "b", 2, nodes=3), asking(2, "b", 2))
    best = Scene(two_teams(None), running, pending).plan()
    assert best.preempted == {11: 2}  # a's job that loses least
    strict = Scene(two_teams("StrictFIFO"), running, pending).plan()
    assert strict.preempted == {} and strict.behind == {2: 1}


def test_a_strategy_set_on_a_parent_orders_its_leaves_unless_they_say_otherwise() -> None:
    conf = tree(
        team("org", queueing_strategy="StrictFIFO"),
        team("a", gpus(4), parent="org", accounts=("a",)),
        team("b", gpus(4), parent="org", accounts=("b",), queueing_strategy="BestEffortFIFO"),
    )
    assert [conf.strategy(q) for q in ("root", "org", "a", "b")] == [
        "BestEffortFIFO",
        "StrictFIFO",
        "StrictFIFO",
        "BestEffortFIFO",
    ]
    pending = (asking(1, "a", 2, nodes=3), asking(2, "a", 1))
    pending += (asking(4, "b", 2, nodes=3), asking(5, "b", 1))
    plan = Scene(conf, RUNNING, pending).plan()
    assert plan.behind == {2: 1}  # a inherits StrictFIFO from org; b keeps its own
    assert [s.job_id for s in plan.starts] == [5]  # b's small job passes b's borrower


def test_why_names_the_head_and_hides_it_from_other_users() -> None:
    scene = Scene(two_teams("StrictFIFO"), RUNNING, PENDING)
    snap = scene.snapshot()
    params = BackfillParams()
    plan = schedule(snap, NOW, params)
    why = explain(snap, NOW, 2, params, plan)
    assert why.reason is Reason.PRIORITY and why.suggestions == ()
    assert why.queue_head is not None
    assert (why.queue_head.job_id, why.queue_head.reason) == (1, Reason.QUEUE_COHORT_FULL)
    assert explain(snap, NOW, 2, params).queue_head == why.queue_head  # planned afresh
    assert explain(snap, NOW, 1, params, plan).queue_head is None  # the head itself
    reply = whyviews._reply(why, hide_others=False)
    reply.queue = "b"
    doc = why_document(codec.decode("WhyReply", reply.SerializeToString()))
    assert doc["queue"]["head"] == {"job_id": 1, "user": "alice", "reason": "QueueCohortFull"}
    assert (
        "  It waits behind job 1 (alice), the head of its queue "
        "(QueueingStrategy=StrictFIFO), which waits: QueueCohortFull.\n"
    ) in text(doc)
    other = replace(why, user="bob")
    hidden = whyviews._reply(other, hide_others=True)
    assert (hidden.queue_head.job_id, hidden.queue_head.user) == (0, "")
    hidden.queue = "b"
    words = text(why_document(codec.decode("WhyReply", hidden.SerializeToString())))
    assert "It waits behind a job of another user, the head of its queue" in words


# ---------------------------------------------------------------- property


@settings(max_examples=150, deadline=None)
@given(scene=scenes(), backfill=st.booleans(), strict=st.sets(st.sampled_from(["a", "b", "c"])))
def test_no_job_of_a_strict_queue_starts_while_one_ahead_of_it_waits_for_room(
    scene: Scene, backfill: bool, strict: set[str]
) -> None:
    """In a StrictFIFO queue, a job starts in a pass only if every job ahead of it in
    the queue (priority, then submit time) started too or waits for something of its
    own (a limit, its partition's); every job after its first that waits for room
    waits behind that job with reason Priority. (The scenes' jobs have no limits.)"""
    assert scene.conf is not None
    queues = {
        name: replace(spec, queueing_strategy="StrictFIFO") if name in strict else spec
        for name, spec in scene.conf.queues.items()
    }
    scene = replace(scene, conf=QueueConf(queues))
    snap = scene.snapshot()
    assert snap.queues is not None
    plan = schedule(snap, NOW, BackfillParams(max_job_test=100) if backfill else None)
    started = {s.job_id for s in plan.starts}
    entries = snap.queues.entries
    for name in strict & set(scene.conf.leaves()):
        mine = sorted(
            (j for j in snap.pending if (e := entries.get(j.job_id)) and e.queue == name),
            key=queue_key(snap),
        )
        ahead: list[int] = []
        for job in mine:
            if job.job_id in started:
                assert all(a in started for a in ahead), (name, ahead, job.job_id)
            else:
                assert plan.reasons[job.job_id] in WAITING_FOR_ROOM
                if any(a not in started for a in ahead):
                    assert plan.reasons[job.job_id] is Reason.PRIORITY
                    assert plan.behind[job.job_id] in ahead
            ahead.append(job.job_id)
    heads = {entries[h].queue for h in plan.behind.values()}
    assert heads <= strict  # nobody waits behind a head of a BestEffortFIFO queue
