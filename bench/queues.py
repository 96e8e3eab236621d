"""One scheduling cycle with team queues, and a reclaim of about 1,000 running jobs
(issue 17, point 8).

The cluster: 1,000 nodes of 96 CPUs, about 1 TB of memory and ``Gres=gpu:h100:8``,
every GPU busy. The queue tree, written as queues.conf text and read by
``corral.queueconf.parse``: 5 departments (Guarantee=gres/gpu=1600), 3 teams in
each (500), 2 leaf queues in each team (250, one account each): 50 queues on
three levels under the root. The 12 leaves of the first two departments are the
borrowers: they hold every GPU (2,000 running jobs of 4 GPUs, two on each node,
against their 3,000 guaranteed), the second job of each node started earlier than
the first. The 18 leaves of the other three departments hold nothing and have
waiting jobs: the oldest 54 of the 20,000 pending jobs (3 per starved leaf) ask
for 20 nodes of 4 GPUs each, the rest for 1, 2, 4 or 8 GPUs on one node, spread
over all 30 leaves.

The cycle is the controller's: the queue view built as ``controller/snapshots.py``
builds it (``queueviews.view``: each job's queue and TRES, the fair shares divided
this pass), then the main pass, ``schedule(snapshot, now)``, whose end is the
reclaim (``queueplan.reclaims``: the quota core's victims, each group kept only
if the waiting job then fits on nodes). Timed beside it, in the same run and on
the same snapshot, the same pass with no queues configured (``queues=None``),
and the reclaim's own time inside the pass (the quota core's share of it apart).

    python bench/queues.py [--quick] [--runs N]
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import arguments, figure, log, python_baseline, report
from bench.gpus import CPUS, CPUS_PER_GPU, GPUS, MEM_PER_CPU, MEMORY, TYPE  # gpus.py's nodes
from controller import queueviews
from controller.core import Running, Snapshot, quota, schedule
from controller.core.fairshare import Usage
from controller.core.plan import Plan
from controller.core.priority import NO_RANKING
from controller.core.queueplan import QueueView
from controller.jobstate import JobState
from controller.model import Job
from corral.queueconf import QueueConf, parse
from tests.unit.scenario import NOW, cluster, job, node, partition

#: The module (``controller.core.schedule`` is also the name of its function).
SCHEDULE_MODULE = sys.modules["controller.core.schedule"]

VICTIM_GPUS = 4  # each running job: half a node
#: Departments, teams per department, leaves per team; guarantees (GPUs) at each level.
DEPARTMENTS, TEAMS, LEAVES = 5, 3, 2
GUARANTEES = (1600, 500, 250)
BORROWING_DEPARTMENTS = 2
#: The reclaimers: per starved leaf, jobs of RECLAIMER_NODES nodes x VICTIM_GPUS GPUs.
RECLAIMERS_PER_LEAF = 3
RECLAIMER_NODES = 20
#: The other pending jobs' GPUs on one node, with weights.
SIZES = [(1, 30), (2, 25), (4, 25), (8, 20)]

#: (nodes, pending jobs)
FULL = (1_000, 20_000)
QUICK = (100, 2_000)


def queues_text(scale: int = 1) -> str:
    """queues.conf for the tree (guarantees divided by ``scale`` for smaller clusters)."""
    lines = ["# 50 queues on three levels (bench/queues.py)"]
    top, mid, low = (g // scale for g in GUARANTEES)
    for d in range(1, DEPARTMENTS + 1):
        lines.append(f"QueueName=d{d} Guarantee=gres/gpu={top}")
        for t in range(1, TEAMS + 1):
            lines.append(f"QueueName=d{d}-t{t} Parent=d{d} Guarantee=gres/gpu={mid}")
            for leaf in range(1, LEAVES + 1):
                lines.append(
                    f"QueueName=d{d}-t{t}-l{leaf} Parent=d{d}-t{t} Guarantee=gres/gpu={low} "
                    f"Accounts=a{d}{t}{leaf}"
                )
    return "\n".join(lines) + "\n"


def leaves(departments: range) -> list[str]:
    """The accounts of the leaves under ``departments``."""
    return [
        f"a{d}{t}{leaf}"
        for d in departments
        for t in range(1, TEAMS + 1)
        for leaf in range(1, LEAVES + 1)
    ]


def _running_job(job_id: int, name: str, account: str, started: int) -> Job:
    """A borrower's job holding ``VICTIM_GPUS`` GPUs on node ``name``."""
    cpus = VICTIM_GPUS * CPUS_PER_GPU
    return job(
        job_id,
        state=JobState.RUNNING,
        account=account,
        partition="gpu",
        partitions=("gpu",),
        nodes=(name,),
        cpus=(cpus,),
        alloc_mem=(cpus * MEM_PER_CPU,),
        gres_alloc=((("gpu", TYPE, VICTIM_GPUS),),),
        start_time=started,
        time_limit=1440,
    )


