"""sattach by another Unix user: refused in Slurm's words, and the step's runners
never told to connect anywhere (the owner's own attach is tests/integration)."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.asuser import open_cluster, run_as, shared_top


@pytest.fixture
def shared() -> Iterator[Path]:
    yield from shared_top()


def test_another_users_sattach_is_refused(users: tuple[str, ...], shared: Path) -> None:
    cluster = open_cluster(shared)
    try:
        job = cluster.sbatch("-o", "/dev/null", "--wrap", "srun sleep 300")
        cluster.wait_for(lambda: bool(cluster.job(job)["steps"]), 60, "the step did not start")
        other = pwd.getpwnam(users[0])
        for argv in (["--layout", f"{job}.0"], [f"{job}.0"]):
            done = run_as(cluster, other.pw_uid, other.pw_gid, "sattach", *argv)
            assert (done.returncode, done.stderr) == (
                1,
                "sattach: error: Access/permission denied\n",
            )
        assert "sattach at" not in cluster.log("nodeagent")
        cluster.run("scancel", str(job))
    finally:
        cluster.stop()
