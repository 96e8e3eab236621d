"""GraceTime end to end: a victim hears SIGTERM first, keeps running for its
GraceTime, then is cancelled or requeued (its partition's PreemptMode), and the
job it made room for starts once its CPUs are free."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.cluster import Cluster

CPUS = os.cpu_count() or 1
GRACE = 4
TRAP = (
    "#!/bin/bash\n"
    "trap 'date +%s.%N >> {term}' TERM\n"
    "echo $SLURM_RESTART_COUNT >> {runs}\n"
    "while true; do sleep 0.2; done\n"
)


def _lines(path: Path) -> list[str]:
    """The lines written so far (a file the job is still writing may be empty)."""
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("mode", ["CANCEL", "REQUEUE"])
def test_a_victim_gets_sigterm_then_its_grace_time_then_the_modes_action(
    make_cluster: Callable[..., Cluster], mode: str
) -> None:
    settings = (
        "KillWait=1",
        "PreemptType=preempt/partition_prio",
        "PreemptMode=CANCEL",
        f"PartitionName=low Nodes=ALL GraceTime={GRACE} PreemptMode={mode}",
        "PartitionName=high Nodes=ALL PriorityTier=2",
    )
    cluster = make_cluster(nodes=1, settings=settings)
    term, runs, started = (cluster.dir / name for name in ("term.txt", "runs.txt", "high.txt"))
    script = cluster.dir / "victim.sh"
    script.write_text(TRAP.format(term=term, runs=runs))
    low = cluster.sbatch("-p", "low", "-n", str(CPUS), "-o", "/dev/null", str(script))
    cluster.wait_for(lambda: _lines(runs), 20, "the low job did not start")
    high = cluster.sbatch("-p", "high", "-n", str(CPUS), "--wrap", f"date +%s.%N > {started}")
    cluster.wait_for(lambda: _lines(term), 20, "the victim heard no SIGTERM")
    warned = float(_lines(term)[0])
    victim = cluster.job(low)
    assert victim["state"] == "RUNNING"  # its GraceTime runs
    assert victim["preempt_time"] > 0
    assert victim["end_time"] == victim["preempt_time"] + GRACE
    shown = cluster.run("scontrol", "show", "job", str(low)).stdout
    assert f"SystemComment=Preempted ({mode.lower()}) for job {high} at " in shown
    assert f"GraceTime {GRACE}s" in shown
    assert not started.exists()

    cluster.wait_for(lambda: _lines(started), 30, "the waiting job did not start")
    assert float(_lines(started)[0]) >= warned + GRACE - 1.5  # after the GraceTime, not before
    assert cluster.wait_done(high)["state"] == "COMPLETED"
    victim = cluster.job(low)
    if mode == "CANCEL":
        assert victim["state"] == "PREEMPTED"
    else:
        cluster.wait_for(lambda: len(_lines(runs)) == 2, 30, "no second run")
        assert cluster.job(low)["restarts"] == 1
        cluster.run("scancel", str(low))
    log = cluster.log("controller")
    assert f"job_id={low} of user" in log and f"for job_id={high}" in log
