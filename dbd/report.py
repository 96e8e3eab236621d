"""sreport's queries: cluster and association usage over a window, from the rollups.

A report first rolls up (``dbd.rollup.rollup``: every whole hour before now, a
no-op when nothing changed), then reads the window ``[start, end)`` (whole
local hours) as whole months, days and hours of the rollup tables
(``rollup.periods``), so a month costs a few rows per association, never a
scan of the month's jobs. The hour now running is not rolled up yet and counts
nothing, as in Slurm, where sreport shows what the rollups hold.

Every report answers per cluster, clusters by name, only clusters that have
rollup rows in the window:

* ``cluster utilization``: one row per cluster (account and user empty).
* ``cluster accountutilizationbyuser``: the cluster's row, then its accounts
  (the account's usage is its whole subtree's) and users (account and user set)
  in Slurm's hierarchical order: depth first from root, at each level the users
  before the sub-accounts, each sorted by name. ``accounts`` keeps those accounts
  and their subtrees; ``users`` keeps only those users' rows, without accounts.
  Only associations with usage are listed, as in Slurm.
* ``user topusage``: the cluster's row, then (account, user) rows by usage, most
  first (ties by name), at most ``top`` of them (0: Slurm's 10); ``accounts``
  and ``users`` keep those.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from dbd.models import (
    CLUSTER_SECONDS,
    Association,
    AssocUsageDay,
    AssocUsageHour,
    AssocUsageMonth,
    ClusterUsageDay,
    ClusterUsageHour,
    ClusterUsageMonth,
    UsageRollup,
)
from dbd.rollup import HOUR, AssocTable, ClusterTable, hour_start, periods, rollup

UTILIZATION = "cluster utilization"
ACCOUNTS_BY_USER = "cluster accountutilizationbyuser"
TOP_USAGE = "user topusage"
REPORTS = (UTILIZATION, ACCOUNTS_BY_USER, TOP_USAGE)
#: sreport's TopCount default.
DEFAULT_TOP = 10

_ASSOC_TABLES: dict[str, AssocTable] = {
    "hour": AssocUsageHour,
    "day": AssocUsageDay,
    "month": AssocUsageMonth,
}
_CLUSTER_TABLES: dict[str, ClusterTable] = {
    "hour": ClusterUsageHour,
    "day": ClusterUsageDay,
    "month": ClusterUsageMonth,
}


@dataclass(frozen=True, slots=True)
class ReportQuery:
    """What sreport asks for (``ReportRequest``), checked."""

    report: str
    start: int
    end: int
    clusters: tuple[str, ...] = ()  # empty: every cluster
    accounts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    top: int = 0

    def __post_init__(self) -> None:
        if self.report not in REPORTS:
            raise ValueError(f"Not valid report {self.report}")


@dataclass(frozen=True, slots=True)
class Usage:
    """One row of a report: CPU-seconds of a cluster, an account or an (account, user)."""

    cluster: str
    account: str = ""
    user: str = ""
    alloc_secs: int = 0
    down_secs: int = 0
    planned_down_secs: int = 0
    idle_secs: int = 0
    planned_secs: int = 0
    reported_secs: int = 0
    over_secs: int = 0


def window(start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened to whole local hours, one hour at least."""
    begin = hour_start(start)
    stop = hour_start(end)
    if stop < end:
        stop += HOUR
    return begin, max(stop, begin + HOUR)


def usage_report(engine: Engine, query: ReportQuery, now: int) -> tuple[list[Usage], int, int]:
    """The rows of ``query`` and the window they cover, rolled up to ``now`` first."""
    rollup(engine, now)
    start, end = window(query.start, query.end)
    rows: list[Usage] = []
    with Session(engine) as session:
        states = select(UsageRollup.cluster, UsageRollup.hour_end).order_by(UsageRollup.cluster)
        if query.clusters:
            states = states.where(UsageRollup.cluster.in_(query.clusters))
        for cluster, rolled in session.execute(states):
            pieces = periods(start, min(end, rolled))
            total = _cluster_usage(session, cluster, pieces)
            if total is None:
                continue  # nothing rolled up in the window: not there, as in Slurm
            rows.append(total)
            if query.report == UTILIZATION:
                continue
            used = _assoc_usage(session, cluster, pieces, query.users)
            if query.report == ACCOUNTS_BY_USER:
                parents = _account_parents(session, cluster)
                rows += _by_account(cluster, used, parents, query.accounts, bool(query.users))
            else:
                rows += _top(cluster, used, query.accounts, query.top or DEFAULT_TOP)
    return rows, start, end


