"""``corral why``'s document and words, from a Why reply as the CLI's codec decodes it."""

from __future__ import annotations

import time

from cli.why import text
from corral.whydoc import why_document
from corral.wire import codec
from corral.wire import corral_pb2 as pb

NOW = int(time.mktime((2026, 11, 30, 15, 0, 0, 0, 0, -1)))


def _doc(reply: pb.WhyReply) -> dict[str, object]:
    return why_document(codec.decode("WhyReply", reply.SerializeToString()))


PENDING = pb.WhyReply(
    job_id=42,
    user="alice",
    state="PENDING",
    reason="Resources",
    partition="gpu",
    position=3,
    queued=7,
    need_nodes=2,
    need_cpus_per_node=8,
    need_gres="gpu:4",
    need_minutes=120,
    max_time=-1,
    free_nodes="node3",
    free_count=1,
    blockers=[
        pb.WhyBlocker(
            job_id=17,
            user="bob",
            priority=1200,
            nodes="node[1-2]",
            start=NOW - 60,
            end=NOW + 1800,
            running=True,
        ),
        pb.WhyBlocker(priority=1500, nodes="node1", start=NOW + 1800, end=NOW + 3600),
    ],
    expected_start=NOW + 5400,
    expected_nodes="node[1-2]",
    suggestions=[
        pb.WhySuggestion(option="--nodes=1", start=NOW, nodes="node3"),
        pb.WhySuggestion(option="--time=1:00:00", start=NOW + 900, nodes="node3"),
    ],
    now=NOW,
)


def test_the_document_has_nulls_for_unknown_and_unlimited() -> None:
    doc = _doc(PENDING)
    assert doc["needs"] == {
        "nodes": 2,
        "cpus_per_node": 8,
        "memory_per_node": None,
        "gres": "gpu:4",
        "time_limit": 120,
        "exclusive": False,
    }
    assert doc["partition_limits"] == {"max_time": None, "max_nodes": None}
    assert doc["free"] == {"count": 1, "nodes": "node3"}
    blockers = doc["blockers"]
    assert isinstance(blockers, list)
    assert blockers[1] == {
        "job_id": None,  # hidden by PrivateData=jobs
        "user": None,
        "priority": 1500,
        "state": "PENDING",
        "nodes": "node1",
        "start": NOW + 1800,
        "end": NOW + 3600,
    }
    assert (doc["expected_start"], doc["expected_nodes"]) == (NOW + 5400, "node[1-2]")


def test_the_words_say_each_finding_on_a_line() -> None:
    assert text(_doc(PENDING)) == (
        "Job 42 (alice, partition gpu) is pending: Resources\n"
        "  Position 3 of 7 pending in partition gpu.\n"
        "  Needs 2 nodes with 8 CPUs and gpu:4 each for 02:00:00; free now: 1 such node (node3).\n"
        "  Held by: job 17 (bob, priority 1200) on node[1-2] until 15:30:00.\n"
        "  Ahead of it: a job of another user (priority 1500) on node1 from 15:30:00 "
        "until 16:00:00.\n"
        "  Expected to start 2026-11-30T16:30:00 on node[1-2] (as squeue --start shows).\n"
        "  Would start sooner with: --nodes=1 (now), --time=1:00:00 (15:15:00)\n"
    )


def test_a_partition_limit_is_said_with_its_numbers() -> None:
    reply = pb.WhyReply()
    reply.CopyFrom(PENDING)
    reply.reason, reply.max_time = "PartitionTimeLimit", 60
    del reply.blockers[:]
    reply.expected_start, reply.expected_nodes = 0, ""
    words = text(_doc(reply))
    assert "  Partition gpu allows at most 01:00:00 (MaxTime); the job asks 02:00:00.\n" in words
    assert "Expected" not in words and "No expected start" not in words


def test_a_job_that_is_not_pending_says_its_state() -> None:
    reply = pb.WhyReply(job_id=5, user="bob", state="RUNNING", reason="None", nodes="node[1-2]")
    assert _doc(reply) == {
        "job_id": 5,
        "user": "bob",
        "state": "RUNNING",
        "reason": "None",
        "flavor": None,
        "moved_to": None,
        "nodes": "node[1-2]",
        "queue": None,
    }
    assert text(_doc(reply)) == "Job 5 (bob) is RUNNING on node[1-2], not pending.\n"
    reply.queue = "teama"
    assert _doc(reply)["queue"] == {"name": "teama", "resources": [], "head": None}
    assert text(_doc(reply)) == "Job 5 (bob) is RUNNING on node[1-2] in queue teama, not pending.\n"
