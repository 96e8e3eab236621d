"""PreemptMode=SUSPEND,GANG on a live cluster, its jobs contained in cgroups.

A low-tier job that counts every 0.2 s is suspended by a job of a higher
PriorityTier partition: its count stops while the preemptor runs, its memory
cgroup keeps its limit, and it goes on by itself once the preemptor ends. In a
partition with OverSubscribe=FORCE:2 and SchedulerTimeSlice=2, two jobs on the
same CPUs take turns, and each counts for a fair part of the time; a job of
the higher tier takes their CPUs from both, the one waiting for its turn too,
and once it ends they take turns again. Needs root and a cgroup file system,
as test_suspend.py does.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nodeagent import cgroups
from tests.integration.cluster import Cluster
from tests.integration.test_containment import SETTINGS, WHY_NOT
from tests.integration.test_suspend import count, still

pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no cgroups: {WHY_NOT}")

CPUS = os.cpu_count() or 1
PREEMPT = (
    *SETTINGS,
    "PreemptType=preempt/partition_prio",
    "PreemptMode=SUSPEND,GANG",
    "SchedulerTimeSlice=2",
    "PartitionName=high Nodes=ALL PriorityTier=2",
    "PartitionName=gang Nodes=ALL OverSubscribe=FORCE:2",
)


def counter(name: str) -> str:
    """Counts in ``name`` every 0.2 s."""
    return f"i=0; while :; do i=$((i+1)); echo $i > {name}; sleep 0.2; done"


def memory_limit(cluster: Cluster, job: int) -> str:
    """The memory limit of the job's cgroup, as the file says it."""
    paths = cgroups.run_paths(str(cluster.dir / "spool" / "node1" / f"job{job}.0"))
    for name in ("memory.max", "memory.limit_in_bytes"):
        path = Path(paths["memory"], name)
        if path.exists():
            return path.read_text().strip()
    raise AssertionError(f"no memory limit in {paths}")


def test_a_suspended_victim_keeps_its_memory_and_resumes_when_its_preemptor_ends(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=1, settings=PREEMPT, start=False)
    (cluster.dir / "cgroup.conf").write_text("ConstrainRAMSpace=yes\n")
    cluster.start()
    low = cluster.sbatch("-p", "debug", "-o", "/dev/null", "-c", str(CPUS), "--mem=64",
                         "--wrap", counter("low"))  # fmt: skip
    cluster.wait_for(lambda: count(cluster, "low") > 2, 20, "the low job never counted")
    limit = memory_limit(cluster, low)
    assert limit == str(64 * 1024 * 1024)
    high = cluster.sbatch("-p", "high", "-o", "/dev/null", "-c", str(CPUS), "--mem=32",
                          "--wrap", "sleep 6")  # fmt: skip

    cluster.wait_state(low, {"SUSPENDED"}, timeout=20)
    cluster.wait_state(high, {"RUNNING"}, timeout=20)
    cluster.wait_for(lambda: still(cluster, "low"), 15, "the suspended job kept counting")
    assert still(cluster, "low", 1.5)
    assert memory_limit(cluster, low) == limit  # its memory stays its own
    shown = cluster.run("scontrol", "show", "job", str(low)).stdout
    assert "JobState=SUSPENDED" in shown
    assert f"Preempted (suspend) for job {high}" in shown
    log = (cluster.logs / "controller.log").read_text()
    assert f"job_id={low} of user" in log and "preempted (suspend)" in log

    assert cluster.wait_done(high, timeout=30)["state"] == "COMPLETED"
    cluster.wait_state(low, {"RUNNING"}, timeout=20)
    counted = count(cluster, "low")
    cluster.wait_for(
        lambda: count(cluster, "low") > counted + 2, 15, "the resumed job never counted"
    )
    resumed = cluster.job(low)
    assert resumed["suspended_secs"] >= 4
    assert f"job_id={low} resumed" in (cluster.logs / "controller.log").read_text()
    cluster.run("scancel", str(low))
    assert cluster.wait_done(low)["state"] == "CANCELLED"


def test_gang_jobs_sharing_cpus_take_turns(make_cluster: Callable[..., Cluster]) -> None:
    cluster = make_cluster(nodes=1, settings=PREEMPT)
    options = ("-p", "gang", "-o", "/dev/null", "-c", str(CPUS), "--mem=32", "--wrap")
    jobs = [cluster.sbatch(*options, counter(name)) for name in ("one", "two")]
    cluster.wait_for(
        lambda: count(cluster, "one") > 0 and count(cluster, "two") > 0,
        30,
        "both jobs never counted",
    )
    seen: set[tuple[str, str]] = set()
    start = {name: count(cluster, name) for name in ("one", "two")}
    began = time.monotonic()
    progress = dict.fromkeys(start, 0)
    # At least 10 s (five slices); on a loaded machine, until each has had turns.
    while time.monotonic() - began < 10 or (
        min(progress.values()) < 5 and time.monotonic() - began < 40
    ):
        # One query for both: two would see the turn change between them.
        states = {j["job_id"]: j["state"] for j in cluster.jobs(*jobs)}
        seen.add(tuple(states[j] for j in jobs))  # type: ignore[arg-type]
        time.sleep(0.5)
        progress = {name: count(cluster, name) - start[name] for name in start}
    total = sum(progress.values())
    assert total > 0
    for name, made in progress.items():
        assert made / total >= 0.25, (name, progress)
    # They alternate: each was suspended while the other ran, and never both ran.
    assert ("RUNNING", "SUSPENDED") in seen and ("SUSPENDED", "RUNNING") in seen, seen
    assert ("RUNNING", "RUNNING") not in seen, seen
    for job in jobs:
        cluster.run("scancel", str(job))
        assert cluster.wait_done(job)["state"] == "CANCELLED"


def test_a_higher_tier_job_takes_the_cpus_of_jobs_taking_turns(
    make_cluster: Callable[..., Cluster],
) -> None:
    cluster = make_cluster(nodes=1, settings=PREEMPT)
    options = ("-p", "gang", "-o", "/dev/null", "-c", str(CPUS), "--mem=32", "--wrap")
    names = ("one", "two")
    jobs = [cluster.sbatch(*options, counter(name)) for name in names]
    cluster.wait_for(
        lambda: sorted(j["state"] for j in cluster.jobs(*jobs)) == ["RUNNING", "SUSPENDED"],
        30,
        "the jobs never took turns",
    )
    # The one waiting for its turn keeps the CPUs too: both are preempted (suspended).
    high = cluster.sbatch("-p", "high", "-o", "/dev/null", "-c", str(CPUS), "--mem=32",
                          "--wrap", "sleep 6")  # fmt: skip
    cluster.wait_state(high, {"RUNNING"}, timeout=30)
    assert [j["state"] for j in cluster.jobs(*jobs)] == ["SUSPENDED", "SUSPENDED"]
    before = [count(cluster, name) for name in names]
    time.sleep(1.5)
    assert [count(cluster, name) for name in names] == before  # no turns under it
    for job in jobs:
        shown = cluster.run("scontrol", "show", "job", str(job)).stdout
        assert f"Preempted (suspend) for job {high}" in shown

    assert cluster.wait_done(high, timeout=30)["state"] == "COMPLETED"
    ended = [count(cluster, name) for name in names]
    cluster.wait_for(
        lambda: all(count(cluster, n) > c for n, c in zip(names, ended, strict=True)),
        40,
        "the jobs never took turns again",
    )
    for job in jobs:
        cluster.run("scancel", str(job))
        assert cluster.wait_done(job)["state"] == "CANCELLED"
