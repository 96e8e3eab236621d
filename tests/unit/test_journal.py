"""The journal: what one writes, a fresh one on the same state reads, on both backends
(SQLite in StateSaveLocation, and MariaDB: controller/dbjournal.py)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import NOW, job, running

from controller.dbjournal import DatabaseJournal
from controller.jobstate import COMPLETING, REQUEUED, JobState, Reason
from controller.journal import Batch, Journal, StateJournal, job_from_row, job_to_row
from controller.model import Job, NodeRuntime, Payload, Step
from tests.databases import BACKENDS, fresh_state_database

PENDING = job(1, dependency="afterok:9", exc_nodes=("n3",), comment="ünïcødé 🐄")
RUNNING = running(
    2,
    nodes=("n1", "n2"),
    cpus=(4, 2),
    alloc_mem=(1000, 500),
    flags=frozenset({COMPLETING, REQUEUED}),
    requeue_hold="admin",
    nodes_given=True,
    mem_per_cpu=250,
    time_limit=60,
)
FINISHED = running(
    3,
    state=JobState.FAILED,
    reason=Reason.NON_ZERO_EXIT_CODE,
    exit_status=2 << 8,
    end_time=NOW,
    mem_per_node=0,
    admin_priority=0,
)
ARRAY_TASK = job(
    5,
    array_job_id=4,
    array_task_id=1,
    array_max_tasks=2,
    array_spec="0-3%2",
    held="admin",
    reason=Reason.JOB_HELD_ADMIN,
)
JOBS = {j.job_id: j for j in (PENDING, RUNNING, FINISHED, ARRAY_TASK)}
PAYLOAD = Payload("#!/bin/sh\necho ü\n", ("a", "b c"), (("A", "1"), ("PATH", "/bin")))
NODE = NodeRuntime(
    "n1",
    responding=True,
    last_seen=12.5,
    state="DOWN",
    drain=True,
    reason="bad fan",
    reason_user="root",
    reason_uid=0,
    reason_time=NOW,
    hostname="host1",
    probed_cpus=4,
    jobs=frozenset({2}),
)


Reopen = Callable[[], StateJournal]


@pytest.fixture(params=BACKENDS)
def reopen(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Reopen]:
    """Opens a journal on one state (a directory, or a MariaDB database), each time anew;
    a database journal takes the lease, as the controller does before it writes."""
    if request.param == "sqlite":
        yield lambda: Journal(str(tmp_path / "state"))
        return
    with fresh_state_database(tmp_path) as storage:

        def open_database() -> StateJournal:
            journal = DatabaseJournal(storage, "test")
            assert journal.lease.take() is None
            return journal

        yield open_database


@pytest.fixture
def journal(reopen: Reopen) -> Iterator[StateJournal]:
    j = reopen()
    yield j
    j.close()


def test_fresh_state_loads_empty(journal: StateJournal) -> None:
    loaded = journal.load()
    assert (loaded.jobs, loaded.nodes, loaded.meta, loaded.outbox, loaded.events) == (
        {},
        {},
        {},
        {},
        {},
    )
    assert journal.payload(1) is None


def test_sqlite_state_is_a_file_in_state_save_location(tmp_path: pathlib.Path) -> None:
    Journal(str(tmp_path / "state")).close()
    assert (tmp_path / "state" / "corral-state.db").is_file()


def test_batch_survives_reopen(journal: StateJournal, reopen: Reopen) -> None:
    journal.write(
        Batch(
            jobs=dict(JOBS),
            payloads={1: PAYLOAD},
            nodes={"n1": NODE},
            meta={"next_job_id": "6", "last_update": str(NOW)},
        )
    )
    journal.close()
    again = reopen()
    try:
        loaded = again.load()
        assert loaded.jobs == JOBS
        assert loaded.meta == {"next_job_id": "6", "last_update": str(NOW)}
        assert again.payload(1) == PAYLOAD
        assert again.payload(2) is None
        # Only the administrator's decisions about a node survive; liveness does not.
        assert loaded.nodes == {
            "n1": {
                "state": "DOWN",
                "drain": True,
                "reason": "bad fan",
                "reason_user": "root",
                "reason_uid": 0,
                "reason_time": NOW,
                "reboot": "",  # scontrol reboot's (controller/reboots.py)
                "reboot_asap": False,
                "reboot_next": "",
                "reboot_time": 0,
                "power": "",  # power saving's (controller/powersave.py)
                "power_time": 0,
                "idle_since": None,  # when it went idle, for SuspendTime
                "available_features": None,  # scontrol update NodeName= Features=
                "active_features": None,
            }
        }
    finally:
        again.close()


def test_later_batches_replace_and_delete(journal: StateJournal, reopen: Reopen) -> None:
    journal.write(
        Batch(jobs=dict(JOBS), payloads={1: PAYLOAD, 3: PAYLOAD}, meta={"next_job_id": "6"})
    )
    done = running(2, state=JobState.COMPLETED, end_time=NOW + 5)
    journal.write(
        Batch(
            jobs={2: done},
            deleted_jobs={1, 3},
            deleted_payloads={1},  # job 3's payload stays: an array's other tasks still use it
            meta={"next_job_id": "7"},
        )
    )
    journal.close()
    again = reopen()
    try:
        loaded = again.load()
        assert set(loaded.jobs) == {2, 5}
        assert loaded.jobs[2] == done
        assert loaded.meta == {"next_job_id": "7"}
        assert again.payload(1) is None
        assert again.payload(3) == PAYLOAD
    finally:
        again.close()


def test_outboxes_and_steps_survive_reopen(journal: StateJournal, reopen: Reopen) -> None:
    """dbd's two outboxes (bytes and JSON, by sequence) and a job's steps come back as
    written; delivered records leave."""
    step = Step(0, "x", ("n1", "n2"), (1, 1), (1, 1), 5, mem=(300, 200))
    stepped = replace(RUNNING, steps=(step,))
    journal.write(
        Batch(
            jobs={2: stepped},
            outbox={1: b"\x00\xffone", 2: b"two", 3: b"three"},
            events={1: '{"node": "n1"}', 2: '{"node": "n2"}'},
        )
    )
    journal.write(Batch(delivered=2, events_delivered=1, outbox={4: b"four"}))
    journal.close()
    again = reopen()
    try:
        loaded = again.load()
        assert loaded.jobs == {2: stepped}
        assert loaded.outbox == {3: b"three", 4: b"four"}
        assert loaded.events == {2: '{"node": "n2"}'}
    finally:
        again.close()


def test_failed_batch_writes_nothing(journal: StateJournal, reopen: Reopen) -> None:
    journal.write(Batch(meta={"k": "before"}))
    unserialisable = Payload(script=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        journal.write(Batch(jobs={1: PENDING}, payloads={1: unserialisable}, meta={"k": "after"}))
    journal.write(Batch(meta={"other": "x"}))  # still usable after the rollback
    journal.close()
    again = reopen()
    try:
        loaded = again.load()
        assert loaded.jobs == {}
        assert loaded.meta == {"k": "before", "other": "x"}
    finally:
        again.close()


@pytest.mark.parametrize(
    ("batch", "truthy"),
    [
        (Batch(), False),
        (Batch(jobs={1: PENDING}), True),
        (Batch(deleted_jobs={1}), True),
        (Batch(payloads={1: PAYLOAD}), True),
        (Batch(nodes={"n1": NODE}), True),
        (Batch(meta={"k": "v"}), True),
    ],
    ids=["empty", "jobs", "deletions", "payloads", "nodes", "meta"],
)
def test_batch_is_true_when_it_has_changes(batch: Batch, truthy: bool) -> None:
    assert bool(batch) is truthy


# ---------------------------------------------------------------- row codec property

_TEXT = st.text(max_size=8)
_NAMES = st.lists(st.text(min_size=1, max_size=5), max_size=3).map(tuple)
_INT = st.integers(-(2**40), 2**40)

_JOBS = st.builds(
    Job,
    job_id=st.integers(1, 2**31),
    name=_TEXT,
    uid=st.integers(0, 2**32 - 1),
    gid=st.integers(0, 2**32 - 1),
    user=_TEXT,
    group=_TEXT,
    state=st.sampled_from(JobState),
    reason=st.sampled_from(Reason),
    submit_time=_INT,
    partitions=_NAMES,
    flags=st.frozensets(st.sampled_from([COMPLETING, REQUEUED])),
    held=st.sampled_from(["", "user", "admin"]),
    admin_priority=st.none() | _INT,
    mem_per_node=st.none() | st.integers(0, 2**40),
    mem_per_cpu=st.none() | st.integers(0, 2**40),
    array_task_id=st.none() | st.integers(0, 10**6),
    req_nodes=_NAMES,
    exc_nodes=_NAMES,
    nodes=_NAMES,
    cpus=st.lists(st.integers(0, 256), max_size=3).map(tuple),
    alloc_mem=st.lists(st.integers(0, 2**40), max_size=3).map(tuple),
    tasks_given=st.booleans(),
    nodes_given=st.booleans(),
    requeue_hold=st.sampled_from(["", "user", "admin"]),
    comment=_TEXT,
    dependency=_TEXT,
    exclusive=st.booleans(),
    requeue=st.booleans(),
    time_limit=_INT,
    exit_status=_INT,
    restarts=st.integers(0, 1000),
    node_info_zeros=st.sampled_from(
        [(), ("sockets_per_node",), ("cores_per_socket", "sockets_per_node")]
    ),
)


@settings(max_examples=200, deadline=None)
@given(_JOBS)
def test_job_row_round_trip(j: Job) -> None:
    assert job_from_row(job_to_row(j)) == j


@settings(max_examples=25, deadline=None)
@given(jobs=st.lists(_JOBS, max_size=5, unique_by=lambda j: j.job_id))
def test_random_jobs_survive_reopen(
    tmp_path_factory: pytest.TempPathFactory, jobs: list[Job]
) -> None:
    directory = str(tmp_path_factory.mktemp("state"))
    first = Journal(directory)
    first.write(Batch(jobs={j.job_id: j for j in jobs}))
    first.close()
    second = Journal(directory)
    try:
        assert second.load().jobs == {j.job_id: j for j in jobs}
    finally:
        second.close()


def test_backfill_estimates_are_not_journaled() -> None:
    """Expected starts are derived anew by every backfill pass; a row never holds them."""
    j = job(7)
    estimated = replace(j, expected_start=123, expected_nodes=("n1", "n2"))
    assert job_from_row(job_to_row(estimated)) == j


def test_a_row_with_a_field_this_version_lacks_still_loads() -> None:
    """A journal written by another version (a field since removed) restores, not crashes."""
    row = json.loads(job_to_row(job(1)))
    row["next_step_id"] = 3
    assert job_from_row(json.dumps(row)) == job(1)


def test_a_steps_own_memory_survives_a_restart() -> None:
    """Held against the job's other steps, it must be there after the controller's restart."""
    step = Step(0, "x", ("n1", "n2"), (1, 1), (1, 1), 5, mem=(300, 200))
    j = replace(job(1), steps=(step,))
    assert job_from_row(job_to_row(j)).steps[0].mem == (300, 200)
