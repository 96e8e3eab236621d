"""Topology on a live cluster: topology.conf read beside slurm.conf, scontrol show
topology, --switches waiting then relaxing, Corral's --topology-level holding a job
to one leaf switch, corral why saying so, and a request no topology can meet."""

from __future__ import annotations

import os
from pathlib import Path

#: Six nodes: three leaf switches of two under two spines, and no switch above them,
#: so no job spans the spines (as in Slurm).
TOPOLOGY = """\
SwitchName=l0 Nodes=node[1-2]
SwitchName=l1 Nodes=node[3-4]
SwitchName=l2 Nodes=node[5-6]
SwitchName=s0 Switches=l[0-1]
SwitchName=s1 Switches=l2
"""
SETTINGS = ("TopologyPlugin=topology/tree", "KillWait=1")


def test_switches_wait_then_relax_and_a_level_holds_a_job_to_one_leaf(make_cluster) -> None:  # type: ignore[no-untyped-def]
    c = make_cluster(nodes=6, settings=SETTINGS, start=False)
    Path(os.path.dirname(c.conf), "topology.conf").write_text(TOPOLOGY)
    c.start()
    shown = c.run("scontrol", "show", "topology").stdout.splitlines()
    assert shown == [
        "SwitchName=l0 Level=0 LinkSpeed=1 Nodes=node[1-2]",
        "SwitchName=l1 Level=0 LinkSpeed=1 Nodes=node[3-4]",
        "SwitchName=l2 Level=0 LinkSpeed=1 Nodes=node[5-6]",
        "SwitchName=s0 Level=1 LinkSpeed=1 Nodes=node[1-4] Switches=l[0-1]",
        "SwitchName=s1 Level=1 LinkSpeed=1 Nodes=node[5-6] Switches=l2",
    ]
    # One node busy on each leaf: node2, node4 and node6 are free, no two on one leaf.
    busy = [c.sbatch("-w", f"node{n}", "--exclusive", "--wrap", "sleep 300") for n in (1, 3, 5)]
    c.wait_for(lambda: all(c.job(j)["state"] == "RUNNING" for j in busy), 30, "not started")

    # --switches=1 with a minute to wait: pending, and corral why says why.
    patient = c.sbatch("-N2", "--switches=1@1:00", "--wrap", "sleep 300")
    c.wait_for(lambda: c.job(patient)["reason"] == "Resources", 30, "no pass saw the job")
    assert "Switches=1@00:01:00" in c.run("scontrol", "show", "job", str(patient)).stdout
    words = c.run("corral", "why", str(patient)).stdout
    assert "Placement: at most 1 leaf switch (--switches) until" in words, words
    assert "That is what keeps it waiting" in words and "--switches=2 (now)" in words, words
    # scontrol update's Switches= (pending only) takes the advice: it starts at once.
    c.run("scontrol", "update", f"JobId={patient}", "Switches=2@2:00")
    c.wait_state(patient, {"RUNNING"})
    assert "Switches=2@00:02:00" in c.run("scontrol", "show", "job", str(patient)).stdout
    refused = c.run("scontrol", "update", f"JobId={patient}", "Switches=1", check=False)
    assert "Job is no longer pending execution" in refused.stderr
    c.run("scancel", str(patient))
    c.wait_state(patient, {"CANCELLED"})

    # Three seconds to wait: then it takes two leaves, both under s0 (never s0 and s1).
    hasty = c.sbatch("-N2", "--switches=1@0:03", "--wrap", "sleep 300")
    c.wait_state(hasty, {"RUNNING"})
    assert c.job(hasty)["nodes"] == "node[2,4]"
    assert c.job(hasty)["start_time"] >= c.job(hasty)["submit_time"] + 3

    # --topology-level=0: the whole job on one leaf switch, however long that takes.
    bound = c.sbatch("-N2", "--topology-level=0", "--wrap", "sleep 300")
    c.wait_for(lambda: c.job(bound)["reason"] == "Resources", 30, "no pass saw the job")
    assert "TopologyLevel=0" in c.run("scontrol", "show", "job", str(bound)).stdout
    c.run("scancel", str(hasty), str(busy[0]))  # l0 is free again
    c.wait_state(bound, {"RUNNING"})
    assert c.job(bound)["nodes"] == "node[1-2]"

    # A request that no topology.conf line can meet is refused at submission.
    refused = c.run("sbatch", "-N2", "--segment=2", "--wrap", "true", check=False)
    assert refused.returncode != 0
    assert "Requested topology configuration is not available" in refused.stderr
    c.run("scancel", str(bound), *map(str, busy))
