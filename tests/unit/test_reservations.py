"""Advance reservations: the controller's rules, and the scheduling core around them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core import BackfillParams, schedule
from controller.core.snapshot import ResvView
from controller.jobstate import Reason
from controller.reservations import Cluster, ReservationBook
from corral.errors import SlurmError
from tests.unit.scenario import NOW, cluster, job, node, partition

HOUR = 3600
CLUSTER = Cluster(
    nodes={f"n{i}": 4 for i in range(1, 5)},
    usable=frozenset({"n1", "n2", "n3", "n4"}),
    partitions={"batch": ("n1", "n2", "n3", "n4")},
    default_partition="batch",
)


def create(book: ReservationBook, at: Cluster = CLUSTER, **settings: str) -> str:
    values = {"starttime": "now", "duration": "60", "users": "root", **settings}
    return book.create(values, at, NOW).name


def test_a_reservation_takes_named_counted_or_all_nodes() -> None:
    book = ReservationBook()
    create(book, reservationname="maint", nodes="n[1-2]", flags="MAINT")
    resv = book.by_name["maint"]
    assert (resv.nodes, resv.cores, resv.flags) == (("n1", "n2"), 8, ("MAINT", "SPEC_NODES"))
    assert (resv.start, resv.end) == (NOW, NOW + HOUR)
    name = create(book, nodecnt="2", starttime=f"now+{2 * HOUR}")  # later: nodes free again
    assert name == "root_2" and book.by_name[name].nodes == ("n1", "n2")
    whole = create(book, nodes="ALL", reservationname="all", starttime=f"now+{5 * HOUR}")
    assert book.by_name[whole].flags == ("ALL_NODES",)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"starttime": None}, "A start time must be given"),
        ({"duration": None}, "An end time or duration must be given"),
        ({"users": None}, "Reservation request lacks users, groups or accounts"),
        ({"nodes": None}, "CoreCnt, Nodes, NodeCnt, TRES or Watts must be specified"),
        ({"nodes": "n9"}, "Invalid node name specified"),
        ({"users": "no-such-user-here"}, "Invalid user id"),
        ({"flags": "DAILY"}, "Flag DAILY is not supported"),
        ({"flags": "BOGUS"}, "Error parsing flags BOGUS"),
        ({"duration": "soon"}, "Invalid duration soon"),
        ({"endtime": "now+10"}, "StartTime \\+ Duration does not equal EndTime"),
        ({"nodes": None, "nodecnt": "9"}, "Requested nodes are busy"),
        ({"partitionname": "gpu"}, "Invalid partition name specified"),
        ({"color": "red"}, "Unknown parameter color"),
    ],
)
def test_bad_requests_get_slurms_errors(settings: dict[str, str | None], message: str) -> None:
    values = {"starttime": "now", "duration": "60", "users": "root", "nodes": "n1"}
    values.update(settings)
    given = {k: v for k, v in values.items() if v is not None}
    with pytest.raises(SlurmError, match=message):
        ReservationBook().create(given, CLUSTER, NOW)


def test_reservations_share_no_node_at_the_same_time_unless_one_may() -> None:
    book = ReservationBook()
    create(book, reservationname="a", nodes="n1")
    with pytest.raises(SlurmError, match="overlaps with another reservation"):
        create(book, nodes="n1", starttime="now+1800")
    create(book, nodes="n1", starttime=f"now+{HOUR}")  # right after it: fine
    create(book, nodes="n1", flags="OVERLAP", starttime="now+10")
    with pytest.raises(SlurmError, match="Duplicate reservation name"):
        create(book, reservationname="a", nodes="n2")


def test_nodes_running_jobs_past_the_start_are_busy_unless_maint_or_ignore_jobs() -> None:
    busy = replace(CLUSTER, running=[(("n1",), NOW + 2 * HOUR, ""), (("n2",), NOW + 60, "")])
    with pytest.raises(SlurmError, match="Requested nodes are busy"):
        create(ReservationBook(), busy, nodes="n1")
    create(ReservationBook(), busy, nodes="n1", flags="IGNORE_JOBS")
    create(ReservationBook(), busy, nodes="n1", flags="MAINT")
    create(ReservationBook(), busy, nodes="n2", starttime="now+120")  # ends before
    counted = ReservationBook().create(
        {"starttime": "now", "duration": "60", "users": "root", "nodecnt": "2"}, busy, NOW
    )
    assert counted.nodes == ("n3", "n4")


def test_who_may_run_in_a_reservation() -> None:
    book = ReservationBook()
    create(book, reservationname="r", nodes="n1", users="root,-nobody", accounts="lab")
    resv = book.by_name["r"]
    assert resv.allows("root", "") and resv.allows("alice", "lab")
    assert not resv.allows("alice", "physics") and not resv.allows("nobody", "lab")
    with pytest.raises(SlurmError, match="Access denied to requested reservation"):
        book.admit("r", "alice", "physics")
    with pytest.raises(SlurmError, match="Requested reservation is invalid"):
        book.admit("nope", "root", "")


def test_update_delete_end_and_the_journal_form() -> None:
    book = ReservationBook()
    create(book, reservationname="r", nodes="n1", starttime=f"now+{HOUR}")
    longer = book.update({"reservationname": "r", "duration": "120"}, CLUSTER, NOW)
    assert longer.end == NOW + 3 * HOUR
    both = book.update({"reservationname": "r", "flags+": "MAINT"}, CLUSTER, NOW)
    assert both.flags == ("MAINT", "SPEC_NODES")
    assert ReservationBook.from_json(book.to_json()).by_name == book.by_name
    in_use = replace(CLUSTER, running=[(("n1",), 0, "r")])
    with pytest.raises(SlurmError, match="Requested reservation is in use"):
        book.delete("r", in_use)
    assert book.ended(NOW + 3 * HOUR - 1) == []
    assert [r.name for r in book.ended(NOW + 3 * HOUR)] == ["r"]
    assert book.by_name == {}


# ---------------------------------------------------------------- the core
NODES = [node(f"n{i}", cpus=4) for i in range(1, 4)]
PART = partition("batch", "n[1-3]")


def snap_with(*jobs: object, resv: ResvView) -> object:
    return replace(cluster(NODES, [PART]).snapshot(jobs), reservations=(resv,))  # type: ignore[arg-type]


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
def test_jobs_outside_keep_off_reserved_nodes_while_it_lasts(
    backfill: BackfillParams | None,
) -> None:
    resv = ResvView("r", frozenset({"n1", "n2"}), NOW + HOUR, NOW + 2 * HOUR)
    long = job(1, num_tasks=4, time_limit=120, min_nodes=2, nodes_given=True)
    short = job(2, num_tasks=4, time_limit=30, min_nodes=2, nodes_given=True)
    plan = schedule(snap_with(long, resv=resv), NOW, backfill)  # type: ignore[arg-type]
    assert not plan.starts  # it would run into the reservation on n1 or n2
    plan = schedule(snap_with(short, resv=resv), NOW, backfill)  # type: ignore[arg-type]
    assert [s.nodes for s in plan.starts] == [("n1", "n2")]  # done before it starts
    forever = job(3, num_tasks=4)  # no time limit at all
    plan = schedule(snap_with(forever, resv=resv), NOW, backfill)  # type: ignore[arg-type]
    assert [s.nodes for s in plan.starts] == [("n3",)]


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
def test_jobs_in_a_reservation_run_on_its_nodes_from_its_start(
    backfill: BackfillParams | None,
) -> None:
    now_resv = ResvView("r", frozenset({"n2", "n3"}), NOW - 60, NOW + HOUR)
    mine = job(1, num_tasks=8, reservation="r", time_limit=600)
    plan = schedule(snap_with(mine, resv=now_resv), NOW, backfill)  # type: ignore[arg-type]
    assert [s.nodes for s in plan.starts] == [("n2", "n3")]
    later = replace(now_resv, start=NOW + HOUR, end=NOW + 2 * HOUR)
    plan = schedule(snap_with(mine, resv=later), NOW, backfill)  # type: ignore[arg-type]
    assert not plan.starts and plan.reasons[1] is Reason.RESERVATION
    if backfill is not None:
        assert plan.expected[1].start_time >= NOW + HOUR
        assert set(plan.expected[1].nodes) == {"n2", "n3"}
    gone = replace(mine, reservation="other")
    plan = schedule(snap_with(gone, resv=now_resv), NOW, backfill)  # type: ignore[arg-type]
    assert plan.reasons[1] is Reason.RESERVATION_DELETED


def test_a_waiting_reservation_job_holds_back_no_one_outside() -> None:
    resv = ResvView("r", frozenset({"n1"}), NOW - 60, NOW + HOUR)
    big = job(1, num_tasks=8, reservation="r", time_limit=10)  # never fits on n1 alone
    small = job(2, num_tasks=4, time_limit=10)
    plan = schedule(snap_with(big, small, resv=resv), NOW)  # type: ignore[arg-type]
    assert [s.job_id for s in plan.starts] == [2]
    assert plan.starts[0].nodes != ("n1",)


# ---------------------------------------------------------------- licenses alone (ANY_NODES)
LICENSED = replace(CLUSTER, licenses={"foo": 4})


def test_a_reservation_of_licenses_alone_needs_any_nodes() -> None:
    book = ReservationBook()
    with pytest.raises(SlurmError, match="Invalid node name specified"):
        create(book, LICENSED, licenses="foo:2")
    with pytest.raises(SlurmError, match="BurstBuffer, Licenses or Watts must be specified"):
        create(book, LICENSED, flags="ANY_NODES")
    name = create(book, LICENSED, reservationname="lic", licenses="foo:2", flags="LICENSE_ONLY")
    resv = book.by_name[name]
    assert (resv.nodes, resv.cores, resv.flags, resv.licenses) == ((), 0, ("ANY_NODES",), "foo:2")
    assert resv.view().any_nodes and not resv.view().nodes
    with_nodes = create(book, LICENSED, nodes="n1", licenses="foo:1", flags="ANY_NODES")
    assert book.by_name[with_nodes].flags == ("SPEC_NODES", "ANY_NODES")
    with pytest.raises(SlurmError, match="Invalid license specification"):
        create(book, LICENSED, licenses="foo:2", flags="ANY_NODES")  # 3 of 4 kept already
    assert ReservationBook.from_json(book.to_json()).by_name["lic"] == resv


def _licensed(*jobs: object, resv: ResvView) -> object:
    return replace(snap_with(*jobs, resv=resv), licenses={"foo": 4})  # type: ignore[type-var]


@pytest.mark.parametrize("backfill", [None, BackfillParams()], ids=["main", "backfill"])
def test_jobs_of_a_license_reservation_run_on_any_node_with_its_licenses(
    backfill: BackfillParams | None,
) -> None:
    lic = ResvView("lic", frozenset(), NOW - 60, NOW + HOUR, (("foo", 3),), any_nodes=True)
    mine = job(1, num_tasks=8, reservation="lic", time_limit=10, licenses="foo:4")
    plan = schedule(_licensed(mine, resv=lic), NOW, backfill)  # type: ignore[arg-type]
    assert [s.nodes for s in plan.starts] == [("n1", "n2")]  # any node; kept and free ones
    outside = job(2, num_tasks=1, time_limit=10, licenses="foo:2")  # one is free, 3 kept
    plan = schedule(_licensed(outside, resv=lic), NOW, backfill)  # type: ignore[arg-type]
    assert not plan.starts and plan.reasons[2] is Reason.LICENSES
    later = replace(lic, start=NOW + HOUR, end=NOW + 2 * HOUR)
    plan = schedule(_licensed(mine, resv=later), NOW, backfill)  # type: ignore[arg-type]
    assert not plan.starts and plan.reasons[1] is Reason.RESERVATION
    if backfill is not None:
        assert plan.expected[1].start_time >= NOW + HOUR


def test_an_any_nodes_job_uses_its_own_nodes_and_avoids_others() -> None:
    own = ResvView("own", frozenset({"n1"}), NOW - 60, NOW + HOUR, (("foo", 1),), any_nodes=True)
    mine = job(1, num_tasks=12, reservation="own", time_limit=10)
    plan = schedule(_licensed(mine, resv=own), NOW)  # type: ignore[arg-type]
    assert [s.nodes for s in plan.starts] == [("n1", "n2", "n3")]
    other = ResvView("other", frozenset({"n3"}), NOW - 60, NOW + HOUR)
    snap = replace(_licensed(mine, resv=own), reservations=(own, other))  # type: ignore[type-var]
    assert not schedule(snap, NOW).starts  # n3 is another reservation's  # type: ignore[arg-type]
