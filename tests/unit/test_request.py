"""``request.fitter``: placement's per-request ``node_fits`` gives its answer on any node.

Its plain path (``_plain_fits``) skips per node the checks a plain request cannot
need; random requests, plain and not, on random nodes and partitions must get the
same ``Fit`` (or None) as ``node_fits`` itself.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import job, node, partition

from controller.core.request import fitter, node_fits
from controller.core.snapshot import NodeView, PartitionView
from controller.model import Job

_MEMORY = st.sampled_from([None, 0, 100, 1000, 3000, 9000])


#: Each a request ``node_fits`` must check more of on every node: with one of them at a
#: time, a wrong shortcut for it shows.
_ODD: dict[str, dict[str, Any]] = {
    "gres": {"gres": "gpu:1"},
    "typed gres": {"gres": "gpu:a100:1"},
    "exclusive": {"exclusive": True},
    "sockets": {"sockets_per_node": 2},
    "cores per socket": {"cores_per_socket": 2},
    "tasks per socket": {"ntasks_per_socket": 1},
}


@st.composite
def _jobs(draw: st.DrawFn) -> Job:
    odd = draw(st.sampled_from([*[None] * len(_ODD), *_ODD]))  # half of them plain
    fields = {
        "num_tasks": draw(st.integers(1, 8)),
        "cpus_per_task": draw(st.integers(1, 3)),
        "min_cpus": draw(st.integers(0, 4)),
        "mem_per_node": draw(_MEMORY),
        "mem_per_cpu": draw(_MEMORY) if draw(st.booleans()) else None,
        "threads_per_core": draw(st.integers(0, 2)),
        "sockets_per_node": draw(st.integers(0, 1)),
        "cores_per_socket": draw(st.integers(0, 1)),
        "oversubscribe": draw(st.booleans()),
    }
    return job(1, **(fields | _ODD[odd] if odd else fields))


@st.composite
def _partitions(draw: st.DrawFn) -> PartitionView:
    part = partition(
        "batch",
        "n1",
        def_mem_per_cpu=draw(st.sampled_from([0, 100])),
        def_mem_per_node=draw(st.sampled_from([0, 500])),
        max_mem_per_node=draw(st.sampled_from([0, 2000])),
        oversubscribe=draw(st.sampled_from(["", "NO", "YES:2", "FORCE:2", "EXCLUSIVE"])),
    )
    return replace(part, max_cpus_per_node=draw(st.sampled_from([None, 2, 6])))


@st.composite
def _nodes(draw: st.DrawFn) -> NodeView:
    cpus = draw(st.sampled_from([1, 2, 4, 8]))
    # Mostly up and without sharing jobs, where the plain path does not hand over.
    sharing = draw(st.sampled_from([(), (), (), (("batch", 1, 1),), (("other", 1, 1),)]))
    view = node(
        "n1",
        cpus,
        draw(st.sampled_from([0, 1000, 4000, 8000])),
        used_cpus=draw(st.sampled_from([0, 0, 1, cpus // 2, cpus])),
        used_memory=draw(st.sampled_from([0, 500])),
        usable=draw(st.sampled_from([True, True, True, False])),
        gres=draw(st.sampled_from(["", "gpu:a100:2"])),
        shared=sharing,
    )
    unit = draw(st.sampled_from([1, 1, 2])) if cpus > 1 else 1
    unshared = draw(st.booleans())  # a job that keeps its CPUs runs here
    return replace(view, unit=unit, sockets=draw(st.integers(0, 2)), unshared=unshared)


@settings(max_examples=3000, deadline=None)
@given(_jobs(), _partitions(), _nodes(), st.integers(1, 5), st.booleans())
def test_fitter_is_node_fits(
    asked: Job, part: PartitionView, view: NodeView, cpus: int, stacking: bool
) -> None:
    expected = node_fits(asked, part, view, cpus, stacking=stacking)
    assert fitter(asked, part, stacking=stacking)(view, cpus) == expected
