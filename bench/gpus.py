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

Topology (issue 18, point 8): in the same run, the same passes on the same
cluster and queue placed by a ``topology.conf`` (C node bitmap only), and each
figure's ratio to the flat one (target: at most 1.5):

* ``_tree``: ``TopologyPlugin=topology/tree``, three levels: leaf switches of
  20 nodes, spines of 5 leaves (100 nodes), one top switch. One pending job in
  four asks for a topology: ``--switches=1@5:00`` (half of them waiting since
  now, half since ten minutes ago: their wait is over) or
  ``--topology-level=1`` (the whole job under one spine);
* ``_block``: ``TopologyPlugin=topology/block``, base blocks of 20 nodes,
  ``BlockSizes=20,40,80,160``; one job in four asks: ``--segment=2`` (a
  multi-node job: two nodes per base block) or ``--topology-level=1`` (one
  node: within a block of 40).

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
import statistics
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._harness import arguments, figure, log, python_baseline, report
from bench.schedule import c_and_python, one_pass
from controller.core import BackfillParams, Running, Snapshot, schedule
from controller.core import topology as topo
from controller.core.plan import Plan
from controller.model import Job
from corral import topologyconf
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
#: The topology cases: nodes per leaf switch (base block), leaves per spine, jobs asking.
LEAF = 20
SPINE = 5
ASKING = 0.25
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


def topology_text(plugin: str, names: list[str]) -> str:
    """The benchmark's topology.conf: three levels of switches, or blocks of LEAF nodes."""
    leaves = [names[i : i + LEAF] for i in range(0, len(names), LEAF)]
    if plugin == topologyconf.BLOCK:
        lines = [f"BlockName=b{i} Nodes={','.join(leaf)}" for i, leaf in enumerate(leaves)]
        sizes = ",".join(str(LEAF << k) for k in range(4))
        return "\n".join([*lines, f"BlockSizes={sizes}"]) + "\n"
    lines = [f"SwitchName=l{i} Nodes={','.join(leaf)}" for i, leaf in enumerate(leaves)]
    spines = range(0, len(leaves), SPINE)
    for k, first in enumerate(spines):
        last = min(first + SPINE, len(leaves)) - 1
        lines.append(f"SwitchName=s{k} Switches=l[{first}-{last}]")
    lines.append(f"SwitchName=top Switches=s[0-{len(spines) - 1}]")
    return "\n".join(lines) + "\n"


def _asks(rng: random.Random, plugin: str, j: Job) -> Job:
    """One job in four with a topology request (see the module docstring)."""
    if rng.random() >= ASKING:
        return j
    many = j.min_nodes > 1
    if plugin == topologyconf.TREE:
        if rng.random() < 0.5:
            since = NOW if rng.random() < 0.5 else NOW - 600
            return replace(j, switches=1, switch_wait=300, switch_wait_start=since)
        return replace(j, topology_required=1)
    if many:
        return replace(j, segment=2)
    return replace(j, topology_required=1)


def with_topology(snap: Snapshot, plugin: str, seed: int = 2) -> Snapshot:
    """``snap`` placed by a topology.conf of ``plugin``, one job in four asking for one."""
    rng = random.Random(seed)
    names = list(snap.nodes)
    conf = topologyconf.parse(topology_text(plugin, names), "topology.conf", plugin, names)
    view = topo.from_conf(conf, names, dict.fromkeys(names, 1), False)
    parts = {name: replace(p, topology=view) for name, p in snap.partitions.items()}
    pending = tuple(_asks(rng, plugin, j) for j in snap.pending)
    return replace(snap, partitions=parts, pending=pending)


def topology_figures(snap: Snapshot, label: str, runs: int) -> dict[str, dict[str, Any]]:
    """The same passes placed by each topology, and their ratio to the flat ones.

    Each pass is timed flat, then on the tree, then on the blocks, ``runs`` times
    in turn, so that a busy machine slows all three alike; the ratio is of medians.
    """
    kinds = {"flat": snap}
    kinds.update(
        (plugin.split("/")[1], with_topology(snap, plugin))
        for plugin in (topologyconf.TREE, topologyconf.BLOCK)
    )
    figures: dict[str, dict[str, Any]] = {}
    for name, depth, backfill in _PASSES:
        log(f"{name}_{label}: {runs} passes flat, on the tree and on blocks in turn (C bitmap)")
        timed: dict[str, list[tuple[float, int, int]]] = {kind: [] for kind in kinds}
        for _ in range(runs):
            for kind, placed in kinds.items():
                timed[kind].append(one_pass(placed, depth, backfill))
        flat = statistics.median(t[0] for t in timed["flat"])
        for kind in ("tree", "block"):
            value = statistics.median(t[0] for t in timed[kind])
            figures[f"{name}_{label}_{kind}"] = figure(
                [t[0] for t in timed[kind]],
                "s",
                starts=timed[kind][0][1],
                starts_flat=timed["flat"][0][1],
                reservations=timed[kind][0][2],
                pending_asking=sum(1 for j in kinds[kind].pending if topo.asks(j)),
                without_topology_s=round(flat, 3),
                ratio=round(value / flat, 2),
                ratio_target=1.5,
                ratio_met=value / flat <= 1.5,
            )
    return figures


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


#: The passes timed: (name, bf_max_job_test or None for every job, backfill or not).
_PASSES = (
    ("main_pass", None, False),
    ("backfill_default_depth", 500, True),
    ("backfill_full_depth", None, True),
)


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
    for short, depth, backfill in _PASSES:
        name = f"{short}_{label}"
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
    figures.update(topology_figures(snap, label, args.runs))
    report("gpus", args, baseline, figures, cluster=shape)


if __name__ == "__main__":
    main()
