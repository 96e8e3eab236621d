"""The journal in MariaDB (controller/dbjournal.py) and the leader lease
(controller/lease.py): an unreachable database fails a write with nothing written and
the store retries it; only the lease's holder writes, and a controller whose token is
stale has its write refused and stops serving; a standby follows the state, reading
only what changed (controller/warmstate.py).

The database is cut off for real: the journal reaches MariaDB through a TCP relay
(tests/tcpcut.py) the test cuts and restores.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from scenario import job

from controller import dbjournal, durability
from controller.dbjournal import DatabaseJournal
from controller.jobspec import from_fields
from controller.journal import Batch, Fenced, JournalError, JournalWriteError
from controller.lease import keep
from controller.model import Job, NodeRuntime
from controller.principal import principal_for
from controller.store import JobStore
from corral import errors
from corral.config import parse
from corral.statestorage import StateStorage
from tests.databases import fresh_state_database
from tests.tcpcut import Relay

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-2] CPUs=8 RealMemory=16000
PartitionName=p Nodes=ALL Default=YES
"""
SPEC = from_fields({"name": "a", "script": "#!/bin/sh\ntrue\n", "work_dir": "/tmp"})
WHO = principal_for(0, 0)


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[StateStorage]:
    with fresh_state_database(tmp_path) as made:
        yield made


def holding(storage: StateStorage, holder: str, lease_s: float = 10) -> DatabaseJournal:
    """A journal of ``holder`` that has taken the lease."""
    journal = DatabaseJournal(replace(storage, lease_s=lease_s), "test", holder)
    assert journal.lease.take() is None
    return journal


def test_a_held_lease_is_refused_to_another_until_released(storage: StateStorage) -> None:
    first = holding(storage, "a")
    second = DatabaseJournal(storage, "test", "b")
    try:
        held = second.lease.take()
        assert held is not None and held.startswith("held by a (token 1) for ")
        assert first.lease.take() is None and first.lease.token == 1  # renewed, same token
        first.close()  # a clean stop hands the lease back
        assert second.lease.take() is None and second.lease.token == 2
    finally:
        second.close()


def test_a_lease_handed_over_goes_to_that_line_first(storage: StateStorage) -> None:
    """scontrol takeover: the holder hands the lease to line "ctl2"; another standby
    waits one lease length for it, ctl2 takes it at once."""
    first = holding(storage, "a", lease_s=0.6)
    other = DatabaseJournal(storage, "test", "c", line="ctl3")
    chosen = DatabaseJournal(storage, "test", "b", line="ctl2")
    try:
        first.lease.hand_over("ctl2")
        assert first.lease.token == 0
        held = other.lease.take()
        assert held is not None and held.startswith("handed to ctl2 for ")
        assert chosen.lease.take() is None and chosen.lease.token == 2
    finally:
        for journal in (first, other, chosen):
            journal.close()


def test_a_lease_handed_to_a_line_that_never_came_frees_after_a_lease(
    storage: StateStorage,
) -> None:
    first = holding(storage, "a", lease_s=0.5)
    other = DatabaseJournal(replace(storage, lease_s=0.5), "test", "c", line="ctl3")
    try:
        first.lease.hand_over("ctl2")
        assert other.lease.take() is not None
        time.sleep(0.6)
        assert other.lease.take() is None and other.lease.token == 2
    finally:
        first.close()
        other.close()


def test_a_newer_holder_fences_the_old_ones_writes(storage: StateStorage) -> None:
    """The first holder's lease expires (it hung); the second takes it under token 2;
    the first's next write is refused with nothing written, and so is its renewal."""
    first = holding(storage, "a", lease_s=0.5)
    first.write(Batch(jobs={1: job(1)}))
    time.sleep(0.6)
    second = holding(storage, "b")
    try:
        assert second.lease.token == 2
        with pytest.raises(Fenced) as refused:
            first.write(Batch(jobs={2: job(2)}, meta={"next_job_id": "3"}))
        assert "b holds it under token 2, ours was 1" in refused.value.reason
        with pytest.raises(Fenced):
            first.lease.take()
        second.write(Batch(meta={"by": "b"}))
        loaded = second.load()
        assert set(loaded.jobs) == {1} and loaded.meta == {"by": "b"}
    finally:
        first.close()  # does not hand back b's lease
        assert second.lease.take() is None and second.lease.token == 2
        second.close()


