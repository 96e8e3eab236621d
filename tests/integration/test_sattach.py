"""sattach end to end: a second client attached to a running step of two nodes.

Task 0 waits for a line on its stdin, which only sattach sends (srun's stdin is an
idle pipe), then lets task 1 go on: so every line printed here comes after the
attach, through each node's runner, while srun still gets it all too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

STEP = (
    'if [ "$SLURM_PROCID" = 0 ]; then read line; echo "got $line"; touch {flag}; '
    "else while [ ! -e {flag} ]; do sleep 0.1; done; echo task one; echo to stderr >&2; fi"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("sattach"), 2, ("KillWait=2",))
    try:
        yield c.start()
    finally:
        c.stop()


def test_attach_layout_output_and_stdin(cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    step = STEP.format(flag=tmp_path / "flag")
    script.write_text(f"#!/bin/sh\nsleep 300 | srun -N2 -n2 sh -c '{step}'\n")
    job = cluster.sbatch("-N2", "-n2", "-o", str(tmp_path / "out"), str(script))
    cluster.wait_for(lambda: bool(cluster.job(job)["steps"]), 60, "the step did not start")
    layout = cluster.run("sattach", "--layout", f"{job}.0")
    assert layout.stdout == (
        "Job step layout:\n\t2 tasks, 2 nodes (node[1-2])\n\n"
        "\tNode 0 (node1), 1 task(s): 0 \n\tNode 1 (node2), 1 task(s): 1 \n"
    )
    attached = cluster.run("sattach", "-l", "--error-filter=0", f"{job}.0", input="hello\n")
    assert attached.stdout.splitlines() == ["0: got hello", "1: task one"] or (
        attached.stdout.splitlines() == ["1: task one", "0: got hello"]
    )
    assert attached.stderr == ""  # task 1's stderr filtered out
    out = tmp_path / "out"

    def srun_saw_it_all() -> bool:
        text = out.read_text() if out.exists() else ""
        return "got hello" in text and "to stderr" in text

    cluster.wait_for(srun_saw_it_all, 30, "srun did not get the step's output")
    cluster.run("scancel", str(job))  # the script's sleep feeding srun's stdin


def test_no_such_step(cluster: Cluster) -> None:
    done = cluster.run("sattach", "999.0", check=False)
    assert (done.returncode, done.stderr) == (1, "sattach: error: Invalid job id specified\n")


def test_input_reaches_every_task_and_its_end_closes_theirs(
    cluster: Cluster, tmp_path: Path
) -> None:
    """22.05's sattach sends its input to every task and its end of input closes their
    stdin (srun's own, an idle pipe here, never ends): both tasks end, and so does
    sattach."""
    script = tmp_path / "job.sh"
    step = 'cat; echo "eof $SLURM_PROCID"'
    script.write_text(f"#!/bin/sh\nsleep 300 | srun -N2 -n2 sh -c '{step}'\n")
    job = cluster.sbatch("-N2", "-n2", "-o", str(tmp_path / "out"), str(script))
    cluster.wait_for(lambda: bool(cluster.job(job)["steps"]), 60, "the step did not start")
    attached = cluster.run("sattach", "-l", f"{job}.0", input="hi\n")
    assert sorted(attached.stdout.splitlines()) == ["0: eof 0", "0: hi", "1: eof 1", "1: hi"]
    cluster.run("scancel", str(job))  # the script's sleep feeding srun's stdin
