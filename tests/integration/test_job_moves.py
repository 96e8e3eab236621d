"""A pending job moves to another cluster that starts it sooner (issue 20, Kueue's
MultiKueue; docs/federation.md, "A pending job moves"): two clusters on this machine
sharing one corral-dbd, each looking every second."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

HOLD = "while [ ! -e go ]; do sleep 0.2; done"
MOVES = (
    "SchedulerParameters=requeue_delay=1,bf_interval=1,corral_move_interval=1,corral_move_margin=0"
)


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[Cluster, Cluster]]:
    if os.geteuid() != 0:
        pytest.skip("a job as another user needs root")
    top = Path(tempfile.mkdtemp(prefix="corral-moves-", dir="/tmp"))
    top.chmod(0o755)  # the jobs' users reach their work directories below it
    alpha = Cluster(top / "alpha", 1, ("KillWait=2", MOVES), accounting=True, name="alpha")
    beta: Cluster | None = None
    try:
        alpha.start()
        beta = Cluster(top / "beta", 1, ("KillWait=2", MOVES), name="beta", dbd_of=alpha).start()
        alpha.wait_for(
            lambda: "beta" in alpha.run("sacctmgr", "-n", "-P", "show", "cluster").stdout,
            30,
            "beta never registered with dbd",
        )
        yield alpha, beta
    finally:
        if beta is not None:
            beta.stop()
        alpha.stop()
        shutil.rmtree(top, ignore_errors=True)


@pytest.fixture
def work(pair: tuple[Cluster, Cluster]) -> Path:
    """A directory any job's user may write, with ``hold.sh`` (ends once ``go`` exists)."""
    alpha, _ = pair
    path = Path(tempfile.mkdtemp(dir=alpha.dir.parent))
    path.chmod(0o777)
    (path / "hold.sh").write_text(f"#!/bin/sh\n{HOLD}\n")
    return path


def _blocker(alpha: Cluster, work: Path) -> int:
    """alpha's one node taken for an hour: a job waiting there expects a late start."""
    busy = alpha.sbatch(
        "-D", str(work), "-o", "/dev/null", "--exclusive", "-t", "60", str(work / "hold.sh")
    )
    alpha.wait_state(busy, {"RUNNING"})
    return busy


def _moved_from(beta: Cluster, key: str) -> list[dict[str, object]]:
    return [j for j in beta.jobs() if j.get("moved_from") == key]


def test_a_waiting_job_moves_once_to_the_cluster_that_starts_it_sooner(
    pair: tuple[Cluster, Cluster], work: Path, users: tuple[str, ...]
) -> None:
    alpha, beta = pair
    user = pwd.getpwnam(users[0])
    script = work / "who.sh"
    script.write_text('#!/bin/sh\necho "$(id -u) $SLURM_WORKING_CLUSTER $SLURM_CLUSTER_NAME"\n')
    # Both idle: the first named wins, and it is held there before it can start.
    line = alpha.run(
        "sbatch", "-M", "alpha,beta", "-H", f"--uid={user.pw_uid}", "-D", str(work),
        "-o", "moved-%j.out", str(script),
    ).stdout  # fmt: skip
    assert line.endswith(" on cluster alpha\n"), line
    job = int(line.split()[3])
    busy = _blocker(alpha, work)
    single = alpha.sbatch("-M", "alpha", "-D", str(work), "-o", "/dev/null", "--wrap", "true")
    alpha.run("scontrol", "release", str(job))

    alpha.wait_state(job, {"CANCELLED"}, timeout=60)
    shown = alpha.run("scontrol", "show", "job", str(job)).stdout
    assert "JobState=REVOKED " in shown, shown
    moved_to = next(w for w in shown.split() if w.startswith("MovedTo="))
    there = int(moved_to.removeprefix("MovedTo=beta:"))
    done = beta.wait_done(there)
    assert done["state"] == "COMPLETED" and done["uid"] == user.pw_uid, done
    assert f"MovedFrom=alpha:{job}" in beta.run("scontrol", "show", "job", str(there)).stdout
    ran = (work / f"moved-{there}.out").read_text().split()
    assert ran[0] == str(user.pw_uid) and ran[1].startswith("beta:") and ran[2] == "beta", ran
    assert len(_moved_from(beta, f"alpha:{job}")) == 1  # once

    why = alpha.run("corral", "why", str(job)).stdout
    assert why == f"Job {job} ({user.pw_name}) moved to cluster beta as job {there}.\n", why
    queue = alpha.run("squeue", "-M", "all", "-h", "-t", "all", "-o", "%i %t").stdout
    assert "CLUSTER: alpha\n" in queue and f"{job} RV\n" in queue, queue
    alpha.wait_for(
        lambda: "REVOKED" in alpha.run("sacct", "-n", "-X", "-j", str(job), "-o", "State").stdout,
        20,
        "sacct never showed the job REVOKED",
    )

    # A job whose -M named one cluster waits where it is, however long.
    assert alpha.job(single)["state"] == "PENDING"
    assert _moved_from(beta, f"alpha:{single}") == []
    (work / "go").touch()
    assert alpha.wait_done(busy)["state"] == "COMPLETED"
    assert alpha.wait_done(single)["state"] == "COMPLETED"


