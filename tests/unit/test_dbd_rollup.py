"""Usage rollups and sreport's queries in corral-dbd, on SQLite and on MariaDB.

Hand-built jobs around the end of January 2024 (UTC): hours, the day and the
month they complete, a job still running, records that arrive after their hours
were rolled up, and the reports read back from the rollups.
"""

from __future__ import annotations

import asyncio
import calendar
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from corral import auth, credentials
from corral.credentials import Verifier
from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.admin import Admin
from dbd.models import (
    AssocUsageDay,
    AssocUsageHour,
    AssocUsageMonth,
    ClusterUsageDay,
    ClusterUsageHour,
    ClusterUsageMonth,
    RunningUsage,
    UsageRollup,
)
from dbd.report import ReportQuery, Usage, usage_report, window
from dbd.rollup import day_start, hour_start, month_start, next_day, next_month, periods, rollup
from dbd.service import AccountingService
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)

TABLES = (
    AssocUsageHour,
    AssocUsageDay,
    AssocUsageMonth,
    ClusterUsageHour,
    ClusterUsageDay,
    ClusterUsageMonth,
)


def at(text: str) -> int:
    """Epoch seconds of a UTC ``YYYY-MM-DDTHH:MM``."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M"))


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        try:
            yield Storage(engine)
        finally:
            engine.dispose()


class Jobs:
    """Records of one cluster as its controller's outbox sends them (sequence by sequence)."""

    def __init__(self, storage: Storage, cluster: str = "c") -> None:
        self.storage = storage
        self.cluster = cluster
        self.seq = 0

    def send(
        self,
        job_id: int,
        user: str,
        account: str,
        cpus: int,
        start: str,
        end: str,
        eligible: str | None = None,
        **fields: Any,
    ) -> None:
        """A job record; eligible (waiting: planned time) by default from its start on, so
        never waiting, and never if it has not started (held)."""
        self.seq += 1
        if eligible is None:
            eligible = start
        info = pb.JobInfo(
            job_id=job_id,
            submit_time=at("2024-01-31T20:00"),
            eligible_time=at(eligible) if eligible else 0,
            uid=1000 + job_id,
            user=user,
            account=account,
            state="COMPLETED" if end else "RUNNING",
            num_cpus=cpus,
            start_time=at(start) if start else 0,
            end_time=at(end) if end else 0,
            **fields,
        )
        self.storage.record_jobs(self.cluster, [info], [self.seq])


def rows(storage: Storage, table: Any) -> list[tuple[Any, ...]]:
    """A usage table's rows: (period as text, account, user, alloc) or the cluster's sums."""
    with Session(storage.engine) as session:
        found = []
        for row in session.scalars(select(table)):
            when = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(row.period))
            if hasattr(row, "user"):
                found.append((row.cluster, when, row.account, row.user, row.alloc_secs))
            else:
                found.append(
                    (row.cluster, when, row.cpus, row.alloc_secs, row.idle_secs, row.reported_secs)
                )
        return sorted(found)


def everything(storage: Storage) -> list[list[tuple[Any, ...]]]:
    return [rows(storage, table) for table in TABLES]


def january_jobs(storage: Storage) -> Jobs:
    """A 10-CPU cluster registered at 22:00 on January 31st, and four jobs."""
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"), cpus=10)
    jobs = Jobs(storage)
    jobs.send(1, "alice", "physics", 2, "2024-01-31T22:30", "2024-02-01T01:15")
    jobs.send(2, "bob", "chem", 4, "2024-01-31T23:00", "2024-01-31T23:30")
    jobs.send(3, "carol", "physics", 1, "2024-02-01T00:10", "")  # still running
    jobs.send(4, "dave", "chem", 8, "", "")  # pending (held: not waiting)
    return jobs


@pytest.fixture
def january(storage: Storage) -> Jobs:
    """January's jobs rolled up at 02:20."""
    jobs = january_jobs(storage)
    assert rollup(storage.engine, at("2024-02-01T02:20")) == 4
    return jobs


