"""Reservations in corral-dbd, on SQLite and on MariaDB: their records, which rows count,
``sacctmgr show reservation``, sreport's ``reservation Utilization``, and what they
(and waiting jobs) make of sreport's Allocated, PLND Down, Planned and Over Comm;
and the controller's outbox split.

The rollup example, hand-computed (UTC; a 10-CPU cluster registered at 22:00 on
January 31st 2024, rolled up to 00:00 on February 1st):

* ``maint``: MAINT on n[1-2] (4 CPUs), 22:30 to 23:30: planned down 4 x 1800
  in each hour.
* ``project``: no flags, n3 (2 CPUs), 22:00 to 00:00: allocated 2 x 3600 in each
  hour, used or not; job X (1 CPU on n3, 22:00 to 22:30) counts in it, not again.
* ``ignore``: IGNORE_JOBS, n4 (2 CPUs), 22:00 to 00:00: nothing for the cluster;
  job Y (2 CPUs on n4, 23:00 to 23:30) counts as any job: 3600.
* job W (2 CPUs) eligible at 22:15, ran 23:15 to 23:45 on n5: planned 2 x 2700 at
  22:00 and 2 x 900 at 23:00, allocated 2 x 1800 at 23:00.
* job P (8 CPUs) eligible at 23:30, still pending: planned 8 x 1800 at 23:00.

22:00: allocated 7200, planned down 7200, planned 5400, idle 36000 - 19800 = 16200.
23:00: allocated 3600 + 3600 + 7200 = 14400, planned down 7200; 16200 waited but
only 14400 is left: planned 14400, over-committed 1800, idle 0.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from cli.sacctmgr.session import sacctmgr
from cli.sreport.session import sreport
from controller.accounting import batch
from corral.wire import corral_pb2 as pb
from dbd import schema
from dbd.admin import Admin
from dbd.models import ClusterUsageDay, ClusterUsageHour, ReservationRecord
from dbd.report import ReportQuery, usage_report
from dbd.reservations import FOREVER, spans
from dbd.rollup import rollup
from dbd.storage import Storage, engine_for
from tests.databases import BACKENDS, fresh_database
from tests.unit.test_dbd_rollup import Jobs, at
from tests.unit.test_timefmt import utc  # noqa: F401 (autouse fixture: times in UTC)


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    with fresh_database(request.param, tmp_path) as url:
        engine = engine_for(url)
        schema.upgrade(engine)
        try:
            yield Storage(engine)
        finally:
            engine.dispose()


def resv(
    resv_id: int, name: str, nodes: str, cpus: int, start: str, end: str, **fields: Any
) -> pb.ReservationInfo:
    return pb.ReservationInfo(
        id=resv_id,
        name=name,
        nodes=nodes,
        node_count=len(nodes.split(",")),
        core_count=cpus,
        start=at(start),
        end=at(end),
        tres=f"cpu={cpus}",
        state=fields.pop("state", "INACTIVE"),
        **fields,
    )


# ---------------------------------------------------------------- records
def stored(storage: Storage) -> list[tuple[Any, ...]]:
    table = ReservationRecord
    order = (table.cluster, table.resv_id, table.time_start)
    with Session(storage.engine) as session:
        return [
            (r.cluster, r.resv_id, r.time_start, r.time_end, r.nodes, r.cpus, r.deleted, r.seq)
            for r in session.scalars(select(table).order_by(*order))
        ]


def test_a_reservation_record_is_stored_once_however_often_it_arrives(storage: Storage) -> None:
    made = resv(1, "maint", "n[1-2]", 4, "2024-01-31T22:30", "2024-01-31T23:30", flags="MAINT")
    assert storage.record_reservations("c", [made], [1]) == 1
    assert storage.record_reservations("c", [made], [1]) == 0  # resent after a lost reply
    assert stored(storage) == [
        ("c", 1, at("2024-01-31T22:30"), at("2024-01-31T23:30"), "n[1-2]", 4, False, 1)
    ]


def test_a_change_with_the_same_start_replaces_the_row_and_a_new_start_adds_one(
    storage: Storage,
) -> None:
    made = resv(1, "r", "n1", 2, "2024-01-31T22:00", "2024-01-31T23:00")
    longer = resv(1, "r", "n[1-2]", 4, "2024-01-31T22:00", "2024-02-01T01:00")
    assert storage.record_reservations("c", [made, longer], [3, 4]) == 1  # the newest of both
    assert storage.record_reservations("c", [made], [3]) == 0  # an older one changes nothing
    assert stored(storage) == [
        ("c", 1, at("2024-01-31T22:00"), at("2024-02-01T01:00"), "n[1-2]", 4, False, 4)
    ]
    # Changed while active: a new row from the change on.
    changed = resv(1, "r", "n1", 2, "2024-01-31T23:10", "2024-02-01T01:00", state="ACTIVE")
    assert storage.record_reservations("c", [changed], [5]) == 1
    # Another cluster's reservation 1 is another reservation.
    assert storage.record_reservations("d", [made], [1]) == 1
    assert [(r[0], r[1], r[2]) for r in stored(storage)] == [
        ("c", 1, at("2024-01-31T22:00")),
        ("c", 1, at("2024-01-31T23:10")),
        ("d", 1, at("2024-01-31T22:00")),
    ]


def row(seq: int, start: int, end: int, state: str = "INACTIVE", deleted: bool = False) -> Any:
    return ReservationRecord(
        cluster="c",
        resv_id=7,
        time_start=start,
        time_end=end,
        seq=seq,
        state=state,
        deleted=deleted,
        flags="MAINT",
        nodes="n1",
        cpus=2,
        name="r",
    )


def counted(rows: list[Any]) -> list[tuple[int, int]]:
    return [(s.start, s.end) for s in spans(rows)]


def test_which_rows_of_a_reservation_count_and_until_when() -> None:
    # Changed while active at 150: the first row ran until then, the second from then.
    first, second = row(1, 100, 300), row(2, 150, 300, state="ACTIVE")
    assert counted([second, first]) == [(100, 150), (150, 300)]
    # Moved later (or earlier) before it began: only the newer row counts.
    assert counted([row(1, 100, 300), row(2, 200, 400)]) == [(200, 400)]
    assert counted([row(1, 100, 300), row(2, 50, 250)]) == [(50, 250)]
    # Its last record (ended, or removed: end is when) counts as it says, whatever follows.
    assert counted([row(1, 100, 180, deleted=True), row(2, 200, 300)]) == [(100, 180), (200, 300)]
    # Removed before it began: nothing; without an end: until further notice.
    assert counted([row(1, 100, 90, deleted=True)]) == []
    assert counted([row(1, 100, 0)]) == [(100, FOREVER)]
    assert spans([row(1, 100, 200)])[0].maint


# ---------------------------------------------------------------- rollups
def example(storage: Storage) -> Jobs:
    """The module docstring's cluster, reservations and jobs."""
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"), cpus=10)
    storage.record_reservations(
        "c",
        [
            resv(1, "maint", "n[1-2]", 4, "2024-01-31T22:30", "2024-01-31T23:30", flags="MAINT"),
            resv(2, "project", "n3", 2, "2024-01-31T22:00", "2024-02-01T00:00"),
            resv(3, "ignore", "n4", 2, "2024-01-31T22:00", "2024-02-01T00:00", flags="IGNORE_JOBS"),
        ],
        [1, 2, 3],
    )
    jobs = Jobs(storage)
    on = {"nodes": "n3", "cpus_per_node": [1]}
    jobs.send(1, "xavier", "physics", 1, "2024-01-31T22:00", "2024-01-31T22:30", **on)
    on = {"nodes": "n4", "cpus_per_node": [2]}
    jobs.send(2, "yann", "physics", 2, "2024-01-31T23:00", "2024-01-31T23:30", **on)
    on = {"nodes": "n5", "cpus_per_node": [2]}
    jobs.send(3, "wu", "chem", 2, "2024-01-31T23:15", "2024-01-31T23:45", "2024-01-31T22:15", **on)
    jobs.send(4, "pia", "chem", 8, "", "", "2024-01-31T23:30")
    return jobs


