"""sbcast end to end: a file copied to each node of a job, as the job's user.

The cluster emulates two nodes with one agent on this host, so both nodes share
one filesystem: DEST carries ``%n`` (each node's name), and each node's copy
lands at its own path, written by the agent serving it. The job belongs to an
ordinary user (root submits it with ``--uid``); root, an operator, sends the
file, which must be that user's. Other users are refused:
tests/security/test_sbcast_access.py.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import sharedobjects
from tests.integration.cluster import Cluster
from tests.security.asuser import shared_top


@pytest.fixture(scope="module")
def shared() -> Iterator[Path]:
    """A directory every user may write in (pytest's tmp_path is under a 0700 one)."""
    for top in shared_top():
        top.chmod(0o1777)  # the job's user writes its copies here
        yield top


@pytest.fixture(scope="module")
def cluster(shared: Path) -> Iterator[Cluster]:
    """Two nodes, in a tree the test users may reach (their job's spool is in it)."""
    home = shared / "cluster"
    home.mkdir(mode=0o755)
    (shared / "bdest").mkdir()
    (shared / "bdest").chmod(0o1777)  # the job user writes its relative copies here
    bcast = f"BcastParameters=DestDir={shared / 'bdest'},Compression=lz4"
    c = Cluster(home, 2, ("KillWait=2", bcast, "BcastExclude=/usr/lib64"))
    c.env["SBCAST_TIMEOUT"] = "60"  # each block's wait for the nodes: a loaded host is slow
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture(scope="module")
def job(cluster: Cluster, users: tuple[str, ...], shared: Path) -> int:
    """A running two-node job of the first test user."""
    job_id = cluster.sbatch(
        f"--uid={users[0]}", "-N2", "-o", str(shared / "out"), "--wrap", "sleep 300"
    )
    cluster.wait_state(job_id, "RUNNING", timeout=30)
    return job_id


def _source(shared: Path, name: str, data: bytes, mode: int = 0o750) -> Path:
    path = shared / name
    path.write_bytes(data)
    path.chmod(mode)
    os.utime(path, (1_600_000_000, 1_600_000_000))
    return path


def test_copy_lands_on_each_node_as_the_jobs_user(
    cluster: Cluster, job: int, users: tuple[str, ...], shared: Path
) -> None:
    data = os.urandom(5000)
    source = _source(shared, "prog", data)
    dest = shared / "prog.%n"
    done = cluster.run("sbcast", "-j", str(job), "-s", "1k", "-Czlib", str(source), str(dest))
    assert done.stdout == "" and done.stderr == ""
    owner = pwd.getpwnam(users[0]).pw_uid
    for node in ("node1", "node2"):
        copy = shared / f"prog.{node}"
        assert copy.read_bytes() == data
        info = copy.stat()
        assert info.st_uid == owner
        assert info.st_mode & 0o777 == 0o750
        assert int(info.st_mtime) != 1_600_000_000  # without -p the times are the copy's


def test_existing_file_needs_force(cluster: Cluster, job: int, shared: Path) -> None:
    source = _source(shared, "data", b"first")
    dest = str(shared / "data.%n")
    cluster.run("sbcast", "-j", str(job), str(source), dest)
    again = cluster.run("sbcast", "-j", str(job), str(source), dest, check=False)
    assert again.returncode == 1
    assert "sbcast: error: REQUEST_FILE_BCAST(node1): File exists" in again.stderr
    source.write_bytes(b"second, compressed")
    os.utime(source, (1_600_000_000, 1_600_000_000))
    cluster.run("sbcast", "-f", "-p", "-C", "-j", str(job), str(source), dest)  # lz4
    for node in ("node1", "node2"):
        copy = shared / f"data.{node}"
        assert copy.read_bytes() == b"second, compressed"
        assert int(copy.stat().st_mtime) == 1_600_000_000


def test_inside_the_job_and_its_errors(cluster: Cluster, job: int, shared: Path) -> None:
    source = _source(shared, "env", b"x")
    inside = {"SLURM_JOB_ID": str(job)}
    cluster.run("sbcast", str(source), str(shared / "env.%n"), env=inside)
    assert (shared / "env.node2").read_bytes() == b"x"
    gone = cluster.run("sbcast", "-j", "999999", str(source), "/tmp/x", check=False)
    assert gone.stderr == "sbcast: error: Slurm job 999999 lookup error: Invalid job id specified\n"
    unwritable = cluster.run(
        "sbcast", "-j", str(job), str(source), "/proc/corral-%n", check=False, env=inside
    )
    assert unwritable.returncode == 1
    assert "REQUEST_FILE_BCAST(node1): " in unwritable.stderr


def test_a_relative_dest_goes_to_dest_dir(cluster: Cluster, job: int, shared: Path) -> None:
    source = _source(shared, "rel", b"relative, lz4 by default")
    done = cluster.run("sbcast", "-v", "-j", str(job), str(source), "rel.%n")
    assert f"sbcast: dest       = {shared}/bdest/rel.%n" in done.stderr
    assert "sbcast: compress   = lz4" in done.stderr
    assert (shared / "bdest" / "rel.node1").read_bytes() == b"relative, lz4 by default"


def test_send_libs_copies_the_programs_libraries(cluster: Cluster, job: int, shared: Path) -> None:
    program = shared / "ls"
    program.write_bytes(Path("/bin/ls").read_bytes())
    program.chmod(0o755)
    done = cluster.run(
        "sbcast", "-v", "--send-libs", "-j", str(job), str(program), str(shared / "ls.%n")
    )
    libc = next(p for p in sharedobjects.shared_objects(str(program), ()) if "libc.so" in p)
    assert f"Broadcast of shared object '{libc}' to destination cache directory" in done.stderr
    for node in ("node1", "node2"):
        libs = shared / f"ls.{node}_libs"
        assert (libs / os.path.basename(libc)).read_bytes() == Path(libc).read_bytes()
        assert (shared / f"ls.{node}").read_bytes() == program.read_bytes()
    again = cluster.run(
        "sbcast", "--exclude=/", "--send-libs", "-j", str(job), str(program), "ls2.%n"
    )
    assert again.stderr == ""
    assert not (shared / "bdest" / "ls2.node1_libs").exists()  # every library excluded
