"""Advance reservations end to end: scontrol, sinfo -T, squeue, sbatch --reservation."""

from __future__ import annotations

import re
import signal
from collections.abc import Callable

from tests.integration.cluster import Cluster


def test_a_reservation_keeps_its_nodes_for_its_jobs(cluster: Cluster) -> None:
    made = cluster.run(
        "scontrol", "create", "reservation", "ReservationName=week", "Nodes=node1",
        "StartTime=now", "Duration=60", "Users=root", "Flags=MAINT",
    )  # fmt: skip
    assert made.stdout == "Reservation created: week\n"
    shown = cluster.run("scontrol", "show", "reservation", "week").stdout
    assert re.match(r"ReservationName=week StartTime=\S+ EndTime=\S+ Duration=01:00:00\n", shown)
    assert "   Nodes=node1 NodeCnt=1 CoreCnt=" in shown
    assert "Flags=MAINT,SPEC_NODES\n" in shown
    assert "   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE" in shown
    table = cluster.run("sinfo", "-T").stdout.splitlines()
    assert table[0].split() == [
        "RESV_NAME", "STATE", "START_TIME", "END_TIME", "DURATION", "NODELIST",
    ]  # fmt: skip
    assert table[1].split()[:2] == ["week", "ACTIVE"] and table[1].endswith("node1")
    states = cluster.run("sinfo", "-N", "-h", "-o", "%N %t").stdout.split("\n")
    assert "node1 maint" in states

    inside = cluster.sbatch("--reservation=week", "-w", "node1", "--wrap", "sleep 30")
    outside = cluster.sbatch("-w", "node1", "-t", "5", "--wrap", "true")
    assert cluster.wait_state(inside, "RUNNING", 20)["nodes"] == "node1"
    shown_job = cluster.run("scontrol", "show", "job", str(inside)).stdout
    assert "Reservation=week" in shown_job
    squeue = cluster.run("squeue", "-h", "-j", str(outside), "-o", "%T %r").stdout.strip()
    assert squeue == "PENDING Resources"

    busy = cluster.run("scontrol", "delete", "ReservationName=week", check=False)
    assert busy.returncode == 1
    assert busy.stderr.strip() == (
        "delete_reservation ReservationName=week: Requested reservation is in use"
    )
    cluster.run("scancel", str(inside))
    cluster.wait_done(inside)
    # Cancelled, the job is in use of the reservation until its processes are gone.
    cluster.wait_for(
        lambda: (
            cluster.run("scontrol", "delete", "ReservationName=week", check=False).returncode == 0
        ),
        20,
        "the reservation stayed in use",
    )
    assert cluster.wait_done(outside)["state"] == "COMPLETED"  # the nodes are everyone's again
    assert cluster.run("sinfo", "-T").stdout == "No reservations in the system\n"


