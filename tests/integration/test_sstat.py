"""sstat end to end: a job whose step holds memory and burns CPU, sampled by the real
agent every second (JobAcctGatherFrequency=task=1), read through the controller by
the real sstat: Slurm's default layout, -o, -p/-P, -n, -a, .batch, and Slurm's
words for steps and jobs that are not running."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.sstat import DEFAULT_FIELDS
from tests.integration.cluster import Cluster

SETTINGS = (
    "KillWait=2",
    "SlurmdTimeout=6",
    "JobAcctGatherType=jobacct_gather/linux",
    "JobAcctGatherFrequency=task=1,energy=0",
)
#: Each task holds ~64 MiB, uses a second of CPU, then waits to be cancelled.
HOG = (
    'python3 -c \'import time; b = bytearray(64 << 20); b[::4096] = b"\\1" * (16 << 10)\n'
    "while time.process_time() < 1: pass\n"
    "time.sleep(300)'"
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, nodes=2, settings=SETTINGS)
    try:
        yield c.start()
    finally:
        c.stop()


def _seconds(clock: str) -> float:
    """sacct's CPU clock (``MM:SS.mmm``, ``HH:MM:SS``) in seconds."""
    parts = [float(p) for p in clock.split("-")[-1].split(":")]
    return float(sum(value * 60.0**power for power, value in enumerate(reversed(parts))))


def _kib(size: str) -> float:
    number = re.fullmatch(r"([\d.]+)([KMGTP]?)", size)
    assert number is not None, size
    return float(number.group(1)) * 1024.0 ** (
        "KMGTP".index(number.group(2)) if number.group(2) else -1
    )


def test_sstat_shows_a_running_step_as_slurm_does(cluster: Cluster) -> None:
    job = cluster.sbatch("-N2", "-n4", "-o", "/dev/null", "--wrap", f"srun -n4 {HOG}")

    def sampled() -> bool:
        # MinCPU too, which the test reads: under load one task can lag the average.
        fields = "MaxRSS,AveCPU,MinCPU"
        done = cluster.run("sstat", "-P", "-n", "-o", fields, "-j", str(job), check=False)
        if done.returncode != 0 or not done.stdout:
            return False
        rss, *cpus = done.stdout.strip().split("|")
        return _kib(rss) >= 60 * 1024 and min(map(_seconds, cpus)) >= 0.9

    cluster.wait_for(sampled, 60, "sstat never showed the step's memory and CPU")

    # Slurm's default fields and widths, one line for the lowest srun step.
    out = cluster.run("sstat", "-j", str(job)).stdout.splitlines()
    assert len(out) == 3, out
    assert out[0].split() == DEFAULT_FIELDS.split(",")
    assert out[2].startswith(f"{job}.0 ".ljust(13))
    parsable = cluster.run("sstat", "-p", "-j", str(job)).stdout.splitlines()
    names = parsable[0].split("|")
    row = dict(zip(names, parsable[1].split("|"), strict=True))
    assert parsable[0].endswith("|") and row[""] == ""
    assert row["JobID"] == f"{job}.0" and row["NTasks"] == "4"
    # Two tasks a node: each maximum and minimum names its node and a task there.
    for name in ("MaxRSS", "MinCPU", "MaxVMSize"):
        node, task = row[f"{name}Node"], int(row[f"{name}Task"])
        assert (node, task // 2) in (("node1", 0), ("node2", 1)), (name, node, task)
    assert _kib(row["AveRSS"]) >= 60 * 1024 and _kib(row["MaxVMSize"]) >= _kib(row["MaxRSS"])
    assert _seconds(row["MinCPU"]) >= 0.9
    assert row["TRESUsageInMax"].startswith("cpu=") and ",mem=" in row["TRESUsageInMax"]
    assert row["TRESUsageInMaxNode"].split(",")[0] in ("cpu=node1", "cpu=node2")
    assert row["ConsumedEnergy"] == "0" and row["ReqCPUFreqGov"] == "Unknown"

    # -a: every running step, the batch script's first; -i: the pids.
    everything = cluster.run("sstat", "-a", "-n", "-P", "-o", "JobID,NTasks", "-j", str(job))
    assert everything.stdout.splitlines() == [f"{job}.batch|1", f"{job}.0|4"]
    pids = cluster.run("sstat", "-n", "-P", "-i", "-j", f"{job}.0").stdout.strip().split("|")
    assert pids[:2] == [f"{job}.0", "node[1-2]"] and len(pids[2].split(",")) == 4

    # Steps and jobs that do not run, in Slurm's words (and its exit status, 0).
    missing = cluster.run("sstat", "-n", "-j", f"{job}.7")
    assert (missing.stdout, missing.stderr) == (
        "",
        f"sstat: error: StepId={job}.7 not found running.\n",
    )
    unknown = cluster.run("sstat", "-n", "-j", "999999")
    assert unknown.stderr == "sstat: error: couldn't get steps for job 999999\n"
    cluster.run("scancel", str(job))
    cluster.wait_done(job, 30)
    ended = cluster.run("sstat", "-n", "-j", str(job))
    assert ended.stderr == f"sstat: error: No steps running for job {job}\n"
    bad = cluster.run("sstat", "-j", "x1", check=False)
    assert (bad.returncode, bad.stderr) == (1, "sstat: fatal: Bad job/step specified: x1\n")


def test_a_steps_max_rss_counts_what_wait4_never_reaped(cluster: Cluster) -> None:
    """A task leaves a 64 MiB process behind in its group and ends: the runner's wait4
    never sees it, the sampler did, and the step's MaxRSS (sacct's) says so."""
    script = cluster.dir / "escape.sh"
    script.write_text(
        "(python3 -c 'import time; b = bytearray(64 << 20); "
        'b[::4096] = b"\\1" * (16 << 10); time.sleep(300)\' &)\nsleep 4\n'
    )
    job = cluster.sbatch("-o", "/dev/null", "--wrap", f"srun -n1 sh {script}")
    record = cluster.wait_done(job, 60)
    assert record["state"] == "COMPLETED"
    (step,) = cluster.job(job)["steps"]
    assert step["max_rss_kb"] >= 60 * 1024 and step["ave_rss_kb"] >= 60 * 1024