def _cluster_usage(
    session: Session, cluster: str, pieces: list[tuple[str, int, int]]
) -> Usage | None:
    """The cluster's sums over ``pieces``, None if it has no rows there."""
    sums = [0] * (1 + len(CLUSTER_SECONDS))
    for kind, lo, hi in pieces:
        table = _CLUSTER_TABLES[kind]
        statement = select(
            func.count(),
            *(func.coalesce(func.sum(getattr(table, name)), 0) for name in CLUSTER_SECONDS),
        ).where(table.cluster == cluster, table.period >= lo, table.period < hi)
        for index, value in enumerate(session.execute(statement).one()):
            sums[index] += int(value)
    count, alloc, down, planned_down, idle, planned, reported, over = sums
    if not count:
        return None
    return Usage(cluster, "", "", alloc, down, planned_down, idle, planned, reported, over)


def _assoc_usage(
    session: Session, cluster: str, pieces: list[tuple[str, int, int]], users: tuple[str, ...]
) -> dict[tuple[str, str], int]:
    """CPU-seconds per (account, user) over ``pieces``, of ``users`` if any."""
    used: dict[tuple[str, str], int] = defaultdict(int)
    for kind, lo, hi in pieces:
        table = _ASSOC_TABLES[kind]
        where: list[ColumnElement[bool]] = [
            table.cluster == cluster,
            table.period >= lo,
            table.period < hi,
        ]
        if users:
            where.append(table.user.in_(users))
        statement = (
            select(table.account, table.user, func.sum(table.alloc_secs))
            .where(*where)
            .group_by(table.account, table.user)
        )
        for account, user, secs in session.execute(statement):
            used[account, user] += int(secs)
    return {key: secs for key, secs in used.items() if secs}


def _account_parents(session: Session, cluster: str) -> dict[str, str]:
    """Each account of the cluster's association tree and its parent ("" for root)."""
    statement = select(Association.account, Association.parent).where(
        Association.cluster == cluster, Association.user == ""
    )
    return {account: parent for account, parent in session.execute(statement)}


def _by_account(
    cluster: str,
    used: dict[tuple[str, str], int],
    parents: dict[str, str],
    accounts: tuple[str, ...],
    users_only: bool,
) -> list[Usage]:
    """AccountUtilizationByUser's rows, in Slurm's hierarchical order."""
    parents = dict(parents)
    for account, _ in used:  # an account without an association hangs under root
        if account != "root":
            parents.setdefault(account, "root")

    def lineage(account: str) -> list[str]:
        chain: list[str] = []
        while account and account not in chain:
            chain.append(account)
            account = parents.get(account, "")
        return chain

    wanted = set(accounts)
    if wanted:
        used = {key: secs for key, secs in used.items() if wanted & set(lineage(key[0]))}
    totals: dict[str, int] = defaultdict(int)
    if not users_only:
        for (account, _), secs in used.items():
            for ancestor in lineage(account):
                if not wanted or wanted & set(lineage(ancestor)):
                    totals[ancestor] += secs
    # (sort key, row) children per parent; "" holds the top level.
    children: dict[str, list[tuple[tuple[int, str, str], Usage]]] = defaultdict(list)
    for (account, user), secs in used.items():
        parent = account if account in totals else ""
        row = Usage(cluster, account, user, secs)
        children[parent].append(((0, user, account), row))
    for account, secs in totals.items():
        parent = parents.get(account, "")
        children[parent if parent in totals else ""].append(
            ((1, account, ""), Usage(cluster, account, "", secs))
        )
    ordered: list[Usage] = []

    def walk(parent: str) -> None:
        for _, row in sorted(children.get(parent, []), key=lambda item: item[0]):
            ordered.append(row)
            if not row.user:
                walk(row.account)

    walk("")
    return ordered


def _top(
    cluster: str, used: dict[tuple[str, str], int], accounts: tuple[str, ...], top: int
) -> list[Usage]:
    """TopUsage's rows: the most used (account, user) pairs first."""
    pairs = [(key, secs) for key, secs in used.items() if not accounts or key[0] in accounts]
    pairs.sort(key=lambda item: (-item[1], item[0][1], item[0][0]))
    return [Usage(cluster, account, user, secs) for (account, user), secs in pairs[:top]]
