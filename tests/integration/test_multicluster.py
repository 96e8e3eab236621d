"""Two clusters on this machine sharing one corral-dbd, the cluster key and the CA, as
Slurm's multi-cluster operation shares slurmdbd and MUNGE's key: ``-M`` on one
cluster's clients reaches the other's controller through the local daemon
(corral/clusterroute.py), and ``sbatch -M a,b`` sends a job to the cluster that would
start it first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.client import Client, agent_socket_path
from corral.config import load
from corral.errors import SlurmError
from tests.integration.cluster import Cluster

HOLD = "while [ ! -e go ]; do sleep 0.2; done"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Cluster]]:
    top = tmp_path_factory.mktemp("multicluster")
    alpha = Cluster(top / "alpha", 1, ("KillWait=2",), accounting=True, name="alpha")
    beta: Cluster | None = None
    try:
        alpha.start()
        beta = Cluster(top / "beta", 2, ("KillWait=2",), name="beta", dbd_of=alpha).start()
        both = "alpha|beta|"
        alpha.wait_for(
            lambda: both in "".join(_registered(alpha)), 30, "beta never registered with dbd"
        )
        yield alpha, beta
    finally:
        if beta is not None:
            beta.stop()
        alpha.stop()


def _registered(c: Cluster) -> list[str]:
    shown = c.run("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster", check=False)
    return sorted(f"{line}|" for line in shown.stdout.split())


def test_clients_reach_the_other_cluster_named_with_m(pair: tuple[Cluster, Cluster]) -> None:
    alpha, beta = pair
    work: Path = beta.dir
    (work / "hold.sh").write_text(f"#!/bin/sh\n{HOLD}\n")
    submitted = alpha.run(
        "sbatch", "-M", "beta", "-D", str(work), "-o", "/dev/null", str(work / "hold.sh")
    ).stdout
    assert submitted.startswith("Submitted batch job ") and submitted.endswith(
        " on cluster beta\n"
    ), submitted
    job = int(submitted.split()[3])
    beta.wait_state(job, {"RUNNING"})
    assert alpha.jobs() == []  # the job is beta's alone

    queue = alpha.run("squeue", "-M", "beta", "-h", "-o", "%i %T").stdout
    assert queue == f"CLUSTER: beta\n{job} RUNNING\n", queue
    both = alpha.run("squeue", "-M", "all", "-h", "-o", "%i").stdout
    assert both == f"CLUSTER: alpha\nCLUSTER: beta\n{job}\n", both
    nodes = alpha.run("sinfo", "-M", "alpha,beta", "-h", "-o", "%D").stdout
    assert nodes == "CLUSTER: alpha\n1\nCLUSTER: beta\n2\n", nodes
    shown = alpha.run("scontrol", "-M", "beta", "show", "job", str(job)).stdout
    assert f"JobId={job} " in shown and "JobState=RUNNING" in shown, shown

    waiting = alpha.run(
        "sbatch", "--parsable", "-M", "beta", "-N2", "--exclusive", "--wrap", "true"
    ).stdout
    waiting_id = int(waiting.split(";")[0])
    assert waiting == f"{waiting_id};beta\n", waiting
    beta.wait_state(waiting_id, {"PENDING"})
    priorities = alpha.run("sprio", "-M", "beta", "-h", "-o", "%i").stdout
    assert priorities.split() == [str(waiting_id)], priorities
    assert alpha.run("sprio", "-h", "-o", "%i").stdout == ""  # alpha's own: none

    alpha.run("scancel", "-M", "beta", str(job), str(waiting_id))
    assert beta.wait_done(job)["state"] == "CANCELLED"
    assert beta.wait_done(waiting_id)["state"] == "CANCELLED"


def test_sbatch_m_picks_the_cluster_that_starts_the_job_first(
    pair: tuple[Cluster, Cluster],
) -> None:
    alpha, beta = pair
    work: Path = alpha.dir
    (work / "hold.sh").write_text(f"#!/bin/sh\n{HOLD}\n")
    busy = alpha.sbatch("-D", str(work), "-o", "/dev/null", "--exclusive", str(work / "hold.sh"))
    alpha.wait_state(busy, {"RUNNING"})
    line = alpha.run(
        "sbatch", "-M", "alpha,beta", "-t", "5", "-o", "/dev/null", "--wrap", "true"
    ).stdout
    assert line.endswith(" on cluster beta\n"), line
    assert beta.wait_done(int(line.split()[3]))["state"] == "COMPLETED"
    (work / "go").touch()
    assert alpha.wait_done(busy)["state"] == "COMPLETED"

    # Both idle: the first named wins the tie.
    line = alpha.run("sbatch", "-M", "beta,alpha", "-o", "/dev/null", "--wrap", "true").stdout
    assert line.endswith(" on cluster beta\n"), line


def test_a_cluster_nobody_registered_is_refused_in_slurms_words(
    pair: tuple[Cluster, Cluster],
) -> None:
    alpha, _ = pair
    for command in (("squeue", "-M", "gamma"), ("sbatch", "-M", "gamma", "--wrap", "true")):
        refused = alpha.run(*command, check=False)
        assert refused.returncode == 1
        assert refused.stderr == (
            f"{command[0]}: error: 'gamma' can't be reached now, or it is an invalid entry "
            "for --cluster.  Use 'sacctmgr list clusters' to see available clusters.\n"
        ), refused.stderr
    several = alpha.run("scontrol", "-M", "alpha,beta", "show", "config", check=False)
    assert several.returncode == 1
    assert "scontrol acts on one cluster at a time" in several.stderr


def test_a_node_agent_carries_m_calls_as_the_controller_does(
    pair: tuple[Cluster, Cluster],
) -> None:
    """A client away from the controller's host talks to its node agent, which signs
    the call for the caller and carries it to the named cluster's controller."""
    alpha, _ = pair
    proxy = agent_socket_path(load(alpha.conf).slurmd_spool_dir)
    through_agent = Client(proxy, timeout=10, cluster="beta")
    assert through_agent.call("Ping")["cluster"] == "beta"
    assert [n["name"] for n in through_agent.call("Nodes")["nodes"]] == ["node1", "node2"]
    with pytest.raises(SlurmError) as unknown:
        Client(proxy, timeout=10, cluster="gamma").call("Ping")
    assert unknown.value.message == "Invalid cluster name"


