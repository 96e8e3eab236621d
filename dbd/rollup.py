"""Usage rollups: each cluster's CPU usage by hour, day and month, from the job records.

Slurm's slurmdbd keeps ``assoc_usage_{hour,day,month}`` and ``cluster_usage_*``
tables so that sreport reads a month as one row per association, not as every
job of the month; these are the same tables for CPUs (``dbd.models``).

``rollup(engine, now)`` rolls every whole hour before ``now`` that is not yet
rolled up, then the days and months those hours complete. An hour's rows are
recomputed from the job records every time it is rolled (deleted and inserted
in one transaction), so running it twice changes nothing. A job's CPU-seconds
in an hour are its CPUs times the part of [start, end) in the hour; a job still
running counts to the end of the last whole hour, and when its record changes
its hours are rolled again.

Records that arrive late are counted when the next rollup rolls their hours
again: a record stored or changed since the last rollup (a row id above
``job_mark``, or an outbox sequence above the cluster's ``seq_mark``) makes the
rollup start at the first hour it touches, which is its start; or, for a job the
last rollup counted as running from the same start (``usage_running``), the hour
it ended. A job's earlier run that a requeue overwrote stays counted until its
hours are rolled again for another reason.

Hours, days and months are those of dbd's local time, as in Slurm. Reported
time is the cluster's CPUs (as registered when the hour was first rolled) times
the seconds of the hour since the cluster was first known (its registration or
its first job); down is the CPU-seconds of nodes down or drained (node events,
counted as they are when the hour is rolled: an event that reaches dbd after
its hours were rolled counts only if they are rolled again); idle is what
allocation and down time leave of it. Planned down time (power saving) and
planned (reserved) time are 0: there are no reservations yet. As in Slurm, a
cluster's allocated time in an hour is capped at its reported time
(oversubscription), an association's is not; down time at what allocation
leaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import BigInteger, delete, func, insert, literal, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from corral.wire import corral_pb2 as pb
from dbd.models import (
    CLUSTER_SECONDS,
    AssocUsageDay,
    AssocUsageHour,
    AssocUsageMonth,
    Cluster,
    ClusterUsageDay,
    ClusterUsageHour,
    ClusterUsageMonth,
    JobRecord,
    NodeEventRecord,
    RunningUsage,
    UsageRollup,
)

HOUR = 3600
#: Hours rolled per transaction: bounds the memory (associations x hours) and what
#: a failure makes the next rollup do again.
CHUNK_HOURS = 32 * 24
#: Rows per INSERT statement.
INSERT_BATCH = 10_000
#: Read the whole jobs table, in ranges of SCAN_IDS row ids, when more than one job in
#: SCAN_FRACTION is in the hours to roll (see ``_jobs_in``).
SCAN_FRACTION = 4
SCAN_IDS = 50_000
#: Association names are VARCHAR(64), like the accounts in the job records.
NAME_SIZE = 64

AssocTable = type[AssocUsageHour] | type[AssocUsageDay] | type[AssocUsageMonth]
ClusterTable = type[ClusterUsageHour] | type[ClusterUsageDay] | type[ClusterUsageMonth]

#: One rollup at a time in this process (the periodic one, and sreport's before it reads).
_LOCK = threading.Lock()


# ---------------------------------------------------------------- local periods
def hour_start(t: int) -> int:
    """The start of the local hour holding ``t``."""
    return t - (t + time.localtime(t).tm_gmtoff) % HOUR


def day_start(t: int) -> int:
    """Local midnight of ``t``'s day."""
    tm = time.localtime(t)
    return int(time.mktime((tm.tm_year, tm.tm_mon, tm.tm_mday, 0, 0, 0, 0, 0, -1)))


def next_day(day: int) -> int:
    """Local midnight of the day after the one starting at ``day``."""
    tm = time.localtime(day)
    return int(time.mktime((tm.tm_year, tm.tm_mon, tm.tm_mday + 1, 0, 0, 0, 0, 0, -1)))


def month_start(t: int) -> int:
    """Local midnight of the first day of ``t``'s month."""
    tm = time.localtime(t)
    return int(time.mktime((tm.tm_year, tm.tm_mon, 1, 0, 0, 0, 0, 0, -1)))


def next_month(month: int) -> int:
    """Local midnight of the first day of the month after the one starting at ``month``."""
    tm = time.localtime(month)
    return int(time.mktime((tm.tm_year, tm.tm_mon + 1, 1, 0, 0, 0, 0, 0, -1)))


# ---------------------------------------------------------------- the rollup
def rollup(engine: Engine, now: int) -> int:
    """Roll up every cluster's whole hours before ``now``; returns how many hours were rolled."""
    with _LOCK:
        with Session(engine) as session:
            known = [
                (name, cpus, registered)
                for name, cpus, registered in session.execute(
                    select(Cluster.name, Cluster.cpus, Cluster.registered)
                )
            ]
        return sum(_roll_cluster(engine, name, cpus, seen, now) for name, cpus, seen in known)


