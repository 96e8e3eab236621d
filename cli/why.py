"""``corral why JOBID``: why a pending job waits, in words or (``--json``) as data.

The controller's scheduling core computes the answer (the Why RPC,
``controller/core/why.py``) from the plan behind ``squeue --start``; this
prints it. ``--json`` prints ``corral.whydoc.why_document``, the document the
REST gateway serves, and the words are written from that same document.
"""

from __future__ import annotations

import sys
import time

from cli.boundary import UsageError, connect, run
from cli.corral_options import WHY
from cli.options import parse
from corral import errors, timefmt
from corral.errors import SlurmError
from corral.whydoc import why_document

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

USAGE = "Usage: corral why [--json] JOBID"
#: Jobs named per kind (holding, ahead) before "and N more".
SHOWN = 5
MAX_JOB_ID = 0xFFFFFFFF


def why(argv: list[str]) -> int:
    found, ids = parse(WHY, argv, permute=True)
    keys = {option.key for option, _ in found}
    if "help" in keys:
        print(USAGE)
        return 0
    as_json = "json" in keys  # -v is the error boundary's switch for tracebacks
    if len(ids) != 1:
        raise UsageError(USAGE)
    if not ids[0].isdigit() or not 0 < int(ids[0]) <= MAX_JOB_ID:
        raise SlurmError(errors.ESLURM_INVALID_JOB_ID)
    doc = why_document(connect().call("Why", {"job_id": int(ids[0])}))
    if as_json:
        import json  # imports re: only for --json

        print(json.dumps(doc, indent=2))
    else:
        sys.stdout.write(text(doc))
    return 0


def text(doc: Mapping[str, Any]) -> str:
    """The answer in words, a line per finding."""
    job, user, state = doc["job_id"], doc["user"], doc["state"]
    if doc.get("moved_to"):  # docs/federation.md, "A pending job moves"
        cluster, _, there = doc["moved_to"].partition(":")
        if not there:
            return f"Job {job} ({user}) is being moved to cluster {cluster}.\n"
        return f"Job {job} ({user}) moved to cluster {cluster} as job {there}.\n"
    if state != "PENDING":
        where = f" on {doc['nodes']}" if doc["nodes"] else ""
        queue = f" in queue {doc['queue']['name']}" if doc.get("queue") else ""
        flavor = f"  Flavor: {doc['flavor']}\n" if doc.get("flavor") else ""
        return f"Job {job} ({user}) is {state}{where}{queue}, not pending.\n{flavor}"
    part, reason, now = doc["partition"], doc["reason"], doc["now"]
    lines = [
        f"Job {job} ({user}, partition {part}) is pending: {reason}",
        f"Position {doc['position']} of {doc['queued']} pending in partition {part}.",
        _needs(doc),
    ]
    limits, needs = doc["partition_limits"], doc["needs"]
    if reason == "PartitionTimeLimit" and limits["max_time"] is not None:
        lines.append(
            f"Partition {part} allows at most {_limit(limits['max_time'])} (MaxTime); "
            f"the job asks {_limit(needs['time_limit'])}."
        )
    if reason == "PartitionNodeLimit":
        most = f"at most {limits['max_nodes']}" if limits["max_nodes"] else "no fewer"
        lines.append(f"Partition {part} allows {most} nodes; the job asks {needs['nodes']}.")
    if doc.get("flavors"):
        lines += _flavors(doc, now)
    if doc.get("queue"):
        lines += _queue(doc["queue"], reason)
    running = [b for b in doc["blockers"] if b["state"] == "RUNNING"]
    ahead = [b for b in doc["blockers"] if b["state"] != "RUNNING"]
    if running:
        lines.append("Held by: " + _jobs(running, now, planned=False))
    if ahead:
        lines.append("Ahead of it: " + _jobs(ahead, now, planned=True))
    for v in doc.get("preempting", []):
        lines.append(_preempted(v, now))
    for lic in doc.get("licenses", []):
        lines.append(
            f"License {lic['name']}: asks {lic['asked']} of {lic['total']}, "
            f"{lic['free']} free now (scontrol show licenses)."
        )
    if doc.get("topology"):
        lines.append(_topology(doc["topology"], now))
    for r in doc["reservations"]:
        lines.append(
            f"Reservation {r['name']} on {r['nodes']} "
            f"from {_when(r['start'], now)} until {_when(r['end'], now)}."
        )
    start, nodes = doc["expected_start"], doc["expected_nodes"]
    if start is not None and start <= now:
        lines.append(f"Starts at the next scheduling cycle, on {nodes}.")
    elif start is not None:
        lines.append(
            f"Expected to start {timefmt.format_timestamp(start)} on {nodes} "
            "(as squeue --start shows)."
        )
    elif reason in ("Resources", "Priority"):
        lines.append("No expected start: backfill plans none within bf_window (yet).")
    if doc["suggestions"]:
        lines.append(
            "Would start sooner with: "
            + ", ".join(f"{s['option']} ({_when(s['start'], now)})" for s in doc["suggestions"])
        )
    return lines[0] + "\n" + "".join(f"  {line}\n" for line in lines[1:])


#: The queues' reasons (squeue's words) in a sentence each (docs/queues.md).
QUEUE_REASONS = {
    "QueueLimit": "its queue, or one above it, holds its Limit",
    "QueueBorrowLimit": "its queue has borrowed all its BorrowLimit allows",
    "QueueGuarantee": (
        "its queue's jobs cannot be preempted (Preemptible=no), so they run only within "
        "its Guarantee, and the job does not fit in what is left of it"
    ),
    "QueueCohortFull": "the other queues have nothing unused that they lend to borrow",
    "InvalidQueue": "its queue takes no jobs (only leaf queues do)",
}


