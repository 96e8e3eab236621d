"""PurgeJobAfter and PurgeEventAfter on SQLite and MariaDB."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.purge import purge_events, purge_jobs
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database
from tests.unit.test_dbd_storage import ids, info

DAY = 86_400
NOW = 100 * DAY


@pytest.mark.parametrize("kind", BACKENDS)
def test_only_records_that_ended_long_enough_ago_go(kind: str, tmp_path: Path) -> None:
    with fresh_database(kind, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        storage = Storage(engine)
        storage.record_jobs(
            "c",
            [
                info(1, state="COMPLETED", end_time=NOW - 40 * DAY),  # older than 30 days
                info(2, state="COMPLETED", end_time=NOW - 10 * DAY),
                info(3, state="RUNNING", start_time=NOW - 50 * DAY),  # no end: kept
            ],
            [1, 2, 3],
        )
        assert purge_jobs(engine, NOW, 0) == 0  # no PurgeJobAfter: keep everything
        assert purge_jobs(engine, NOW, 30 * DAY) == 1
        assert ids(storage, clusters=("c",)) == [2, 3]
        assert purge_jobs(engine, NOW, 30 * DAY) == 0
        old = pb.NodeEvent(node="n1", start=NOW - 50 * DAY, end=NOW - 40 * DAY, state="DOWN")
        open_ = pb.NodeEvent(node="n2", start=NOW - 50 * DAY, state="DRAIN")
        storage.record_events("c", [old, open_], [1, 2])
        assert purge_events(engine, NOW, 30 * DAY) == 1  # the open one stays
        assert purge_events(engine, NOW, 30 * DAY) == 0
        engine.dispose()