def hours(storage: Storage) -> dict[str, tuple[int, ...]]:
    """Per hour: allocated, down, planned down, planned, over-committed, idle, reported."""
    with Session(storage.engine) as session:
        return {
            time.strftime("%H:%M", time.gmtime(r.period)): (
                r.alloc_secs,
                r.down_secs,
                r.planned_down_secs,
                r.planned_secs,
                r.over_secs,
                r.idle_secs,
                r.reported_secs,
            )
            for r in session.scalars(select(ClusterUsageHour).order_by(ClusterUsageHour.period))
        }


def test_reservations_and_waiting_jobs_in_the_cluster_figures(storage: Storage) -> None:
    example(storage)
    assert rollup(storage.engine, at("2024-02-01T00:05")) == 2
    assert hours(storage) == {
        "22:00": (7200, 0, 7200, 5400, 0, 16200, 36000),
        "23:00": (14400, 0, 7200, 14400, 1800, 0, 36000),
    }
    # The day (complete at 00:00) sums its hours, over-committed time too.
    with Session(storage.engine) as session:
        day = session.scalars(select(ClusterUsageDay)).one()
    assert (day.alloc_secs, day.planned_down_secs, day.planned_secs, day.over_secs) == (
        21600,
        14400,
        19800,
        1800,
    )
    # sreport reads the same, and rolling up again changes nothing.
    (usage,) = usage_report(
        storage.engine,
        ReportQuery("cluster utilization", at("2024-01-31T22:00"), at("2024-02-01T00:00")),
        at("2024-02-01T00:30"),
    )[0]
    assert (usage.alloc_secs, usage.planned_down_secs, usage.planned_secs, usage.idle_secs) == (
        21600,
        14400,
        19800,
        16200,
    )
    assert usage.over_secs == 1800
    assert rollup(storage.engine, at("2024-02-01T00:50")) == 0
    assert hours(storage)["23:00"] == (14400, 0, 7200, 14400, 1800, 0, 36000)


