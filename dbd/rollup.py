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
rollup start at the first hour it touches, which is its start (or, for a record
new since the last rollup, its eligible time; for one that was waiting then, the
end of its wait); or, for a job the last rollup counted as running from the same
start (``usage_running``), the hour it ended. A job's earlier run that a requeue
overwrote stays counted until its hours are rolled again for another reason.
A reservation record stored or changed since (``resv_mark``, ``resv_seq_mark``)
rolls again from the first start of that reservation's rows.

Hours, days and months are those of dbd's local time, as in Slurm. Reported
time is the cluster's CPUs (as registered when the hour was first rolled) times
the seconds of the hour since the cluster was first known (its registration or
its first job); the rest follows Slurm's hourly rollup (as_mysql_rollup.c):

* Allocated: the jobs' CPU-seconds, except those inside a reservation with
  neither MAINT nor IGNORE_JOBS, whose whole time (its CPUs while it lasts,
  used or not) is allocated instead. Job records do not name a reservation: a
  job's CPUs on a reservation's nodes while the reservation lasts are inside it.
* Down: nodes down or drained (node events, counted as they are when the hour
  is rolled: an event that reaches dbd after its hours were rolled counts only
  if they are rolled again).
* Planned down: reservations with MAINT but not IGNORE_JOBS (all their CPUs),
  and nodes down inside a MAINT reservation; a reservation counts its nodes'
  down time no more.
* Planned: CPU-seconds eligible jobs waited (from their eligible time until
  they started, ended unstarted, or the hour ended; a pending array record
  once per pending task), up to what allocated, down and planned down time
  leave; what waited beyond that is over-committed time (``over_secs``).
* Idle: what is left.

IGNORE_JOBS reservations count nothing for the cluster (their jobs count as
any). As in Slurm, a cluster's allocated time in an hour is capped at its
reported time (oversubscription), an association's is not; down time at what
allocation leaves, planned down time at what both leave. Per reservation row
and hour, ``reservation_usage_hour`` keeps the seconds it covered and its jobs'
CPU-seconds (sacctmgr's UnusedWall, sreport's reservation Utilization).

