"""controller.core.devices: the plan names each start's GPUs and CPUs."""

from __future__ import annotations

from dataclasses import replace

from controller.core import schedule
from controller.core.devices import bind, mask, near_cpus, still_free
from controller.core.plan import Start
from controller.core.snapshot import NodeDevices, NodeView
from tests.unit.scenario import NOW, cluster, job, node, partition

A100S = (("a100", 0), ("a100", 1), ("a100", 2), ("a100", 3))
NEAR = ((0, (0, 1)), (1, (2, 3)), (2, (4, 5)), (3, (6, 7)))


def gpu_node(name: str = "n1", kept: int = 0, **held: frozenset[int]) -> NodeView:
    base = node(name, cpus=8, gres="gpu:a100:4")
    return replace(base, devices=NodeDevices(A100S, near=NEAR, **held), kept_ids=kept)


def start(count: int, cpus: int = 2) -> Start:
    return Start(1, "p", ("n1",), (cpus,), (0,), ((("gpu", "a100", count),),))


def test_the_lowest_free_indices_are_named_with_the_cpus_near_them() -> None:
    nodes = {"n1": gpu_node(whole=frozenset({0}), shared=frozenset({1}))}
    bound = bind(start(2, cpus=4), nodes)  # type: ignore[arg-type]
    assert bound is not None
    assert bound.gpus == ((2, 3),)
    assert bound.cpu_ids == ((4, 5, 6, 7),)


def test_held_cpus_are_passed_over_and_too_few_leave_the_start_to_a_later_pass() -> None:
    nodes = {"n1": gpu_node(kept=mask({0}))}
    bound = bind(start(1), nodes)  # type: ignore[arg-type]
    assert bound is not None and bound.gpus == ((0,),) and bound.cpu_ids == ((1, 2),)
    crowded = {"n1": gpu_node(kept=mask(range(7)))}
    assert bind(start(1, cpus=2), crowded) is None  # type: ignore[arg-type]


def test_a_share_of_a_gpu_given_whole_cannot_be_named() -> None:
    nodes = {"n1": gpu_node(whole=frozenset({2}))}
    share = Start(1, "p", ("n1",), (1,), (0,), ((("mps", "a100#2", 25),),))
    assert bind(share, nodes) is None  # type: ignore[arg-type]
    other = Start(1, "p", ("n1",), (1,), (0,), ((("mps", "a100#1", 25),),))
    named = replace(other, cpu_ids=((0,),))  # a share names no GPU whole, but its CPU
    assert bind(other, nodes) == named  # type: ignore[arg-type]


def test_starts_of_one_pass_get_different_gpus_and_cpus() -> None:
    snap = cluster([gpu_node()], [partition("p", "n1")]).snapshot(  # type: ignore[list-item]
        [job(1, gres="gpu:a100:1", partitions=("p",)), job(2, gres="gpu:a100:2", partitions=("p",))]
    )
    plan = schedule(snap, NOW)
    assert [(s.job_id, s.gpus, s.cpu_ids) for s in plan.starts] == [
        (1, ((0,),), ((0,),)),
        (2, ((1, 2),), ((2,),)),  # one CPU, the first near its GPUs not taken
    ]


def test_cpus_near_the_gpus_come_first() -> None:
    near = {0: (0, 1), 2: (4, 5)}
    assert near_cpus(near, [2], 8, busy=0) == [4, 5]
    assert near_cpus(near, [2, 0], 8, busy=mask({4})) == [0, 1, 5]
    assert near_cpus(near, [3], 8, busy=0) == []


def test_commit_rechecks_the_named_devices_against_the_node_as_it_is_now() -> None:
    bound = bind(start(1), {"n1": gpu_node()})
    assert bound is not None and bound.gpus == ((0,),) and bound.cpu_ids == ((0, 1),)
    assert still_free(gpu_node(), bound, 0)
    assert not still_free(gpu_node(whole=frozenset({0})), bound, 0)  # given whole since
    assert not still_free(gpu_node(shared=frozenset({0})), bound, 0)  # shared since
    assert not still_free(gpu_node(kept=mask({1})), bound, 0)  # CPU taken since
    share = Start(1, "p", ("n1",), (1,), (0,), ((("mps", "a100#2", 25),),))
    assert not still_free(gpu_node(whole=frozenset({2})), share, 0)