def _being_sent(alpha: Cluster, job: int) -> None:
    """alpha's controller killed with the job journaled as being sent to beta: the
    state it leaves between ``send_to``'s flush and the job's revocation."""
    alpha.kill("controller")
    state = sqlite3.connect(alpha.dir / "state" / "corral-state.db")
    with state:
        (row,) = state.execute("SELECT record FROM jobs WHERE job_id = ?", (job,)).fetchone()
        record = json.loads(row)
        record.pop("held", None)
        record.update(moved_to="beta", reason="NONE")
        state.execute("UPDATE jobs SET record = ? WHERE job_id = ?", (json.dumps(record), job))
    state.close()


@pytest.mark.parametrize("sent", [False, True], ids=["before-sending", "after-sending"])
def test_a_controller_killed_mid_move_leaves_exactly_one_copy(
    pair: tuple[Cluster, Cluster], work: Path, users: tuple[str, ...], sent: bool
) -> None:
    alpha, beta = pair
    user = pwd.getpwnam(users[0])
    job = alpha.sbatch(
        "-M", "alpha,beta", "-H", f"--uid={user.pw_uid}", "-D", str(work),
        "-o", "/dev/null", "--wrap", "true",
    )  # fmt: skip
    _being_sent(alpha, job)
    key = f"alpha:{job}"
    spec = {"script": "#!/bin/sh\ntrue\n", "work_dir": str(work), "std_out": "/dev/null"}
    if sent:  # the submission reached beta; its answer never reached alpha
        made = beta.client.call(
            "Submit", {"spec": {**spec, "run_as_uid": user.pw_uid}, "moved_from": key}
        )
        again = beta.client.call(
            "Submit", {"spec": {**spec, "run_as_uid": user.pw_uid}, "moved_from": key}
        )
        assert again["job_id"] == made["job_id"]  # a retry gets the job the first made
        other = pwd.getpwnam(users[1]).pw_uid
        theirs = beta.client.call(
            "Submit", {"spec": {**spec, "run_as_uid": other}, "moved_from": key}
        )
        assert theirs["job_id"] != made["job_id"]  # another user's key finds nothing of this one's
        beta.client.call("Signal", {"filter": {"job_ids": [str(theirs["job_id"])]}})
    alpha.start_controller()

    alpha.wait_state(job, {"CANCELLED"}, timeout=60)
    copies = [j for j in _moved_from(beta, key) if j["uid"] == user.pw_uid]
    assert len(copies) == 1, copies
    there = copies[0]["job_id"]
    if sent:
        assert there == made["job_id"]
    assert alpha.job(job)["moved_to"] == f"beta:{there}"
    assert beta.wait_done(there)["state"] == "COMPLETED"
