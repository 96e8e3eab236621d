"""srun's standard input on two nodes, as measured on Slurm 22.05 with two slurmd.

By default every task gets all of srun's stdin and its end; ``-i N`` task N alone (the
others read /dev/null); ``-i none`` nobody; ``-i in%t`` each task its own file, opened
on its node in the step's directory; ``-i FILE`` without such a pattern is read by
srun, relative to srun's own directory (``-D`` elsewhere does not change it), and sent
to every task; a FILE srun cannot open fails in Slurm's words with exit 1; a per-task
file missing on a node fails that node's tasks alone, in Slurm's words, and they add
no exit code.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("stdin"), 2, ("KillWait=2",))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def job(cluster: Cluster) -> Iterator[int]:
    """A running two-node job, cancelled after the module's tests."""
    with cluster.running("-N2", "-n4", "--wrap", "sleep 300") as job_id:
        yield job_id


def _srun(
    cluster: Cluster, job: int, *args: str, cwd: Path, input: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {"SLURM_JOB_ID": str(job)}
    return cluster.run("srun", "-N2", "-l", *args, cwd=cwd, env=env, input=input, check=False)


def _lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.splitlines())


def test_stdin_goes_to_every_task(cluster: Cluster, job: int, tmp_path: Path) -> None:
    done = _srun(cluster, job, "-n3", "cat", cwd=tmp_path, input="x\ny\n")
    assert _lines(done) == ["0: x", "0: y", "1: x", "1: y", "2: x", "2: y"]


def test_input_to_one_task(cluster: Cluster, job: int, tmp_path: Path) -> None:
    done = _srun(
        cluster, job, "-n3", "-i", "1", "sh", "-c", "cat; echo end", cwd=tmp_path, input="x\n"
    )
    assert _lines(done) == ["0: end", "1: end", "1: x", "2: end"]
    assert done.stdout.index("1: x") < done.stdout.index("1: end")


def test_input_none(cluster: Cluster, job: int, tmp_path: Path) -> None:
    done = _srun(
        cluster, job, "-n2", "-i", "none", "sh", "-c", "cat; echo end", cwd=tmp_path, input="x\n"
    )
    assert _lines(done) == ["0: end", "1: end"]


def test_per_task_files_on_the_nodes(cluster: Cluster, job: int, tmp_path: Path) -> None:
    for task in range(3):
        (tmp_path / f"in{task}").write_text(f"file{task}\n")
    done = _srun(cluster, job, "-n3", "-i", "in%t", "cat", cwd=tmp_path)
    assert _lines(done) == ["0: file0", "1: file1", "2: file2"]


def test_a_plain_file_is_srun_s(cluster: Cluster, job: int, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "plain").write_text("srun's\n")
    (tmp_path / "sub" / "plain").write_text("the step's directory's\n")
    done = _srun(cluster, job, "-n2", "-D", "sub", "-i", "plain", "cat", cwd=tmp_path)
    assert _lines(done) == ["0: srun's", "1: srun's"]
    missing = _srun(cluster, job, "-n2", "-i", "missing", "cat", cwd=tmp_path)
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == "srun: error: Could not open stdin file: No such file or directory\n"


def test_a_per_task_file_missing_on_a_node_fails_its_tasks_alone(
    cluster: Cluster, job: int, tmp_path: Path
) -> None:
    """Slurm 22.05, measured (``-N2 -n2 -l -i in%t``, in1 missing): task 1's node says
    "task 1 launch failed: Slurmd could not connect IO"; task 0 runs to its end and
    srun exits with its code; with no file at all every task says so and srun exits 0."""
    (tmp_path / "in0").write_text("zero\n")
    script = "cat; sleep 1; echo done; exit 3"
    done = _srun(cluster, job, "-n2", "-i", "in%t", "sh", "-c", script, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (3, "0: zero\n0: done\n")
    assert done.stderr == (
        "srun: error: task 1 launch failed: Slurmd could not connect IO\n"
        "srun: error: node1: task 0: Exited with exit code 3\n"
    )
    none = _srun(cluster, job, "-n3", "-i", "none%t", "cat", cwd=tmp_path)
    assert (none.returncode, none.stdout) == (0, "")
    assert sorted(none.stderr.splitlines()) == [
        f"srun: error: task {task} launch failed: Slurmd could not connect IO" for task in range(3)
    ]


def test_the_stream_variables_stand_for_the_options(
    cluster: Cluster, job: int, tmp_path: Path
) -> None:
    """Slurm 22.05, measured: SLURM_STDINMODE is ``-i`` (``0``: task 0 alone, empty:
    task 0 too, ``none``: nobody) and ``-i`` on the line wins over it; SLURM_STDOUTMODE
    and SLURM_STDERRMODE are ``-o`` and ``-e``; with ``--pty`` it is refused as ``-i``."""

    def srun(variables: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        env = {"SLURM_JOB_ID": str(job), **variables}
        return cluster.run("srun", "-N2", "-l", *args, cwd=tmp_path, env=env, input="x\n",
                           check=False)  # fmt: skip

    assert _lines(srun({"SLURM_STDINMODE": "0"}, "-n2", "cat")) == ["0: x"]
    assert _lines(srun({"SLURM_STDINMODE": ""}, "-n2", "cat")) == ["0: x"]
    assert _lines(srun({"SLURM_STDINMODE": "none"}, "-n2", "cat")) == []
    assert _lines(srun({"SLURM_STDINMODE": "1"}, "-n2", "-i", "0", "cat")) == ["0: x"]
    streams = {"SLURM_STDOUTMODE": "out%t", "SLURM_STDERRMODE": "err%t"}
    assert _lines(srun(streams, "-n2", "-i", "none", "sh", "-c", "echo o; echo e >&2")) == []
    assert [(tmp_path / f"out{t}").read_text() for t in range(2)] == ["o\n", "o\n"]
    assert [(tmp_path / f"err{t}").read_text() for t in range(2)] == ["e\n", "e\n"]
    pty = srun({"SLURM_STDINMODE": "0"}, "-n1", "--pty", "true")
    assert (pty.returncode, pty.stderr) == (
        1,
        "srun: error: --error/--input/--output are incompatible with --pty\n",
    )
