"""The core's pass on nodes of one CPU, in C: where a backfill replay spends its time.

A trace's own cluster has nodes of one CPU (``replay.cluster_shape``: MaxProcs over
MaxNodes), every job asks for one-CPU tasks, no memory, for its time limit, and one
partition holds every node. On that input the core's pass (``schedule``'s main pass,
then backfill's) reduces to bits: a node is free or not, and at most one job on it
ends at a time the core knows. ``csrc/onecpu.c`` restates that pass step by step:
the same trial times (``core/timeline.py``), pictures computed lazily in the same
order, candidates in selection order with the nodes an end gives back first, the
same start moved sooner (``Backfill._sooner``) and the same shortcuts (``floor``,
``resume``), so every decision is the one ``controller.core.schedule`` makes.
``tests/unit/test_onecpu.py`` compares the two pass by pass on random clusters and
queues, and ``tests/unit/test_sim_backfill.py`` whole replays with the controller's
way (every job, every node, the Python core, at every event).

``Backfilling`` (``policy.py``) calls it in place of the core where it applies; the
Python core stays the definition, and a change to its backfill must be made here too
(the comparison tests fail until it is).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

from corral._onecpu import ffi, lib

from controller.core import BackfillParams, PartitionView, Plan
from controller.core.backfill import duration
from controller.core.plan import Draft, Start
from controller.model import Job


def job_test_limit(params: BackfillParams) -> int:
    """How many jobs a backfill pass tests from the head: ``bf_max_job_test``, and
    ``bf_max_job_user`` too (every sim job has the same user)."""
    if params.max_job_user:
        return min(params.max_job_test, params.max_job_user)
    return params.max_job_test


def one_cpu_pass(
    ends: array[int],
    names: Sequence[str],
    part: PartitionView,
    jobs: Sequence[Job],
    now: int,
    params: BackfillParams | None,
) -> Plan:
    """The plan ``schedule`` makes at ``now`` for ``jobs`` (in the core's order) on the
    nodes ``names`` (in selection order, all in ``part``); ``ends``: per node, -1 while
    free, else the end time the core knows for its job. ``params`` None: the main
    pass alone."""
    if params is not None and params.resolution < 1:  # C would divide by it
        raise ValueError(f"bf_resolution must be at least 1 second, not {params.resolution}")
    shapes: dict[tuple[int, int], int] = {}
    tasks = array("i", [job.num_tasks for job in jobs])
    window = params.window if params is not None else 0
    length = array("q", [duration(job, part, window) for job in jobs])
    shape = array("i", [shapes.setdefault((j.num_tasks, j.time_limit), len(shapes)) for j in jobs])
    node_job = array("i", bytes(4 * len(names)))
    started = lib.onecpu_pass(
        now,
        window,
        params.resolution if params is not None else 1,
        job_test_limit(params) if params is not None else 0,
        1 if params is not None and params.easy else 0,
        len(names),
        ffi.from_buffer("int64_t[]", ends),
        len(jobs),
        ffi.from_buffer("int32_t[]", tasks),
        ffi.from_buffer("int64_t[]", length),
        ffi.from_buffer("int32_t[]", shape),
        len(shapes),
        ffi.from_buffer("int32_t[]", node_job, require_writable=True),
    )
    if started < 0:
        raise MemoryError("the one-CPU pass ran out of memory")
    given: dict[int, list[str]] = {}
    for node, job in enumerate(node_job):
        if job >= 0:
            given.setdefault(job, []).append(names[node])
    plan = Draft(now=now, backfilled=params is not None)
    for index in sorted(given):  # in the core's order: the main pass's, then backfill's
        nodes = tuple(given[index])
        one = (1,) * len(nodes)
        plan.starts.append(Start(jobs[index].job_id, part.name, nodes, one, (0,) * len(nodes)))
    return plan.freeze()
