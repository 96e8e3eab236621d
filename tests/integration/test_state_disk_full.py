"""The state disk filled while jobs run, then freed; a corrupt journal (issue 16, point 5).

StateSaveLocation is a 2 MiB tmpfs. Filled, the controller refuses submissions
and updates in Slurm's words, lets the running jobs run and takes their results,
and accepts again by itself once space returns; after a kill -9 every job it
acknowledged is still there and the results it took are recorded. Mounting
needs root: without it the test is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral import errors
from corral.errors import SlurmError
from tests.integration.cluster import DONE, Cluster
from tests.integration.faultkit import fill

REFUSED = "sbatch: error: Batch job submission failed: I/O error writing script/environment to file"
#: Each submission's script: new pages in the journal, so a full disk is met quickly.
BIG = "#!/bin/sh\n" + "# padding\n" * 4000 + "true\n"


@pytest.fixture
def small_state(tmp_path: Path) -> Iterator[Cluster]:
    """A two-node cluster whose StateSaveLocation is a 2 MiB tmpfs (unmounted after)."""
    cluster = Cluster(tmp_path, nodes=2, settings=("KillWait=2",))
    state = tmp_path / "state"
    state.mkdir()
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0755", "tmpfs", str(state)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mount.returncode != 0:
        why = f"cannot mount a tmpfs: {mount.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
        subprocess.run(["umount", str(state)], check=True)


def test_a_full_state_disk_refuses_changes_keeps_results_and_recovers(
    small_state: Cluster, tmp_path: Path
) -> None:
    c = small_state
    marks = [tmp_path / f"ran{n}" for n in range(2)]
    running = [c.sbatch("--wrap", f"sleep 4; echo done > {mark}") for mark in marks]
    for job_id in running:
        c.wait_state(job_id, {"RUNNING"})

    acknowledged = [c.submit(BIG, tmp_path, "fill") for _ in range(6)]  # kept before the disk fills
    filler = fill(c.dir / "state")
    refusal: SlurmError | None = None
    for _ in range(300):  # SQLite reuses its WAL's room for a while: submit until refused
        try:
            acknowledged.append(c.submit(BIG, tmp_path, "fill"))
        except SlurmError as exc:
            refusal = exc
            break
    assert refusal is not None, "a full state disk never refused a submission"
    assert refusal.code == errors.ESLURM_WRITING_TO_FILE

    # Refused up front now, in Slurm's words, with a failing exit status.
    sbatch = c.run("sbatch", "--wrap", "true", check=False)
    assert (sbatch.returncode, sbatch.stderr.strip()) == (1, REFUSED)
    drain = c.run("scontrol", "update", "nodename=node2", "state=drain", "reason=x", check=False)
    assert drain.returncode != 0 and "I/O error writing script/environment" in drain.stderr
    assert "cannot write" in c.log("controller")

    # The running jobs run to their end, and their results are taken meanwhile.
    c.wait_for(lambda: all(m.exists() for m in marks), 30, "running jobs did not run on")
    c.wait_for(lambda: all(c.job(j)["state"] == "COMPLETED" for j in running), 30, "no results")

    filler.unlink()
    c.wait_for(
        lambda: c.run("sbatch", "--wrap", "true", check=False).returncode == 0,
        30,
        "the controller did not accept again once space returned",
    )
    assert "written again; accepting changes" in c.log("controller")
    every = running + acknowledged
    c.wait_for(lambda: all(c.job(j)["state"] in DONE for j in every), 120, "jobs did not end")

    c.kill("controller", signal.SIGKILL)
    c.start_controller()
    states = {j["job_id"]: j["state"] for j in c.jobs()}
    assert [j for j in every if j not in states] == [], "an acknowledged job was lost"
    assert [states[j] for j in running] == ["COMPLETED", "COMPLETED"]
    assert all(states[j] == "COMPLETED" for j in acknowledged)


def test_a_corrupt_journal_stops_the_controller_with_one_line(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, nodes=1)
    state = tmp_path / "state"
    state.mkdir()
    (state / "corral-state.db").write_bytes(b"not a database" * 100)
    ended = subprocess.run(
        [sys.executable, "-m", "controller.main", "-f", cluster.conf],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ended.returncode == 1
    assert ended.stderr.splitlines()[-1] == (
        f"corral-controller: fatal: {state}/corral-state.db: corrupt state "
        "(file is not a database); no good copy to start from"
    )
    assert "Traceback" not in ended.stderr
