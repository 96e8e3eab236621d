"""srun --bcast, srun's lines when its step is ended, and sbcast to a part of a step.

Two emulated nodes on this host, one filesystem: each node's copy of srun --bcast has
its own path (the default name ends in the node's name, a DEST carries ``%n``). The
expected stderr lines are those measured on Slurm 22.05 (KillWait=5 there too: "up to
7 seconds"); slurmstepd's line there names ``slurmstepd-NODE`` under multiple slurmd,
``slurmstepd`` here, as everywhere else in Corral.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.demo import client_command
from tests.integration.cluster import Cluster

SCRIPT = '#!/bin/sh\necho "$SLURMD_NODENAME $0 $LD_LIBRARY_PATH"\n'
ABORTED = "srun: Job step aborted: Waiting up to 7 seconds for job step to finish."
BANNER = r"slurmstepd: error: \*\*\* STEP {step} ON node1 CANCELLED AT \S+{why} \*\*\*"


@pytest.fixture(scope="module")
def dest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bcastdest")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, dest: Path) -> Iterator[Cluster]:
    home = tmp_path_factory.mktemp("cluster")
    c = Cluster(home, 2, ("KillWait=5", f"BcastParameters=DestDir={dest}"))
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def job(cluster: Cluster) -> Iterator[int]:
    """A running two-node job (two CPUs on each), cancelled afterwards."""
    with cluster.running("-N2", "-n4", "--wrap", "sleep 300") as job_id:
        yield job_id


def _srun(cluster: Cluster, job: int, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cluster.run("srun", *args, cwd=cwd, env={"SLURM_JOB_ID": str(job)}, check=False)


def test_bcast_runs_the_copy_on_each_node(
    cluster: Cluster, job: int, dest: Path, tmp_path: Path
) -> None:
    """No DEST: ``slurm_bcast_JOB.STEP_NODE`` in DestDir, the path the tasks see as $0."""
    script = tmp_path / "prog.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    done = _srun(cluster, job, "-N2", "-n2", "-l", "--bcast", "./prog.sh", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert lines == [
        f"0: node1 {dest}/slurm_bcast_{job}.0_node1 ",
        f"1: node2 {dest}/slurm_bcast_{job}.0_node2 ",
    ]
    for node in ("node1", "node2"):
        assert (dest / f"slurm_bcast_{job}.0_{node}").read_text() == SCRIPT


def test_bcast_to_a_named_destination_with_libraries(
    cluster: Cluster, job: int, tmp_path: Path
) -> None:
    """--bcast=DEST (absolute), --send-libs: LD_LIBRARY_PATH starts with DEST_libs."""
    script = tmp_path / "named.sh"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    target = tmp_path / "copy_%n"
    done = _srun(
        cluster, job, "-N2", "-n2", f"--bcast={target}", "--send-libs", "--compress=zlib",
        str(script), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.splitlines())
    assert lines == [
        f"node1 {tmp_path}/copy_node1 {tmp_path}/copy_node1_libs",
        f"node2 {tmp_path}/copy_node2 {tmp_path}/copy_node2_libs",
    ]


def test_bcast_failure_launches_nothing(cluster: Cluster, job: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    script = tmp_path / "touch.sh"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    done = _srun(cluster, job, "-N1", "--bcast=/nonexistent/dir/x", str(script), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "srun: error: REQUEST_FILE_BCAST(node1): No such file or directory",
        f"srun: fatal: Failed to broadcast '{script}'. Step launch aborted.",
    ]
    assert not marker.exists()


def test_compress_without_bcast_is_refused(cluster: Cluster, job: int, tmp_path: Path) -> None:
    done = _srun(cluster, job, "-N1", "--compress", "true", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (1, "srun: error: --compress needs --bcast\n")


def _ended(cluster: Cluster, job: int, tmp_path: Path, *scancel: str) -> tuple[int, list[str]]:
    """srun's exit status and stderr lines once ``scancel`` (``{step}``: the step,
    ``{job}``: the job; none: the job's time limit) has ended its step of two sleeping
    tasks on node1."""
    srun = subprocess.Popen(
        [*client_command("srun"), "-N1", "-n2", "-w", "node1", "sleep", "100"],
        env={**cluster.env, "SLURM_JOB_ID": str(job)},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        cluster.wait_for(
            lambda: f"{job}.0 " in cluster.run("squeue", "-h", "-s").stdout,
            30,
            "the step did not start",
        )
        if scancel:  # none: the job's time limit ends it
            cluster.run("scancel", *(arg.format(step=f"{job}.0", job=job) for arg in scancel))
        _, err = srun.communicate(timeout=60)
    finally:
        if srun.poll() is None:
            srun.kill()
            srun.wait()
    return srun.returncode, err.splitlines()


def test_scancel_of_the_step(cluster: Cluster, job: int, tmp_path: Path) -> None:
    code, lines = _ended(cluster, job, tmp_path, "{step}")
    assert code == 137
    assert lines[0] == ABORTED
    assert re.fullmatch(BANNER.format(step=rf"{job}\.0", why=""), lines[1])
    assert lines[2:] == ["srun: error: node1: tasks 0-1: Killed"]


def test_scancel_of_the_job(cluster: Cluster, job: int, tmp_path: Path) -> None:
    code, lines = _ended(cluster, job, tmp_path, "{job}")
    assert code == 143
    assert lines[0] == ABORTED
    assert re.fullmatch(BANNER.format(step=rf"{job}\.0", why=""), lines[1])
    assert lines[2:] == ["srun: error: node1: tasks 0-1: Terminated"]


def test_scancel_kill_of_the_step_is_forced(cluster: Cluster, job: int, tmp_path: Path) -> None:
    code, lines = _ended(cluster, job, tmp_path, "-s", "KILL", "{step}")
    assert code == 137
    assert lines == [
        "srun: error: node1: tasks 0-1: Killed",
        f"srun: Force Terminated StepId={job}.0",
    ]


def test_job_time_limit(cluster: Cluster, tmp_path: Path) -> None:
    """The job's limit: slurmstepd's line says so, then srun's aborted line."""
    job = cluster.sbatch("-N1", "-n2", "-t", "1", "-o", "/dev/null", "--wrap", "sleep 300")
    cluster.wait_state(job, {"RUNNING"}, timeout=30)
    try:
        code, lines = _ended(cluster, job, tmp_path)
    finally:
        cluster.run("scancel", str(job), check=False)
    assert code == 143
    assert re.fullmatch(BANNER.format(step=rf"{job}\.0", why=" DUE TO TIME LIMIT"), lines[0])
    assert lines[1:] == [ABORTED, "srun: error: node1: tasks 0-1: Terminated"]


def test_sbcast_reaches_the_part_named(cluster: Cluster, job: int, tmp_path: Path) -> None:
    """``srun a : b`` in one job: -j J.S is its first part's nodes, -j J.S+1 the next's
    (as measured on Slurm 22.05, which names the parts S+0 and S+1)."""
    srun = subprocess.Popen(
        [*client_command("srun"), "-N1", "-n1", "sleep", "100", ":", "-N1", "-n1", "sleep", "100"],
        env={**cluster.env, "SLURM_JOB_ID": str(job)},
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        cluster.wait_for(
            lambda: f"{job}.0+1 " in cluster.run("squeue", "-h", "-s").stdout,
            30,
            "the step did not start",
        )
        source = tmp_path / "data"
        source.write_text("data\n")
        for step, name in ((f"{job}.0", "first"), (f"{job}.0+1", "second")):
            cluster.run("sbcast", "-j", step, str(source), str(tmp_path / f"{name}.%n"))
    finally:
        srun.kill()
        srun.wait()
    copies = sorted(p.name for p in tmp_path.iterdir() if p.name != "data")
    assert copies == ["first.node1", "second.node2"]
