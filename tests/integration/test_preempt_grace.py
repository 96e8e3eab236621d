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


def _settings(low: str, *extra: str) -> tuple[str, ...]:
    """Jobs of partition ``high`` preempt those of ``low`` (which has a GraceTime
    and the words ``low`` adds), CANCEL unless ``low`` says otherwise."""
    return (
        "KillWait=1",
        "PreemptType=preempt/partition_prio",
        "PreemptMode=CANCEL",
        *extra,
        f"PartitionName=low Nodes=ALL GraceTime={GRACE} {low}".rstrip(),
        "PartitionName=high Nodes=ALL PriorityTier=2",
    )


@pytest.mark.parametrize("mode", ["CANCEL", "REQUEUE"])
def test_a_victim_gets_sigterm_then_its_grace_time_then_the_modes_action(
    make_cluster: Callable[..., Cluster], mode: str
) -> None:
    cluster = make_cluster(nodes=1, settings=_settings(f"PreemptMode={mode}"))
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


def test_send_user_signal_warns_with_the_jobs_own_signal(
    make_cluster: Callable[..., Cluster],
) -> None:
    settings = _settings("", "PreemptParameters=send_user_signal")
    cluster = make_cluster(nodes=1, settings=settings)
    usr1, term, runs = (cluster.dir / name for name in ("usr1.txt", "term.txt", "runs.txt"))
    script = cluster.dir / "victim.sh"
    script.write_text(
        TRAP.format(term=term, runs=runs).replace(
            "trap ", f"trap 'date +%s.%N >> {usr1}' USR1\ntrap ", 1
        )
    )
    low = cluster.sbatch(
        "-p", "low", "-n", str(CPUS), "-o", "/dev/null", "--signal=B:USR1@600", str(script)
    )  # fmt: skip
    cluster.wait_for(lambda: _lines(runs), 20, "the low job did not start")
    cluster.sbatch("-p", "high", "-n", str(CPUS), "--wrap", "true")
    cluster.wait_for(lambda: _lines(usr1), 20, "the victim heard no USR1")
    warned = float(_lines(usr1)[0])
    assert cluster.wait_done(low)["state"] == "PREEMPTED"
    ended = _lines(term)  # the cancel's own SIGTERM, after the GraceTime; none before
    assert not ended or float(ended[0]) >= warned + GRACE - 1.5
