"""Slurm's task layouts (controller/tasklayout.py) and the ``--distribution`` grammar."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller import tasklayout
from controller.jobenv import tasks_per_node
from controller.jobstate import JobState
from corral import distribution
from tests.unit.scenario import NOW, job


@pytest.mark.parametrize(
    ("room", "ntasks", "counts"),
    [
        ((3, 3), 6, (3, 3)),
        ((5, 1), 6, (5, 1)),
        ((8, 8), 6, (3, 3)),  # whole nodes: even, not the first filled
        ((8, 8), 3, (2, 1)),
        ((4, 2, 2), 5, (2, 2, 1)),
        ((4, 2, 2), 7, (3, 2, 2)),
        ((1, 4), 5, (1, 4)),
        ((2, 2), 6, (3, 3)),  # beyond the room: round robin over every node
        ((1, 3), 6, (2, 4)),
        ((4,), 2, (2,)),
        ((2, 2, 2), 2, (1, 1, 0)),
    ],
)
def test_block_deals_a_round_at_a_time_over_nodes_with_room(
    room: tuple[int, ...], ntasks: int, counts: tuple[int, ...]
) -> None:
    assert tasklayout.block_counts(room, ntasks) == counts
    ids = tasklayout.layout(room, ntasks)
    assert [len(node) for node in ids] == list(counts)
    assert [t for node in ids for t in node] == list(range(ntasks))  # node 0's first


def test_pack_fills_nodes_in_order_after_one_task_each() -> None:
    assert tasklayout.block_counts((4, 4, 4), 6, pack=True) == (4, 1, 1)
    assert tasklayout.block_counts((4, 4), 1, pack=True) == (1, 0)
    assert tasklayout.block_counts((2, 2), 6, pack=True) == (3, 3)


def test_cyclic_numbers_tasks_round_robin_among_nodes_with_room() -> None:
    # srun(1)'s example: three nodes of two CPUs, four tasks: 0 and 3 on the first
    assert tasklayout.layout((2, 2, 2), 4, "cyclic") == ((0, 3), (1,), (2,))
    assert tasklayout.layout((3, 1), 4, "cyclic") == ((0, 2, 3), (1,))


def test_plane_deals_blocks_of_its_size() -> None:
    assert tasklayout.layout((4, 4), 8, "plane", plane=2) == ((0, 1, 4, 5), (2, 3, 6, 7))
    assert tasklayout.layout((4, 4), 6, "plane", plane=4) == ((0, 1, 2, 3), (4, 5))


def test_arbitrary_follows_the_host_list() -> None:
    got = tasklayout.arbitrary(("n1", "n2"), ("n2", "n1", "n2", "n2"))
    assert got == ((1,), (0, 2, 3))


def test_the_batch_environment_lays_tasks_out_over_the_cpus_held() -> None:
    running = replace(job(1, num_tasks=6), state=JobState.RUNNING, start_time=NOW)
    for cpus, expected in (((3, 3), [3, 3]), ((5, 1), [5, 1]), ((8, 8), [3, 3])):
        placed = replace(running, nodes=("a", "b"), cpus=cpus)
        assert tasks_per_node(placed) == expected
    per_task = replace(running, num_tasks=3, cpus_per_task=2, nodes=("a", "b"), cpus=(4, 2))
    assert tasks_per_node(per_task) == [2, 1]


@pytest.mark.parametrize(
    ("text", "method", "plane", "sockets", "cores", "pack", "env"),
    [
        ("block", "block", 0, "cyclic", "cyclic", None, "block"),
        ("*", "block", 0, "cyclic", "cyclic", None, "block"),
        ("cyclic:block", "cyclic", 0, "block", "block", None, "cyclic:block"),
        (
            "block:fcyclic:block,Pack",
            "block",
            0,
            "fcyclic",
            "block",
            True,
            "block:fcyclic:block,Pack",
        ),
        ("plane=3", "plane", 3, "cyclic", "cyclic", None, "plane"),
        ("arbitrary,NoPack", "arbitrary", 0, "cyclic", "cyclic", False, "arbitrary,NoPack"),
        ("*:block", "block", 0, "block", "block", None, "*:block"),
    ],
)
def test_the_distribution_grammar(
    text: str, method: str, plane: int, sockets: str, cores: str, pack: bool | None, env: str
) -> None:
    dist = distribution.parse(text)
    assert (dist.method, dist.plane, dist.socket_method, dist.core_method, dist.pack) == (
        method, plane, sockets, cores, pack,
    )  # fmt: skip
    assert dist.text() == env


@pytest.mark.parametrize(
    "text",
    ["bogus", "block:bogus", "plane=0", "plane=2:block", "block,Tight", "cyclic=2", "a:b:c:d"],
)
def test_srun_refuses_what_slurm_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid --distribution specification"):
        distribution.parse(text)


def test_a_plane_size_may_come_from_the_environment() -> None:
    assert distribution.parse("plane", plane_size="4").plane == 4
    with pytest.raises(ValueError, match="Invalid plane size or size not specified"):
        distribution.parse("plane")