def test_nodes_down_in_a_reservation_count_once(storage: Storage) -> None:
    """n1 (in ``maint``) drained 22:45-23:15: planned down, as the reservation was, not
    down; n3 (in ``project``) down 23:00-23:30: down, and no longer allocated."""
    example(storage)
    storage.record_events(
        "c",
        [
            pb.NodeEvent(
                node="n1",
                start=at("2024-01-31T22:45"),
                end=at("2024-01-31T23:15"),
                state="DRAIN",
                cpus=2,
            ),
            pb.NodeEvent(
                node="n3",
                start=at("2024-01-31T23:00"),
                end=at("2024-01-31T23:30"),
                state="DOWN",
                cpus=2,
            ),
        ],
        [4, 5],
    )
    rollup(storage.engine, at("2024-02-01T00:05"))
    assert hours(storage) == {
        "22:00": (7200, 0, 7200, 5400, 0, 16200, 36000),
        "23:00": (10800, 3600, 7200, 14400, 1800, 0, 36000),
    }


def test_a_late_reservation_record_rolls_its_hours_again(storage: Storage) -> None:
    example(storage)
    rollup(storage.engine, at("2024-02-01T00:05"))
    # ``project`` was removed at 23:00; the record comes after its hours were rolled.
    removed = resv(2, "project", "n3", 2, "2024-01-31T22:00", "2024-01-31T23:00", deleted=True)
    storage.record_reservations("c", [removed], [9])
    assert rollup(storage.engine, at("2024-02-01T00:10")) == 2  # from its start, 22:00
    assert hours(storage)["23:00"] == (7200, 0, 7200, 16200, 0, 5400, 36000)
    assert hours(storage)["22:00"] == (7200, 0, 7200, 5400, 0, 16200, 36000)
    assert rollup(storage.engine, at("2024-02-01T00:20")) == 0


def test_a_job_record_that_arrives_late_counts_its_wait(storage: Storage) -> None:
    storage.register_cluster("c", "ctl", 6817, at("2024-01-31T22:00"), cpus=10)
    jobs = Jobs(storage)
    rollup(storage.engine, at("2024-02-01T00:05"))
    # Eligible at 22:30, started at 23:30: its records reach dbd only now.
    jobs.send(1, "wu", "chem", 4, "2024-01-31T23:30", "", "2024-01-31T22:30")
    assert rollup(storage.engine, at("2024-02-01T00:10")) == 2  # from 22:30
    assert [h[3] for h in hours(storage).values()] == [4 * 1800, 4 * 1800]
    # A pending array record waits once per pending task.
    jobs.send(2, "wu", "chem", 1, "", "", "2024-02-01T00:00", array_task_str="1-3%2")
    rollup(storage.engine, at("2024-02-01T01:05"))
    assert hours(storage)["00:00"][3] == 3 * 3600


