"""GRES, OverSubscribe and constraints end to end: sbatch, the controller, squeue/scontrol."""

from __future__ import annotations

import os


def test_gres_are_allocated_per_node_and_refused_when_unknown(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(
        nodes=1,
        settings=("GresTypes=gpu", "NodeName=DEFAULT Gres=gpu:a100:2 Feature=fast"),
    )
    both = c.sbatch("--gres=gpu:2", "-C", "fast*1", "--wrap", "sleep 30")
    assert c.wait_state(both, {"RUNNING"})["gres"] == "gres/gpu:2"
    waits = c.sbatch("--gres=gpu:a100:1", "--wrap", "true")
    c.wait_for(lambda: c.job(waits)["reason"] == "Resources", 10, "GPU job did not wait")
    assert "TresPerNode=gres/gpu:a100:1" in c.run("scontrol", "show", "job", str(waits)).stdout
    refused = c.run("sbatch", "--gres=fpga:1", "--wrap", "true", check=False)
    assert refused.returncode != 0
    assert "Invalid generic resource (gres) specification" in refused.stderr
    never = c.run("sbatch", "--gres=gpu:3", "--wrap", "true", check=False)
    assert "Requested node configuration is not available" in never.stderr
    bad = c.run("sbatch", "-C", "[fast&slow]", "--wrap", "true", check=False)
    assert "Invalid feature specification" in bad.stderr
    c.run("scancel", str(both))
    assert c.wait_done(waits)["state"] == "COMPLETED"


def test_force_shares_cpus_up_to_its_count(make_cluster) -> None:  # type: ignore[no-untyped-def]
    cpus = os.cpu_count() or 1
    c = make_cluster(nodes=1, settings=("PartitionName=shared Nodes=ALL OverSubscribe=FORCE:2",))
    wide = ("-p", "shared", "-n", str(cpus), "--wrap", "sleep 30")
    first, second, third = c.sbatch(*wide), c.sbatch(*wide), c.sbatch(*wide)
    c.wait_state(first, {"RUNNING"})
    c.wait_state(second, {"RUNNING"})
    c.wait_for(lambda: c.job(third)["reason"] == "Resources", 10, "third job did not wait")
    assert c.job(first)["oversubscribe"] == "OK"
    node = c.run("scontrol", "show", "node", "node1").stdout
    assert f"CPUAlloc={cpus} " in node and "State=ALLOCATED" in node
    c.run("scancel", str(first), str(second), str(third))
