"""scontrol suspend and resume on a live cluster, its jobs contained in cgroups.

A job that counts every 0.2 s is suspended: the count stops (its cgroup frozen
once PreemptParameters=suspend_grace_time has passed since its SIGTSTP),
its memory cgroup stays, and its CPUs go to another job that was waiting for
them; its resume is refused while that job holds them ("Requested nodes are
busy"), then taken: the count goes on and its end moves by the time it was
suspended. Suspended again and cancelled, it ends CANCELLED with nothing left
running. A job that traps SIGTSTP is told of its suspension and goes on
through its grace before it stops. Needs root and a cgroup file system, as
test_containment.py does.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nodeagent import cgroups
from tests.integration.cluster import Cluster
from tests.integration.test_containment import LAYOUT, SETTINGS, WHY_NOT, alive

pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no cgroups: {WHY_NOT}")

CPUS = os.cpu_count() or 1
#: Where processes are held in cgroup v2, a suspended run's cgroup is frozen.
FROZEN_V2 = any(version == cgroups.V2 and "procs" in roles for version, _, roles in LAYOUT)
#: Counts in ``count`` every 0.2 s; its shell's pid in ``counter.pid``.
COUNTER = "echo $$ > counter.pid; i=0; while :; do i=$((i+1)); echo $i > count; sleep 0.2; done"
#: Counts as COUNTER does, and writes the count it has reached in ``told`` when it is
#: sent SIGTSTP (it waits for its sleeps, so that the trap runs at once).
TRAPPED = (
    "trap 'echo $i > told' TSTP; i=0; "
    "while :; do i=$((i+1)); echo $i > count; sleep 0.2 & wait $!; done"
)


def count(cluster: Cluster, name: str = "count") -> int:
    """The last number a counting job wrote in its file ``name`` (0: none yet)."""
    path = cluster.dir / name
    for _ in range(20):  # the shell's `>` empties the file before it writes the number
        text = path.read_text().strip() if path.exists() else ""
        if text.isdigit() or not path.exists():
            break
        time.sleep(0.01)
    return int(text) if text.isdigit() else 0


def still(cluster: Cluster, name: str = "count", over: float = 1.0) -> bool:
    """Whether the count in ``name`` stays put for ``over`` seconds."""
    before = count(cluster, name)
    time.sleep(over)
    return count(cluster, name) == before


def _rundir(cluster: Cluster, job: int) -> str:
    return str(cluster.dir / "spool" / "node1" / f"job{job}.0")


def test_a_suspended_job_stops_lends_its_cpus_and_resumes_later(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS, start=False)
    (cluster.dir / "cgroup.conf").write_text("ConstrainRAMSpace=yes\n")
    cluster.start()
    job = cluster.sbatch("-o", "c.out", "-c", str(CPUS), "--mem=64", "-t", "5", "--wrap", COUNTER)
    cluster.wait_for(lambda: count(cluster) > 2, 20, "the counter never counted")
    running = cluster.job(job)
    assert running["state"] == "RUNNING"
    waiting = cluster.sbatch("-o", "/dev/null", "-c", "1", "--mem=32", "--wrap", "sleep 300")
    assert cluster.job(waiting)["state"] == "PENDING"

    cluster.run("scontrol", "suspend", str(job))
    suspended = cluster.job(job)
    assert suspended["state"] == "SUSPENDED" and suspended["suspend_time"] > 0
    squeue = cluster.run("squeue", "-h", "-j", str(job), "-o", "%t %T").stdout.split()
    assert squeue == ["S", "SUSPENDED"]
    cluster.wait_for(lambda: still(cluster), 15, "the suspended job kept counting")
    assert still(cluster, over=1.5)
    paths = cgroups.run_paths(_rundir(cluster, job))
    assert os.path.isdir(paths["memory"])  # its memory stays its own
    if FROZEN_V2:  # frozen, not stopped by signals
        assert "frozen 1" in Path(paths["procs"], "cgroup.events").read_text()
    # Its CPUs go to the job that waited for them.
    cluster.wait_state(waiting, {"RUNNING"}, timeout=20)
    refused = cluster.run("scontrol", "resume", str(job), check=False)
    assert refused.returncode == 1
    assert f"Requested nodes are busy for job {job}" in refused.stderr
    assert cluster.job(job)["state"] == "SUSPENDED"
    again = cluster.run("scontrol", "suspend", str(job), check=False)
    assert (again.returncode, again.stderr.splitlines()[0]) == (
        1,
        f"Job is not running for job {job}",
    )

    cluster.run("scancel", str(waiting))
    cluster.wait_done(waiting)
    # A node with only a suspended job is idle, as in Slurm: its CPUs are free.
    cluster.wait_for(
        lambda: cluster.run("sinfo", "-h", "-o", "%t").stdout.strip() == "idle",
        10,
        "the node of a suspended job was not idle",
    )
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "JobState=SUSPENDED" in shown and "SuspendTime=None" not in shown
    cluster.run("scontrol", "resume", str(job))
    resumed = cluster.job(job)
    assert resumed["state"] == "RUNNING"
    paused = int(resumed["suspended_secs"])
    assert paused >= 2
    assert resumed["end_time"] == resumed["start_time"] + 5 * 60 + paused
    counted = count(cluster)
    cluster.wait_for(lambda: count(cluster) > counted + 2, 15, "the resumed job never counted")
    assert cluster.run("squeue", "-h", "-j", str(job), "-o", "%t").stdout.strip() == "R"
    not_suspended = cluster.run("scontrol", "resume", str(job), check=False)
    assert f"Job is not suspended for job {job}" in not_suspended.stderr

    # Suspended again and cancelled: the kill thaws it, and nothing is left.
    pid = int((cluster.dir / "counter.pid").read_text())
    cluster.run("scontrol", "suspend", str(job))
    cluster.wait_for(lambda: still(cluster), 15, "the suspended job kept counting")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    cluster.wait_for(lambda: not alive(pid), 10, f"the counter {pid} outlived its job")
    assert cluster.job(job)["suspended_secs"] >= paused


def test_a_suspended_job_is_told_with_sigtstp_and_stopped_after_its_grace(
    make_cluster: Callable[..., Cluster],
) -> None:
    """PreemptParameters=suspend_grace_time as slurmstepd applies it to every
    suspension: SIGTSTP first, so the job can prepare, and it stops only later."""
    settings = (*SETTINGS, "PreemptParameters=suspend_grace_time=4")
    cluster = make_cluster(nodes=1, settings=settings)
    job = cluster.sbatch("-o", "c.out", "--wrap", TRAPPED)
    cluster.wait_for(lambda: count(cluster) > 2, 20, "the counter never counted")
    assert not (cluster.dir / "told").exists()
    cluster.run("scontrol", "suspend", str(job))
    assert cluster.job(job)["state"] == "SUSPENDED"
    cluster.wait_for(lambda: count(cluster, "told") > 0, 15, "the job was never sent SIGTSTP")
    told = count(cluster, "told")
    cluster.wait_for(lambda: count(cluster) > told, 15, "the job did not go on in its grace")
    cluster.wait_for(lambda: still(cluster), 15, "the job kept counting after its grace")
    cluster.run("scontrol", "resume", str(job))
    counted = count(cluster)
    cluster.wait_for(lambda: count(cluster) > counted + 2, 15, "the resumed job never counted")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"


def test_an_uncontained_job_is_stopped_by_signals(make_cluster: Callable[..., Cluster]) -> None:
    """Without cgroups (proctrack/pgid) the run's process group gets SIGSTOP and SIGCONT."""
    cluster = make_cluster(nodes=1, settings=("KillWait=1", "ProctrackType=proctrack/pgid"))
    job = cluster.sbatch("-o", "c.out", "--wrap", COUNTER)
    cluster.wait_for(lambda: count(cluster) > 2, 20, "the counter never counted")
    cluster.run("scontrol", "suspend", str(job))
    cluster.wait_for(lambda: still(cluster), 15, "the suspended job kept counting")
    pid = int((cluster.dir / "counter.pid").read_text())
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state == "T"
    cluster.run("scontrol", "resume", str(job))
    counted = count(cluster)
    cluster.wait_for(lambda: count(cluster) > counted + 2, 15, "the resumed job never counted")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"


