"""Team queues on a live cluster (queues.conf): borrowing, reclaim and return.

Two teams are each guaranteed half of 8 GPUs. Team A, alone, borrows all 8;
when team B's jobs come, the scheduler reclaims B's guarantee by requeueing
A's over-quota jobs (never those within A's guarantee), B's jobs start, and
A's requeued jobs come back once B's are done. With PreemptMode=SUSPEND and
queues of CPUs, the borrower is suspended instead, and goes on once B's job
has ended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: Four nodes of 2 GPUs (and as many CPUs as this host: 2 on CI's); Slurm's
#: JobRequeue default keeps requeueing on.
SETTINGS = ("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:2", "KillWait=1")
QUEUES = """\
QueueName=teama Accounts=teama Guarantee=gres/gpu=4
QueueName=teamb Accounts=teamb Guarantee=gres/gpu=4 Preemptible=no
"""


def running(c, ids: list[int]) -> list[int]:  # type: ignore[no-untyped-def]
    return [j["job_id"] for j in c.jobs(*ids) if j["state"] == "RUNNING"]


def test_a_team_reclaims_its_guarantee_and_the_borrower_comes_back(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=4, settings=SETTINGS, start=False)
    Path(os.path.dirname(c.conf), "queues.conf").write_text(QUEUES)
    c.start()
    a = [c.sbatch("-A", "teama", "--gres=gpu:1", "--wrap", "sleep 300") for _ in range(8)]
    c.wait_for(lambda: len(running(c, a)) == 8, 30, "team A did not borrow all 8 GPUs")
    b = [c.sbatch("-A", "teamb", "--gres=gpu:2", "--wrap", "sleep 10") for _ in range(2)]
    c.wait_for(lambda: len(running(c, b)) == 2, 30, "team B did not get its guarantee back")
    kept = running(c, a)
    assert len(kept) == 4, kept  # A's guarantee is protected
    requeued = [j for j in c.jobs(*a) if j["restarts"] == 1]
    assert len(requeued) == 4, c.jobs(*a)
    shown = c.run("scontrol", "show", "job", str(requeued[0]["job_id"])).stdout
    assert "Reclaim" in shown or "reclaim" in shown, shown
    # A third job of B's does not fit its guarantee, and B may not borrow: it waits
    # with its queue's reason while A holds the rest.
    third = c.sbatch("-A", "teamb", "--gres=gpu:1", "--wrap", "sleep 1")
    c.wait_for(lambda: c.job(third)["reason"] == "QueueGuarantee", 20, "B's third job did not wait")
    # B's first two end: B's third runs (by fair share now, reclaiming one more of A's
    # jobs if it must), and once it is done all of A's jobs run again.
    assert c.wait_done(third, 60)["state"] == "COMPLETED"
    c.wait_for(lambda: len(running(c, a)) == 8, 60, "team A's requeued jobs did not come back")
    c.run("scancel", *map(str, a))


CPUS = os.cpu_count() or 1
#: Reclaim alone takes victims: one partition, so PreemptType's tiers preempt nobody.
SUSPEND = ("PreemptType=preempt/partition_prio", "PreemptMode=SUSPEND,GANG", "KillWait=1")
CPU_QUEUES = """\
QueueName=teama Accounts=teama Guarantee=cpu=1
QueueName=teamb Accounts=teamb Guarantee=cpu=1
"""


def cpus_allocated(c, queue: str) -> int:  # type: ignore[no-untyped-def]
    """The CPUs ``corral queues`` says ``queue`` holds."""
    doc = json.loads(c.run("corral", "queues", "--json").stdout)
    (mine,) = (q for q in doc["queues"] if q["name"] == queue)
    return sum(r["allocated"] for r in mine["resources"] if r["resource"] == "cpu")


@pytest.mark.skipif(CPUS < 2, reason="two teams of one CPU each need two CPUs")
def test_a_reclaim_victim_whose_preempt_mode_is_suspend_is_suspended_then_resumed(
    make_cluster,
) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=1, settings=SUSPEND, start=False)
    Path(os.path.dirname(c.conf), "queues.conf").write_text(CPU_QUEUES)
    c.start()
    a = [c.sbatch("-A", "teama", "--mem=16", "--wrap", "sleep 300") for _ in range(CPUS)]
    c.wait_for(lambda: len(running(c, a)) == CPUS, 30, "team A did not borrow every CPU")
    b = c.sbatch("-A", "teamb", "--mem=16", "--wrap", "sleep 3")
    c.wait_state(b, {"RUNNING"}, timeout=30)
    (victim,) = [j["job_id"] for j in c.jobs(*a) if j["state"] == "SUSPENDED"]
    shown = c.run("scontrol", "show", "job", str(victim)).stdout
    assert f"Preempted (suspend) for job {b}" in shown and "reclaimed" in shown, shown
    assert cpus_allocated(c, "teama") == CPUS - 1  # the CPU it lends is B's now
    assert c.wait_done(b, timeout=30)["state"] == "COMPLETED"
    c.wait_state(victim, {"RUNNING"}, timeout=30)
    assert cpus_allocated(c, "teama") == CPUS
    assert all(j["restarts"] == 0 for j in c.jobs(*a))  # suspended, never requeued
    c.run("scancel", *map(str, a))