# ---------------------------------------------------------------- sacctmgr
def listing(storage: Storage, **where: str) -> list[dict[str, str]]:
    return Admin(storage.engine).run("list", "reservation", where, {}, False, "alice", False).rows


def test_sacctmgr_lists_reservations_with_their_unused_wall(storage: Storage) -> None:
    example(storage)
    other = resv(1, "other", "m1", 8, "2024-01-31T20:00", "2024-01-31T21:00")
    storage.record_reservations("d", [other], [1])
    rollup(storage.engine, at("2024-02-01T00:05"))
    rows = listing(storage)
    assert [(r["Cluster"], r["Name"], r["TimeStart"]) for r in rows] == [
        ("c", "ignore", "2024-01-31T22:00:00"),
        ("c", "project", "2024-01-31T22:00:00"),
        ("c", "maint", "2024-01-31T22:30:00"),
        ("d", "other", "2024-01-31T20:00:00"),
    ]
    project = rows[1]
    assert project == {
        "Cluster": "c",
        "Name": "project",
        "ID": "2",
        "TRES": "cpu=2",
        "TimeStart": "2024-01-31T22:00:00",
        "TimeEnd": "2024-02-01T00:00:00",
        # 2 hours, less job X's 1800 s on one of its 2 CPUs.
        "UnusedWall": "6300.000000",
        "Flags": "",
        "NodeName": "n3",
    }
    assert rows[0]["UnusedWall"] == "5400.000000"  # job Y: 1800 s on both CPUs
    assert rows[2]["UnusedWall"] == "3600.000000"
    assert rows[3]["UnusedWall"] == "0.000000"  # cluster d is not rolled up (no registration)
    # Filters: cluster, names, ids, nodes and the time window.
    assert [r["Name"] for r in listing(storage, cluster="d")] == ["other"]
    assert [r["Name"] for r in listing(storage, name="maint,project")] == ["project", "maint"]
    assert [r["Name"] for r in listing(storage, id="3")] == ["ignore"]
    assert [r["Name"] for r in listing(storage, nodes="n[1-3]")] == ["project", "maint"]
    window = {"start": str(at("2024-01-31T23:45")), "end": str(at("2024-02-01T01:00"))}
    assert [r["Name"] for r in listing(storage, **window)] == ["ignore", "project"]
    assert [r["Name"] for r in listing(storage, end=str(at("2024-01-31T22:10")))] == [
        "ignore",
        "project",
        "other",
    ]


def acct_admin(storage: Storage) -> Any:
    """sacctmgr's AcctAdmin call, answered by the dbd's Admin as the controller would."""
    admin = Admin(storage.engine)

    def call(request: dict[str, Any]) -> Mapping[str, Any]:
        answer = admin.run(
            request["verb"], request["kind"], request["where"], {}, False, "alice", False
        )
        return {
            "rows": [{"fields": r} for r in answer.rows],
            "columns": list(answer.columns),
            "defaults": list(answer.defaults),
        }

    return call


def test_sacctmgr_show_reservation_prints_slurms_columns(
    storage: Storage, capsys: pytest.CaptureFixture[str]
) -> None:
    example(storage)
    rollup(storage.engine, at("2024-02-01T00:05"))
    call = acct_admin(storage)
    assert sacctmgr(["-P", "show", "reservation", "names=project,maint"], call=call) == 0
    assert capsys.readouterr().out == (
        "Cluster|Name|TRES|TimeStart|TimeEnd|UnusedWall\n"
        "c|project|cpu=2|2024-01-31T22:00:00|2024-02-01T00:00:00|6300.000000\n"
        "c|maint|cpu=4|2024-01-31T22:30:00|2024-01-31T23:30:00|3600.000000\n"
    )
    words = ["-P", "-n", "list", "resv", "start=2024-01-31T23:45", "end=2024-02-01T01:00"]
    assert sacctmgr([*words, "format=name,id,flags,nodename"], call=call) == 0
    assert capsys.readouterr().out == "ignore|3|IGNORE_JOBS|n4\nproject|2||n3\n"
    # Without -P: Slurm's widths (Name 15, TRES 30), UnusedWall as a double.
    assert sacctmgr(["show", "reservation", "ids=1"], call=call) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["Cluster", "Name", "TRES", "TimeStart", "TimeEnd", "UnusedWall"]
    assert lines[1] == " ".join(["-" * 10, "-" * 15, "-" * 30, "-" * 19, "-" * 19, "-" * 10]) + " "
    assert lines[2].split() == [
        "c",
        "maint",
        "cpu=4",
        "2024-01-31T22:30:00",
        "2024-01-31T23:30:00",
        "3.6000e+03",  # print_fields_double: fitted to the width
    ]
    assert sacctmgr(["show", "reservation", "bogus"], call=call) == 1
    assert "Unknown condition: bogus" in capsys.readouterr().err
    assert sacctmgr(["show", "reservation", "start=yesterdayish"], call=call) == 1
    assert "Invalid time specification" in capsys.readouterr().err


