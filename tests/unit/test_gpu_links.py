"""GPUs best linked among themselves (gres.conf Links=): core/gpulinks.py as
core/devices.py names a start's GPUs, and gpuaffinity reading Links=."""

from __future__ import annotations

from dataclasses import replace
from itertools import combinations
from pathlib import Path

from controller import gpuaffinity
from controller.core.devices import bind
from controller.core.gpulinks import Links, best_linked, link_map
from controller.core.plan import Start
from controller.core.snapshot import NodeDevices, NodeView
from corral import config
from tests.unit.scenario import node

PAIRS: Links = ((0, 1, 4), (2, 3, 4))  # 0-1 and 2-3 joined by NVLink


def islands(size: int, count: int) -> Links:
    """``count`` islands of ``size`` GPUs, each GPU linked to every other of its own."""
    out = []
    for first in range(0, size * count, size):
        out += [(a, b, 12) for a, b in combinations(range(first, first + size), 2)]
    return tuple(out)


def gpu_node(gpus: int, links: Links, busy: frozenset[int] = frozenset()) -> NodeView:
    numbers = tuple(("h100", i) for i in range(gpus))
    base = node("n1", cpus=2 * gpus, gres=f"gpu:h100:{gpus}")
    return replace(base, devices=NodeDevices(numbers, whole=busy, links=links))


def chosen(count: int, dev: NodeView) -> tuple[int, ...]:
    bound = bind(Start(1, "p", ("n1",), (1,), (0,), ((("gpu", "h100", count),),)), {"n1": dev})
    assert bound is not None
    return bound.gpus[0]


def test_two_of_four_take_the_free_linked_pair_not_the_lowest_free() -> None:
    assert chosen(2, gpu_node(4, PAIRS, busy=frozenset({1}))) == (2, 3)


def test_without_links_the_lowest_free_as_before() -> None:
    assert chosen(2, gpu_node(4, (), busy=frozenset({1}))) == (0, 2)


def test_four_of_eight_take_one_nvlink_island() -> None:
    assert chosen(4, gpu_node(8, islands(4, 2), busy=frozenset({0}))) == (4, 5, 6, 7)
    assert chosen(4, gpu_node(8, islands(4, 2))) == (0, 1, 2, 3)


def test_sixteen_gpus_are_searched_greedily_and_still_find_an_island() -> None:
    # C(16, 8) sets is over EXHAUSTIVE: the greedy growth from each free GPU decides.
    assert chosen(8, gpu_node(16, islands(8, 2), busy=frozenset({3}))) == tuple(range(8, 16))


def test_among_equally_linked_sets_the_earliest_candidates_win() -> None:
    links = link_map(PAIRS)
    assert best_linked([0, 1, 2, 3], 2, links) == [0, 1]
    assert best_linked([3, 2, 1, 0], 2, links) == [3, 2]  # the candidates' own order
    assert best_linked([0, 2], 3, links) is None
    assert best_linked([0, 2, 1], 1, links) == [0]


def test_gres_conf_links_become_pairs_by_gpu_number(tmp_path: Path) -> None:
    # Links name GPUs by their place among the node's devices; numbers come from File=.
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=h\nGresTypes=gpu\n"
        "NodeName=n1 CPUs=8 Gres=gpu:4\nPartitionName=p Nodes=n1\n"
    )
    (tmp_path / "gres.conf").write_text(
        "NodeName=n1 Name=gpu File=/dev/nvidia4 Links=-1,2,0,0\n"
        "NodeName=n1 Name=gpu File=/dev/nvidia5 Links=2,-1,0,0\n"
        "NodeName=n1 Name=gpu File=/dev/nvidia6 Links=0,0,-1,1\n"
        "NodeName=n1 Name=gpu File=/dev/nvidia7 Links=0,0,3,-1\n"
    )
    conf = config.load(str(tmp_path / "slurm.conf"))
    assert gpuaffinity.gpu_links(conf, "n1") == ((4, 5, 2), (6, 7, 3))


def test_probed_nvlinks_are_reported_by_the_controllers_numbering() -> None:
    from nodeagent.gpus.migbinding import probed_links
    from tests.unit.test_gpu_probe import expected_h100s

    # The fake host: 8 H100s, NVLinked in pairs of 6 lanes and 2 across; the last two
    # are in MIG mode (their instances are numbered 6..14 and have no links).
    numbering = [("h100", i) for i in range(6)]
    numbering += [("1g.10gb", 6 + i) for i in range(7)] + [("3g.40gb", 13), ("3g.40gb", 14)]
    assert probed_links(expected_h100s(), numbering) == [
        (0, 1, 6),
        (0, 2, 2),
        (1, 3, 2),
        (2, 3, 6),
        (4, 5, 6),
    ]


def test_the_hello_carries_the_probed_links_to_the_nodes_devices() -> None:
    from nodeagent.agent import registrations, select_nodes
    from tests.unit.test_probe import CONF, facts_for

    conf = config.parse(CONF.format(host="h1"), "/etc/corral/slurm.conf")
    nodes = select_nodes(conf, None, "h1")
    (reg,) = registrations(nodes, facts_for("h1"), gpu_links=[(0, 1, 6), (2, 3, 6)])
    assert [(g.a, g.b, g.count) for g in reg.gpu_links] == [(0, 1, 6), (2, 3, 6)]