def _roll_cluster(engine: Engine, cluster: str, cpus: int, registered: int, now: int) -> int:
    end = hour_start(now)
    with Session(engine) as session:
        job_mark = session.scalar(select(func.max(JobRecord.id))) or 0
        seq_mark = (
            session.scalar(select(func.max(JobRecord.seq)).where(JobRecord.cluster == cluster)) or 0
        )
        state = session.get(UsageRollup, cluster)
        if state is None:
            first_start = session.scalar(
                select(func.min(JobRecord.start_time)).where(
                    JobRecord.cluster == cluster, JobRecord.start_time > 0
                )
            )
            known = [t for t in (registered, first_start) if t]
            if not known:
                return 0  # nothing ran and no controller registered: nothing to roll
            since = min(known)
            first = hour_start(since)
        else:
            since, first = _changed(session, state)
    hours = 0
    lo = first
    while lo < end:
        hi = min(end, lo + CHUNK_HOURS * HOUR)
        with Session(engine) as session, session.begin():
            _roll_hours(session, cluster, lo, hi, since, cpus)
            _roll_periods(session, cluster, lo, hi, day_start, next_day, _DAYS)
            _roll_periods(session, cluster, lo, hi, month_start, next_month, _MONTHS)
            _save(session, cluster, since, hour_end=hi)
        hours += (hi - lo) // HOUR
        lo = hi
    with Session(engine) as session, session.begin():
        state = _save(session, cluster, since, hour_end=first)
        state.job_mark, state.seq_mark = job_mark, seq_mark
        _keep_running(session, cluster, state.hour_end, job_mark, seq_mark)
    return hours


def _save(session: Session, cluster: str, since: int, hour_end: int) -> UsageRollup:
    """The cluster's rollup state, rolled up at least to ``hour_end``."""
    state = session.get(UsageRollup, cluster)
    if state is None:
        state = UsageRollup(cluster=cluster, since=since, hour_end=hour_end, job_mark=0, seq_mark=0)
        session.add(state)
    state.since = min(state.since, since)
    state.hour_end = max(state.hour_end, hour_end)
    return state


def _changed(session: Session, state: UsageRollup) -> tuple[int, int]:
    """(since, the first hour to roll): job records stored or changed since the last rollup
    may touch hours it rolled already."""
    cluster = state.cluster
    columns = (JobRecord.id, JobRecord.cluster, JobRecord.start_time, JobRecord.end_time)
    # Two index ranges: new rows by primary key (any cluster: the range is short), and
    # rows this cluster's controller changed by outbox sequence.
    new = session.execute(select(*columns).where(JobRecord.id > state.job_mark))
    changed = session.execute(
        select(*columns).where(JobRecord.cluster == cluster, JobRecord.seq > state.seq_mark)
    )
    running = {
        job: start
        for job, start in session.execute(
            select(RunningUsage.job, RunningUsage.start_time).where(RunningUsage.cluster == cluster)
        )
    }
    since, first = state.since, state.hour_end
    seen: set[int] = set()
    for job, of, start, end in (*new, *changed):
        if of != cluster or job in seen:
            continue
        seen.add(job)
        touched = _touched_from(running.get(job), start, end)
        if touched is not None:
            first = min(first, hour_start(touched))
        if start:
            since = min(since, start)
    return since, first


def _touched_from(counted: int | None, start: int, end: int) -> int | None:
    """The first time whose usage a changed job record changes, None if none.

    ``counted`` is the start the last rollup counted the job running from (None: it
    was not running then); the job now has ``start`` and ``end`` (0: not yet).
    """
    if counted is None:
        return start or None  # newly started or seen: from its start
    if start == counted:
        return end or None  # the same run: from its end on, if it ended
    return min(counted, start) if start else counted  # requeued or restarted


