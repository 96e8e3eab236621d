"""PurgeJobAfter: forget job records that ended longer ago than slurmdbd.conf keeps them.

Slurm purges at the start of a period: a record goes once its end is older
than the period before now. Jobs still pending or running (no end time) are
never purged. Usage rollups keep their sums, so sreport still covers the
purged time. (PurgeEventAfter waits for node events, which dbd does not
store yet.)
"""

from __future__ import annotations

from sqlalchemy import delete
from sqlalchemy.engine import Engine

from dbd.models import JobRecord


def purge_jobs(engine: Engine, now: int, after: int) -> int:
    """Delete the job records that ended before ``now - after``; returns how many."""
    if after <= 0:
        return 0
    with engine.begin() as connection:
        done = connection.execute(
            delete(JobRecord).where(JobRecord.end_time > 0, JobRecord.end_time < now - after)
        )
    return int(done.rowcount or 0)
