"""PurgeJobAfter and PurgeEventAfter: forget what ended longer ago than slurmdbd.conf keeps.

A job record or node event goes once its end is older than the period before
now; jobs still pending or running and events still open (no end time) are
never purged. Usage rollups keep their sums, so sreport still covers the
purged time.
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.engine import Engine

from dbd.models import JobRecord, NodeEventRecord


def purge_jobs(engine: Engine, now: int, after: int) -> int:
    """Delete the job records that ended before ``now - after``; returns how many."""
    if after <= 0:
        return 0
    with engine.begin() as connection:
        done = connection.execute(
            delete(JobRecord).where(JobRecord.end_time > 0, JobRecord.end_time < now - after)
        )
    return int(done.rowcount or 0)


def purge_events(engine: Engine, now: int, after: int) -> int:
    """Delete the node events that ended before ``now - after``; returns how many."""
    if after <= 0:
        return 0
    with engine.begin() as connection:
        done = connection.execute(
            delete(NodeEventRecord).where(
                NodeEventRecord.time_end > 0, NodeEventRecord.time_end < now - after
            )
        )
    return int(done.rowcount or 0)
