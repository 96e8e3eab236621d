"""sattach end to end: a second client attached to a running step of two nodes.

Task 0 waits for a line on its stdin, which only sattach sends (srun's stdin is an
idle pipe), then lets task 1 go on: so every line printed here comes after the
attach, through each node's runner, while srun still gets it all too.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster, command

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


def test_a_regular_file_or_dev_null_on_stdin_is_read_as_a_pipe(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Slurm 22.05, measured (``sleep 30 | srun -n1 sh -c 'cat; echo end'``): ``sattach
    J.0 < file`` sends the file's lines and its end, so sattach prints them and ``end``
    and exits 0; ``< /dev/null`` sends the end alone: ``end``."""
    script = tmp_path / "job.sh"
    step = 'cat; echo "end $SLURM_PROCID"'
    script.write_text(f"#!/bin/sh\nsleep 300 | srun -N2 -n2 sh -c '{step}'\n")
    feed = tmp_path / "feed.txt"
    feed.write_text("line1\nline2\n")
    for stdin, lines in ((feed, ["line1", "line2"]), (Path(os.devnull), [])):
        job = cluster.sbatch("-N2", "-n2", "-o", "/dev/null", str(script))
        started = lambda job=job: bool(cluster.job(job)["steps"])  # noqa: E731
        cluster.wait_for(started, 60, "the step did not start")
        with stdin.open("rb") as source:
            attached = subprocess.run(
                [*command("sattach"), "-l", f"{job}.0"],
                env=cluster.env, stdin=source, capture_output=True, text=True, timeout=30,
            )  # fmt: skip
        assert attached.returncode == 0, attached.stderr
        expected = [f"{t}: {line}" for t in range(2) for line in [*lines, f"end {t}"]]
        assert sorted(attached.stdout.splitlines()) == sorted(expected)
        cluster.run("scancel", str(job))  # the script's sleep feeding srun's stdin