Why this module is over 500 lines: the hour, day and month rollups of
associations and clusters share one walk over the job records and one
transaction per hour.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from sqlalchemy import BigInteger, and_, delete, func, insert, literal, or_, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from corral import arrayspec, hostlist
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
    ReservationRecord,
    ReservationUsageHour,
    RunningUsage,
    UsageRollup,
)
from dbd.reservations import Span, spans_between

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
        resv_mark = session.scalar(select(func.max(ReservationRecord.id))) or 0
        resv_seq_mark = (
            session.scalar(
                select(func.max(ReservationRecord.seq)).where(ReservationRecord.cluster == cluster)
            )
            or 0
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
        state.resv_mark, state.resv_seq_mark = resv_mark, resv_seq_mark
        _keep_running(session, cluster, state.hour_end, job_mark, seq_mark)
    return hours


def _save(session: Session, cluster: str, since: int, hour_end: int) -> UsageRollup:
    """The cluster's rollup state, rolled up at least to ``hour_end``."""
    state = session.get(UsageRollup, cluster)
    if state is None:
        state = UsageRollup(
            cluster=cluster,
            since=since,
            hour_end=hour_end,
            job_mark=0,
            seq_mark=0,
            resv_mark=0,
            resv_seq_mark=0,
        )
        session.add(state)
    state.since = min(state.since, since)
    state.hour_end = max(state.hour_end, hour_end)
    return state


def _changed(session: Session, state: UsageRollup) -> tuple[int, int]:
    """(since, the first hour to roll): job records stored or changed since the last rollup
    may touch hours it rolled already."""
    cluster = state.cluster
    columns = (
        JobRecord.id,
        JobRecord.cluster,
        JobRecord.eligible_time,
        JobRecord.start_time,
        JobRecord.end_time,
    )
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
    for job, of, eligible, start, end in (*new, *changed):
        if of != cluster or job in seen:
            continue
        seen.add(job)
        fresh = job > state.job_mark
        touched = _touched_from(running.get(job), start, end, eligible if fresh else 0)
        if touched is not None:
            first = min(first, hour_start(touched))
        if start:
            since = min(since, start)
    resv_touched = _reservations_touched(session, state)
    if resv_touched is not None:
        first = min(first, hour_start(resv_touched))
    return since, first


def _touched_from(counted: int | None, start: int, end: int, eligible: int = 0) -> int | None:
    """The first time whose usage a changed job record changes, None if none.

    ``counted`` is the start the last rollup counted the job running from (None: it
    was not running then); the job now has ``start`` and ``end`` (0: not yet), and,
    if its record is new since the last rollup, ``eligible`` (its wait is planned
    time: a record seen before was counted waiting already, until it started or ended).
    """
    if counted is None:
        times = [t for t in (eligible, start, end) if t]
        if eligible:
            return min(times)  # newly seen: from its wait's start
        return times[0] if times else None  # from its start, or where its wait ended
    if start == counted:
        return end or None  # the same run: from its end on, if it ended
    return min(counted, start) if start else counted  # requeued or restarted


def _reservations_touched(session: Session, state: UsageRollup) -> int | None:
    """The first start of a reservation with a record stored or changed since the last
    rollup (all its rows: a new one can end an older one or replace it), None if none."""
    cluster = state.cluster
    changed = select(ReservationRecord.resv_id).where(
        ReservationRecord.cluster == cluster,
        or_(
            ReservationRecord.id > state.resv_mark,
            ReservationRecord.seq > state.resv_seq_mark,
        ),
    )
    return session.scalar(
        select(func.min(ReservationRecord.time_start)).where(
            ReservationRecord.cluster == cluster, ReservationRecord.resv_id.in_(changed)
        )
    )


def _roll_hours(session: Session, cluster: str, lo: int, hi: int, since: int, cpus: int) -> None:
    """Recompute the hour rows of ``[lo, hi)`` (whole hours) from the job records, node
    events and reservations."""
    width = (hi - lo) // HOUR
    reserved = spans_between(session, cluster, lo, hi)
    jobs = _job_usage(session, cluster, lo, hi, width, reserved)
    nodes = _node_time(session, cluster, lo, hi, width, reserved)
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
    for table in (AssocUsageHour, ClusterUsageHour, ReservationUsageHour):
        session.execute(
            delete(table).where(table.cluster == cluster, table.period >= lo, table.period < hi)
        )
    _insert(
        session,
        AssocUsageHour,
        (
            {"cluster": cluster, "period": lo + i * HOUR, "account": a, "user": u, "alloc_secs": v}
            for (a, u), secs in jobs.per_assoc.items()
            for i, v in enumerate(secs)
            if v
        ),
    )
    totals = [sum(column) for column in zip(*jobs.per_assoc.values(), strict=True)] or [0] * width
    rows = []
    for i in range(width):
        period = lo + i * HOUR
        known = max(0, period + HOUR - max(period, since))
        count = kept.get(period, cpus)
        reported = count * known
        # Jobs in a reservation that counts as allocated (or planned down) count in it.
        alloc = max(0, totals[i] - jobs.bundled[i]) + nodes.reserved[i]
        down, planned_down, planned, over, idle = nodes.down[i], nodes.planned_down[i], 0, 0, 0
        if not reported and not alloc:
            continue
        if reported:
            alloc = min(alloc, reported)
            down = min(down, reported - alloc)
            planned_down = min(planned_down, reported - alloc - down)
            free = reported - alloc - down - planned_down
            planned = min(jobs.waiting[i], free)
            over = jobs.waiting[i] - planned
            idle = free - planned
        rows.append(
            {
                "cluster": cluster,
                "period": period,
                "cpus": count,
                "alloc_secs": alloc,
                "down_secs": down,
                "planned_down_secs": planned_down,
                "idle_secs": idle,
                "planned_secs": planned,
                "reported_secs": reported,
                "over_secs": over,
            }
        )
    _insert(session, ClusterUsageHour, rows)
    _insert(session, ReservationUsageHour, _reservation_rows(cluster, lo, hi, reserved, jobs))


def _spread(values: list[int], lo: int, begin: int, end: int, rate: int) -> None:
    """Add ``rate`` per second of ``[begin, end)`` (inside the hours from ``lo``) to the
    hours' ``values``."""
    index = (begin - lo) // HOUR
    edge = lo + (index + 1) * HOUR
    while begin < end:
        part = min(end, edge)
        values[index] += (part - begin) * rate
        begin = part
        edge += HOUR
        index += 1


def _clip(begin: int, end: int, lo: int, hi: int) -> tuple[int, int]:
    """``[begin, end)`` (an end of 0: not yet) within ``[lo, hi)``; empty if ``end <= begin``."""
    return max(begin, lo), min(end or hi, hi)


class _NodeTime:
    """Per hour: CPU-seconds of nodes down, planned down (in maintenance reservations),
    and reserved (reservations that count as allocated)."""

    __slots__ = ("down", "planned_down", "reserved")

    def __init__(self, width: int) -> None:
        self.down = [0] * width
        self.planned_down = [0] * width
        self.reserved = [0] * width


def _node_time(
    session: Session, cluster: str, lo: int, hi: int, width: int, reserved: list[Span]
) -> _NodeTime:
    """Down, planned down and reserved time in each hour of ``[lo, hi)``, as Slurm's
    rollup counts them.

    A reservation with neither MAINT nor IGNORE_JOBS is allocated time for all
    its CPUs while it lasts, used or not (its jobs count in it, not again); with
    MAINT but not IGNORE_JOBS it is planned down time. A node down or drained
    (node events) is down time, planned down inside a MAINT reservation; the
    reservation counts that time of its node no more.
    """
    times = _NodeTime(width)
    # Per reservation that counts for the cluster: its nodes' down time in it.
    taken = {index: [0] * width for index, span in enumerate(reserved) if not span.ignore_jobs}
    events = session.execute(
        select(
            NodeEventRecord.node,
            NodeEventRecord.time_start,
            NodeEventRecord.time_end,
            NodeEventRecord.cpus,
        ).where(
            NodeEventRecord.cluster == cluster,
            NodeEventRecord.time_start < hi,
            or_(NodeEventRecord.time_end == 0, NodeEventRecord.time_end > lo),
        )
    )
    node_sets = [span.node_set() for span in reserved]
    for node, start, end, cpus in events:
        first, last = _clip(start, end, lo, hi)
        if last <= first:
            continue
        _spread(times.down, lo, first, last, cpus)
        maintenance = []
        for index, (span, nodes) in enumerate(zip(reserved, node_sets, strict=True)):
            if node not in nodes:
                continue
            begin, stop = max(first, span.start), min(last, span.end)
            if stop <= begin:
                continue
            if span.maint:
                maintenance.append((begin, stop))
            if index in taken:
                _spread(taken[index], lo, begin, stop, cpus)
        for begin, stop in _merged(maintenance):
            _spread(times.down, lo, begin, stop, -cpus)
            _spread(times.planned_down, lo, begin, stop, cpus)
    for index, down in taken.items():
        span = reserved[index]
        whole = [0] * width
        begin, stop = _clip(span.start, span.end, lo, hi)
        _spread(whole, lo, begin, stop, span.cpus)
        into = times.planned_down if span.maint else times.reserved
        for i, (secs, lost) in enumerate(zip(whole, down, strict=True)):
            into[i] += max(0, secs - lost)
    return times


def _merged(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping ``[begin, end)`` intervals joined."""
    joined: list[tuple[int, int]] = []
    for begin, end in sorted(intervals):
        if joined and begin <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((begin, end))
    return joined


class _JobUsage:
    """What the jobs did in each hour: CPU-seconds per (account, user); those inside
    reservations that count for the cluster (``bundled``); those per reservation row
    (``in_resv``); and the CPU-seconds eligible jobs waited (``waiting``: planned time)."""

    __slots__ = ("bundled", "in_resv", "per_assoc", "waiting")

    def __init__(self, width: int) -> None:
        self.per_assoc: dict[tuple[str, str], list[int]] = {}
        self.bundled = [0] * width
        self.waiting = [0] * width
        self.in_resv: dict[tuple[int, int], list[int]] = {}


def _job_usage(
    session: Session, cluster: str, lo: int, hi: int, width: int, reserved: list[Span]
) -> _JobUsage:
    """The jobs' use of each hour of ``[lo, hi)``, and their waits."""
    usage = _JobUsage(width)
    node_sets = [span.node_set() for span in reserved]
    for eligible, start, end, account, uid, record in _jobs_in(session, cluster, lo, hi):
        info: pb.JobInfo | None = None
        begin, stop = _clip(start, end, lo, hi) if start else (0, 0)
        if stop > begin:
            info = pb.JobInfo.FromString(record)
            cpus = info.num_cpus
            if cpus:
                key = (_name(account), _name(info.user or str(uid)))
                secs = usage.per_assoc.get(key)
                if secs is None:
                    secs = usage.per_assoc[key] = [0] * width
                _spread(secs, lo, begin, stop, cpus)
                if reserved:
                    _in_reservations(usage, info, begin, stop, lo, width, reserved, node_sets)
        if eligible:
            # Eligible and waiting, from its eligible time until it started (or ended
            # without starting); a pending array record waits for each of its tasks.
            wait_from, wait_to = _clip(eligible, start or end, lo, hi)
            if wait_to > wait_from:
                info = info or pb.JobInfo.FromString(record)
                tasks = arrayspec.count(info.array_task_str.partition("%")[0]) or 1
                _spread(usage.waiting, lo, wait_from, wait_to, info.num_cpus * tasks)
    return usage


def _in_reservations(
    usage: _JobUsage,
    info: pb.JobInfo,
    begin: int,
    stop: int,
    lo: int,
    width: int,
    reserved: list[Span],
    node_sets: list[frozenset[str]],
) -> None:
    """Count a job's CPU-seconds on a reservation's nodes while it lasted as used in it.

    Records do not name a job's reservation: a job on its nodes then ran in it (or,
    under IGNORE_JOBS, was let run there).
    """
    on: list[tuple[str, int]] | None = None  # (node, CPUs) of the job, once needed
    for span, members in zip(reserved, node_sets, strict=True):
        first, last = max(begin, span.start), min(stop, span.end)
        if last <= first:
            continue
        if on is None:
            nodes = hostlist.expand(info.nodes) if info.nodes else []
            per_node = list(info.cpus_per_node)
            if len(per_node) != len(nodes):  # not per node: spread evenly
                per_node = [info.num_cpus // max(len(nodes), 1)] * len(nodes)
            on = list(zip(nodes, per_node, strict=True))
        cpus = sum(c for node, c in on if node in members)
        if not cpus:
            continue
        secs = usage.in_resv.get((span.resv_id, span.start))
        if secs is None:
            secs = usage.in_resv[span.resv_id, span.start] = [0] * width
        _spread(secs, lo, first, last, cpus)
        if not span.ignore_jobs:
            _spread(usage.bundled, lo, first, last, cpus)


def _reservation_rows(
    cluster: str, lo: int, hi: int, reserved: list[Span], jobs: _JobUsage
) -> Iterator[dict[str, Any]]:
    """The reservation usage rows of the hours of ``[lo, hi)``."""
    width = (hi - lo) // HOUR
    for span in reserved:
        wall = [0] * width
        begin, stop = _clip(span.start, span.end, lo, hi)
        _spread(wall, lo, begin, stop, 1)
        used = jobs.in_resv.get((span.resv_id, span.start), [0] * width)
        for i, (secs, alloc) in enumerate(zip(wall, used, strict=True)):
            if secs:
                yield {
                    "cluster": cluster,
                    "period": lo + i * HOUR,
                    "resv_id": span.resv_id,
                    "time_start": span.start,
                    "wall_secs": secs,
                    "alloc_secs": alloc,
                }


#: A job as ``_jobs_in`` reads it: eligible, start, end, account, uid, record.
_Job = tuple[int, int, int, str, int, bytes]
_JOB_COLUMNS = (
    JobRecord.eligible_time,
    JobRecord.start_time,
    JobRecord.end_time,
    JobRecord.account,
    JobRecord.uid,
    JobRecord.record,
)


def _jobs_in(session: Session, cluster: str, lo: int, hi: int) -> Iterator[_Job]:
    """(eligible, start, end, account, uid, record) of the cluster's jobs that ran or
    were eligible in ``[lo, hi)``, and maybe a few more.

    Few jobs (the hours of the last rollup): through the (cluster, end_time) index,
    as two ranges, ended after ``lo`` and not ended, since an OR of both would make
    SQLite read every job of the cluster. Many (a first rollup, a late record for a
    long job): the whole table in primary key ranges, which reads it in order where
    an index would jump about it; the rows are then filtered here.
    """
    ran = (
        JobRecord.cluster == cluster,
        or_(
            and_(JobRecord.start_time > 0, JobRecord.start_time < hi),
            and_(JobRecord.eligible_time > 0, JobRecord.eligible_time < hi),
        ),
    )
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
            if (
                row[0] == cluster
                and (0 < row[1] < hi or 0 < row[2] < hi)
                and (row[3] == 0 or row[3] > lo)
            ):
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
