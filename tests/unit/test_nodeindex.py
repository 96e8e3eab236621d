"""nodeindex.NodeOrder: an order a pass reuses is the one it would make.

``NodeOrder.of`` keeps the orders recent passes made; these tests change, one at a
time, each thing an order is made from (as the live controller's snapshots change
between passes) and check that the order found is always a freshly made one's twin.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scenario import node, partition

from controller.core.nodeindex import (
    C_BITMAPS,
    PYTHON_BITMAPS,
    Bitmaps,
    NodeOrder,
    _range_string,
    selection_sorted,
)
from controller.core.snapshot import NodeView, PartitionView
from corral import pynodeset


def _fresh(
    nodes: dict[str, NodeView], parts: tuple[PartitionView, ...], bitmaps: Bitmaps = C_BITMAPS
) -> NodeOrder:
    """An order made now, from nothing kept."""
    key = (
        bitmaps,
        tuple(nodes),
        tuple((v.weight, v.rank) for v in nodes.values()),
        tuple((p.name, p.nodes) for p in parts),
    )
    return NodeOrder(key)


def _same(a: NodeOrder, b: NodeOrder) -> None:
    assert a.names == b.names
    assert a.index == b.index
    assert a.bitmaps is b.bitmaps
    assert {k: str(v) for k, v in a.masks.items()} == {k: str(v) for k, v in b.masks.items()}


def _cluster() -> tuple[dict[str, NodeView], tuple[PartitionView, ...]]:
    nodes = {f"n{i}": replace(node(f"n{i}"), rank=i) for i in range(1, 9)}
    return nodes, (partition("batch", "n[1-8]"), partition("small", "n[2-3,7]"))


def test_equal_snapshots_share_an_order_whatever_is_free() -> None:
    nodes, parts = _cluster()
    first = NodeOrder.of(nodes, parts)
    busy = {name: replace(view, free_cpus=0) for name, view in nodes.items()}
    assert NodeOrder.of(dict(busy), tuple(replace(p) for p in parts)) is first
    _same(first, _fresh(nodes, parts))


@pytest.mark.parametrize(
    "change",
    [
        "weight",
        "rank",
        "node added",
        "node gone",
        "mapping order",
        "partition nodes",
        "partition added",
        "bitmaps",
    ],
)
def test_a_changed_snapshot_gets_the_order_made_for_it(change: str) -> None:
    nodes, parts = _cluster()
    bitmaps = C_BITMAPS
    before = NodeOrder.of(nodes, parts)
    if change == "weight":  # scontrol update NodeName=n5 Weight=0
        nodes["n5"] = replace(nodes["n5"], weight=0)
    elif change == "rank":
        nodes["n2"] = replace(nodes["n2"], rank=9)
    elif change == "node added":
        nodes["n0"] = replace(node("n0"), rank=0)
    elif change == "node gone":
        del nodes["n3"]
    elif change == "mapping order":  # equal keys: the mapping's order breaks ties
        nodes = {name: replace(view, rank=0) for name, view in reversed(nodes.items())}
        before = NodeOrder.of({n: nodes[n] for n in sorted(nodes)}, parts)
    elif change == "partition nodes":
        parts = (parts[0], partition("small", "n[2-4,7]"))
    elif change == "partition added":
        parts = (*parts, partition("big", "n[5-8]"))
    else:
        bitmaps = PYTHON_BITMAPS
    after = NodeOrder.of(nodes, parts, bitmaps)
    assert after is not before
    _same(after, _fresh(nodes, parts, bitmaps))
    # and a snapshot like the first again finds the order made for it
    first_nodes, first_parts = _cluster()
    if change != "mapping order":
        assert NodeOrder.of(first_nodes, first_parts) is before


def test_selection_order_ties_keep_the_mapping_order() -> None:
    nodes = {
        n: replace(node(n, weight=w), rank=r) for n, w, r in [("b", 2, 0), ("a", 1, 5), ("c", 1, 5)]
    }
    assert selection_sorted(nodes) == ("a", "c", "b")
    assert NodeOrder.of(nodes, ()).names == ("a", "c", "b")


@settings(max_examples=200, deadline=None)
@given(st.sets(st.integers(0, 40)))
def test_range_string_is_the_runs_of_the_positions(chosen: set[int]) -> None:
    positions = sorted(chosen)
    assert pynodeset.NodeSet(_range_string(positions), size=41) == pynodeset.NodeSet(
        positions, size=41
    )