# ---------------------------------------------------------------- the controller's outbox
def test_the_outbox_sends_reservations_and_node_events_apart() -> None:
    made = {"id": 4, "name": "maint", "start": 100, "end": 200, "flags": "MAINT"}
    node = {"node": "n1", "start": 50, "end": 0, "state": "DOWN", "reason": "", "cpus": 2}
    events = {
        3: json.dumps(node),
        5: json.dumps({"reservation": made}),
        6: json.dumps({**node, "end": 90}),
        8: json.dumps({"reservation": {**made, "deleted": True, "end": 150, "later": "x"}}),
    }
    record = pb.JobInfo(job_id=1).SerializeToString()
    request, seqs, event_seqs = batch({11: record}, events)
    assert seqs == [11] and [job.job_id for job in request.jobs] == [1]
    assert list(request.event_seqs) == [3, 6]
    assert [e.end for e in request.events] == [0, 90]
    assert list(request.resv_seqs) == [5, 8]
    assert [(r.id, r.end, r.deleted) for r in request.reservations] == [
        (4, 200, False),
        (4, 150, True),
    ]
    assert event_seqs == [3, 5, 6, 8]  # acknowledged up to the last, whatever its kind
    # (a key the wire lacks, as "later" above, is left out rather than stop deliveries)


# ---------------------------------------------------------------- sreport
def test_sreport_reservation_utilization(
    storage: Storage, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each reservation's CPUs over its whole time, allocated (its jobs) and idle."""
    example(storage)
    clock = at("2024-02-01T00:30")
    monkeypatch.setattr("dbd.admin.time", type("Clock", (), {"time": staticmethod(lambda: clock)}))
    admin = acct_admin(storage)
    window = ["start=2024-01-31T22:00", "end=2024-02-01T00:00"]

    def report(*words: str) -> str:
        argv = ["-P", *words[:-1], "reservation", "utilization", *window, "clusters=c"]
        assert sreport([*argv, *words[-1:]], admin=admin) == 0
        return capsys.readouterr().out

    assert report("-n", "names=project,maint,ignore") == (
        "c|ignore|2024-01-31T22:00:00|2024-02-01T00:00:00|cpu|60|180\n"
        "c|project|2024-01-31T22:00:00|2024-02-01T00:00:00|cpu|30|210\n"
        "c|maint|2024-01-31T22:30:00|2024-01-31T23:30:00|cpu|0|240\n"
    )
    assert report("maint").splitlines() == [
        "-" * 80,
        "Reservation Utilization 2024-01-31T22:00:00 - 2024-01-31T23:59:59",
        "Usage reported in TRES Minutes",
        "-" * 80,
        "Cluster|Name|Start|End|TRES Name|Allocated|Idle",
        "c|maint|2024-01-31T22:30:00|2024-01-31T23:30:00|cpu|0|240",
    ]
    columns = "format=res,name,count,totaltime,trestime,flags,nodes"  # "id": Idle, as in Slurm
    assert report("-n", columns) == (
        "3|ignore|2|02:00:00|04:00:00|IGNORE_JOBS|n4\n"
        "2|project|2|02:00:00|04:00:00||n3\n"
        "1|maint|4|01:00:00|04:00:00|MAINT|n[1-2]\n"
    )
    assert report("-n", "-t", "percent", "flags=maint,ignore_jobs") == (
        "c|ignore|2024-01-31T22:00:00|2024-02-01T00:00:00|cpu|25.00%|75.00%\n"
        "c|maint|2024-01-31T22:30:00|2024-01-31T23:30:00|cpu|0.00%|100.00%\n"
    )
