"""A job whose process cannot be killed drains its node "Kill task failed".

Slurm's rule (slurmstepd's step_terminate_monitor): a process of a step still
there UnkillableStepTimeout seconds after SIGKILL makes slurmstepd log that the
step did not end with signals and drain the node with the reason "Kill task
failed"; the job itself ends as it was going to (a cancelled job CANCELLED).

A real unkillable process: the job's ``sleep``, moved by this test into a
cgroup v1 freezer cgroup of its own and frozen, does not die on SIGKILL until it
is thawed. Only its freezer membership changes: its cgroups in the hierarchies
the agent contains runs with (the v2 one for processes here) still hold it, so
the agent sees it left behind. Needs root and cgroup containment (where CI is
set, these fail rather than skip without them) and a v1 freezer hierarchy beside
a v2 one holding the processes (a hybrid host; skipped on a pure v2 one, whose
freezer lets SIGKILL through).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from nodeagent import cgroups
from tests.integration.cluster import Cluster
from tests.integration.test_containment import SETTINGS as CONTAINED
from tests.integration.test_containment import alive

LAYOUT = cgroups.detect()
FREEZER = next(
    (
        point
        for version, point, opts in cgroups.cgroup_mounts()
        if version == 1 and "freezer" in opts
    ),
    None,
)
USES_FREEZER = any(version == cgroups.V1 and "procs" in names for version, _, names in LAYOUT)
WHY_NOT = cgroups.unusable(LAYOUT)
if WHY_NOT is not None and os.environ.get("CI"):
    pytest.fail(f"cgroups unusable in CI: {WHY_NOT}", pytrace=False)
# A pure cgroup v2 host has no freezer a SIGKILL waits for (v2's thaws for it): no
# unkillable process can be made there, in CI either.
NO_FREEZE = (
    "no cgroup v1 freezer hierarchy to freeze a process in"
    if FREEZER is None
    else "runs are contained with the v1 freezer itself: moving a process out frees it"
    if USES_FREEZER
    else None
)
pytestmark = pytest.mark.skipif(
    WHY_NOT is not None or NO_FREEZE is not None, reason=f"{WHY_NOT or NO_FREEZE}"
)

#: Contained (KillWait=1), and 5 s for the processes to go after SIGKILL.
SETTINGS = (*CONTAINED, "UnkillableStepTimeout=5")


@pytest.fixture
def freezer() -> Iterator[Path]:
    """A freezer cgroup of this test's own; thawed, emptied and removed at the end."""
    assert FREEZER is not None
    path = Path(FREEZER) / f"corral-test-unkillable.{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        (path / "freezer.state").write_text("THAWED")
        deadline = time.monotonic() + 10
        while True:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            for pid in pids:  # the job's process, its SIGKILL now delivered, or killed here
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            try:
                path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def frozen(cluster: Cluster, job: int, freezer: Path) -> int:
    """The job's ``sleep`` (its pid in sleep.pid), moved into ``freezer`` and frozen."""
    pid_file = cluster.dir / "sleep.pid"
    cluster.wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 15, "no sleep")
    pid = int(pid_file.read_text())
    own = cgroups.own_cgroups(pid)
    assert f"/job_{job}/" in own[""]  # the v2 hierarchy holds the runs' processes here
    (freezer / "cgroup.procs").write_text(str(pid))
    (freezer / "freezer.state").write_text("FROZEN")
    cluster.wait_for(
        lambda: (freezer / "freezer.state").read_text().strip() == "FROZEN", 10, "not frozen"
    )
    # Only the freezer hierarchy changed: the job's cgroups still hold the process.
    assert {k: v for k, v in cgroups.own_cgroups(pid).items() if k != "freezer"} == {
        k: v for k, v in own.items() if k != "freezer"
    }
    return pid


def cancel_and_see_drained(cluster: Cluster, job: int, pid: int, entity: str) -> None:
    """Cancel the job: it ends CANCELLED, and UnkillableStepTimeout after the kill the
    node is drained "Kill task failed", with slurmstepd's line for ``entity``."""
    cancelled = time.monotonic()
    cluster.run("scancel", str(job))
    assert cluster.wait_done(job)["state"] == "CANCELLED"

    def drained() -> bool:
        shown = cluster.run("sinfo", "-R", "-h", "-o", "%E|%N").stdout.splitlines()
        return "Kill task failed|node1" in shown

    cluster.wait_for(drained, 20, "the node was not drained 'Kill task failed'")
    # The shell ended on SIGTERM at once; the sleep was given UnkillableStepTimeout.
    assert time.monotonic() - cancelled >= 5
    assert alive(pid)  # SIGKILLed, frozen: still there
    node = cluster.run("scontrol", "show", "node", "node1").stdout
    state = next(word for word in node.split() if word.startswith("State="))
    assert "DRAIN" in state
    assert "Reason=Kill task failed" in node
    log = cluster.log("nodeagent")
    assert f"*** {entity} STEPD TERMINATED ON node1 AT " in log
    assert "DUE TO JOB NOT ENDING WITH SIGNALS ***" in log


SLEEP = "sleep 1000 & echo $! > sleep.pid; wait"


def test_an_unkillable_process_drains_its_node_kill_task_failed(
    make_cluster: Callable[..., Cluster], freezer: Path
) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    assert "jobs contained in cgroups" in cluster.log("nodeagent")
    job = cluster.sbatch("-o", "k.out", "--wrap", SLEEP)
    pid = frozen(cluster, job, freezer)
    cancel_and_see_drained(cluster, job, pid, f"JOB {job}")
    (freezer / "freezer.state").write_text("THAWED")  # the pending SIGKILL lands
    cluster.wait_for(lambda: not alive(pid), 10, f"process {pid} outlived its thaw")


def test_an_unkillable_process_of_a_step_drains_its_node(
    make_cluster: Callable[..., Cluster], freezer: Path
) -> None:
    cluster = make_cluster(nodes=1, settings=SETTINGS)
    (cluster.dir / "step.sh").write_text(SLEEP + "\n")
    job = cluster.sbatch("-o", "k.out", "--wrap", "srun sh step.sh")
    pid = frozen(cluster, job, freezer)
    assert cgroups.own_cgroups(pid)[""].endswith(f"/job_{job}/step_0")
    cancel_and_see_drained(cluster, job, pid, f"STEP {job}.0")
    (freezer / "freezer.state").write_text("THAWED")
    cluster.wait_for(lambda: not alive(pid), 10, f"process {pid} outlived its thaw")
