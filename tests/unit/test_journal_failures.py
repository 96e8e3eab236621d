"""A journal that cannot be written, or read: nothing acknowledged lost, nothing
unwritten acknowledged, and a clear stop on a corrupt file (issue 16, point 5).

Writes fail for real: SQLite's ``max_page_count`` held at the file's size makes
every growing transaction end in SQLITE_FULL, as a full disk does.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from scenario import job

from controller import durability
from controller.durability import put_back
from controller.effects import Effect, Launch
from controller.jobspec import from_fields
from controller.jobstate import Start
from controller.journal import (
    Batch,
    Journal,
    JournalError,
    JournalWriteError,
)
from controller.model import Payload
from controller.principal import principal_for
from controller.store import JobStore
from corral import errors
from corral.config import parse
from corral.dirsync import replace_durably

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-2] CPUs=8 RealMemory=16000
PartitionName=p Nodes=ALL Default=YES
"""
#: Big enough that one submission needs new pages.
SPEC = from_fields({"name": "a", "script": "#!/bin/sh\n" + "#" * 20000 + "\n", "work_dir": "/tmp"})
WHO = principal_for(0, 0)


def _disk_full(journal: Journal, full: bool) -> None:
    """Hold the journal's file at its size (``full``) or let it grow again."""
    db = journal._db  # the connection the writes go through: the limit is per connection
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    db.execute(f"PRAGMA max_page_count={pages if full else 1 << 30}")


@pytest.fixture
def state(tmp_path: Path) -> str:
    return str(tmp_path / "state")


