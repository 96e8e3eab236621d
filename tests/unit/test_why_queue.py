"""``corral why``'s queue part: the numbers (``queuereply.why_queue`` over a QueueView
made by hand) and the words (``cli.why.text``)."""

from __future__ import annotations

from cli.why import text
from controller.core.queueplan import QueueEntry, QueueView
from controller.core.quota import Shares
from controller.queuereply import why_queue
from corral.queueconf import parse
from corral.whydoc import why_document
from corral.wire import codec
from corral.wire import corral_pb2 as pb

GPU = "gres/gpu"
CONF = parse(
    "QueueName=teama Accounts=teama Guarantee=gres/gpu=4\n"
    "QueueName=teamb Accounts=teamb Guarantee=gres/gpu=4 Preemptible=no\n",
    "queues.conf",
    ["gpu"],
)
SHARES = Shares(
    fair={"root": {GPU: 8}, "teama": {GPU: 5}, "teamb": {GPU: 3}},
    guarantee={"root": {GPU: 8}, "teama": {GPU: 4}, "teamb": {GPU: 4}},
    demand={},
)
#: teama holds 3 GPUs, teamb 4; job 1 (teama) asks 2, job 2 (teamb) 1.
VIEW = QueueView(
    CONF,
    SHARES,
    {"teama": {GPU: 3}, "teamb": {GPU: 4}},
    {1: QueueEntry("teama", {GPU: 2}, True, 0), 2: QueueEntry("teamb", {GPU: 1}, False, 0)},
    (),
)


def test_what_a_job_would_borrow_is_what_its_queue_would_hold_above_the_guarantee() -> None:
    (a,) = why_queue(VIEW, 1)
    assert (a.resource, a.guarantee, a.fair_share, a.allocated, a.request) == (GPU, 4, 5, 3, 2)
    assert a.would_borrow == 1  # 3 + 2 is one above 4
    (b,) = why_queue(VIEW, 2)
    assert (b.allocated, b.request, b.would_borrow) == (4, 1, 1)
    assert why_queue(VIEW, 3) == []  # a job in no queue


def _reply(job_id: int, reason: str) -> dict[str, object]:
    reply = pb.WhyReply(
        job_id=job_id, user="alice", state="PENDING", reason=reason, partition="gpu", queue="teamb"
    )
    reply.queue_resources.extend(why_queue(VIEW, job_id))
    return codec.decode("WhyReply", reply.SerializeToString())


def test_the_words_name_the_queue_its_numbers_and_its_reason() -> None:
    doc = why_document(_reply(2, "QueueGuarantee"))
    assert doc["queue"] == {
        "name": "teamb",
        "resources": [
            {
                "resource": GPU,
                "guarantee": 4,
                "fair_share": 3,
                "allocated": 4,
                "request": 1,
                "would_borrow": 1,
            }
        ],
        "head": None,
    }
    words = text(doc)
    assert "  Queue teamb: gres/gpu: guarantee 4, fair share 3, holds 4.\n" in words
    assert "  Starting now it would borrow gres/gpu=1 above the guarantee.\n" in words
    assert "cannot be preempted (Preemptible=no), so they run only within its Guarantee" in words


def test_no_queue_no_queue_words() -> None:
    reply = _reply(2, "Resources")
    reply["queue"], reply["queue_resources"] = "", []
    doc = why_document(reply)
    assert doc["queue"] is None and "Queue" not in text(doc)