def test_hours_days_and_months_hold_each_jobs_cpu_seconds(storage: Storage, january: Jobs) -> None:
    assert rows(storage, AssocUsageHour) == [
        ("c", "2024-01-31T22:00", "physics", "alice", 2 * 1800),
        ("c", "2024-01-31T23:00", "chem", "bob", 4 * 1800),
        ("c", "2024-01-31T23:00", "physics", "alice", 2 * 3600),
        ("c", "2024-02-01T00:00", "physics", "alice", 2 * 3600),
        ("c", "2024-02-01T00:00", "physics", "carol", 1 * 3000),
        ("c", "2024-02-01T01:00", "physics", "alice", 2 * 900),
        ("c", "2024-02-01T01:00", "physics", "carol", 1 * 3600),  # running: the whole hour
    ]
    assert rows(storage, ClusterUsageHour) == [
        ("c", "2024-01-31T22:00", 10, 3600, 36000 - 3600, 36000),
        ("c", "2024-01-31T23:00", 10, 14400, 36000 - 14400, 36000),
        ("c", "2024-02-01T00:00", 10, 10200, 36000 - 10200, 36000),
        ("c", "2024-02-01T01:00", 10, 5400, 36000 - 5400, 36000),
    ]
    # January 31st and January are over; February 1st is not.
    assert rows(storage, AssocUsageDay) == [
        ("c", "2024-01-31T00:00", "chem", "bob", 7200),
        ("c", "2024-01-31T00:00", "physics", "alice", 10800),
    ]
    assert rows(storage, ClusterUsageDay) == [("c", "2024-01-31T00:00", 10, 18000, 54000, 72000)]
    assert rows(storage, AssocUsageMonth) == [
        ("c", "2024-01-01T00:00", "chem", "bob", 7200),
        ("c", "2024-01-01T00:00", "physics", "alice", 10800),
    ]
    assert rows(storage, ClusterUsageMonth) == [("c", "2024-01-01T00:00", 10, 18000, 54000, 72000)]


