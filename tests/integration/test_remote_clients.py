"""Clients away from the controller's host reach it through their node agent.

A copy of slurm.conf whose StateSaveLocation holds no controller socket
stands for a compute node's view: the clients find the node agent's socket
instead, and the agent signs their calls for the controller's gRPC API with
the uid the kernel gives it.
"""

from __future__ import annotations

from pathlib import Path

from tests.integration.cluster import Cluster


def remote_conf(cluster: Cluster) -> str:
    elsewhere = cluster.dir / "elsewhere"
    elsewhere.mkdir()
    text = Path(cluster.conf).read_text()
    lines = [
        f"StateSaveLocation={elsewhere}" if line.startswith("StateSaveLocation=") else line
        for line in text.splitlines()
    ]
    path = cluster.dir / "remote.conf"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_clients_on_another_host_go_through_the_node_agent(cluster: Cluster) -> None:
    conf = remote_conf(cluster)
    assert (cluster.dir / "spool" / "corral-agent.sock").exists()
    env = {"SLURM_CONF": conf}
    script = cluster.dir / "job.sh"
    script.write_text(f"#!/bin/bash\nSLURM_CONF={conf} srun -n2 -l echo hi\n")
    out = cluster.run("sbatch", "--parsable", "-n2", "-o", "remote-%j.out", str(script), env=env)
    job_id = int(out.stdout.strip())
    listed = cluster.run("squeue", "-h", "-t", "all", "-o", "%i %u", env=env).stdout.split("\n")
    assert f"{job_id} root" in listed
    assert cluster.wait_done(job_id)["state"] == "COMPLETED"
    assert sorted((cluster.dir / f"remote-{job_id}.out").read_text().splitlines()) == [
        "0: hi",
        "1: hi",
    ]
    refused = cluster.run("scontrol", "show", "job", "999", env=env, check=False)
    assert refused.returncode == 1
    assert "Invalid job id specified" in refused.stderr
