"""controller.effects: the transition -> effect table (the store's side, effects sent
only after their cause is on disk, is in test_store_ledger.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from scenario import NOW, job, running

from controller import effects
from controller.agentlink import AgentLink
from controller.effects import Kill, Launch
from controller.jobstate import (
    COMPLETING,
    REQUEUED,
    Cancel,
    Event,
    Finish,
    GiveUp,
    Hold,
    JobState,
    NodeFail,
    Preempt,
    Reason,
    Release,
    Requeue,
    Start,
    apply,
)
from controller.model import Job
from corral.config import parse
from corral.wire import corral_pb2 as pb

LATER = NOW + 500
PENDING = job(1)
RUNNING = running(1, time_limit=60)
ALLOCATION = running(1, time_limit=60, interactive=True)
CANCELLING = running(1, state=JobState.CANCELLED, flags=frozenset({COMPLETING}), end_time=NOW)
REQUEUEING = running(1, flags=frozenset({COMPLETING, REQUEUED}))

# (job before, event) -> the effects' kinds and reasons; every valid pair is listed.
TABLE: list[tuple[str, Job, Event, list[tuple[type, str]]]] = [
    ("start", PENDING, Start(LATER, "p", ("n2",), (2,), (100,), 1), [(Launch, "")]),
    ("allocation-start", job(1, interactive=True), Start(LATER, "p", ("n2",), (2,), (100,), 1), []),
    ("cancel-pending", PENDING, Cancel(LATER), []),
    ("hold", PENDING, Hold(admin=False), []),
    ("release", job(1, held="user"), Release(), []),
    ("give-up", PENDING, GiveUp(LATER, Reason.DEADLINE), []),
    ("cancel", RUNNING, Cancel(LATER), [(Kill, "cancel")]),
    ("preempt", RUNNING, Preempt(LATER), [(Kill, "preempt")]),
    ("requeue", RUNNING, Requeue(LATER), [(Kill, "requeue")]),
    ("node-fail", RUNNING, NodeFail(LATER, requeue=False), [(Kill, "node_down")]),
    ("node-fail-requeue", RUNNING, NodeFail(LATER, requeue=True), [(Kill, "node_down")]),
    ("batch-finish", RUNNING, Finish(LATER, 0, "exited"), []),
    ("allocation-given-back", ALLOCATION, Finish(LATER, 0, "exited"), [(Kill, "complete")]),
    ("allocation-timeout", ALLOCATION, Finish(LATER, 0, "timeout"), [(Kill, "timeout")]),
    ("cancelled-ends", CANCELLING, Finish(LATER, 0, "cancelled"), []),
    ("requeued-ends", REQUEUEING, Finish(LATER, 0, "cancelled"), []),
    ("cancelled-node-fails", CANCELLING, NodeFail(LATER, requeue=False), []),
    ("requeue-finished", running(1, state=JobState.COMPLETED, end_time=NOW), Requeue(LATER), []),
]


@pytest.mark.parametrize(
    ("before", "event", "expected"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE]
)
def test_each_transition_causes_what_the_table_says(
    before: Job, event: Event, expected: list[tuple[type, str]]
) -> None:
    after = apply(before, event)
    got = effects.follow(before, after, event)
    assert [(type(e), getattr(e, "reason", "")) for e in got] == expected
    for effect in got:
        # A launch carries the job as started; a kill, the job as it ran (its nodes).
        assert effect.job == (after if isinstance(effect, Launch) else before)


def test_only_a_requeue_waits_before_its_kill() -> None:
    delays = {
        name: [e.delay for e in effects.follow(b, apply(b, ev), ev) if isinstance(e, Kill)]
        for name, b, ev, _ in TABLE
    }
    assert delays["requeue"] == [effects.REQUEUE_KILL_DELAY_S]
    assert all(d == [0.0] for n, d in delays.items() if d and n != "requeue")


@pytest.mark.parametrize("restarted", [False, True], ids=["same-run", "next-run"])
def test_a_requeues_delayed_kill_spares_the_jobs_next_run(tmp_path: Path, restarted: bool) -> None:
    """SignalJob names the job, not its run: when a requeued job's run ends within the
    kill's delay and the job starts again (a failing Prolog's requeue), the kill meant
    for the old run must not end the new one."""
    conf = parse(
        "ClusterName=c\nSlurmctldHost=ctl\nNodeName=n1 CPUs=2\nPartitionName=p Nodes=n1\n",
        str(tmp_path / "slurm.conf"),
    )
    old = replace(RUNNING, nodes=("n1",))
    now = replace(old, restarts=old.restarts + 1) if restarted else old
    store = SimpleNamespace(conf=conf, jobs={old.job_id: now})
    link = AgentLink(store, b"k" * 32, SimpleNamespace(ttl=60), lambda: None)  # type: ignore[arg-type]
    sent: list[pb.ControllerMessage] = []
    link.sessions["n1"] = SimpleNamespace(send=sent.append)  # type: ignore[assignment]

    async def dispatch_and_wait() -> None:
        link.dispatch([Kill(old, "requeue", delay=0.01)])
        assert sent == []
        await asyncio.sleep(0.05)

    asyncio.run(dispatch_and_wait())
    assert [(m.signal.job_id, m.signal.signal) for m in sent] == ([] if restarted else [(1, 0)])