def _record(j: Job) -> Running:
    """The snapshot's record of running job ``j`` (as ``snapshots._running`` makes it)."""
    return Running(
        j.job_id,
        j.nodes,
        j.cpus,
        j.alloc_mem,
        j.start_time + j.time_limit * 60,
        j.gres_alloc,
        requeue=True,
        partition=j.partition,
        start_time=j.start_time,
    )


def _pending(rng: random.Random, job_id: int, account: str, nodes: int = 1) -> Job:
    if nodes > 1:  # -N K --ntasks-per-node=4 -c 12 --gres=gpu:4
        gpus, fields = VICTIM_GPUS, {"ntasks_per_node": VICTIM_GPUS}
        tasks = nodes * VICTIM_GPUS
    else:  # -N1 -n G -c 12 --gres=gpu:G
        gpus = rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]
        fields, tasks = {"tasks_given": True}, gpus
    return job(
        job_id,
        account=account,
        partitions=("gpu",),
        cpus_per_task=CPUS_PER_GPU,
        cpus_per_task_given=True,
        mem_per_cpu=MEM_PER_CPU,
        gres=f"gpu:{gpus}",
        time_limit=rng.choice([60, 240, 1440]),
        min_nodes=nodes,
        nodes_given=True,
        num_tasks=tasks,
        submit_time=NOW - 100_000 + job_id,
        **fields,
    )


