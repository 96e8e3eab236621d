"""Batch jobs end to end through the real clients and daemons (issue 2)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.integration.cluster import DONE, Cluster


def test_submit_run_complete_with_output_and_environment(cluster: Cluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)  # Slurm makes no directory for the output
    script = work / "job.sh"
    script.write_text(
        "#!/bin/sh\n#SBATCH -J envjob\n#SBATCH -o out/%x-%j.txt\n#SBATCH -c 1\n"
        'env | sort\necho args: "$@"\n'
    )
    result = cluster.run("sbatch", str(script), "a1", "b2", cwd=work)
    assert result.stdout.startswith("Submitted batch job ")
    job_id = int(result.stdout.split()[-1])
    script.unlink()  # clients may delete the script right after sbatch returns
    job = cluster.wait_done(job_id)
    assert job["state"] == "COMPLETED"
    assert job["exit_status"] == 0
    out = (work / "out" / f"envjob-{job_id}.txt").read_text()
    env = dict(
        line.split("=", 1)
        for line in out.splitlines()
        if "=" in line and not line.startswith("args")
    )
    assert env["SLURM_JOB_ID"] == str(job_id)
    assert env["SLURM_JOB_NAME"] == "envjob"
    assert env["SLURM_JOB_NODELIST"] == env["SLURMD_NODENAME"]
    assert env["SLURM_SUBMIT_DIR"] == str(work)
    assert env["SLURM_CLUSTER_NAME"] == "corral"
    assert env["SLURM_NTASKS"] == "1"
    assert env["SLURM_JOB_NUM_NODES"] == "1"
    assert env["SLURM_JOB_PARTITION"] == "debug"
    assert env["SLURM_CPUS_PER_TASK"] == "1"  # given, so set even at its default
    assert env["SLURM_CONF"] == cluster.conf
    assert "args: a1 b2" in out


def test_exit_code_and_signal_recorded(cluster: Cluster) -> None:
    failing = cluster.sbatch("--wrap", "exit 3")
    killed = cluster.sbatch("--wrap", "kill -9 $$")
    job = cluster.wait_done(failing)
    assert (job["state"], job["exit_status"] >> 8, job["reason"]) == (
        "FAILED",
        3,
        "NonZeroExitCode",
    )
    job = cluster.wait_done(killed)
    assert (job["state"], job["exit_status"] & 0x7F) == ("FAILED", 9)
    shown = cluster.run("scontrol", "show", "job", str(failing)).stdout
    assert "ExitCode=3:0" in shown


def test_cancel_pending_and_running(cluster: Cluster) -> None:
    running = cluster.sbatch("--wrap", "sleep 60")
    cluster.wait_state(running, {"RUNNING"})
    held = cluster.sbatch("-H", "--wrap", "true")
    cluster.run("scancel", str(running), str(held))
    assert cluster.wait_done(running)["state"] == "CANCELLED"
    assert cluster.wait_done(held)["state"] == "CANCELLED"
    again = cluster.run("scancel", "-v", str(running), check=False)
    assert "Job/step already completing or completed" in again.stderr


def test_time_limit_ends_job_as_timeout(cluster: Cluster) -> None:
    # One minute is the smallest limit Slurm's time format can express.
    job_id = cluster.sbatch("-t", "1", "--wrap", "trap '' TERM; sleep 300")
    job = cluster.wait_state(job_id, {"RUNNING"})
    assert job["time_limit"] == 1
    job = cluster.wait_done(job_id, timeout=90)
    assert (job["state"], job["reason"]) == ("TIMEOUT", "TimeLimit")
    assert 60 <= job["end_time"] - job["start_time"] <= 60 + 2 + 3  # limit + KillWait + slack


def test_hold_and_release(cluster: Cluster) -> None:
    job_id = cluster.sbatch("--hold", "--wrap", "true")
    job = cluster.job(job_id)
    assert (job["state"], job["reason"], job["priority"]) == ("PENDING", "JobHeldUser", 0)
    time.sleep(1.2)  # a scheduling cycle passes and it stays held
    assert cluster.job(job_id)["state"] == "PENDING"
    cluster.run("scontrol", "hold", str(job_id))
    assert cluster.job(job_id)["reason"] == "JobHeldAdmin"
    cluster.run("scontrol", "release", str(job_id))
    assert cluster.wait_done(job_id)["state"] == "COMPLETED"


def test_requeue_running_job_runs_again(cluster: Cluster, tmp_path: Path) -> None:
    """scontrol requeue answers at once; the same job id runs again with
    SLURM_RESTART_COUNT 1, and no finished state is ever shown in between."""
    marker = tmp_path / "runs"
    script = f"echo run $SLURM_RESTART_COUNT >> {marker}; sleep 30"
    job_id = cluster.sbatch("--requeue", "--wrap", script)
    cluster.wait_state(job_id, {"RUNNING"})
    cluster.wait_for(marker.exists, 10, "first run did not start")
    began = time.monotonic()
    cluster.run("scontrol", "requeue", str(job_id))
    assert time.monotonic() - began < 2  # it does not wait for the job to end
    seen: set[str] = set()

    def running_again() -> bool:
        job = cluster.job(job_id)
        seen.add(str(job["state"]))
        return job["restarts"] == 1 and job["state"] == "RUNNING"

    cluster.wait_for(running_again, 30, "job was not requeued and run again")
    assert not seen & DONE, seen
    cluster.wait_for(lambda: marker.read_text().count("run") == 2, 10, "second run did not start")
    assert marker.read_text().splitlines() == ["run 0", "run 1"]
    cluster.run("scancel", str(job_id))
    assert cluster.wait_done(job_id)["state"] == "CANCELLED"


def test_sbatch_wait_returns_the_jobs_exit_code(cluster: Cluster) -> None:
    waited = cluster.run("sbatch", "--wait", "--wrap", "exit 7", check=False)
    assert waited.returncode == 7, waited.stderr
    assert cluster.run("sbatch", "--wait", "--wrap", "true").returncode == 0


def test_array_job_runs_every_task(cluster: Cluster, tmp_path: Path) -> None:
    job_id = cluster.sbatch(
        "--array=1-4%2",
        "-o",
        str(tmp_path / "a-%A_%a.out"),
        "--wrap",
        "echo $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID",
    )
    for task in range(1, 5):
        assert cluster.wait_done(f"{job_id}_{task}")["state"] == "COMPLETED"
        assert (tmp_path / f"a-{job_id}_{task}.out").read_text().split() == [str(job_id), str(task)]


def test_dependency_waits_for_the_first_job(cluster: Cluster, tmp_path: Path) -> None:
    first = cluster.sbatch("--wrap", "sleep 2")
    second = cluster.sbatch(f"--dependency=afterok:{first}", "--wrap", "true")
    never = cluster.sbatch(f"--dependency=afternotok:{first}", "--wrap", "true")
    cluster.wait_for(
        lambda: cluster.job(second)["reason"] == "Dependency", 10, "no Dependency reason"
    )
    # Slurm shows what is still awaited, and how it stands, in scontrol and squeue's %E.
    waiting = f"afterok:{first}(unfulfilled)"
    assert f" Dependency={waiting}\n" in cluster.run("scontrol", "show", "job", str(second)).stdout
    assert cluster.run("squeue", "-h", "-j", str(second), "-o", "%E").stdout == waiting + "\n"
    assert cluster.wait_done(second)["state"] == "COMPLETED"
    assert cluster.job(second)["start_time"] >= cluster.job(first)["end_time"]
    # Met: Slurm clears the field; never to be met: marked failed.
    assert " Dependency=(null)\n" in cluster.run("scontrol", "show", "job", str(second)).stdout
    cluster.wait_for(
        lambda: cluster.job(never)["reason"] == "DependencyNeverSatisfied", 10, "not failed"
    )
    failed = cluster.run("squeue", "-h", "-j", str(never), "-o", "%E").stdout
    assert failed == f"afternotok:{first}(failed)\n"
    cluster.run("scancel", str(never))


def test_squeue_and_sinfo_show_the_cluster(cluster: Cluster) -> None:
    job_id = cluster.sbatch("-J", "shown", "--wrap", "sleep 30")
    cluster.wait_state(job_id, {"RUNNING"})
    out = cluster.run("squeue").stdout.splitlines()
    assert (
        out[0]
        == "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)"
    )
    assert any(
        line.split()[:5] == [str(job_id), "debug", "shown", os.environ.get("USER", "root"), "R"]
        or line.split()[:3] == [str(job_id), "debug", "shown"]
        for line in out[1:]
    )
    sinfo = cluster.run("sinfo").stdout.splitlines()
    assert sinfo[0] == "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST"
    cluster.run("scancel", str(job_id))
    cluster.wait_done(job_id)


def test_finished_jobs_stay_visible_for_min_job_age(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(settings=("MinJobAge=2",))
    job_id = c.sbatch("--wrap", "true")
    c.wait_done(job_id)
    assert "COMPLETED" in c.run("squeue", "-t", "all", "-h", "-o", "%T", "-j", str(job_id)).stdout
    # Slurm: a job that ended is not among squeue's default states even when named, so
    # `squeue -h -j ID` prints nothing (and succeeds) while the controller still holds it...
    shown = c.run("squeue", "-h", "-j", str(job_id))
    assert (shown.stdout, shown.returncode) == ("", 0)
    # ...and once MinJobAge purged it, the id is unknown.
    c.wait_for(
        lambda: c.run("squeue", "-h", "-j", str(job_id), check=False).returncode == 1,
        10,
        "finished job was not purged after MinJobAge",
    )
    gone = c.run("squeue", "-h", "-j", str(job_id), check=False)
    assert gone.stderr == "slurm_load_jobs error: Invalid job id specified\n"


def test_cancelling_an_array_with_finished_tasks_cancels_the_rest(cluster: Cluster) -> None:
    job_id = cluster.sbatch(
        "--array=1-3", "--wrap", 'if [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then exit 0; fi; sleep 60'
    )
    cluster.wait_done(f"{job_id}_1")
    result = cluster.run("scancel", "-v", str(job_id))
    assert "error" not in result.stderr
    states = {cluster.wait_done(f"{job_id}_{t}")["state"] for t in (2, 3)}
    assert states == {"CANCELLED"}
    assert cluster.job(f"{job_id}_1")["state"] == "COMPLETED"


def test_a_pending_array_is_one_line_until_its_tasks_are_addressed(cluster: Cluster) -> None:
    job_id = cluster.sbatch("--array=1-10%4", "--hold", "--wrap", "true")

    def squeue(*args: str) -> list[str]:
        out = cluster.run("squeue", "-h", "-o", "%i %T", *args).stdout
        return sorted(out.splitlines())

    assert squeue() == [f"{job_id}_[1-10%4] PENDING"]
    assert len(squeue("-r")) == 10
    cluster.run("scancel", f"{job_id}_5")
    assert squeue() == [f"{job_id}_[1-4,6-10%4] PENDING"]
    assert f"{job_id}_5 CANCELLED" in squeue("-t", "all")
    assert squeue("-j", f"{job_id}_[2-3]") == [f"{job_id}_[2-3%4] PENDING"]
    cluster.run("scancel", str(job_id))
    assert squeue() == []


def test_backfill_starts_a_short_job_without_delaying_the_one_ahead(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(settings=("SchedulerParameters=bf_interval=1",))
    first = c.sbatch("-N", "1", "--exclusive", "-t", "2", "--wrap", "sleep 60")
    c.wait_state(first, {"RUNNING"})
    wide = c.sbatch("-N", "2", "--exclusive", "-t", "5", "--wrap", "true")
    short = c.sbatch("-N", "1", "--exclusive", "-t", "1", "--wrap", "true")
    long = c.sbatch("-N", "1", "--exclusive", "-t", "10", "--wrap", "true")
    assert c.wait_done(short)["state"] == "COMPLETED"

    def planned() -> bool:  # both expected starts, from a backfill pass that planned both
        return all(c.job(j)["start_time"] > 0 for j in (wide, long))

    c.wait_for(planned, 10, "no expected starts for the waiting jobs")
    began = c.job(first)["start_time"]
    wide_job, long_job = c.job(wide), c.job(long)
    seen = {
        key: (wide_job[key], long_job[key])
        for key in ("state", "reason", "start_time", "sched_nodes")
    }
    assert seen["state"] == ("PENDING", "PENDING"), seen
    assert wide_job["start_time"] >= began + 120, (began, seen)
    assert wide_job["sched_nodes"] == "node[1-2]", seen
    assert long_job["reason"] == "Priority", seen
    assert long_job["start_time"] >= wide_job["start_time"] + 300, seen
    start = c.run("squeue", "--start", "-h", "-j", str(wide), "-o", "%i %S").stdout.split()
    assert start[0] == str(wide) and start[1] != "N/A"
    c.run("scancel", str(first), str(wide), str(long))


def test_sprio_and_sshare_show_the_live_priorities(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(settings=("PriorityWeightAge=1000", "PriorityWeightJobSize=500"))
    running = c.sbatch("-N", "1", "--exclusive", "--wrap", "sleep 60")
    c.wait_state(running, {"RUNNING"})
    waiting = c.sbatch("-N", "2", "--exclusive", "--wrap", "true")
    c.wait_for(lambda: c.job(waiting)["reason"] == "Resources", 10, "job did not wait")
    # The job-size factor counts once the next priority pass has run.
    c.wait_for(lambda: c.job(waiting)["priority"] > 1, 30, "the priority was not recalculated")
    rows = c.run("sprio", "-h", "-o", "%i %Y %J").stdout.split()
    assert rows[0] == str(waiting)
    assert int(rows[1]) == c.job(waiting)["priority"]
    user = c.run("sshare", "-h", "-P", "-a").stdout
    assert "root|" in user
    c.run("scancel", str(running), str(waiting))


def test_aftercorr_tasks_follow_their_counterparts_and_deadlines_end_jobs(
    cluster: Cluster,
) -> None:
    first = cluster.sbatch("--array=1-3", "--wrap", 'exit "$((SLURM_ARRAY_TASK_ID == 2))"')
    second = cluster.sbatch("--array=1-3", f"--dependency=aftercorr:{first}", "--wrap", "true")
    for task in (1, 3):
        assert cluster.wait_done(f"{second}_{task}")["state"] == "COMPLETED"
    cluster.wait_for(
        lambda: cluster.job(f"{second}_2")["reason"] == "DependencyNeverSatisfied",
        10,
        "task 2 did not see its counterpart fail",
    )
    late = cluster.sbatch("--deadline=now+60", "-t", "10", "--wrap", "true")
    done = cluster.wait_done(late)
    assert (done["state"], done["reason"]) == ("DEADLINE", "DeadLine")
    cluster.run("scancel", str(second))
