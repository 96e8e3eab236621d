"""PreemptParameters=reclaim_licenses end to end: a low-tier job holds the one ``fluent``
license on a node of its own; a high-tier job asking for it, with a node free for it,
requeues the holder and runs, then the holder runs again.

Slurm 22.05 has no PreemptParameters (its parser refuses the key: "Parsing error at
unrecognized key: PreemptParameters"); what it does without, measured there with these
settings, is ``test_without_it_the_job_waits_for_the_license``'s."""

from __future__ import annotations

from collections.abc import Callable

from tests.integration.cluster import Cluster

SETTINGS = (
    "KillWait=1",
    "PreemptType=preempt/partition_prio",
    "PreemptMode=REQUEUE",
    "PreemptParameters=reclaim_licenses",
    "Licenses=fluent:1",
    "PartitionName=high Nodes=ALL PriorityTier=2",
)


def test_a_job_waiting_for_a_license_requeues_its_holder(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=2, settings=SETTINGS)
    low = cluster.sbatch("-p", "debug", "-w", "node1", "-L", "fluent", "--wrap", "sleep 300")
    cluster.wait_state(low, {"RUNNING"})
    high = cluster.sbatch("-p", "high", "-w", "node2", "-L", "fluent", "--wrap", "sleep 1")
    assert cluster.wait_done(high, timeout=40)["state"] == "COMPLETED"

    def low_again() -> bool:
        job = cluster.job(low)
        return job["state"] == "RUNNING" and job["restarts"] == 1

    cluster.wait_for(low_again, 40, "the license holder was not requeued and run again")
    cluster.run("scancel", str(low))


def test_without_it_the_job_waits_for_the_license(make_cluster: Callable[..., Cluster]) -> None:
    """Slurm 22.05, measured: the high-tier job pends with reason Licenses, the holder
    keeps running (Restarts=0), and the waiting job runs once the holder ends."""
    plain = tuple(s for s in SETTINGS if not s.startswith("PreemptParameters"))
    cluster = make_cluster(nodes=2, settings=plain)
    low = cluster.sbatch("-p", "debug", "-w", "node1", "-L", "fluent", "--wrap", "sleep 300")
    cluster.wait_state(low, {"RUNNING"})
    high = cluster.sbatch("-p", "high", "-w", "node2", "-L", "fluent", "--wrap", "sleep 1")
    cluster.wait_for(lambda: cluster.job(high)["reason"] == "Licenses", 15, "no Licenses reason")
    assert (cluster.job(low)["state"], cluster.job(low)["restarts"]) == ("RUNNING", 0)
    cluster.run("scancel", str(low))
    assert cluster.wait_done(high, timeout=40)["state"] == "COMPLETED"
    assert cluster.job(low)["restarts"] == 0
