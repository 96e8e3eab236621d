"""Reservation records as they count: which rows of a reservation happened, and until when.

dbd keeps a row per (cluster, reservation id, start), as Slurm does: a record
that keeps the start replaces its row, one with a new start is a new row. The
rows of one reservation then say, together, what happened; ``spans`` reads them
so, from the stored rows alone (whatever order their records came in, however
often):

* A row whose record was the reservation's last (``deleted``: it ended or was
  removed) counts from its start to its end; one removed before it began
  (end not after start) does not count at all.
* A row with a newer row (higher sequence) at a later start made while the
  reservation was ACTIVE ran until that start: a change of a running
  reservation ends one row and begins the next, as in Slurm, where the old
  row's end becomes the new start.
* A row with any other newer row was replaced before it began (its start was
  moved earlier, or later before the reservation was active): it does not count.
* Otherwise a row counts from its start to its end (0: without end).

The rollups (``dbd.rollup``), ``sacctmgr show reservation`` and sreport's
reservation report all read reservations through ``spans``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from corral import hostlist
from dbd.entities import invalid, names, timestamp
from dbd.models import ReservationRecord, ReservationUsageHour

#: The end of a reservation without one.
FOREVER = 2**62


@dataclass(frozen=True, slots=True)
class Span:
    """One reservation row as it counts: from ``start`` (its key) to ``end``."""

    cluster: str
    resv_id: int
    start: int
    end: int  # where it stopped counting (FOREVER: no end)
    cpus: int
    flags: frozenset[str]
    nodes: str
    row: ReservationRecord

    @property
    def maint(self) -> bool:
        """A maintenance reservation: its time is planned down time."""
        return "MAINT" in self.flags

    @property
    def ignore_jobs(self) -> bool:
        """Made over running jobs: its time is not the cluster's, its jobs count as usual."""
        return "IGNORE_JOBS" in self.flags

    def node_set(self) -> frozenset[str]:
        return frozenset(hostlist.expand(self.nodes)) if self.nodes else frozenset()


def flag_set(text: str) -> frozenset[str]:
    """``MAINT,IGNORE_JOBS`` as a set of upper-case words."""
    return frozenset(word.strip().upper() for word in text.split(",") if word.strip())


def spans(rows: Iterable[ReservationRecord]) -> list[Span]:
    """The rows that count, each with the end it counts to, by cluster, start and id.

    ``rows`` must hold every row of each reservation it holds some of.
    """
    groups: dict[tuple[str, int], list[ReservationRecord]] = defaultdict(list)
    for row in rows:
        groups[row.cluster, row.resv_id].append(row)
    found = []
    for group in groups.values():
        for row in group:
            end = _end(row, group)
            if end is not None and end > row.time_start:
                found.append(_span(row, end))
    found.sort(key=lambda span: (span.cluster, span.start, span.resv_id))
    return found


def _span(row: ReservationRecord, end: int) -> Span:
    flags = flag_set(row.flags)
    return Span(row.cluster, row.resv_id, row.time_start, end, row.cpus, flags, row.nodes, row)


def _end(row: ReservationRecord, group: Sequence[ReservationRecord]) -> int | None:
    """When ``row`` stops counting, given the other rows of its reservation (None: never
    counted)."""
    end = row.time_end or FOREVER
    if row.deleted:
        return end
    for newer in group:
        if newer.seq <= row.seq or newer.time_start == row.time_start:
            continue
        if newer.time_start > row.time_start and newer.state.upper() == "ACTIVE":
            end = min(end, newer.time_start)
        else:
            return None
    return end


def spans_between(session: Session, cluster: str, lo: int, hi: int) -> list[Span]:
    """The cluster's reservation spans that meet ``[lo, hi)``."""
    # A row counts at most until its own end: only reservations with a row that had not
    # ended by lo can meet the hours (all their rows decide how).
    ids = select(ReservationRecord.resv_id).where(
        ReservationRecord.cluster == cluster,
        ReservationRecord.time_start < hi,
        or_(ReservationRecord.time_end > lo, ReservationRecord.time_end == 0),
    )
    rows = session.scalars(
        select(ReservationRecord).where(
            ReservationRecord.cluster == cluster, ReservationRecord.resv_id.in_(ids)
        )
    )
    return [s for s in spans(rows) if s.start < hi and s.end > lo]