def test_a_resume_lost_while_the_agent_was_away_reaches_it_when_it_returns(
    make_cluster: Callable[..., Cluster],
) -> None:
    """The controller's view wins: a job resumed while its agent was down is thawed
    by the agent that comes back (it says again what it holds suspended)."""
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    job = cluster.sbatch("-o", "c.out", "--wrap", COUNTER)
    cluster.wait_for(lambda: count(cluster) > 2, 20, "the counter never counted")
    cluster.run("scontrol", "suspend", str(job))
    cluster.wait_for(lambda: still(cluster), 15, "the suspended job kept counting")
    cluster.kill("agent", signal.SIGKILL)
    cluster.run("scontrol", "resume", str(job))
    assert cluster.job(job)["state"] == "RUNNING"
    assert still(cluster, over=1.5)  # nobody told the job yet
    cluster.start_agent()
    counted = count(cluster)
    cluster.wait_for(lambda: count(cluster) > counted + 2, 20, "the job stayed suspended")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"


def test_sacct_shows_the_suspension_and_the_time_suspended(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path / "acct", 1, ("KillWait=1",), accounting=True)
    try:
        cluster.start()
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "sleep 300")
        cluster.wait_state(job, {"RUNNING"}, timeout=20)
        cluster.run("scontrol", "suspend", str(job))

        def sacct() -> list[str]:
            out = cluster.run("sacct", "-X", "-n", "-P", "-o", "State,Suspended", "-j", str(job))
            return out.stdout.strip().split("|")

        cluster.wait_for(lambda: sacct()[0] == "SUSPENDED", 20, "sacct never said SUSPENDED")
        time.sleep(2)
        cluster.run("scontrol", "resume", str(job))
        cluster.run("scancel", str(job))
        cluster.wait_done(job)
        cluster.wait_for(lambda: sacct()[0].startswith("CANCELLED"), 20, "sacct kept it running")
        hours, minutes, seconds = (int(part) for part in sacct()[1].split(":"))
        assert (hours, minutes) == (0, 0) and seconds >= 2
    finally:
        cluster.stop()


def test_a_suspended_jobs_steps_stop_with_it(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    (cluster.dir / "counter.sh").write_text(COUNTER + "\n")
    job = cluster.sbatch("-o", "c.out", "--wrap", "srun sh counter.sh")
    cluster.wait_for(lambda: count(cluster) > 2, 30, "the step never counted")
    cluster.run("scontrol", "suspend", str(job))
    cluster.wait_for(lambda: still(cluster), 15, "the suspended job's step kept counting")
    assert still(cluster, over=1.5)
    cluster.run("scontrol", "resume", str(job))
    counted = count(cluster)
    cluster.wait_for(lambda: count(cluster) > counted + 2, 15, "the step never went on")
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"
