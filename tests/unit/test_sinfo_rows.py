"""sinfo's rows: finding the row a node joins by its host (``groups._Rows``) picks
the very row a look through every row would, on random clusters and formats."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cli import sinfo
from cli.nodes import groups
from corral.wire import codec

FORMATS = ["%n", "%o", "%n%o%P", "%n %t", "%P %n %f", "%N %n %o %T", "%N %t", "%P %D %t"]


def _reference(
    nodes: list[dict[str, Any]], partitions: list[dict[str, Any]], how: groups.Grouping
) -> list[groups.NodeGroup]:
    """``groups.build`` as written before the rows were indexed: every row asked."""
    rows: list[groups.NodeGroup] = []
    if "partition" in how.flags:
        rows.extend(groups.NodeGroup(part, index) for index, part in enumerate(partitions))
    by_name = {node["name"]: node for node in nodes}
    for index, part in enumerate(partitions):
        for name in part["node_names"]:
            node = by_name[name]
            for row in rows:
                if groups._same_partition(row, index, part, how) and (
                    not row.nodes or groups._same_node(row, node, how)
                ):
                    row.add(node)
                    break
            else:
                rows.append(groups.NodeGroup(part, index, [node]))
    return rows


@st.composite
def _cluster(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes sharing few host names, addresses, states and features; two partitions."""
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        record = codec.decode("NodeInfo", b"")
        record.update(
            name=f"n{i}",
            hostname=draw(st.sampled_from(["h1", "h2", f"n{i}"])),
            addr=draw(st.sampled_from(["a1", "a2", f"n{i}"])),
            state=draw(st.sampled_from(["IDLE", "ALLOCATED", "DOWN"])),
            available_features=draw(st.sampled_from(["", "x"])),
            cpus=2,
        )
        nodes.append(record)
    names = [n["name"] for n in nodes]
    partitions = []
    for name in ("p", "q"):
        record = codec.decode("PartitionInfo", b"")
        members = draw(st.lists(st.sampled_from(names), unique=True))
        record.update(name=name, node_names=members, state="UP", max_time=-1)
        partitions.append(record)
    return nodes, partitions


@settings(max_examples=200, deadline=None)
@given(cluster=_cluster(), spec=st.sampled_from(FORMATS))
def test_rows_found_by_host_are_the_rows_every_row_asked_would_give(
    cluster: tuple[list[dict[str, Any]], list[dict[str, Any]]], spec: str
) -> None:
    nodes, partitions = cluster
    layout = sinfo.build_layout(spec, False)
    how = groups.Grouping(layout.flags)
    got = groups.build(nodes, partitions, how)
    want = _reference(nodes, partitions, how)
    shape = [[(r.part_index, [n["name"] for n in r.nodes]) for r in rows] for rows in (got, want)]
    assert shape[0] == shape[1]
