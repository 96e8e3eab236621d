"""Preemption end to end: a higher-tier job requeues the one in its way, which keeps its id."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from corral.timefmt import format_timestamp
from tests.integration.cluster import Cluster

CPUS = os.cpu_count() or 1
SETTINGS = (
    "KillWait=1",
    "PreemptType=preempt/partition_prio",
    "PreemptMode=REQUEUE",
    "PartitionName=high Nodes=ALL PriorityTier=2",
)


def test_a_preempted_job_is_requeued_and_runs_again(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    runs = cluster.dir / "runs.txt"
    low = cluster.sbatch(
        "-p", "debug", "-n", str(CPUS), "--wrap", f"echo $SLURM_RESTART_COUNT >> {runs}; sleep 300"
    )  # fmt: skip
    cluster.wait_for(lambda: runs.exists(), 20, "the low job did not start")
    seen: set[str] = set()
    high = cluster.sbatch("-p", "high", "-n", str(CPUS), "--wrap", "sleep 1")

    def low_again() -> bool:
        job = cluster.job(low)
        seen.add(job["state"])
        return job["state"] == "RUNNING" and job["restarts"] == 1

    cluster.wait_for(low_again, 40, "the preempted job did not run again")
    cluster.wait_for(lambda: len(runs.read_text().split()) == 2, 20, "no second run")
    assert cluster.job(high)["state"] == "COMPLETED"
    assert seen <= {"RUNNING", "PENDING"}, seen  # never shown as ended in between
    assert runs.read_text().split() == ["0", "1"]
    cluster.run("scancel", str(low))


def test_the_job_that_touched_its_checkpoint_file_is_the_one_preempted(
    make_cluster: Callable[..., Cluster],
) -> None:
    """Two jobs fill the two nodes. A step of the older one saves its state: it touches
    the file its CORRAL_CHECKPOINT_FILE names (its own, in the step's directory) and
    exits at once. ``scontrol show job`` shows the checkpoint, and a job of a higher
    tier then takes the older job's node rather than the younger's, which has run less
    since its start than the older has since its checkpoint."""
    cluster = make_cluster(nodes=2, settings=SETTINGS)
    go, files = cluster.dir / "go", cluster.dir / "files"
    step = f'touch "$CORRAL_CHECKPOINT_FILE"; stat -c "%n %Y" "$CORRAL_CHECKPOINT_FILE" >> {files}'
    script = (
        f"while [ ! -e {go} ]; do sleep 0.1; done\n"
        f'echo "$CORRAL_CHECKPOINT_FILE batch" >> {files}\n'
        f"srun sh -c '{step}'\n"
        "sleep 300\n"
    )
    older = cluster.sbatch("-p", "debug", "-w", "node1", "--exclusive", "--wrap", script)
    cluster.wait_state(older, {"RUNNING"})
    younger = cluster.sbatch("-p", "debug", "-w", "node2", "--exclusive", "--wrap", "sleep 300")
    began = int(cluster.wait_state(younger, {"RUNNING"})["start_time"])

    def shown() -> str:
        return cluster.run("scontrol", "show", "job", str(older)).stdout

    assert "Checkpointed=" not in shown()
    # A checkpoint in the second the younger job started would tie with it.
    cluster.wait_for(lambda: time.time() >= began + 1, 5, "the clock did not move on")
    go.touch()
    cluster.wait_for(lambda: "Checkpointed=" in shown(), 30, "no checkpoint shown")
    (batch_file, _), (step_file, touched) = (
        line.split() for line in files.read_text().splitlines()
    )
    assert batch_file.endswith(f"/node1/job{older}.0/checkpoint/saved")
    assert step_file.endswith(f"/node1/step{older}.0/checkpoint/saved")
    assert f"Checkpointed={format_timestamp(int(touched))}" in shown()
    cluster.wait_for(lambda: not os.path.exists(step_file), 10, "the step's file was kept")

    cluster.sbatch("-p", "high", "-N1", "--exclusive", "--wrap", "sleep 1")
    cluster.wait_for(lambda: cluster.job(older)["restarts"] == 1, 40, "the older job stayed")
    assert (cluster.job(younger)["state"], cluster.job(younger)["restarts"]) == ("RUNNING", 0)
    cluster.run("scancel", str(older), str(younger))
