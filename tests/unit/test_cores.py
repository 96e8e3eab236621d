"""Whole cores: on hyperthreaded nodes cons_tres (CR_Core, the default) gives CPUs by core."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.admission import static_nodes
from controller.core import schedule
from tests.unit.scenario import NOW, cluster, job, node, partition, slurm_conf

HT = cluster([replace(node("n1", cpus=8), unit=2)], [partition("batch", "n1")])


@pytest.mark.parametrize(
    ("fields", "cpus"),
    [
        ({"num_tasks": 1}, 2),
        ({"num_tasks": 2}, 2),
        ({"num_tasks": 3}, 4),
        ({"cpus_per_task": 3}, 4),
    ],
    ids=["one-task-one-core", "two-tasks-share-a-core", "three-tasks-two-cores", "c3-two-cores"],
)
def test_allocations_round_up_to_whole_cores(fields: dict[str, int], cpus: int) -> None:
    plan = schedule(HT.snapshot([job(1, **fields)]), NOW)
    assert [s.cpus for s in plan.starts] == [(cpus,)]


def test_a_node_whose_free_cpus_are_not_a_whole_core_cannot_take_a_task() -> None:
    busy = cluster([replace(node("n1", cpus=8, used_cpus=7), unit=2)], [partition("batch", "n1")])
    plan = schedule(busy.snapshot([job(1)]), NOW)
    assert plan.starts == ()


@pytest.mark.parametrize(
    ("select", "unit"),
    [("", 2), ("SelectTypeParameters=CR_Core_Memory", 2), ("SelectTypeParameters=CR_CPU", 1)],
    ids=["default-cores", "cr-core-memory", "cr-cpu-threads"],
)
def test_the_allocation_unit_follows_select_type_parameters(select: str, unit: int) -> None:
    lines = [select] if select else []
    conf = slurm_conf(*lines, "NodeName=n1 CPUs=8 ThreadsPerCore=2", "PartitionName=p Nodes=n1")
    assert static_nodes(conf)["n1"].unit == unit
