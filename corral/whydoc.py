"""``corral why``'s answer as a JSON document: one shape for the CLI and the REST gateway.

``why_document`` takes the Why reply as the import-light codec decodes it (a
dict with every field; from a protobuf message:
``codec.decode("WhyReply", message.SerializeToString())``) and returns plain
JSON values. Unknown and unlimited become ``null``: no expected start, no time
limit, no MaxTime, a blocker hidden by PrivateData=jobs. Times are epoch
seconds; node lists are hostlist expressions. A job that is not pending has
only ``job_id``, ``user``, ``state``, ``reason``, ``nodes``, ``queue``
(its name, with no resources and a null head) and ``flavor``.

A job that names alternatives (``--gres=a|b``, ``--prefer``) has ``flavor``, the
words of scontrol's ``Flavor=`` line (null for a plain job), and, pending,
``flavors``: each alternative in its order with what the pass found for it
(``starts``, ``awaited``, ``borrows``, ``untried`` or a pending reason), its
expected start (null: none) and whether it is the one chosen.

A pending job's ``licenses`` lists each license it asks for (``-L``): how many, the
cluster's total, and how many are free now (empty: it asks for none).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

#: A pending job's queue, per resource (``WhyQueueResource``).
QUEUE_AMOUNTS = ("resource", "guarantee", "fair_share", "allocated", "request", "would_borrow")


def why_document(reply: Mapping[str, Any]) -> dict[str, Any]:
    """The Why reply ``reply`` as the document ``corral why --json`` prints."""
    doc: dict[str, Any] = {
        "job_id": reply["job_id"],
        "user": reply["user"],
        "state": reply["state"],
        "reason": reply["reason"],
    }
    doc["flavor"] = reply.get("flavor") or None
    doc["moved_to"] = reply.get("moved_to") or None  # docs/federation.md
    if reply["state"] != "PENDING" or doc["moved_to"]:
        doc["nodes"] = reply["nodes"] or None
        doc["queue"] = _queue(reply)
        return doc
    doc.update(
        partition=reply["partition"],
        position=reply["position"],
        queued=reply["queued"],
        needs={
            "nodes": reply["need_nodes"],
            "cpus_per_node": reply["need_cpus_per_node"],
            "memory_per_node": reply["need_memory_per_node"] or None,
            "gres": reply["need_gres"] or None,
            "time_limit": reply["need_minutes"] if reply["need_minutes"] >= 0 else None,
            "exclusive": reply["need_exclusive"],
        },
        partition_limits={
            "max_time": reply["max_time"] if reply["max_time"] >= 0 else None,
            "max_nodes": reply["max_nodes"] or None,
        },
        free={"count": reply["free_count"], "nodes": reply["free_nodes"] or None},
        blockers=[
            {
                "job_id": b["job_id"] or None,
                "user": b["user"] or None,
                "priority": b["priority"],
                "state": "RUNNING" if b["running"] else "PENDING",
                "nodes": b["nodes"],
                "start": b["start"],
                "end": b["end"] or None,
            }
            for b in reply["blockers"]
        ],
        reservations=[
            {"name": r["name"], "nodes": r["nodes"], "start": r["start"], "end": r["end"]}
            for r in reply["reservations"]
        ],
        expected_start=reply["expected_start"] or None,
        expected_nodes=reply["expected_nodes"] or None,
        suggestions=[
            {"option": s["option"], "start": s["start"], "nodes": s["nodes"] or None}
            for s in reply["suggestions"]
        ],
        now=reply["now"],
        preempting=[
            {
                "job_id": v["job_id"] or None,
                "user": v["user"] or None,
                "nodes": v["nodes"] or None,
                "state": v["state"],
                "grace_end": v["grace_end"] or None,
                "why": v["why"],
            }
            for v in reply.get("preempting", [])
        ],
        queue=_queue(reply),
        licenses=[
            {"name": x["name"], "asked": x["asked"], "total": x["total"], "free": x["free"]}
            for x in reply.get("licenses", [])
        ],
        topology=_topology(reply),
        flavors=[
            {
                "label": f["label"],
                "gres": f["gres"] or None,
                "outcome": f["outcome"],
                "start": f["start"] or None,
                "chosen": f["chosen"],
            }
            for f in reply.get("flavors", [])
        ],
    )
    return doc


def _topology(reply: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the job asks of the network (null: nothing), and whether that is what
    keeps it waiting (``held``: a looser request, among the suggestions, starts it
    sooner)."""
    asked = reply.get("topology")
    if not asked:
        return None
    return {
        "switches": asked["switches"] or None,
        "switch_wait_end": asked["switch_wait_end"] or None,
        "required_level": asked["required_level"] if asked["required_level"] >= 0 else None,
        "preferred_level": asked["preferred_level"] if asked["preferred_level"] >= 0 else None,
        "segment": asked["segment"] or None,
        "held": asked["held"],
    }


def _queue(reply: Mapping[str, Any]) -> dict[str, Any] | None:
    """The job's queue (null: no queues.conf, or no queue takes the job) and, for a
    pending job, per governed resource its queue's guarantee, fair share and
    holdings, what the job asks and what it would borrow were it to start now, and
    the head of a StrictFIFO queue it waits behind (null: none)."""
    if not reply.get("queue"):
        return None
    head = reply.get("queue_head")
    return {
        "name": reply["queue"],
        "resources": [
            {key: r[key] for key in QUEUE_AMOUNTS} for r in reply.get("queue_resources", [])
        ],
        "head": {
            "job_id": head["job_id"] or None,
            "user": head["user"] or None,
            "reason": head["reason"],
        }
        if head
        else None,
    }
