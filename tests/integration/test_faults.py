"""Faults while jobs run: controller kill -9, agent restart, silent nodes (issue 2)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

from tests.integration.cluster import Cluster


def test_controller_kill9_during_500_jobs_loses_nothing(make_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=4, settings=("KillWait=2",))
    runs = tmp_path / "runs.txt"
    script = f"#!/bin/sh\necho $SLURM_JOB_ID >> {runs}\n"
    before = [c.submit(script, tmp_path) for _ in range(250)]
    c.wait_for(
        lambda: runs.exists() and len(runs.read_text().split()) >= 20, 60, "jobs did not start"
    )
    c.kill("controller", signal.SIGKILL)
    c.start_controller()
    after = [c.submit(script, tmp_path) for _ in range(250)]
    assert min(after) > max(before), "job ids must stay monotonic across a restart"
    every = before + after

    unfinished: dict[int, object] = {}  # the jobs not COMPLETED at the last look, whole

    def all_done() -> bool:
        jobs = {j["job_id"]: j for j in c.jobs()}
        unfinished.clear()
        for job_id in every:
            job = jobs.get(job_id)
            if job is None or job["state"] != "COMPLETED":
                unfinished[job_id] = job
        return not unfinished

    try:
        c.wait_for(all_done, 240, "not every job completed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- not completed ---\n{unfinished}") from None
    counts = Counter(int(x) for x in runs.read_text().split())
    assert set(counts) == set(every)
    assert [j for j, n in counts.items() if n != 1] == [], "a job ran more than once"


def test_agent_restart_while_job_runs(cluster: Cluster, tmp_path: Path) -> None:
    done = tmp_path / "done"
    job_id = cluster.sbatch("--wrap", f"sleep 3; echo finished > {done}")
    cluster.wait_state(job_id, {"RUNNING"})
    cluster.kill("agent", signal.SIGKILL)
    cluster.start_agent()
    job = cluster.wait_done(job_id, timeout=30)
    assert job["state"] == "COMPLETED"
    assert done.read_text() == "finished\n"


def test_agent_down_while_job_ends_result_is_kept(cluster: Cluster, tmp_path: Path) -> None:
    job_id = cluster.sbatch("--wrap", "sleep 1; exit 7")
    cluster.wait_state(job_id, {"RUNNING"})
    cluster.kill("agent", signal.SIGKILL)
    time.sleep(2.5)  # the job ends while nobody is there to report it
    cluster.start_agent()
    job = cluster.wait_done(job_id, timeout=30)
    assert (job["state"], job["exit_status"] >> 8) == ("FAILED", 7)


def test_silent_node_goes_down_and_its_jobs_are_handled(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=1, settings=("SlurmdTimeout=4", "KillWait=1"))
    requeued = c.sbatch("--requeue", "--wrap", "sleep 300")
    c.wait_state(requeued, {"RUNNING"})
    # RUNNING is the controller's word: the agent may not have started it yet.
    c.wait_for(lambda: c.job_processes(requeued), 20, "the job's script never ran")
    c.kill("agent", signal.SIGSTOP)
    try:
        c.wait_for(
            lambda: "*" in c.run("sinfo", "-h", "-o", "%t").stdout,
            10,
            "node never shown as not responding",
        )
        c.wait_for(
            lambda: c.run("sinfo", "-h", "-o", "%t").stdout.strip() == "down*",
            20,
            "node did not go DOWN",
        )
        job = c.job(requeued)
        assert (job["state"], job["restarts"]) == ("PENDING", 1)
        assert c.job_processes(requeued, restarts=0), "the silent node's run went with it"
    finally:
        c.kill("agent", signal.SIGCONT)
    # Back, the node reports the run it kept, stale now: the controller has it ended.
    c.wait_for(lambda: not c.job_processes(requeued, restarts=0), 20, "the stale run lived on")
    c.run("scancel", str(requeued))
    c.wait_for(lambda: not c.job_processes(requeued), 20, "the cancelled job lived on")


def test_silent_node_fails_a_job_that_cannot_requeue(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=1, settings=("SlurmdTimeout=4", "KillWait=1"))
    job_id = c.sbatch("--no-requeue", "--wrap", "sleep 300")
    c.wait_state(job_id, {"RUNNING"})
    c.wait_for(lambda: c.job_processes(job_id), 20, "the job's script never ran")
    c.kill("agent", signal.SIGSTOP)
    try:
        job = c.wait_done(job_id, timeout=20)
        assert job["state"] == "NODE_FAIL"
        assert c.job_processes(job_id), "the silent node's run went with it"
    finally:
        c.kill("agent", signal.SIGCONT)
    # Back, the node reports the run it kept, of a job that has ended: it is ended too.
    c.wait_for(lambda: not c.job_processes(job_id), 20, "the failed job's run lived on")