# ---------------------------------------------------------------- sacctmgr and sreport
@dataclass(frozen=True, slots=True)
class Listed:
    """A reservation row as listed: its span and its use so far (from the hourly rollup)."""

    span: Span
    wall_secs: int  # seconds of it rolled up
    alloc_secs: int  # CPU-seconds jobs ran on its nodes then

    @property
    def unused_wall(self) -> float:
        """Slurm's UnusedWall: seconds of it no job used, a job's seconds weighed by its
        share of the reservation's CPUs."""
        cpus = self.span.cpus
        used = self.alloc_secs / cpus if cpus else 0.0
        return max(0.0, self.wall_secs - used)


def listed(session: Session, where: Mapping[str, str], now: int) -> list[Listed]:
    """The reservation rows that ``where`` (sacctmgr's conditions: cluster, name, id,
    nodes, start, end as epoch seconds) selects, by cluster, start and name.

    As in Slurm, a start without an end means until ``now``; a row is in the window
    when it began before its end and had not ended before its start.
    """
    clusters = names(where.get("cluster", ""))
    wanted_names = names(where.get("name", ""))
    try:
        ids = {int(text) for text in names(where.get("id", ""))}
    except ValueError:
        raise invalid(f"Invalid reservation id: {where['id']}") from None
    nodes = set(hostlist.expand(where["nodes"])) if where.get("nodes") else set()
    start = _epoch(where.get("start"))
    end = _epoch(where.get("end")) or (now if start else 0)
    statement = select(ReservationRecord)
    if clusters:
        statement = statement.where(ReservationRecord.cluster.in_(clusters))
    found = []
    for span in spans(session.scalars(statement)):
        row = span.row
        if wanted_names and row.name.lower() not in wanted_names:
            continue
        if ids and row.resv_id not in ids:
            continue
        if end and span.start >= end:
            continue
        if start and span.end < start:
            continue
        if nodes and nodes.isdisjoint(span.node_set()):
            continue
        found.append(span)
    use = _use(session, clusters)
    found.sort(key=lambda s: (s.cluster, s.start, s.row.name))
    return [Listed(s, *use.get((s.cluster, s.resv_id, s.start), (0, 0))) for s in found]


def _epoch(text: str | None) -> int:
    if not text:
        return 0
    try:
        return int(text)
    except ValueError:
        raise invalid(f"Invalid time specification: {text}") from None


def _use(session: Session, clusters: list[str]) -> dict[tuple[str, int, int], tuple[int, int]]:
    """(wall seconds, CPU-seconds used) per reservation row, from the hourly rollup."""
    table = ReservationUsageHour
    statement = select(
        table.cluster,
        table.resv_id,
        table.time_start,
        func.sum(table.wall_secs),
        func.sum(table.alloc_secs),
    ).group_by(table.cluster, table.resv_id, table.time_start)
    if clusters:
        statement = statement.where(table.cluster.in_(clusters))
    return {
        (cluster, resv_id, start): (int(wall or 0), int(alloc or 0))
        for cluster, resv_id, start, wall, alloc in session.execute(statement)
    }


def sacctmgr_row(item: Listed, usage: bool = False) -> dict[str, str]:
    """sacctmgr's fields of a listed reservation row, keyed by their headers; with
    ``usage``, what sreport's reservation report needs besides, as numbers."""
    span, row = item.span, item.span.row
    extra = {}
    if usage:
        extra = {
            "StartRaw": str(span.start),
            "EndRaw": str(0 if span.end == FOREVER else span.end),
            "CPUs": str(span.cpus),
            "AllocSecs": str(item.alloc_secs),
            "Accounts": row.accounts,
            "Users": row.users,
        }
    return {
        **extra,
        "Cluster": span.cluster,
        "Name": row.name,
        "ID": str(span.resv_id),
        "TRES": row.tres,
        "TimeStart": timestamp(span.start),
        "TimeEnd": timestamp(0 if span.end == FOREVER else span.end),
        "UnusedWall": f"{item.unused_wall:.6f}",
        "Flags": row.flags,
        "NodeName": row.nodes,
    }