def _roll_hours(session: Session, cluster: str, lo: int, hi: int, since: int, cpus: int) -> None:
    """Recompute the hour rows of ``[lo, hi)`` (whole hours) from the job records."""
    width = (hi - lo) // HOUR
    per_assoc = _allocated(session, cluster, lo, hi, width)
    kept = {
        period: count
        for period, count in session.execute(
            select(ClusterUsageHour.period, ClusterUsageHour.cpus).where(
                ClusterUsageHour.cluster == cluster,
                ClusterUsageHour.period >= lo,
                ClusterUsageHour.period < hi,
            )
        )
    }
    for table in (AssocUsageHour, ClusterUsageHour):
        session.execute(
            delete(table).where(table.cluster == cluster, table.period >= lo, table.period < hi)
        )
    _insert(
        session,
        AssocUsageHour,
        (
            {"cluster": cluster, "period": lo + i * HOUR, "account": a, "user": u, "alloc_secs": v}
            for (a, u), secs in per_assoc.items()
            for i, v in enumerate(secs)
            if v
        ),
    )
    totals = [sum(column) for column in zip(*per_assoc.values(), strict=True)] or [0] * width
    downs = _down(session, cluster, lo, hi, width)
    rows = []
    for i, (alloc, down) in enumerate(zip(totals, downs, strict=True)):
        period = lo + i * HOUR
        known = max(0, period + HOUR - max(period, since))
        count = kept.get(period, cpus)
        reported = count * known
        if not reported and not alloc:
            continue
        if reported:
            alloc = min(alloc, reported)
            down = min(down, reported - alloc)
        rows.append(
            {
                "cluster": cluster,
                "period": period,
                "cpus": count,
                "alloc_secs": alloc,
                "down_secs": down,
                "planned_down_secs": 0,
                "idle_secs": reported - alloc - down if reported else 0,
                "planned_secs": 0,
                "reported_secs": reported,
            }
        )
    _insert(session, ClusterUsageHour, rows)


