"""One scheduling pass on a GPU cluster: 1,000 nodes of 8 GPUs, 10,000 pending GPU jobs.

Synthetic cluster (a fixed seed) of 96-CPU nodes with ``Gres=gpu:h100:8``
(about 1 TB of memory each), about 60 % of its GPUs busy with running jobs
(one to eight GPUs on a node, and jobs of two to four whole nodes) whose
limits end within a day: each has a ``Running`` record with the GPUs it
holds on each node, so backfill's timeline gives them back at its end.
Pending: GPU jobs as sbatch would admit them, 12 CPUs and 120,000 MiB
per GPU:

* one node, 1, 2, 4 or 8 GPUs: ``-N1 -n G -c 12 --gres=gpu:G``;
* 2 to 8 whole nodes: ``-N K --ntasks-per-node=8 -c 12 --gres=gpu:8``;
* one in ten names its type (``--gres=gpu:h100:G``), the rest do not;
* limits of 10 minutes to 24 hours.

For the cluster the script times the pure core, ``schedule(snapshot, now,
BackfillParams(...))``, for the main pass alone, main + backfill at the
default ``bf_max_job_test`` (500) and main + backfill over every pending
job, first with the C node bitmap and then, in the same run, with its
pure-Python twin (``corral.pynodeset``); both must make the same plan.

* one in five is a fraction of a GPU by memory instead: ``-n1 -c 4
  --gres=gpumem:M`` with M = 10, 20 or 40 GiB.

Each node's GPUs also offer 80 GiB of ``gpumem`` each, as per-GPU pools
(``controller.gpushare``): a GPU held whole offers none, as the controller's
snapshot couples them. Within one pass the core does not couple a fraction's
GPU with whole GPUs taken in the same pass (the controller re-checks each
start), so a plan here may count a GPU both ways; ``fraction_starts`` and
``gpumem_started`` say how much the fractions took.

    python bench/gpus.py [--quick] [--runs N]
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import arguments, figure, log, python_baseline, report
from bench.schedule import c_and_python
from controller.core import BackfillParams, Running, Snapshot, schedule
from controller.core.plan import Plan
from controller.model import Job
from tests.unit.scenario import NOW, cluster, job, node, partition

GPUS = 8  # per node
CPUS_PER_GPU = 12
CPUS = GPUS * CPUS_PER_GPU
MEM_PER_CPU = 10_000  # MiB
MEMORY = 1_024_000  # MiB per node
TYPE = "h100"
GPU_MEMORY = 80 << 30  # bytes of gpumem per GPU
#: Share of pending jobs that are fractions, and their sizes (GiB).
FRACTIONS = 0.2
FRACTION_SIZES = (10, 20, 40)

#: (nodes, pending jobs)
FULL = (1_000, 10_000)
QUICK = (100, 1_000)

#: GPUs busy on a node at the start (mean 4.8 of 8: 60 %).
BUSY = [8, 8, 8, 8, 6, 4, 4, 2, 0, 0]
#: How one node's busy GPUs split into running jobs.
SPLITS = {8: [(8,), (4, 4), (4, 2, 1, 1)], 6: [(4, 2), (2, 2, 2)], 4: [(4,), (2, 1, 1)], 2: [(2,)]}
#: Pending job sizes: GPUs on one node, or ("nodes", K) whole nodes, with weights.
SIZES = [(1, 30), (2, 20), (4, 20), (8, 15), ((2,), 5), ((4,), 5), ((8,), 5)]
#: Time limits, minutes (10 minutes to 24 hours).
LIMITS = [10, 30, 60, 120, 240, 480, 720, 1440]


def _gres(free: int) -> tuple[tuple[str, str, int], ...]:
    """A node's free GPUs and their gpumem pools as the controller's snapshot holds
    them: the busy GPUs (the first ones) held whole, so their pools are empty."""
    busy = GPUS - free
    pools = tuple(("gpumem", f"{TYPE}#{i}", 0 if i < busy else GPU_MEMORY) for i in range(GPUS))
    return (("gpu", TYPE, free), *pools)


def _running(job_id: int, names: tuple[str, ...], gpus: int, end: int) -> Running:
    cpus = gpus * CPUS_PER_GPU
    return Running(
        job_id,
        names,
        tuple(cpus for _ in names),
        tuple(cpus * MEM_PER_CPU for _ in names),
        end,
        tuple((("gpu", TYPE, gpus),) for _ in names),
        start_time=NOW - 600,
    )


def _pending(rng: random.Random, job_id: int) -> Job:
    limit = rng.choice(LIMITS)
    if rng.random() < FRACTIONS:  # -n1 -c 4 --gres=gpumem:MG
        gib = rng.choice(FRACTION_SIZES)
        return job(
            job_id,
            cpus_per_task=4,
            cpus_per_task_given=True,
            mem_per_cpu=MEM_PER_CPU,
            gres=f"gpumem:{gib}G",
            time_limit=limit,
            min_nodes=1,
            nodes_given=True,
            num_tasks=1,
        )
    size = rng.choices([s for s, _ in SIZES], weights=[w for _, w in SIZES])[0]
    typed = rng.random() < 0.1
    if isinstance(size, tuple):  # -N K --ntasks-per-node=8 -c 12 --gres=gpu:8
        nodes, per_node = size[0], GPUS
        fields: dict[str, Any] = {
            "min_nodes": nodes,
            "nodes_given": True,
            "ntasks_per_node": per_node,
            "num_tasks": nodes * per_node,
        }
    else:  # -N1 -n G -c 12 --gres=gpu:G
        per_node = size
        fields = {"min_nodes": 1, "nodes_given": True, "num_tasks": size, "tasks_given": True}
    return job(
        job_id,
        cpus_per_task=CPUS_PER_GPU,
        cpus_per_task_given=True,
        mem_per_cpu=MEM_PER_CPU,
        gres=f"gpu:{TYPE}:{per_node}" if typed else f"gpu:{per_node}",
        time_limit=limit,
        **fields,
    )


def workload(nodes: int, pending: int, seed: int = 1) -> Snapshot:
    rng = random.Random(seed)
    busy = [rng.choice(BUSY) for _ in range(nodes)]
    names = [f"gpu{i:04d}" for i in range(nodes)]
    running: list[Running] = []
    next_id = 10**7
    # Whole-node running jobs of 2 to 4 nodes over about a third of the full nodes.
    full = [i for i, b in enumerate(busy) if b == GPUS]
    rng.shuffle(full)
    grouped: set[int] = set()
    while len(grouped) < len(full) // 3:
        k = rng.randint(2, 4)
        members = full[len(grouped) : len(grouped) + k]
        grouped.update(members)
        end = NOW + rng.randint(1, 1440) * 60
        running.append(_running(next_id, tuple(names[i] for i in sorted(members)), GPUS, end))
        next_id += 1
    for i, b in enumerate(busy):
        if i in grouped or not b:
            continue
        for gpus in rng.choice(SPLITS[b]):
            end = NOW + rng.randint(1, 1440) * 60
            running.append(_running(next_id, (names[i],), gpus, end))
            next_id += 1
    views = []
    for name, b in zip(names, busy, strict=True):
        view = node(
            name,
            cpus=CPUS,
            memory=MEMORY,
            used_cpus=b * CPUS_PER_GPU,
            used_memory=b * CPUS_PER_GPU * MEM_PER_CPU,
        )
        views.append(replace(view, gres=_gres(GPUS - b)))
    part = partition("gpu", names)
    jobs = [
        replace(_pending(rng, j), partitions=("gpu",), submit_time=NOW - 100_000 + j)
        for j in range(1, pending + 1)
    ]
    return cluster(views, [replace(part, order=part.nodes)]).snapshot(jobs, running=running)


def _gpus(plan_gres: tuple[tuple[tuple[str, str, int], ...], ...], kind: str = "gpu") -> int:
    return sum(count for items in plan_gres for name, _, count in items if name == kind)


def _size(j: Job) -> str:
    if j.gres.startswith("gpumem:"):
        return f"gpumem_{j.gres.split(':')[1]}"
    return f"{j.min_nodes}x8_gpus" if j.ntasks_per_node else f"{j.num_tasks}_gpus"


def breakdown(snap: Snapshot, plan: Plan) -> dict[str, Any]:
    """What one plan did: GPUs started (main pass and backfill), starts by job size."""
    by_id = {j.job_id: j for j in snap.pending}
    main, later = plan.starts[: plan.main_starts], plan.starts[plan.main_starts :]
    fractions = [s for s in plan.starts if _gpus(s.gres, "gpumem")]
    return {
        "main_starts": plan.main_starts,
        "backfill_starts": len(later),
        "gpus_started": sum(_gpus(s.gres) for s in plan.starts),
        "gpus_started_by_backfill": sum(_gpus(s.gres) for s in later),
        "fraction_starts": len(fractions),
        "gpumem_started_gib": sum(_gpus(s.gres, "gpumem") for s in fractions) >> 30,
        "gpus_shared_by_fractions": len(
            {(s.nodes[0], k) for s in fractions for _, k, _ in s.gres[0]}
        ),
        "starts_by_size": dict(
            sorted(Counter(_size(by_id[s.job_id]) for s in main + later).items())
        ),
    }


def describe(snap: Snapshot) -> dict[str, Any]:
    """The cluster and queue as built (for the JSON)."""
    total = len(snap.nodes) * GPUS
    free = sum(v.gres[0][2] for v in snap.nodes.values())

    whole = [j for j in snap.pending if not j.gres.startswith("gpumem:")]
    return {
        "nodes": len(snap.nodes),
        "cpus_per_node": CPUS,
        "memory_per_node_mib": MEMORY,
        "gres_per_node": f"gpu:{TYPE}:{GPUS},gpumem:{GPUS * (GPU_MEMORY >> 30)}G",
        "gpus": total,
        "gpus_busy": total - free,
        "gpus_busy_percent": round(100 * (total - free) / total, 1),
        "idle_nodes": sum(1 for v in snap.nodes.values() if v.gres[0][2] == GPUS),
        "running_jobs": len(snap.running),
        "pending_jobs": len(snap.pending),
        "pending_gpus": sum(
            j.min_nodes * GPUS if j.ntasks_per_node else j.num_tasks for j in whole
        ),
        "pending_fractions": len(snap.pending) - len(whole),
        "pending_typed": sum(1 for j in snap.pending if TYPE in j.gres),
        "pending_by_size": dict(sorted(Counter(_size(j) for j in snap.pending).items())),
    }


def main() -> None:
    args = arguments(__doc__ or "", runs=3, quick_runs=1)
    baseline = python_baseline()
    nodes, pending = QUICK if args.quick else FULL
    label = f"{nodes}_nodes_{pending}_pending"
    snap = workload(nodes, pending)
    shape = describe(snap)
    log(
        f"{nodes} nodes, {shape['gpus_busy']}/{shape['gpus']} GPUs busy "
        f"({len(snap.running)} running), {pending} pending"
    )
    figures: dict[str, dict[str, Any]] = {}
    for name, depth, backfill in (
        (f"main_pass_{label}", None, False),
        (f"backfill_default_depth_{label}", 500, True),
        (f"backfill_full_depth_{label}", None, True),
    ):
        log(f"{name}: {args.runs} passes (C bitmap, then the Python twin)")
        runs, twin = c_and_python(snap, depth, backfill, args.runs)
        params = BackfillParams(max_job_test=depth or pending) if backfill else None
        plan = schedule(snap, NOW, params)  # untimed: what the plan holds
        extra: dict[str, Any] = {"starts": runs[0][1]}
        if backfill:
            extra["reservations"] = runs[0][2]
            extra["bf_max_job_test"] = depth or pending
        figures[name] = figure(
            [r[0] for r in runs],
            "s",
            slurm=0.203 if depth == 500 else None,
            note=(
                "main + backfill pass; Slurm: 203 ms per backfill pass at its default "
                "500 jobs with 10,000 eligible pending on 4 CPU-only nodes"
                if depth == 500
                else None
            ),
            **extra,
            **breakdown(snap, plan),
            **twin,
        )
    report("gpus", args, baseline, figures, cluster=shape)


if __name__ == "__main__":
    main()
