"""The live controller and ``corral sim`` make the same decisions for one workload.

Both run the same pure core; this checks that what surrounds it (the
controller's cycle, commit and launch; the sim's clock and cluster) does not
change its decisions. Four jobs are submitted held and released together, so
both sides see the same queue at once; the main scheduler alone
(``sched/builtin``, ``--policy fcfs``) keeps the order deterministic. The
sim's start times are exact; the live ones carry launch and clock-tick
delays, so they are compared in order and within two seconds.

The second test does the same on a cluster with multifactor priorities and two
partitions: the sim replays the live cluster's own slurm.conf (``-f``), and a
blocker keeps every job pending until the queue is full, so priorities alone
decide the order.
"""

from __future__ import annotations

from pathlib import Path

from controller.sim import read, replay
from tests.integration.cluster import Cluster

#: (tasks as a fraction of the cluster's CPUs, seconds of run time)
WORKLOAD = [("all", 3), ("half", 2), ("all", 2), ("one", 1)]


def _swf_line(number: int, procs: int, run: int) -> str:
    fields = [number, 0, -1, run, procs, -1, -1, procs, 60, -1, 1] + [-1] * 7
    return " ".join(str(f) for f in fields)


def test_the_live_controller_starts_jobs_as_the_sim_does(make_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    c: Cluster = make_cluster(nodes=2, settings=("SchedulerType=sched/builtin",))
    cpus = c.client.call("Nodes", {})["nodes"][0]["cpus"]
    tasks = {"all": 2 * cpus, "half": cpus, "one": 1}
    ids = [
        c.sbatch("--hold", "-n", str(tasks[size]), "-t", "1", "--wrap", f"sleep {run}")
        for size, run in WORKLOAD
    ]
    c.run("scontrol", "release", ",".join(map(str, ids)))
    live = {i: c.wait_done(i, timeout=60)["start_time"] for i in ids}

    trace = tmp_path / "workload.swf"
    lines = [_swf_line(n, tasks[size], run) for n, (size, run) in enumerate(WORKLOAD, 1)]
    trace.write_text("\n".join(lines) + "\n")
    sim = {j.number: j.start for j in replay(read(str(trace)), 2, cpus, "fcfs").jobs}

    first = min(live.values())
    live_order = sorted(range(1, len(ids) + 1), key=lambda n: (live[ids[n - 1]], n))
    sim_order = sorted(sim, key=lambda n: (sim[n], n))
    assert live_order == sim_order, (live, sim)
    for n, job_id in enumerate(ids, 1):
        assert abs((live[job_id] - first) - sim[n]) <= 2, (n, live, sim)


#: Multifactor priority by partition and job size; partition high weighs ten times debug.
PRIORITIES = (
    "SchedulerType=sched/builtin",
    "PriorityType=priority/multifactor",
    "PriorityWeightPartition=1000",
    "PriorityWeightJobSize=100",
    "PartitionName=high Nodes=ALL MaxTime=INFINITE State=UP PriorityJobFactor=10",
)

#: (partition, tasks, seconds of run time), submitted while a blocker holds every CPU.
#: By priority: high's C (all CPUs, 1075) and D (one, about 1025), then debug's A
#: (all, 175) and B (half, 150); in submission order it would be A, B, C, D.
RANKED = [("debug", "all", 3), ("debug", "half", 2), ("high", "all", 2), ("high", "one", 1)]
BLOCKER_RUN = 5


def test_priorities_and_two_partitions_order_starts_alike(make_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The blocker holds the cluster while the four jobs are submitted; when it ends
    they start in priority order, in the sim (replaying the live cluster's own
    slurm.conf with -f) as live: C, then D, then A once D leaves its CPU, then B
    (behind A in debug: the main scheduler does not pass it)."""
    from controller.sim import siteconf, sitemap
    from controller.sim.siterun import replay_site

    c: Cluster = make_cluster(nodes=2, settings=PRIORITIES)
    cpus = c.client.call("Nodes", {})["nodes"][0]["cpus"]
    tasks = {"all": 2 * cpus, "half": cpus, "one": 1}
    blocker = c.sbatch("-n", str(2 * cpus), "-t", "1", "--wrap", f"sleep {BLOCKER_RUN}")
    c.wait_state(blocker, {"RUNNING"}, timeout=30)
    ids = [
        c.sbatch("-p", part, "-n", str(tasks[size]), "-t", "1", "--wrap", f"sleep {run}")
        for part, size, run in RANKED
    ]
    assert c.job(blocker)["state"] == "RUNNING", "submitting took longer than the blocker"
    live = {i: c.wait_done(i, timeout=90)["start_time"] for i in [blocker, *ids]}

    # Trace user 1 submits to debug (the default), user 2 to high.
    users = {"debug": 1, "high": 2}
    lines = [_swf_user_line(1, 0, 2 * cpus, BLOCKER_RUN, 1)]
    lines += [
        _swf_user_line(n, 1, tasks[size], run, users[part])
        for n, (part, size, run) in enumerate(RANKED, 2)
    ]
    trace = tmp_path / "ranked.swf"
    trace.write_text("\n".join(lines) + "\n")
    site = siteconf.load(c.conf, (), None, sitemap.parse("user=2 partition=high\n", "map"))
    result = replay_site(site, read(str(trace)), site.default_policy)
    sim = {j.number: j.start for j in result.jobs}
    assert sim == {1: 0, 4: 5, 5: 7, 2: 8, 3: 11}, sim

    every = [blocker, *ids]
    first = live[blocker]
    live_order = sorted(range(1, len(every) + 1), key=lambda n: (live[every[n - 1]], n))
    sim_order = sorted(sim, key=lambda n: (sim[n], n))
    assert live_order == sim_order, (live, sim)
    for n, job_id in enumerate(every, 1):
        assert abs((live[job_id] - first) - sim[n]) <= 2, (n, live, sim)


def _swf_user_line(number: int, submit: int, procs: int, run: int, user: int) -> str:
    fields = [number, submit, -1, run, procs, -1, -1, procs, 60, -1, 1, user, 1]
    return " ".join(str(f) for f in fields + [-1] * 5)