def _down(session: Session, cluster: str, lo: int, hi: int, width: int) -> list[int]:
    """CPU-seconds of nodes down or drained (node events) in each hour of ``[lo, hi)``."""
    down = [0] * width
    events = session.execute(
        select(NodeEventRecord.time_start, NodeEventRecord.time_end, NodeEventRecord.cpus).where(
            NodeEventRecord.cluster == cluster,
            NodeEventRecord.time_start < hi,
            or_(NodeEventRecord.time_end == 0, NodeEventRecord.time_end > lo),
        )
    )
    for start, end, cpus in events:
        first, last = max(start, lo), min(end or hi, hi)
        hour = first - (first - lo) % HOUR
        while hour < last:
            overlap = min(last, hour + HOUR) - max(first, hour)
            down[(hour - lo) // HOUR] += cpus * max(overlap, 0)
            hour += HOUR
    return down


def _allocated(
    session: Session, cluster: str, lo: int, hi: int, width: int
) -> dict[tuple[str, str], list[int]]:
    """CPU-seconds per (account, user) in each hour of ``[lo, hi)``."""
    per_assoc: dict[tuple[str, str], list[int]] = {}
    for start, end, account, uid, record in _jobs_in(session, cluster, lo, hi):
        begin = max(start, lo)
        stop = hi if end == 0 or end > hi else end
        if stop <= begin:
            continue
        info = pb.JobInfo.FromString(record)
        cpus = info.num_cpus
        if not cpus:
            continue
        key = (_name(account), _name(info.user or str(uid)))
        secs = per_assoc.get(key)
        if secs is None:
            secs = per_assoc[key] = [0] * width
        index = (begin - lo) // HOUR
        edge = lo + (index + 1) * HOUR
        while begin < stop:
            part = min(stop, edge)
            secs[index] += (part - begin) * cpus
            begin = part
            edge += HOUR
            index += 1
    return per_assoc


#: A job as ``_jobs_in`` reads it: start, end, account, uid, record.
_Job = tuple[int, int, str, int, bytes]
_JOB_COLUMNS = (
    JobRecord.start_time,
    JobRecord.end_time,
    JobRecord.account,
    JobRecord.uid,
    JobRecord.record,
)


def _jobs_in(session: Session, cluster: str, lo: int, hi: int) -> Iterator[_Job]:
    """(start, end, account, uid, record) of the cluster's jobs that ran in ``[lo, hi)``,
    and maybe a few more.

    Few jobs (the hours of the last rollup): through the (cluster, end_time) index,
    as two ranges, ended after ``lo`` and not ended, since an OR of both would make
    SQLite read every job of the cluster. Many (a first rollup, a late record for a
    long job): the whole table in primary key ranges, which reads it in order where
    an index would jump about it; the rows are then filtered here.
    """
    ran = (JobRecord.cluster == cluster, JobRecord.start_time > 0, JobRecord.start_time < hi)
    after = (JobRecord.end_time > lo, JobRecord.end_time == 0)
    counted = sum(
        session.scalar(select(func.count()).where(JobRecord.cluster == cluster, cond)) or 0
        for cond in after
    )
    # One aggregate a query: SQLite finds a lone min() or max() of the key at once.
    first = session.scalar(select(func.min(JobRecord.id)))
    last = session.scalar(select(func.max(JobRecord.id)))
    stream = {"stream_results": True, "yield_per": 5_000}
    if first is None or last is None or counted * SCAN_FRACTION < last - first + 1:
        for cond in after:
            yield from session.execute(
                select(*_JOB_COLUMNS).where(*ran, cond).execution_options(**stream)
            )
        return
    for begin in range(first, last + 1, SCAN_IDS):
        rows = select(JobRecord.cluster, *_JOB_COLUMNS).where(
            JobRecord.id >= begin, JobRecord.id < begin + SCAN_IDS
        )
        for row in session.execute(rows.execution_options(**stream)):
            if row[0] == cluster and 0 < row[1] < hi and (row[2] == 0 or row[2] > lo):
                yield row[1:]


#: (source, destination) tables of a day's and a month's rows.
_DAYS = ((AssocUsageHour, AssocUsageDay), (ClusterUsageHour, ClusterUsageDay))
_MONTHS = ((AssocUsageDay, AssocUsageMonth), (ClusterUsageDay, ClusterUsageMonth))


def _name(text: str) -> str:
    """An account or user name as the usage tables key it: lower case, as Slurm's
    associations are (and as MariaDB's case-insensitive keys compare), no blanks around."""
    return text.strip().lower()[:NAME_SIZE]


def _roll_periods(
    session: Session,
    cluster: str,
    lo: int,
    hi: int,
    period_start: Callable[[int], int],
    period_end: Callable[[int], int],
    tables: tuple[tuple[AssocTable, AssocTable], tuple[ClusterTable, ClusterTable]],
) -> None:
    """Recompute the days (or months) that meet ``[lo, hi)`` and end by ``hi``, from the
    rows of the next shorter period."""
    assocs, clusters = tables
    begin = period_start(lo)
    while begin < hi:
        end = period_end(begin)
        if end > hi:
            return  # not over yet
        _sum_period(session, cluster, begin, end, assocs, ("account", "user"), (), ("alloc_secs",))
        _sum_period(session, cluster, begin, end, clusters, (), ("cpus",), CLUSTER_SECONDS)
        begin = end


def _sum_period(
    session: Session,
    cluster: str,
    begin: int,
    end: int,
    tables: tuple[Any, Any],
    keys: tuple[str, ...],
    maxima: tuple[str, ...],
    sums: tuple[str, ...],
) -> None:
    """Replace the cluster's row(s) of the period ``[begin, end)`` in the second table by
    the first table's rows in it: per ``keys``, the largest ``maxima``, the summed ``sums``."""
    source, target = tables
    session.execute(delete(target).where(target.cluster == cluster, target.period == begin))
    grouped = [getattr(source, name) for name in keys]
    rows = (
        select(
            source.cluster,
            literal(begin, BigInteger),
            *grouped,
            *(func.max(getattr(source, name)) for name in maxima),
            *(func.sum(getattr(source, name)) for name in sums),
        )
        .where(source.cluster == cluster, source.period >= begin, source.period < end)
        .group_by(source.cluster, *grouped)
    )
    columns = ["cluster", "period", *keys, *maxima, *sums]
    session.execute(insert(target).from_select(columns, rows))


def _keep_running(session: Session, cluster: str, end: int, job_mark: int, seq_mark: int) -> None:
    """Remember the jobs counted as running up to ``end`` (as the marks saw them)."""
    session.execute(delete(RunningUsage).where(RunningUsage.cluster == cluster))
    running = session.execute(
        select(JobRecord.id, JobRecord.start_time).where(
            JobRecord.cluster == cluster,
            JobRecord.end_time == 0,
            JobRecord.start_time > 0,
            JobRecord.start_time < end,
            JobRecord.id <= job_mark,
            JobRecord.seq <= seq_mark,
        )
    )
    _insert(
        session,
        RunningUsage,
        ({"cluster": cluster, "job": job, "start_time": start} for job, start in running),
    )


def _insert(session: Session, model: Any, rows: Iterable[dict[str, Any]]) -> None:
    """INSERT ``rows`` into ``model``'s table in batches (Core: no ORM bookkeeping)."""
    statement = insert(model.__table__)
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == INSERT_BATCH:
            session.execute(statement, batch)
            batch = []
    if batch:
        session.execute(statement, batch)


def periods(start: int, end: int) -> list[tuple[str, int, int]]:
    """``[start, end)`` (whole local hours) as the fewest rollup rows cover it.

    Each item is (``"month"``, ``"day"`` or ``"hour"``, from, to): whole months
    first, then whole days, then the hours at either end; runs of one kind are
    merged, so a month with some days around it is a handful of ranges.
    """
    pieces: list[tuple[str, int, int]] = []
    t = start
    while t < end:
        kind, after = "hour", t + HOUR
        if day_start(t) == t:
            if month_start(t) == t and next_month(t) <= end:
                kind, after = "month", next_month(t)
            elif next_day(t) <= end:
                kind, after = "day", next_day(t)
        if pieces and pieces[-1][0] == kind and pieces[-1][2] == t:
            pieces[-1] = (kind, pieces[-1][1], after)
        else:
            pieces.append((kind, t, after))
        t = after
    return pieces