def test_a_journal_that_never_took_the_lease_cannot_write(storage: StateStorage) -> None:
    journal = DatabaseJournal(storage, "test", "a")
    try:
        with pytest.raises(Fenced):
            journal.write(Batch(meta={"k": "v"}))
    finally:
        journal.close()


def test_an_unreachable_database_fails_the_write_and_writes_nothing(
    storage: StateStorage,
) -> None:
    relay = Relay(("127.0.0.1", storage.port))
    journal = holding(replace(storage, port=relay.port), "a")
    try:
        relay.cut()
        with pytest.raises(JournalWriteError) as failed:
            journal.write(Batch(jobs={1: job(1)}))
        assert not isinstance(failed.value, Fenced)
        assert failed.value.code == errors.ESLURM_WRITING_TO_FILE
        relay.restore()
        journal.write(Batch(meta={"k": "v"}))
        loaded = journal.load()
        assert loaded.jobs == {} and loaded.meta == {"k": "v"}
    finally:
        relay.restore()
        journal.close()
        relay.close()


def test_the_store_retries_until_the_database_is_back(
    storage: StateStorage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission while the database is cut off is refused in Slurm's words; the
    batch is put back and retried; once the database answers it is there."""
    monkeypatch.setattr(durability, "RETRY_FIRST_S", 0.05)
    monkeypatch.setattr(durability, "RETRY_MOST_S", 0.1)
    relay = Relay(("127.0.0.1", storage.port))
    journal = holding(replace(storage, port=relay.port), "a")
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), journal)

    async def scenario() -> None:
        relay.cut()
        first = store.submit(SPEC, WHO, 0).job
        with pytest.raises(JournalWriteError):
            await store.flush()
        assert store.durable.failure is not None
        relay.restore()
        await asyncio.wait_for(store.durable.kept(), 10)
        assert store.durable.failure is None
        assert first.job_id in journal.load().jobs

    try:
        asyncio.run(scenario())
    finally:
        relay.restore()
        journal.close()
        relay.close()


def test_a_fenced_store_refuses_changes_and_says_to_stop(
    storage: StateStorage, tmp_path: Path
) -> None:
    first = holding(storage, "a", lease_s=0.5)
    store = JobStore(parse(CONF, str(tmp_path / "slurm.conf")), first)
    stopped: list[str] = []
    store.durable.lost = lambda: stopped.append("flush")

    async def scenario() -> None:
        await asyncio.sleep(0.6)
        second = holding(storage, "b")
        try:
            store.submit(SPEC, WHO, 0)
            with pytest.raises(Fenced):
                await store.flush()
            assert stopped == ["flush"] and store.durable.failure is not None
            # The renewal finds it too, on its own.
            await asyncio.wait_for(keep(first.lease, lambda: stopped.append("keep")), 5)
            assert stopped == ["flush", "keep"]
            assert second.load().jobs == {}
        finally:
            second.close()

    try:
        asyncio.run(scenario())
    finally:
        first.close()


def counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The job rows the journal parses from now on, by job id."""
    parsed: list[int] = []
    real = dbjournal.job_from_row

    def counted(text: str) -> Job:
        made = real(text)
        parsed.append(made.job_id)
        return made

    monkeypatch.setattr(dbjournal, "job_from_row", counted)
    return parsed


def test_a_standby_follows_only_what_changed(
    storage: StateStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The standby reads everything once, then only the jobs and nodes each batch
    wrote (deleted ones too); at takeover its copy is the state a cold read gives."""
    primary = holding(storage, "a", lease_s=0.5)
    standby = DatabaseJournal(storage, "test", "b")
    parsed = counting_parses(monkeypatch)
    try:
        primary.write(Batch(jobs={i: job(i) for i in range(1, 6)}, meta={"next_job_id": "6"}))
        first = standby.follow()
        assert sorted(parsed) == [1, 2, 3, 4, 5]
        assert standby.follow() == first  # nothing new: nothing read
        assert len(parsed) == 5

        parsed.clear()
        primary.write(Batch(jobs={2: job(2, name="renamed")}, deleted_jobs={1}))
        primary.write(Batch(jobs={6: job(6)}, nodes={"n1": NodeRuntime("n1", state="DOWN")}))
        assert standby.follow() == first + 2
        assert sorted(parsed) == [2, 6]

        primary.write(Batch(deleted_jobs={3}, meta={"next_job_id": "7"}))
        time.sleep(0.6)  # the primary hangs; the standby takes over
        assert standby.lease.take() is None
        parsed.clear()
        warm = standby.load()
        assert parsed == []  # job 3's row is gone: nothing to parse
        assert standby.follow() == -1  # a poll that comes late reads nothing more
        cold = DatabaseJournal(storage, "test", "c")
        try:
            assert cold.load() == warm
        finally:
            cold.close()
        assert sorted(warm.jobs) == [2, 4, 5, 6] and warm.jobs[2].name == "renamed"
        assert warm.nodes["n1"]["state"] == "DOWN"
        assert warm.meta == {"next_job_id": "7"}
    finally:
        primary.close()
        standby.close()


def test_a_standby_behind_the_pruned_changes_reads_everything(
    storage: StateStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deleted jobs' change rows go after PRUNE_EVERY batches; a standby that has
    not followed since reads every row again, and misses no deletion."""
    monkeypatch.setattr(dbjournal, "PRUNE_EVERY", 2)
    primary = holding(storage, "a")
    standby = DatabaseJournal(storage, "test", "b")
    parsed = counting_parses(monkeypatch)
    try:
        primary.write(Batch(jobs={1: job(1), 2: job(2), 3: job(3)}))
        assert standby.follow() == 1
        for batch in (Batch(deleted_jobs={1}), Batch(jobs={4: job(4)}), Batch(meta={"k": "v"})):
            primary.write(batch)
        assert standby.follow() == 4  # pruned below 2: job 1's deletion is not listed
        assert sorted(parsed) == [1, 2, 2, 3, 3, 4]  # so everything again
        parsed.clear()
        primary.write(Batch(deleted_jobs={2}))
        assert standby.follow() == 5 and parsed == []
        cold = DatabaseJournal(storage, "test", "c")
        try:
            assert sorted(cold.load().jobs) == [3, 4]
            assert sorted(standby.load().jobs) == [3, 4]
        finally:
            cold.close()
    finally:
        primary.close()
        standby.close()


def test_batches_written_without_change_rows_make_standbys_read_everything(
    storage: StateStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An older controller writes no change rows: a standby following it sees no
    change, so the next holder's first batch, or the standby's own takeover, makes
    it read everything rather than serve a stale copy."""
    standby = DatabaseJournal(storage, "test", "s")
    parsed = counting_parses(monkeypatch)
    first = holding(storage, "a", lease_s=0.3)
    first.write(Batch(jobs={1: job(1)}))
    assert standby.follow() == 1 and parsed == [1]
    first.close()
    older = holding(storage, "old", lease_s=0.3)
    monkeypatch.setattr(older, "_record_changes", lambda connection, batch: None)
    older.write(Batch(jobs={2: job(2)}))
    assert standby.follow() == 1  # nothing seen
    older.close()
    newer = holding(storage, "new", lease_s=0.3)
    try:
        newer.write(Batch(jobs={3: job(3)}))
        parsed.clear()
        standby.follow()
        assert sorted(parsed) == [1, 2, 3]
        newer.close()  # the older one again, then a takeover
        assert older.lease.take() is None
        older.write(Batch(deleted_jobs={1}))
        older.close()
        assert standby.lease.take() is None
        assert sorted(standby.load().jobs) == [2, 3]
    finally:
        newer.close()
        older.close()
        standby.close()


def test_a_controller_starting_while_the_database_is_cut_waits_for_it(
    storage: StateStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that cannot be reached at start is waited for (a controller restarted
    during a database outage must not exit); a refused account still fails at once."""
    monkeypatch.setattr(dbjournal, "UNREACHABLE_RETRY_MAX_S", 0.2)
    relay = Relay(("127.0.0.1", storage.port))
    relay.cut()
    threading.Timer(1.5, relay.restore).start()
    began = time.monotonic()
    journal = DatabaseJournal(replace(storage, port=relay.port), "test", "a")
    try:
        assert time.monotonic() - began >= 1.0
        assert journal.lease.take() is None
        journal.write(Batch(meta={"k": "v"}))
        assert journal.load().meta["k"] == "v"
    finally:
        journal.close()
        relay.close()
    with pytest.raises(JournalError):
        DatabaseJournal(replace(storage, user="nobody_here"), "test", "b")
