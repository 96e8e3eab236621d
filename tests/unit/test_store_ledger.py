"""The store as a ledger: its seams to durability, holdings and the snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from controller import effects as fx
from controller import snapshots
from controller.core import schedule
from controller.core.schedule import order_key, queue_key
from controller.effects import Effect, Kill, Launch, NewLimit, Signal
from controller.holdings import Holdings
from controller.jobspec import from_fields
from controller.jobstate import Cancel, Finish, Start
from controller.journal import Journal
from controller.principal import principal_for
from controller.store import JobStore, Registration
from corral.config import parse

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-2] CPUs=8 RealMemory=16000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = from_fields({"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"})


@pytest.fixture
def store(tmp_path: Path) -> JobStore:
    return JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state")))


def test_a_record_reaches_the_outbox_once_committed_and_once_per_batch(store: JobStore) -> None:
    store.durable.recorder = lambda job: f"{job.job_id}:{job.state.name}".encode()
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    store.post(job.job_id, Cancel(now=110))
    assert store.durable.outbox == {}  # not on disk yet: dbd must not learn of it
    asyncio.run(store.flush())
    assert list(store.durable.outbox.values()) == [f"{job.job_id}:CANCELLED".encode()]
    store.durable.delivered(max(store.durable.outbox))
    assert store.durable.outbox == {}


def test_holdings_come_and_go_with_the_job(store: JobStore) -> None:
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    store.post(job.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    assert (store.used("n1"), store.used("n2")) == ((4, 1000), (0, 0))
    store.post(job.job_id, Cancel(now=120))
    assert store.used("n1") == (4, 1000)  # COMPLETING: still on its node
    store.post(job.job_id, Finish(130, 0, "cancelled"))
    assert store.used("n1") == (0, 0)


def test_the_snapshot_is_a_function_of_the_ledger_and_changes_nothing(store: JobStore) -> None:
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    other = store.submit(SPEC, principal_for(0, 0), now=100).job
    store.post(job.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    jobs, nodes = dict(store.jobs), dict(store.nodes)
    first, second = store.snapshot(), store.snapshot()
    assert first == second
    assert (store.jobs, store.nodes) == (jobs, nodes)
    assert [j.job_id for j in first.pending] == [other.job_id]
    assert first.nodes["n1"].free_cpus == 4 and first.nodes["n2"].free_cpus == 8
    holdings = Holdings(nodes)  # a ledger made by hand: nothing held
    ledger = snapshots.Ledger(
        nodes,
        {},
        jobs,
        [other.job_id],
        holdings,
        None,
        frozenset(),
        store.priorities.usage,
        store.reservations,
        store.ranking,
    )
    alone = snapshots.build(ledger, store.conf, store.capacity)
    assert alone.nodes["n1"].free_cpus == 8 and alone.pending == first.pending


def test_node_views_are_kept_until_their_node_changes_and_jobs_on_follows(
    store: JobStore,
) -> None:
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    before = store.snapshot().nodes
    store.post(job.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    during = store.snapshot().nodes
    assert during["n2"] is before["n2"]  # untouched: the same view again
    assert during["n1"] is not before["n1"] and during["n1"].free_cpus == 4
    assert [j.job_id for j in store.jobs_on("n1")] == [job.job_id] and not store.jobs_on("n2")
    store.node_registered(Registration("n2", 8, 16000), monotonic=1.0, now=120)
    assert store.snapshot().nodes["n2"] is not during["n2"]  # a new runtime record
    store.post(job.job_id, Cancel(now=130))
    store.post(job.job_id, Finish(140, 0, "cancelled"))
    after = store.snapshot()
    assert after.nodes["n1"].free_cpus == 8 and not store.jobs_on("n1")
    ledger = snapshots.Ledger(
        store.nodes,
        store.partition_state,
        store.jobs,
        [],
        store.holdings,
        store.associations,
        store.enforce,
        store.priorities.usage,
        store.reservations,
        store.ranking,
    )
    assert snapshots.build(ledger, store.conf, store.capacity).nodes == after.nodes


def test_running_records_and_queue_keys_are_kept_until_their_job_changes(
    store: JobStore,
) -> None:
    """The snapshot takes again a running job's record and a pending job's queue key
    while the job is the same value, and works them out anew once it changes."""
    first, second, third = (store.submit(SPEC, principal_for(0, 0), now=100).job for _ in "abc")
    store.post(first.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    before = store.snapshot()
    again = store.snapshot()
    assert again.running[0] is before.running[0]
    assert again.queue_keys[second.job_id] is before.queue_keys[second.job_id]
    store.post(first.job_id, Cancel(now=120))  # COMPLETING: a new value, still held
    store.jobs[second.job_id] = replace(store.jobs[second.job_id], admin_priority=5)
    after = store.snapshot()
    assert after.running[0] is not before.running[0] and not after.running[0].preemptable
    assert after.queue_keys[second.job_id][1][1] == -5
    assert after.queue_keys[third.job_id] is before.queue_keys[third.job_id]
    # The keys order the queue as keys worked out anew would.
    key = order_key(after.partitions, after.ranking.of)
    assert sorted(after.pending, key=queue_key(after)) == sorted(after.pending, key=key)
    assert [j.job_id for j in sorted(after.pending, key=key)] == [second.job_id, third.job_id]


MULTIFACTOR = CONF + (
    "PartitionName=urgent Nodes=ALL PriorityJobFactor=2\n"
    "PriorityType=priority/multifactor\nPriorityMaxAge=00:10:00\n"
    "PriorityWeightAge=1000\nPriorityWeightPartition=1000\n"
)


def test_priorities_are_a_ranking_the_snapshot_takes_and_no_job_is_rewritten(
    tmp_path: Path,
) -> None:
    conf = parse(MULTIFACTOR, str(tmp_path / "slurm.conf"))
    store = JobStore(conf, Journal(str(tmp_path / "state")))
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 8, 16000), monotonic=1.0, now=10)
    plain = store.submit(SPEC, principal_for(0, 0), now=100).job
    urgent = store.submit(replace(SPEC, partitions=("urgent",)), principal_for(0, 0), now=100).job
    records = dict(store.jobs)
    store.recalculate_priorities(400)
    ranking = store.ranking
    assert ranking.at == 400
    assert ranking.values[urgent.job_id] > ranking.values[plain.job_id]
    assert ranking.values[plain.job_id] > plain.calc_priority  # it aged since submission
    assert all(store.jobs[i] is records[i] for i in records)
    snap = store.snapshot()
    assert snap.ranking is ranking
    assert [j.job_id for j in sorted(snap.pending, key=queue_key(snap))] == [
        urgent.job_id,
        plain.job_id,
    ]
    # A job starts with its ranked priority and keeps it while it runs, as Slurm's does.
    started = store.commit(schedule(snap, 400))
    assert {j.job_id: j.calc_priority for j in started} == dict(ranking.values)
    store.recalculate_priorities(1000)
    assert store.ranking.values == {}
    assert {j.job_id: store.ranking.of(j) for j in store.jobs.values()} == dict(ranking.values)


def test_nodes_registering_after_a_calculation_count_at_once_in_the_job_size_factor(
    tmp_path: Path,
) -> None:
    """A controller's first calculation comes before its nodes register; a job
    submitted before PriorityCalcPeriod has passed again counts them all the same."""
    sized = MULTIFACTOR + "PriorityWeightJobSize=1000\nPriorityCalcPeriod=5\n"  # minutes
    store = JobStore(parse(sized, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    store.recalculate_priorities(1000)  # no node yet
    assert store.priorities.cluster.nodes == 0
    for name in ("n1", "n2"):
        store.node_registered(Registration(name, 8, 16000), monotonic=1.0, now=1001)
    store.recalculate_priorities(1002)
    job = store.submit(replace(SPEC, min_nodes=2), principal_for(0, 0), now=1003).job
    # Both nodes of two: the job-size factor's node half is whole.
    assert store.priorities.cluster.nodes == 2
    assert job.calc_priority >= 500


class Recorder:
    """A dispatcher that notes each effect with the job's state in the journal then."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.sent: list[tuple[Effect, str]] = []

    def __call__(self, sent: Sequence[Effect]) -> None:
        on_disk = Journal(str(self.state)).load().jobs
        for effect in sent:
            self.sent.append((effect, on_disk[effect.job.job_id].state.name))