def test_bad_requests_and_jobs_left_behind(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(settings=("KillWait=2", "SchedulerParameters=bf_interval=1"))

    def scontrol(*args: str) -> tuple[int, str]:
        done = cluster.run("scontrol", *args, check=False)
        return done.returncode, done.stdout + done.stderr

    assert scontrol("create", "res", "Nodes=node1", "Duration=10", "Users=root") == (
        1,
        "scontrol: error: A start time must be given.  No reservation created.\n",
    )
    assert scontrol("create", "res", "StartTime=now", "Duration=10", "Nodes=node1") == (
        1,
        "Error creating the reservation: Reservation request lacks users, groups or accounts\n",
    )
    assert scontrol("create", "res", "StartTime=now", "Duration=10", "Nodes=node1", "Colour=x") == (
        1,
        "scontrol: error: Unknown parameter Colour=x.  No reservation created.\n",
    )
    assert scontrol("show", "reservation", "nope") == (0, "Reservation nope not found\n")
    refused = cluster.run("sbatch", "--reservation=nope", "--wrap", "true", check=False)
    assert refused.returncode == 1
    assert refused.stderr == (
        "sbatch: error: Batch job submission failed: Requested reservation is invalid\n"
    )

    # A job waiting for a reservation that has not started, then the reservation goes.
    scontrol("create", "res", "ReservationName=later", "StartTime=now+600", "Duration=10",
             "Nodes=node2", "Users=root")  # fmt: skip
    waiting = cluster.sbatch("--reservation=later", "--wrap", "true")
    cluster.wait_for(
        lambda: cluster.job(waiting)["reason"] == "Reservation", 20, "no Reservation reason"
    )

    def planned() -> bool:
        out = cluster.run("squeue", "--start", "-h", "-j", str(waiting), "-o", "%S").stdout
        return out.strip() not in ("", "N/A")

    cluster.wait_for(planned, 20, "backfill planned no start in the reservation")
    assert scontrol("update", "ReservationName=later", "Duration=20") == (
        0,
        "Reservation updated.\n",
    )
    # It survives a controller restart.
    cluster.kill("controller", signal.SIGKILL)
    cluster.start_controller()
    assert "Duration=00:20:00" in cluster.run("scontrol", "show", "res").stdout
    cluster.run("scontrol", "delete", "reservation", "later")
    cluster.wait_for(
        lambda: cluster.job(waiting)["reason"] == "ReservationDeleted",
        20,
        "the job of a deleted reservation was not held",
    )
    cluster.run("scontrol", "release", str(waiting))
    assert cluster.wait_done(waiting)["state"] == "COMPLETED"


def test_a_reservation_of_licenses_alone(make_cluster: Callable[..., Cluster]) -> None:
    """Flags=ANY_NODES (or LICENSE_ONLY): no nodes, licenses kept for its jobs, which run
    on any node; as Slurm 22.05 shows and schedules it (measured)."""
    # The job outside waits for licenses and blocks the partition's main pass (docs/design.md
    # "Licenses"): the reservation's job starts by backfill, every second here.
    cluster = make_cluster(
        nodes=2, settings=("Licenses=foo:4", "SchedulerParameters=bf_interval=1")
    )
    refused = cluster.run(
        "scontrol", "create", "reservation", "ReservationName=lic", "Licenses=foo:2",
        "StartTime=now", "Duration=60", "Users=root", check=False,
    )  # fmt: skip
    assert (refused.returncode, refused.stderr) == (
        1,
        "Error creating the reservation: Invalid node name specified\n",
    )
    for name, flag in (("lic", "ANY_NODES"), ("lic2", "LICENSE_ONLY")):
        made = cluster.run(
            "scontrol", "create", "reservation", f"ReservationName={name}", "Licenses=foo:2",
            "StartTime=now", "Duration=60", "Users=root", f"Flags={flag}",
        )  # fmt: skip
        assert made.stdout == f"Reservation created: {name}\n"
    shown = cluster.run("scontrol", "show", "reservation", "lic").stdout
    assert "   Nodes=(null) NodeCnt=0 CoreCnt=0 Features=(null) PartitionName=(null) " in shown
    assert "Flags=ANY_NODES\n   TRES=(null)\n" in shown
    assert "Licenses=foo:2 State=ACTIVE" in shown
    table = cluster.run("sinfo", "-T", "-h").stdout.splitlines()
    assert table[0].split()[0] == "lic" and table[0].endswith("(null)")
    # Reserved= counts both in their window, one not started yet none; Free is what jobs
    # do not hold (Slurm 22.05, measured).
    cluster.run(
        "scontrol", "create", "reservation", "ReservationName=later", "Licenses=foo:4",
        "StartTime=now+2hours", "Duration=60", "Users=root", "Flags=ANY_NODES",
    )  # fmt: skip
    licenses = ("scontrol", "-o", "show", "licenses")
    assert cluster.run(*licenses).stdout == (
        "LicenseName=foo Total=4 Used=0 Free=4 Reserved=4 Remote=no\n"
    )

    outside = cluster.sbatch("-L", "foo:1", "--wrap", "sleep 30")  # all four are kept
    too_many = cluster.sbatch("-L", "foo:3", "--reservation=lic", "--wrap", "sleep 30")
    inside = cluster.sbatch("-L", "foo:2", "--reservation=lic", "-N2", "--wrap", "sleep 30")
    assert cluster.wait_state(inside, "RUNNING", 20)["nodes"] == "node[1-2]"
    for job_id in (outside, too_many):
        reason = cluster.run("squeue", "-h", "-j", str(job_id), "-o", "%T %r").stdout.strip()
        assert reason == "PENDING Licenses"
    assert cluster.run(*licenses).stdout == (
        "LicenseName=foo Total=4 Used=2 Free=2 Reserved=4 Remote=no\n"
    )
    cluster.run("scancel", str(inside))
    cluster.run("scontrol", "delete", "ReservationName=lic2")
    assert cluster.wait_state(outside, "RUNNING", 20)  # lic2's two are free again