def test_jobs_read_by_index_or_by_scan_roll_up_alike(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    january_jobs(storage)
    found = []
    for fraction in (0, 10**9):  # never scan the table, always scan it
        monkeypatch.setattr("dbd.rollup.SCAN_FRACTION", fraction)
        with Session(storage.engine) as session, session.begin():
            for table in (*TABLES, UsageRollup, RunningUsage):
                session.execute(delete(table))
        assert rollup(storage.engine, at("2024-02-01T02:20")) == 4
        found.append(everything(storage))
    assert found[0] == found[1]
    assert len(found[0][0]) == 7


def test_rolling_up_again_changes_nothing(storage: Storage, january: Jobs) -> None:
    before = everything(storage)
    assert rollup(storage.engine, at("2024-02-01T02:59")) == 0
    assert everything(storage) == before


def test_a_running_job_counts_until_its_record_says_it_ended(
    storage: Storage, january: Jobs
) -> None:
    assert rollup(storage.engine, at("2024-02-01T03:05")) == 1
    assert ("c", "2024-02-01T02:00", "physics", "carol", 3600) in rows(storage, AssocUsageHour)
    # Carol's job ended at 02:30; its record comes after 02:00-03:00 was rolled up.
    january.send(3, "carol", "physics", 1, "2024-02-01T00:10", "2024-02-01T02:30")
    assert rollup(storage.engine, at("2024-02-01T03:10")) == 1  # 02:00 again, not since 00:10
    assert [r for r in rows(storage, AssocUsageHour) if r[3] == "carol"] == [
        ("c", "2024-02-01T00:00", "physics", "carol", 3000),
        ("c", "2024-02-01T01:00", "physics", "carol", 3600),
        ("c", "2024-02-01T02:00", "physics", "carol", 1800),
    ]
    assert ("c", "2024-02-01T02:00", 10, 1800, 34200, 36000) in rows(storage, ClusterUsageHour)


def test_a_late_record_is_counted_in_the_hours_day_and_month_it_ran(
    storage: Storage, january: Jobs
) -> None:
    january.send(5, "erin", "chem", 3, "2024-01-31T22:00", "2024-01-31T22:20")
    assert rollup(storage.engine, at("2024-02-01T02:30")) == 4  # from 22:00 on
    assert ("c", "2024-01-31T22:00", "chem", "erin", 3600) in rows(storage, AssocUsageHour)
    assert ("c", "2024-01-31T00:00", "chem", "erin", 3600) in rows(storage, AssocUsageDay)
    assert ("c", "2024-01-01T00:00", "chem", "erin", 3600) in rows(storage, AssocUsageMonth)
    assert rows(storage, ClusterUsageMonth) == [("c", "2024-01-01T00:00", 10, 21600, 50400, 72000)]


def test_a_job_that_started_before_the_cluster_registered_counts_from_its_start(
    storage: Storage,
) -> None:
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"), cpus=2)
    Jobs(storage).send(1, "alice", "physics", 1, "2024-01-31T20:30", "2024-01-31T21:00")
    rollup(storage.engine, at("2024-01-31T22:05"))
    assert rows(storage, ClusterUsageHour) == [
        ("c", "2024-01-31T20:00", 2, 1800, 1800, 3600),  # known from 20:30
        ("c", "2024-01-31T21:00", 2, 0, 7200, 7200),
    ]


def test_a_cluster_without_cpus_reports_its_allocation_uncapped(storage: Storage) -> None:
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"))
    Jobs(storage).send(1, "alice", "physics", 4, "2024-01-31T22:00", "2024-01-31T23:00")
    rollup(storage.engine, at("2024-01-31T23:05"))
    assert rows(storage, ClusterUsageHour) == [("c", "2024-01-31T22:00", 0, 14400, 0, 0)]


def test_periods_cover_a_window_with_the_longest_rows() -> None:
    assert periods(at("2024-01-30T22:00"), at("2024-03-02T01:00")) == [
        ("hour", at("2024-01-30T22:00"), at("2024-01-31T00:00")),
        ("day", at("2024-01-31T00:00"), at("2024-02-01T00:00")),
        ("month", at("2024-02-01T00:00"), at("2024-03-01T00:00")),
        ("day", at("2024-03-01T00:00"), at("2024-03-02T00:00")),
        ("hour", at("2024-03-02T00:00"), at("2024-03-02T01:00")),
    ]
    assert periods(at("2024-01-01T00:00"), at("2024-03-01T00:00")) == [
        ("month", at("2024-01-01T00:00"), at("2024-03-01T00:00"))
    ]


def test_local_periods_follow_the_time_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30: hours start at half past, UTC
    time.tzset()
    t = at("2024-03-31T19:30")  # 01:00 on April 1st in Kolkata
    assert hour_start(t + 1799) == t
    assert day_start(t) == at("2024-03-31T18:30")
    assert next_day(day_start(t)) == at("2024-04-01T18:30")
    assert month_start(t) == at("2024-03-31T18:30")
    assert next_month(month_start(t)) == at("2024-04-30T18:30")
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()


# ---------------------------------------------------------------- reports
def report(storage: Storage, kind: str, start: str, end: str, **query: Any) -> list[Usage]:
    found, _, _ = usage_report(
        storage.engine, ReportQuery(kind, at(start), at(end), **query), at("2024-02-02T00:30")
    )
    return found


@pytest.fixture
def tree(storage: Storage, january: Jobs) -> Jobs:
    """January's jobs under root -> science -> physics, root -> chem."""
    admin = Admin(storage.engine)
    for name, parent in (("science", "root"), ("physics", "science"), ("chem", "root")):
        admin.run("add", "account", {"name": name}, {"parent": parent}, True, "root", True)
    for user, account in (("alice", "physics"), ("carol", "physics"), ("bob", "chem")):
        admin.run("add", "user", {"name": user}, {"account": account}, True, "root", True)
    return january


def test_utilization_of_a_day_reads_its_day_row(storage: Storage, january: Jobs) -> None:
    assert report(storage, "cluster utilization", "2024-01-31T00:00", "2024-02-01T00:00") == [
        Usage("c", alloc_secs=18000, idle_secs=54000, reported_secs=72000)
    ]
    # The rolled-up day row is what is read: change it and the report follows.
    with Session(storage.engine) as session, session.begin():
        day = select(ClusterUsageDay).where(ClusterUsageDay.period == at("2024-01-31T00:00"))
        row = session.scalars(day).one()
        row.alloc_secs = 1
    (usage,) = report(storage, "cluster utilization", "2024-01-31T00:00", "2024-02-01T00:00")
    assert usage.alloc_secs == 1


def test_a_report_rolls_up_first_and_counts_whole_hours(storage: Storage, january: Jobs) -> None:
    # Rolled up to 00:00 on February 2nd by the report itself (carol still running).
    assert report(storage, "cluster utilization", "2024-02-01T00:00", "2024-02-02T00:00") == [
        Usage(
            "c", alloc_secs=10200 + 5400 + 22 * 3600, idle_secs=864000 - 94800, reported_secs=864000
        )
    ]
    assert report(storage, "cluster utilization", "2024-03-01T00:00", "2024-03-02T00:00") == []


def test_account_utilization_by_user_follows_the_tree(storage: Storage, tree: Jobs) -> None:
    found = report(
        storage, "cluster accountutilizationbyuser", "2024-01-31T22:00", "2024-02-01T01:00"
    )
    assert [(r.account, r.user, r.alloc_secs) for r in found] == [
        ("", "", 3600 + 14400 + 10200),  # the cluster
        ("root", "", 28200),
        ("chem", "", 7200),
        ("chem", "bob", 7200),
        ("science", "", 21000),
        ("physics", "", 21000),
        ("physics", "alice", 3600 + 7200 + 7200),
        ("physics", "carol", 3000),
    ]
    assert found[0].reported_secs == 3 * 36000
    only_science = report(
        storage,
        "cluster accountutilizationbyuser",
        "2024-01-31T22:00",
        "2024-02-01T01:00",
        accounts=("science",),
    )
    assert [(r.account, r.user) for r in only_science] == [
        ("", ""),
        ("science", ""),
        ("physics", ""),
        ("physics", "alice"),
        ("physics", "carol"),
    ]
    only_users = report(
        storage,
        "cluster accountutilizationbyuser",
        "2024-01-31T22:00",
        "2024-02-01T01:00",
        users=("carol", "bob"),
    )
    assert [(r.account, r.user) for r in only_users] == [
        ("", ""),
        ("chem", "bob"),
        ("physics", "carol"),
    ]


def test_top_usage_orders_users_by_usage(storage: Storage, january: Jobs) -> None:
    found = report(storage, "user topusage", "2024-01-31T00:00", "2024-02-01T02:00", top=2)
    assert [(r.account, r.user, r.alloc_secs) for r in found] == [
        ("", "", 18000 + 10200 + 5400),
        ("physics", "alice", 19800),
        ("chem", "bob", 7200),
    ]
    chem = report(
        storage, "user topusage", "2024-01-31T00:00", "2024-02-01T02:00", accounts=("physics",)
    )
    assert [r.user for r in chem] == ["", "alice", "carol"]


def test_reports_name_clusters_and_refuse_unknown_reports(storage: Storage, january: Jobs) -> None:
    storage.register_cluster("b", "ctl", 6817, at("2024-01-31T00:00"), cpus=1)
    found = report(storage, "cluster utilization", "2024-01-31T00:00", "2024-02-01T00:00")
    assert [(r.cluster, r.reported_secs) for r in found] == [("b", 86400), ("c", 72000)]
    only = report(
        storage, "cluster utilization", "2024-01-31T00:00", "2024-02-01T00:00", clusters=("c",)
    )
    assert [r.cluster for r in only] == ["c"]
    with pytest.raises(ValueError, match="Not valid report cluster bogus"):
        ReportQuery("cluster bogus", 0, 0)


def test_the_window_is_whole_hours() -> None:
    assert window(at("2024-01-31T22:10"), at("2024-01-31T22:50")) == (
        at("2024-01-31T22:00"),
        at("2024-01-31T23:00"),
    )
    assert window(at("2024-01-31T22:00"), at("2024-01-31T22:00")) == (
        at("2024-01-31T22:00"),
        at("2024-01-31T23:00"),
    )


# ---------------------------------------------------------------- the service
class Refused(Exception):
    pass


class Context:
    """The part of a gRPC servicer context the service uses."""

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Refused(code, details)


def ask(storage: Storage, private: tuple[str, ...], uid: int, **fields: Any) -> pb.ReportReply:
    key = b"k" * 32
    service = AccountingService(storage, Verifier(key, auth.DBD_RECEIVER), private, slurm_uid=0)
    request = pb.ReportRequest(**fields)
    credentials.stamp(
        request,
        key,
        uid=uid,
        gid=uid,
        method=credentials.accounting_method("Report"),
        receiver=auth.DBD_RECEIVER,
    )
    reply: pb.ReportReply = asyncio.run(service.Report(request, Context()))
    return reply


def test_the_service_answers_reports_and_keeps_usage_private(
    storage: Storage, january: Jobs
) -> None:
    window = {"start": at("2024-01-31T22:00"), "end": at("2024-02-01T01:00")}
    reply = ask(storage, (), 0, report="User TopUsage", clusters=["all"], **window)
    assert (reply.start, reply.end) == (window["start"], window["end"])
    assert [(r.user, r.alloc_secs) for r in reply.rows] == [
        ("", 28200),
        ("alice", 18000),
        ("bob", 7200),
        ("carol", 3000),
    ]
    assert reply.rows[0].reported_secs == 108000
    # With PrivateData=usage a user sees their own usage alone (uid 4242: no such user).
    reply = ask(storage, ("usage",), 4242, report="user topusage", **window)
    assert [r.user for r in reply.rows] == [""]
    with pytest.raises(Refused, match="Not valid report cluster nothing"):
        ask(storage, (), 0, report="cluster nothing", **window)


def test_nodes_down_or_drained_are_down_time(storage: Storage) -> None:
    """A 4-CPU node drained from 23:30 to 00:15: down in both hours, out of idle."""
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"), cpus=10)
    drained = pb.NodeEvent(
        node="n1", start=at("2024-01-31T23:30"), end=at("2024-02-01T00:15"), state="DRAIN", cpus=4
    )
    storage.record_events("c", [drained], [1])
    rollup(storage.engine, at("2024-02-01T02:20"))
    with Session(storage.engine) as session:
        down = {
            time.strftime("%H:%M", time.gmtime(row.period)): (row.down_secs, row.idle_secs)
            for row in session.scalars(select(ClusterUsageHour))
        }
    assert down["23:00"] == (4 * 1800, 10 * 3600 - 4 * 1800)
    assert down["00:00"] == (4 * 900, 10 * 3600 - 4 * 900)
    assert down["01:00"] == (0, 10 * 3600)