def test_effects_wait_for_the_commit_of_their_cause(store: JobStore, tmp_path: Path) -> None:
    sent = Recorder(tmp_path / "state")
    store.dispatch_to(sent)
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    store.post(job.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    assert sent.sent == []  # not on disk yet: no agent may hear of it
    asyncio.run(store.flush())
    assert [(type(e), state) for e, state in sent.sent] == [(Launch, "RUNNING")]
    store.post(job.job_id, Cancel(now=120))
    asyncio.run(store.flush())
    assert [(type(e), state) for e, state in sent.sent[1:]] == [(Kill, "CANCELLED")]
    asyncio.run(store.flush())
    assert len(sent.sent) == 2  # each effect is sent once


def test_a_new_time_limit_and_a_signal_follow_the_same_path(store: JobStore) -> None:
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    job = store.submit(SPEC, principal_for(0, 0), now=100).job
    started = store.post(job.job_id, Start(110, "p", ("n1",), (4,), (1000,), 1))
    store.update(replace(started, comment="x"))  # no message for the agent
    store.update(replace(store.jobs[job.job_id], time_limit=5))
    store.emit(Signal(started, 10))
    asyncio.run(store.flush())
    assert [type(e) for e in sent] == [Launch, NewLimit, Signal]
    assert sent[1].job.time_limit == 5


@pytest.mark.parametrize(
    ("hooks", "interactive", "effects", "waits"),
    [
        pytest.param("", False, [Launch], None, id="none"),
        pytest.param("Prolog=/p\nEpilog=/e\n", False, [Launch, fx.NodeEpilog], None, id="default"),
        pytest.param(
            "Prolog=/p\nPrologFlags=Alloc\n",
            False,
            [Launch, fx.NodeProlog, fx.NodeEpilog],
            None,
            id="alloc",
        ),
        pytest.param(
            "Prolog=/p\nPrologFlags=Contain\n",
            True,
            [fx.NodeProlog, fx.NodeEpilog],
            {"n1", "n2"},
            id="contain",
        ),
        pytest.param(
            "Prolog=/p\nPrologFlags=Alloc,NoHold\n",
            True,
            [fx.NodeProlog, fx.NodeEpilog],
            None,
            id="nohold",
        ),
        pytest.param(
            "PrologSlurmctld=/c\nPrologFlags=Alloc\n",
            True,
            [fx.Granted],
            {fx.PROLOG_SLURMCTLD},
            id="ctld",
        ),
    ],
)
def test_site_programs_at_a_jobs_start_and_end(
    tmp_path: Path,
    hooks: str,
    interactive: bool,
    effects: list[type],
    waits: set[str] | None,
) -> None:
    """What a start asks of the nodes' and controller's site programs, and what an
    allocation waits for before its client may use it (``configuring``)."""
    store = JobStore(
        parse(CONF + hooks, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "state"))
    )
    sent: list[Effect] = []
    store.dispatch_to(sent.extend)
    spec = from_fields({"name": "a", "interactive": interactive, "work_dir": "/tmp"})
    if not interactive:
        spec = SPEC
    job = store.submit(spec, principal_for(0, 0), now=100).job
    store.post(job.job_id, Start(110, "p", ("n1", "n2"), (4, 4), (1000, 1000), 2))
    assert store.configuring.get(job.job_id) == waits
    store.post(job.job_id, Cancel(now=120))
    store.post(job.job_id, Finish(130, 0, "cancelled"))
    assert job.job_id not in store.configuring  # the end forgets what it waited for
    asyncio.run(store.flush())
    assert [type(e) for e in sent if not isinstance(e, Kill)] == effects