@pytest.fixture
def store(state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JobStore:
    monkeypatch.setattr(durability, "RETRY_FIRST_S", 0.01)
    monkeypatch.setattr(durability, "RETRY_MOST_S", 0.05)
    return JobStore(parse(CONF, str(tmp_path / "slurm.conf")), Journal(state))


def test_a_failed_write_raises_in_slurms_words_and_writes_nothing(state: str) -> None:
    journal = Journal(state)
    _disk_full(journal, True)
    batch = Batch(payloads={7: Payload("x" * 50000, (), ())}, meta={"next_job_id": "8"})
    with pytest.raises(JournalWriteError) as failed:
        journal.write(batch)
    assert failed.value.code == errors.ESLURM_WRITING_TO_FILE
    assert str(failed.value) == "I/O error writing script/environment to file"
    assert "full" in failed.value.reason and not failed.value.detail  # for the log only
    _disk_full(journal, False)
    journal.write(batch)  # the connection is usable: SQLite rolled the failure back
    journal.close()
    again = Journal(state)
    assert again.payload(7) is not None and again.load().meta["next_job_id"] == "8"


def test_put_back_is_the_two_batches_written_in_turn() -> None:
    failed = Batch(
        jobs={1: job(1)},
        meta={"a": "old", "b": "kept"},
        outbox={1: b"r1"},
        delivered=0,
        deleted_payloads={5},
    )
    newer = Batch(meta={"a": "new"}, outbox={2: b"r2"}, delivered=1, deleted_jobs={1})
    merged = put_back(failed, newer)
    assert merged.meta == {"a": "new", "b": "kept"}
    assert merged.outbox == {1: b"r1", 2: b"r2"} and merged.delivered == 1
    assert merged.jobs == {} and merged.deleted_jobs == {1}  # purged after the failure
    assert merged.deleted_payloads == {5}


def test_a_failed_flush_puts_the_batch_back_and_the_retry_writes_it(
    store: JobStore, state: str
) -> None:
    sent: list[Sequence[Effect]] = []
    store.dispatch_to(sent.append)

    async def scenario() -> None:
        first = store.submit(SPEC, WHO, now=100).job
        await store.flush()  # on disk: acknowledged
        _disk_full(store.durable.journal, True)
        second = store.submit(SPEC, WHO, now=101).job
        store.post(first.job_id, Start(102, "p", ("n1",), (1,), (100,), 1))
        with pytest.raises(JournalWriteError):
            await store.flush()
        assert store.durable.failure is not None
        assert sent == []  # the launch waits for the commit that keeps it
        assert second.job_id in store.durable.batch.jobs  # back in the next batch
        await asyncio.sleep(0.1)  # retries fail while the disk is full
        assert store.durable.failure is not None and sent == []
        _disk_full(store.durable.journal, False)
        for _ in range(100):
            if store.durable.failure is None:
                break
            await asyncio.sleep(0.01)
        assert store.durable.failure is None
        assert [type(e) for batch in sent for e in batch] == [Launch]  # once, after the write

    asyncio.run(scenario())
    on_disk = Journal(state).load().jobs
    assert sorted(on_disk) == [1, 2] and on_disk[1].state.name == "RUNNING"


def test_kept_waits_for_the_retry_however_long_the_disk_refuses(store: JobStore) -> None:
    async def scenario() -> None:
        store.submit(SPEC, WHO, now=100)
        _disk_full(store.durable.journal, True)
        waiting = asyncio.ensure_future(store.durable.kept())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        _disk_full(store.durable.journal, False)
        await asyncio.wait_for(waiting, 2)

    asyncio.run(scenario())


def test_a_corrupt_journal_names_the_file_and_says_there_is_no_copy(state: str) -> None:
    os.makedirs(state)
    Path(state, "corral-state.db").write_bytes(b"not a database" * 100)
    with pytest.raises(JournalError) as refused:
        Journal(state)
    message = str(refused.value)
    assert message.startswith(f"{state}/corral-state.db: corrupt state (")
    assert message.endswith("no good copy to start from") and "\n" not in message


def test_a_damaged_page_is_found_at_start_and_the_copy_named(state: str) -> None:
    journal = Journal(state)
    journal.write(Batch(payloads={n: Payload("x" * 3000, (), ()) for n in range(40)}))
    journal.backup()
    journal.close()
    path = os.path.join(state, "corral-state.db")
    with open(path, "r+b") as db:  # the second page on: a table's pages, not the header
        db.seek(4096 + 100)
        db.write(b"\xff" * 8000)
    with pytest.raises(JournalError) as refused:
        Journal(state)
    message = str(refused.value)
    assert f"last good copy: {path}.old (from " in message
    assert f"remove {path}-wal and {path}-shm and move the copy to {path}" in message


def test_the_copy_is_a_whole_database_replaced_atomically(state: str) -> None:
    journal = Journal(state)
    journal.write(Batch(meta={"next_job_id": "5"}))
    journal.backup()
    journal.write(Batch(meta={"next_job_id": "9"}))
    journal.backup()
    assert sorted(os.listdir(state)) == [
        "corral-state.db",
        "corral-state.db-shm",
        "corral-state.db-wal",
        "corral-state.db.old",  # no temporary left, no -wal of its own
    ]
    copy = sqlite3.connect(journal.copy_path)
    assert copy.execute("SELECT value FROM meta WHERE key='next_job_id'").fetchone() == ("9",)
    assert copy.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    copy.close()
    journal.close()
    os.replace(journal.copy_path, journal.path)  # what the message tells the administrator
    for name in ("corral-state.db-wal", "corral-state.db-shm"):  # gone with a clean close
        Path(state, name).unlink(missing_ok=True)
    assert Journal(state).load().meta["next_job_id"] == "9"


def test_the_first_commit_after_start_makes_the_copy(store: JobStore) -> None:
    async def scenario() -> None:
        store.submit(SPEC, WHO, now=100)
        await store.flush()
        await asyncio.sleep(0.2)  # the copy follows the commit, in the writer thread

    asyncio.run(scenario())
    assert os.path.exists(store.durable.journal.copy_path)


def test_replace_durably_leaves_the_new_content_under_the_name(tmp_path: Path) -> None:
    (tmp_path / "a.tmp").write_text("new")
    (tmp_path / "a").write_text("old")
    replace_durably(str(tmp_path / "a.tmp"), str(tmp_path / "a"))
    assert os.listdir(tmp_path) == ["a"] and (tmp_path / "a").read_text() == "new"
