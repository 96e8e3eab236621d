"""The live controller and ``corral sim`` make the same decisions for one workload.

Both run the same pure core; this checks that what surrounds it (the
controller's cycle, commit and launch; the sim's clock and cluster) does not
change its decisions. Four jobs are submitted held and released together, so
both sides see the same queue at once; the main scheduler alone
(``sched/builtin``, ``--policy fcfs``) keeps the order deterministic. The
sim's start times are exact; the live ones carry launch and clock-tick
delays, so they are compared in order and within two seconds.
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
