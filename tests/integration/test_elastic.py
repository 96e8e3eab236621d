"""Elastic jobs end to end (issue 18, point 3): a torchrun-style batch job of
``-N 1-3 --elastic`` on three nodes, two of them busy at its start, grows as they
free, hears each change (SIGWINCH, then ``$CORRAL_RESIZE_FILE``) and relaunches
its workers on the nodes it has; a job of higher priority takes a node back and the
job goes on with two; ``scontrol update NumNodes=1`` then shrinks it, and it hears
each; sacct keeps one record per size."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.databases import fresh_database
from tests.integration.cluster import Cluster

#: What a torchrun-style launcher does with Corral's elastic jobs: on each resize it
#: reads its nodes again and starts its workers over on all of them (one a node). The
#: trap only notes the signal: bash drops a signal that comes while its trap runs, so a
#: resize heard while the workers start would be lost in a trap that starts them.
SCRIPT = """\
#!/bin/bash
log={log}
workers() {{
    srun -N "$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \\
        sh -c 'echo "$SLURM_JOB_NUM_NODES $SLURMD_NODENAME"' | sort > {dir}/workers.$1
}}
resized() {{
    . "$CORRAL_RESIZE_FILE"
    echo "$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST $SLURM_JOB_CPUS_PER_NODE" >> "$log"
    workers "$SLURM_JOB_NUM_NODES"
}}
heard=0
trap 'heard=1' WINCH
echo "$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST $SLURM_JOB_CPUS_PER_NODE" >> "$log"
workers "$SLURM_JOB_NUM_NODES"
while :; do
    if [ "$heard" = 1 ]; then heard=0; resized; fi
    sleep 0.2 & wait $!
done
"""


def after(cluster: Cluster, job: int) -> None:
    """Wait for the clock to pass the job's last change: sacct keeps a size apart
    only from the next second on (dbd files each record under its second)."""
    record = cluster.job(job)
    last = int(record.get("resize_time") or record["start_time"])
    cluster.wait_for(lambda: time.time() >= last + 1, 5, "the clock did not move on")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Three nodes and a corral-dbd on SQLite, for sacct."""
    with fresh_database("sqlite", tmp_path) as url:
        made = Cluster(tmp_path / "c", 3, ("KillWait=1",), accounting=True, database=url)
        try:
            yield made.start()
        finally:
            made.stop()


def test_an_elastic_job_grows_as_nodes_free_and_hears_each_change(cluster: Cluster) -> None:
    log = cluster.dir / "sizes"
    busy = [
        cluster.sbatch("-w", name, "--exclusive", "--wrap", "sleep 300")
        for name in ("node2", "node3")
    ]
    for job_id in busy:
        cluster.wait_state(job_id, {"RUNNING"})
    script = cluster.dir / "elastic.sh"
    script.write_text(SCRIPT.format(log=log, dir=cluster.dir))
    job = cluster.sbatch("-N1-3", "--elastic", "--exclusive", "-o", "/dev/null", str(script))

    def sizes() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    def workers(count: int) -> list[str]:
        found = cluster.dir / f"workers.{count}"
        return found.read_text().splitlines() if found.exists() else []

    cluster.wait_for(lambda: workers(1), 60, "the job did not start its workers")
    cpus = cluster.job(job)["cpus_per_node"][0]  # a whole node's (--exclusive)
    assert sizes() == [f"1 node1 {cpus}"]  # what was free: its minimum
    assert workers(1) == ["1 node1"]
    after(cluster, job)
    cluster.run("scancel", str(busy[0]))
    cluster.wait_for(lambda: len(workers(2)) == 2, 60, "the job did not grow to two nodes")
    assert sizes()[1] == f"2 node[1-2] {cpus}(x2)"
    assert workers(2) == ["2 node1", "2 node2"]  # srun runs on the new allocation
    after(cluster, job)
    cluster.run("scancel", str(busy[1]))
    cluster.wait_for(lambda: len(workers(3)) == 3, 60, "the job did not grow to three nodes")
    assert sizes()[2] == f"3 node[1-3] {cpus}(x3)"
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "NodeList=node[1-3]" in shown and " NumNodes=3 " in shown
    assert "Elastic=1-3 ResizeSignal=SIGWINCH" in shown and "ResizeTime=" in shown

    # A job before it in the queue's order takes back a node it grew onto; the elastic
    # job hears it and goes on; it grows again once that job ends.
    after(cluster, job)
    urgent = cluster.sbatch("--priority=1000000", "--exclusive", "--wrap", "sleep 300")
    cluster.wait_for(lambda: len(sizes()) == 4, 60, "the job did not give a node back")
    assert sizes()[3] == f"2 node[1-2] {cpus}(x2)"
    assert cluster.wait_state(urgent, {"RUNNING"})["nodes"] == "node3"
    assert cluster.job(job)["state"] == "RUNNING"
    after(cluster, job)
    cluster.run("scancel", str(urgent))
    cluster.wait_for(lambda: len(sizes()) == 5, 60, "the job did not grow again")
    assert sizes()[4] == f"3 node[1-3] {cpus}(x3)"

    # scontrol update shrinks it (Slurm keeps its first nodes); the job hears it.
    after(cluster, job)
    inside = {"SLURM_JOBID": str(job), "SLURM_NNODES": "3", "SLURM_JOB_NODELIST": "x"}
    told = cluster.run("scontrol", "update", f"JobId={job}", "NumNodes=1", env=inside)
    assert told.stdout.splitlines()[0] == "To reset Slurm environment variables, execute"
    assert (cluster.dir / f"slurm_job_{job}_resize.sh").read_text() == (
        'export SLURM_JOB_NODELIST="node1"\nexport SLURM_NNODES=1\n'
    )
    cluster.wait_for(lambda: len(sizes()) == 6, 60, "the job did not hear of its shrink")
    assert sizes()[5] == f"1 node1 {cpus}"
    cluster.wait_for(lambda: workers(1) == ["1 node1"], 30, "no worker relaunched")
    shown = cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "NodeList=node1" in shown and " NumNodes=1 " in shown
    refused = cluster.run("scontrol", "update", f"JobId={job}", "NumNodes=2", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"Node count specification invalid for job {job}"

    cluster.run("scancel", str(job))
    cluster.wait_done(job)
    rows = cluster.run(
        "sacct", "-j", str(job), "-X", "-n", "-P", "-o", "State,NNodes,NodeList"
    ).stdout.splitlines()
    assert rows == [
        "RESIZING|1|node1",
        "RESIZING|2|node[1-2]",
        "RESIZING|3|node[1-3]",
        "RESIZING|2|node[1-2]",
        "RESIZING|3|node[1-3]",
        f"CANCELLED by {os.getuid()}|1|node1",
    ]