def _queue(queue: Mapping[str, Any], reason: str) -> list[str]:
    """The job's queue: its guarantee and fair share, what it would borrow, and the
    queue's reason in words."""
    name, resources = queue["name"], queue["resources"]
    lines = []
    if resources:
        each = "; ".join(
            f"{r['resource']}: guarantee {r['guarantee']}, fair share {r['fair_share']}, "
            f"holds {r['allocated']}"
            for r in resources
        )
        lines.append(f"Queue {name}: {each}.")
        borrow = [f"{r['resource']}={r['would_borrow']}" for r in resources if r["would_borrow"]]
        if borrow:
            lines.append(f"Starting now it would borrow {','.join(borrow)} above the guarantee.")
        else:
            lines.append("Starting now it would stay within its queue's guarantee.")
    else:
        lines.append(f"Queue {name}.")
    if reason in QUEUE_REASONS:
        lines.append(f"It waits because {QUEUE_REASONS[reason]}.")
    if queue.get("head"):
        lines.append(_behind(queue["head"]))
    return lines


def _flavors(doc: Mapping[str, Any], now: int) -> list[str]:
    """The job's alternatives in its order, what each met, and the one chosen."""
    shown = []
    for i, f in enumerate(doc["flavors"], 1):
        when = f", expected {_when(f['start'], now)}" if f["start"] else ""
        mark = " <-" if f["chosen"] else ""
        shown.append(f"{i}. {f['label']}: {f['outcome']}{when}{mark}")
    lines = ["Alternatives, in order of preference: " + "; ".join(shown) + "."]
    if doc.get("flavor"):
        lines.append(f"Flavor: {doc['flavor']}")
    return lines


def _behind(head: Mapping[str, Any]) -> str:
    """The StrictFIFO head the job waits behind, and what the head waits for."""
    who = f"job {head['job_id']} ({head['user']})" if head["job_id"] else "a job of another user"
    waits = "starts now" if head["reason"] == "None" else f"waits: {head['reason']}"
    return (
        f"It waits behind {who}, the head of its queue (QueueingStrategy=StrictFIFO), "
        f"which {waits}."
    )


def _topology(asked: Mapping[str, Any], now: int) -> str:
    """What the job asks of the network, and whether that keeps it waiting."""
    parts = []
    if asked["switches"]:
        count = asked["switches"]
        bound = f"at most {count} leaf switch{'es' if count != 1 else ''} (--switches)"
        if asked["switch_wait_end"]:
            bound += f" until {_when(asked['switch_wait_end'], now)}, then any"
        parts.append(bound)
    if asked["required_level"] is not None:
        level = asked["required_level"]
        parts.append(f"under one switch (block) of level {level} or below (--topology-level)")
    if asked["preferred_level"] is not None:
        parts.append(f"preferring level {asked['preferred_level']}")
    if asked["segment"]:
        parts.append(f"segments of {_count(asked['segment'], 'node')} (--segment)")
    text = "Placement: " + "; ".join(parts) + "."
    if asked["held"]:
        text += " That is what keeps it waiting (see below)."
    return text


def _preempted(victim: Mapping[str, Any], now: int) -> str:
    """One job preempted to make room: who, where, how far, and the recorded why."""
    who = f"job {victim['job_id']} ({victim['user']})" if victim["job_id"] else "a job"
    where = f" on {victim['nodes']}" if victim["nodes"] else ""
    grace = f", its GraceTime ends {_when(victim['grace_end'], now)}" if victim["grace_end"] else ""
    return f"Preempting {who}{where}, now {victim['state']}{grace}: {victim['why']}"


def _needs(doc: Mapping[str, Any]) -> str:
    needs, free = doc["needs"], doc["free"]
    whole = needs["exclusive"]  # all of each node's CPUs and memory
    each = [] if whole else [_count(needs["cpus_per_node"], "CPU")]
    if needs["memory_per_node"] and not whole:
        each.append(f"{needs['memory_per_node']}M")
    if needs["gres"]:
        each.append(needs["gres"])
    what = ", ".join(each[:-1]) + " and " + each[-1] if len(each) > 1 else "".join(each)
    what = f" with {what} each" if what else ""
    limit = needs["time_limit"]
    run_for = f"for {_limit(limit)}" if limit is not None else "with no time limit"
    such = f"{_count(free['count'], 'such node')} ({free['nodes']})" if free["count"] else "none"
    nodes = _count(needs["nodes"], "whole node" if whole else "node")
    return f"Needs {nodes}{what} {run_for}; free now: {such}."


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _jobs(blockers: list[Mapping[str, Any]], now: int, *, planned: bool) -> str:
    shown = []
    for b in blockers[:SHOWN]:
        who = f"job {b['job_id']} ({b['user']}, " if b["job_id"] else "a job of another user ("
        until = f"until {_when(b['end'], now)}" if b["end"] else "with no time limit"
        since = f"from {_when(b['start'], now)} " if planned else ""
        shown.append(f"{who}priority {b['priority']}) on {b['nodes']} {since}{until}")
    more = f"; and {len(blockers) - SHOWN} more" if len(blockers) > SHOWN else ""
    return "; ".join(shown) + more + "."


def _limit(minutes: int | None) -> str:
    return timefmt.format_limit_hms(-1 if minutes is None else minutes)


def _when(epoch: int, now: int) -> str:
    """``now``, a clock time today, or the whole date."""
    if epoch <= now:
        return "now"
    if time.localtime(epoch)[:3] == time.localtime(now)[:3]:
        return time.strftime("%H:%M:%S", time.localtime(epoch))
    return timefmt.format_timestamp(epoch)


def main() -> None:
    run("corral why", why)


if __name__ == "__main__":
    main()
