"""Growing allocations end to end (issue 18): Slurm's job expansion (a salloc with
``--dependency=expand:N`` gives its nodes to the running batch job N with ``scontrol
update NumNodes=0``, and ``NumNodes=ALL`` writes N's resize scripts; Slurm's refusals
in its words), and ``salloc -N min-max --elastic``, whose command hears of a growth
as a batch job's script does (SIGWINCH, then ``$CORRAL_RESIZE_FILE``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from cli.demo import client_command
from tests.integration.cluster import Cluster

#: What the salloc's command does, as Slurm's FAQ has it: give the nodes, then exit.
GIVE = (
    "scontrol update jobid=$SLURM_JOB_ID NumNodes=0 > given && "
    'squeue -h -j $SLURM_JOB_ID -o "%T %D" > squeued && sleep 3'
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    made = Cluster(
        tmp_path_factory.mktemp("expansion"),
        3,
        ("SchedulerParameters=permit_job_expansion", "KillWait=1"),
    )
    try:
        yield made.start()
    finally:
        made.stop()


def test_a_salloc_gives_its_nodes_to_the_job_it_expands(cluster: Cluster) -> None:
    target = cluster.sbatch("-N1", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 300")
    assert cluster.wait_state(target, {"RUNNING"})["nodes"] == "node1"
    given = cluster.run(
        "salloc", "-N2", "--exclusive", f"--dependency=expand:{target}", "sh", "-c", GIVE
    )
    assert given.returncode == 0, given.stderr
    assert (cluster.dir / "squeued").read_text() == ""  # ended at once, as in Slurm
    assert "To reset Slurm environment variables, execute" in (cluster.dir / "given").read_text()
    grown = cluster.job(target)
    assert (grown["state"], grown["nodes"]) == ("RUNNING", "node[1-3]")
    inside = {"SLURM_JOBID": str(target), "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "node1"}
    told = cluster.run("scontrol", "update", f"jobid={target}", "NumNodes=ALL", env=inside)
    assert (
        told.stdout.splitlines()[1] == f"  For bash or sh shells:  . ./slurm_job_{target}_resize.sh"
    )
    assert (cluster.dir / f"slurm_job_{target}_resize.sh").read_text() == (
        'export SLURM_JOB_NODELIST="node[1-3]"\nexport SLURM_NNODES=3\n'
    )
    shown = cluster.run("scontrol", "show", "job", str(target)).stdout
    assert "NodeList=node[1-3]" in shown and " NumNodes=3 " in shown
    cluster.run("scancel", str(target))
    cluster.wait_done(target)


def test_slurms_refusals(cluster: Cluster) -> None:
    refused = cluster.run("salloc", "--dependency=expand:99999", "true", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        "salloc: error: Job submit/allocate failed: Job dependency problem"
    )
    target = cluster.sbatch("-N1", "--exclusive", "-o", "/dev/null", "--wrap", "sleep 300")
    cluster.wait_state(target, {"RUNNING"})
    batch = cluster.sbatch(
        "--exclusive", f"--dependency=expand:{target}", "-o", "/dev/null", "--wrap", "sleep 300"
    )
    cluster.wait_state(batch, {"RUNNING"})
    refused = cluster.run("scontrol", "update", f"jobid={batch}", "NumNodes=0", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"Job step already exists for job {batch}"
    cluster.run("scancel", str(batch), str(target))
    cluster.wait_done(batch)
    cluster.wait_done(target)


#: An allocation's shell that waits to be grown to two nodes, logging each size.
GROWN = """\
log={log}
resized() {{
    . "$CORRAL_RESIZE_FILE"
    echo "$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST" >> "$log"
}}
trap resized WINCH
echo "$SLURM_JOB_NUM_NODES $SLURM_JOB_NODELIST" >> "$log"
until [ "$SLURM_JOB_NUM_NODES" = 2 ]; do sleep 0.2 & wait $!; done
exit 0  # the loop's status is the interrupted wait's (128 + SIGWINCH)
"""


def test_an_elastic_sallocs_command_hears_it_grow(cluster: Cluster) -> None:
    busy = cluster.sbatch("-w", "node2,node3", "--exclusive", "--wrap", "sleep 300")
    cluster.wait_state(busy, {"RUNNING"})
    log = cluster.dir / "salloc-sizes"
    shell = GROWN.format(log=log)
    salloc = subprocess.Popen(
        [*client_command("salloc"), "-N1-2", "--elastic", "--exclusive", "bash", "-c", shell],
        env=cluster.env,
        cwd=cluster.dir,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        cluster.wait_for(log.exists, 30, "the allocation's command did not start")
        assert log.read_text() == "1 node1\n"
        cluster.run("scancel", str(busy))
        assert salloc.wait(timeout=60) == 0, salloc.stderr.read() if salloc.stderr else ""
    finally:
        if salloc.poll() is None:
            salloc.kill()
            salloc.wait()
    assert log.read_text() == "1 node1\n2 node[1-2]\n"
    refused = cluster.run("salloc", "-N2", "--elastic", "true", check=False)
    assert (refused.returncode, refused.stderr.strip()) == (
        1,
        "salloc: error: --elastic needs a range of nodes: -N min-max",
    )