def test_salloc_srun_and_a_batch_job_on_another_cluster_run_their_steps_there(
    pair: tuple[Cluster, Cluster],
) -> None:
    """An allocation on another cluster tells what runs in it where it is
    (SLURM_WORKING_CLUSTER): srun in salloc's command and in a batch job sent with -M
    make their steps at that cluster's controller."""
    alpha, beta = pair
    before = alpha.jobs()
    inside = "echo cluster=$SLURM_CLUSTER_NAME; srun -n1 printenv SLURM_STEP_ID"
    out = alpha.run("salloc", "-M", "beta", "-Q", "sh", "-c", inside).stdout
    assert out == "cluster=beta\n0\n", out
    assert alpha.run("srun", "-M", "beta", "printenv", "SLURM_CLUSTER_NAME").stdout == "beta\n"
    assert alpha.jobs() == before  # both allocations were beta's

    work: Path = beta.dir
    line = alpha.run(
        "sbatch", "-M", "beta", "-D", str(work), "-o", "batch.out",
        "--wrap", "srun printenv SLURM_JOB_NODELIST",
    ).stdout  # fmt: skip
    assert beta.wait_done(int(line.split()[3]))["state"] == "COMPLETED"
    assert (work / "batch.out").read_text() == "node1\n"

    refused = alpha.run("salloc", "-M", "gamma", "true", check=False)
    assert refused.returncode == 1 and "'gamma' can't be reached now" in refused.stderr
