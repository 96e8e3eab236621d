"""The file a job touches to report a checkpoint (CORRAL_CHECKPOINT_FILE) is its user's
alone: the agent makes it in a directory of the run's that is the job user's own (mode
0700), so the job touches it and no other user may touch it or list the directory; it
goes with the run."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import TEST_USERS, Cluster
from tests.security.asuser import open_cluster, run_as


@pytest.fixture
def shared(users: tuple[str, ...]) -> Iterator[Cluster]:
    top = Path(tempfile.mkdtemp(prefix="corral-checkpoint-", dir="/tmp"))
    top.chmod(0o755)
    cluster = open_cluster(top, ("KillWait=2", "SlurmdTimeout=6"))
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(top, ignore_errors=True)


def test_only_the_jobs_user_touches_its_checkpoint_file(shared: Cluster) -> None:
    cluster = shared
    owner, other = (pwd.getpwnam(name) for name in TEST_USERS)
    out = cluster.dir.parent / "work" / "out"
    script = (
        'stat -c "%u %a" "$(dirname "$CORRAL_CHECKPOINT_FILE")" "$CORRAL_CHECKPOINT_FILE"\n'
        'echo "$CORRAL_CHECKPOINT_FILE"\n'
        'touch "$CORRAL_CHECKPOINT_FILE" && echo touched\n'
        "sleep 300\n"
    )
    submitted = run_as(
        cluster,
        owner.pw_uid,
        owner.pw_gid,
        "sbatch",
        "--parsable",
        "-o",
        str(out),
        "--wrap",
        script,
    )
    assert submitted.returncode == 0, submitted.stderr
    job = int(submitted.stdout.strip().split(";")[0])
    cluster.wait_for(lambda: out.exists() and "touched" in out.read_text(), 30, "no touch")
    directory, saved, path, _ = out.read_text().splitlines()
    assert (directory, saved) == (f"{owner.pw_uid} 700", f"{owner.pw_uid} 600")

    def shown() -> str:
        return cluster.run("scontrol", "show", "job", str(job)).stdout

    cluster.wait_for(lambda: "Checkpointed=" in shown(), 20, "no checkpoint shown")
    for argv in (["touch", path], ["ls", os.path.dirname(path)]):
        refused = subprocess.run(
            argv,
            user=other.pw_uid,
            group=other.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            check=False,
        )
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, argv
    assert run_as(cluster, owner.pw_uid, owner.pw_gid, "scancel", str(job)).returncode == 0
    assert cluster.wait_done(job)["state"] == "CANCELLED"
    run = os.path.dirname(os.path.dirname(path))
    cluster.wait_for(lambda: not os.path.exists(run), 20, "the run's directory was kept")
