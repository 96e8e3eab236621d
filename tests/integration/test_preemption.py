"""Preemption end to end: a higher-tier job requeues the one in its way, which keeps its id."""

from __future__ import annotations

import os
from collections.abc import Callable

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