def workload(nodes: int, pending: int, seed: int = 1) -> tuple[Snapshot, QueueConf, list[Job]]:
    """The snapshot without queues, the queue tree, and every job (running, then pending)."""
    rng = random.Random(seed)
    scale = FULL[0] // nodes
    conf = parse(queues_text(scale), "/bench/queues.conf", gres_types=("gpu",))
    borrowers = leaves(range(1, BORROWING_DEPARTMENTS + 1))
    starved = leaves(range(BORROWING_DEPARTMENTS + 1, DEPARTMENTS + 1))
    names = [f"gpu{i:04d}" for i in range(nodes)]
    running: list[Job] = []
    for slot, started in ((0, NOW - 3_600), (1, NOW - 7_200)):  # slot 0: the most recent
        for i, name in enumerate(names):
            job_id = 10**7 + slot * nodes + i
            running.append(_running_job(job_id, name, borrowers[job_id % len(borrowers)], started))
    jobs: list[Job] = []
    for account in starved:
        for _ in range(RECLAIMERS_PER_LEAF):
            jobs.append(_pending(rng, len(jobs) + 1, account, RECLAIMER_NODES // scale or 2))
    everyone = borrowers + starved
    while len(jobs) < pending:
        jobs.append(_pending(rng, len(jobs) + 1, rng.choice(everyone)))
    views = [
        replace(
            node(name, cpus=CPUS, memory=MEMORY, used_cpus=CPUS, used_memory=CPUS * MEM_PER_CPU),
            gres=(("gpu", TYPE, 0),),
        )
        for name in names
    ]
    part = partition("gpu", names)
    snap = cluster(views, [replace(part, order=part.nodes)]).snapshot(
        jobs, running=[_record(j) for j in running]
    )
    return snap, conf, running + jobs


def queue_view(snap: Snapshot, conf: QueueConf, jobs: list[Job]) -> QueueView:
    """The snapshot's queues, as ``controller/snapshots.py`` builds them."""
    capacity = {"cpu": 0, "mem": 0, "node": 0, "gres/gpu": 0, f"gres/gpu:{TYPE}": 0}
    for view in snap.nodes.values():
        capacity["cpu"] += view.cpus
        capacity["mem"] += view.real_memory
        capacity["node"] += 1
        capacity["gres/gpu"] += GPUS
        capacity[f"gres/gpu:{TYPE}"] += GPUS
    return queueviews.view(conf, jobs, snap.pending, capacity, None, Usage(), NO_RANKING)


class Stopwatch:
    """Seconds spent in one function, by wrapping the name its caller looks up."""

    def __init__(self, owner: Any, name: str) -> None:
        self.owner, self.name, self.seconds = owner, name, 0.0
        self.inner: Callable[..., Any] = getattr(owner, name)

    def __enter__(self) -> Stopwatch:
        def timed(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return self.inner(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - began

        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc: object) -> None:
        setattr(self.owner, self.name, self.inner)


def cycle(snap: Snapshot, conf: QueueConf, jobs: list[Job]) -> tuple[dict[str, float], Plan]:
    """One cycle with queues: the view, then the pass; the reclaim timed inside it."""
    began = time.perf_counter()
    view = queue_view(snap, conf, jobs)
    built = time.perf_counter()
    with (
        Stopwatch(SCHEDULE_MODULE, "reclaims") as reclaim,
        Stopwatch(quota, "reclaim") as core,
    ):
        plan = schedule(replace(snap, queues=view), NOW)
    ended = time.perf_counter()
    return {
        "cycle": ended - began,
        "view": built - began,
        "pass": ended - built,
        "reclaim": reclaim.seconds,
        "reclaim_quota_core": core.seconds,
    }, plan


def without_queues(snap: Snapshot) -> tuple[float, Plan]:
    began = time.perf_counter()
    plan = schedule(snap, NOW)
    return time.perf_counter() - began, plan


def main() -> None:
    args = arguments(__doc__ or "", runs=3, quick_runs=1)
    baseline = python_baseline()
    nodes, pending = QUICK if args.quick else FULL
    label = f"{nodes}_nodes_{pending}_pending"
    snap, conf, jobs = workload(nodes, pending)
    log(
        f"{nodes} nodes x {GPUS} GPUs, {len(conf.queues) - 1} queues, "
        f"{len(snap.running)} running, {pending} pending"
    )
    times: dict[str, list[float]] = {}
    plain: list[float] = []
    plan = plain_plan = None
    for turn in range(args.runs):  # in turns, so that neither side gets a quieter machine
        log(f"turn {turn + 1}/{args.runs}: with queues, then without")
        measured, plan = cycle(snap, conf, jobs)
        for key, seconds in measured.items():
            times.setdefault(key, []).append(seconds)
        seconds, plain_plan = without_queues(snap)
        plain.append(seconds)
    assert plan is not None and plain_plan is not None
    evicted = len(plan.preempted)
    reclaim_share = [r / c for r, c in zip(times["reclaim"], times["cycle"], strict=True)]
    figures = {
        f"cycle_with_queues_{label}": figure(
            times["cycle"],
            "s",
            target="< 1",
            note="queue view (division included) + main pass + reclaim; KAI: 76 s and "
            "7.9 GiB to reclaim on 1,000 nodes (peers.md 1.9)",
            view_s=round(sorted(times["view"])[len(times["view"]) // 2], 3),
            pass_s=round(sorted(times["pass"])[len(times["pass"]) // 2], 3),
            starts=len(plan.starts),
            evictions=evicted,
            requeued=len(plan.requeued),
            evicted_gpus=evicted * VICTIM_GPUS,
            reclaimers=len(set(plan.preempted.values())),
        ),
        f"cycle_without_queues_{label}": figure(
            plain, "s", note="the same snapshot with queues=None", starts=len(plain_plan.starts)
        ),
        f"reclaim_{label}": figure(
            times["reclaim"],
            "s",
            note="queueplan.reclaims inside the pass: the quota core's victims, then "
            "placement of each waiting job on the freed nodes",
            quota_core_s=round(sorted(times["reclaim_quota_core"])[args.runs // 2], 3),
            share_of_cycle_pct=round(100 * sorted(reclaim_share)[args.runs // 2], 1),
            evictions=evicted,
        ),
    }
    report(
        "queues",
        args,
        baseline,
        figures,
        cluster={
            "nodes": nodes,
            "gpus": nodes * GPUS,
            "queues": len(conf.queues) - 1,
            "leaf_queues": len(conf.leaves()),
            "running_jobs": len(snap.running),
            "pending_jobs": len(snap.pending),
        },
    )


if __name__ == "__main__":
    main()
