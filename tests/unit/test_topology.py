"""Placement by network topology (controller/core/topology.py): scenario tables.

Each scenario is a topology.conf, the nodes busy, one job and where it goes (or
that it waits). The trees are small enough to check by eye; the comments say
what is free where.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.why import text as why_text
from controller.admission import admit, partition_view
from controller.core import BackfillParams, Running, schedule
from controller.core import topology as topo
from controller.core.snapshot import PartitionView
from controller.core.why import TopologyAsk, explain
from controller.jobspec import from_fields
from controller.jobstate import Reason
from controller.principal import principal_for
from controller.whyviews import _reply
from corral import errors, hostlist, topologyconf
from corral.config import SlurmConfig
from corral.errors import SlurmError
from corral.whydoc import why_document
from corral.wire import codec
from tests.unit.scenario import NOW, cluster, job, node, partition, slurm_conf

#: Four leaf switches of four nodes, two spines, one top switch.
TREE = """\
SwitchName=l0 Nodes=n[0-3]
SwitchName=l1 Nodes=n[4-7]
SwitchName=l2 Nodes=n[8-11]
SwitchName=l3 Nodes=n[12-15]
SwitchName=s0 Switches=l[0-1]
SwitchName=s1 Switches=l[2-3]
SwitchName=top Switches=s[0-1]
"""
NODES = [f"n{i}" for i in range(16)]


def fabric(
    text: str,
    busy: str,
    names: list[str] = NODES,
    plugin: str = topologyconf.TREE,
    optional: bool = False,
    weights: dict[str, int] | None = None,
) -> tuple[list[Any], PartitionView]:
    """Nodes of 4 CPUs (``busy`` ones full) and partition ``batch`` placed by ``text``."""
    conf = topologyconf.parse(text, "topology.conf", plugin, names)
    weight = weights or {}
    view = topo.from_conf(conf, names, {n: weight.get(n, 1) for n in names}, optional)
    full = set(hostlist.expand(busy)) if busy else set()
    nodes = [
        node(n, cpus=4, used_cpus=4 if n in full else 0, weight=weight.get(n, 1)) for n in names
    ]
    return nodes, replace(partition("batch", names), topology=view)


def start_of(nodes: list[Any], part: PartitionView, *jobs: Any) -> dict[int, Any]:
    """Each job's nodes (as a hostlist) or its reason, from one main pass."""
    plan = schedule(cluster(nodes, [part]).snapshot(jobs), NOW)
    got: dict[int, Any] = {s.job_id: hostlist.compress(s.nodes) for s in plan.starts}
    got.update({j: r for j, r in plan.reasons.items() if j not in got})
    return got


def fixed(nodes: int, **fields: Any) -> Any:
    """``-N nodes`` (one task a node)."""
    return job(1, min_nodes=nodes, nodes_given=True, num_tasks=nodes, **fields)


# Free: l0 n[2-3] (2), l1 n7 (1), l2 n[9-11] (3), l3 n[14-15] (2); s0 3, s1 5.
BUSY = "n[0-1,4-6,8,12-13]"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"nodes": 2}, "n[2-3]"),
        ({"nodes": 3}, "n[9-11]"),
        ({"nodes": 5}, "n[9-11,14-15]"),
        ({"nodes": 6}, "n[7,9-11,14-15]"),
        ({"nodes": 5, "topology_required": 0}, Reason.RESOURCES),
        ({"nodes": 5, "topology_required": 1}, "n[9-11,14-15]"),
        ({"nodes": 6, "topology_required": 1}, Reason.RESOURCES),
        ({"nodes": 2, "topology_preferred": 1}, "n[2-3]"),
        ({"nodes": 2, "topology_preferred": 1, "topology_required": 1}, "n[2-3]"),
        ({"nodes": 8}, "n[2-3,7,9-11,14-15]"),
        ({"nodes": 9}, Reason.RESOURCES),
    ],
    ids=[
        "best-fit leaf: the fullest that holds it (l0 over l2)",
        "one leaf holds it exactly",
        "no leaf holds it: the spine that does (s1), its leaves best fit",
        "no spine holds it: the top switch, the fullest spine, then the best-fit leaf for one",
        "required level 0: waits for one leaf",
        "required level 1: one spine holds it",
        "required level 1: no spine holds it, waits though the top has room",
        "preferred level 1: the tightest spine (s0, 3 free), its tightest leaf",
        "preferred and required level 1",
        "every free node",
        "more than are free: waits",
    ],
)
def test_tree_placement(fields: dict[str, Any], expected: Any) -> None:
    nodes, part = fabric(TREE, BUSY)
    count = fields.pop("nodes")
    assert start_of(nodes, part, fixed(count, **fields)) == {1: expected}


def test_preferred_level_packs_the_spine_not_the_leaf() -> None:
    # Free: l0 4, l1 0 (s0: 4); l2 3, l3 4 (s1: 7). Three nodes: the tightest leaf is
    # l2 (3, under s1); the tightest spine holding 3 is s0, where l0 takes them.
    nodes, part = fabric(TREE, "n[4-7,8]")
    assert start_of(nodes, part, fixed(3)) == {1: "n[9-11]"}
    assert start_of(nodes, part, fixed(3, topology_preferred=1)) == {1: "n[0-2]"}


#: Two spines: one over three leaves of two free nodes, one over two of four and three.
WIDE = """\
SwitchName=a0 Nodes=n[0-3]
SwitchName=a1 Nodes=n[4-7]
SwitchName=a2 Nodes=n[8-11]
SwitchName=b0 Nodes=n[12-15]
SwitchName=b1 Nodes=n[16-19]
SwitchName=A Switches=a[0-2]
SwitchName=B Switches=b[0-1]
SwitchName=top Switches=A,B
"""
WIDE_NODES = [f"n{i}" for i in range(20)]
WIDE_BUSY = "n[0-1,4-5,8-9,19]"  # A: 2+2+2 = 6 free; B: 4+3 = 7 free


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, "n[2-3,6-7,10-11]"),
        ({"switches": 2, "switch_wait": 300}, "n[12-17]"),
        ({"switches": 1, "switch_wait": 300}, Reason.RESOURCES),
        ({"switches": 1, "switch_wait": 300, "switch_wait_start": NOW - 300}, "n[2-3,6-7,10-11]"),
        ({"switches": 1, "switch_wait": 0}, "n[2-3,6-7,10-11]"),
        ({"switches": 3, "switch_wait": 300}, "n[2-3,6-7,10-11]"),
    ],
    ids=[
        "best fit: spine A (6 free) over three leaves",
        "--switches=2: spine B, where two leaves hold it",
        "--switches=1: no leaf holds six, waits",
        "--switches=1 after its wait: any placement",
        "--switches=1@0: no wait at all",
        "--switches=3: spine A is within it",
    ],
)
def test_switches_bound_the_leaves_until_the_wait_ends(
    fields: dict[str, Any], expected: Any
) -> None:
    nodes, part = fabric(WIDE, WIDE_BUSY, WIDE_NODES)
    assert start_of(nodes, part, fixed(6, **fields)) == {1: expected}


def test_the_switch_wait_starts_when_the_scheduler_first_sees_the_job() -> None:
    nodes, part = fabric(WIDE, WIDE_BUSY, WIDE_NODES)
    waiting = fixed(6, switches=1, switch_wait=300)
    plan = schedule(cluster(nodes, [part]).snapshot([waiting]), NOW)
    assert dict(plan.switch_waits) == {1: NOW}
    seen = replace(waiting, switch_wait_start=NOW - 10)
    assert schedule(cluster(nodes, [part]).snapshot([seen]), NOW).switch_waits == {}


def test_required_nodes_keep_the_job_in_their_switch() -> None:
    nodes, part = fabric(TREE, BUSY)
    # -w n7 (l1, under s0 with 3 free): two nodes go to s0, not to a fuller leaf elsewhere.
    got = start_of(nodes, part, fixed(2, req_nodes=("n7",)))
    assert got == {1: "n[2,7]"}
    # Nodes in two spines and a bound to one: never together.
    bound = fixed(2, req_nodes=("n7", "n9"), topology_required=1)
    assert start_of(nodes, part, bound) == {1: Reason.RESOURCES}


def test_one_node_jobs_are_placed_as_without_topology() -> None:
    # Free: n3 (l0), n[4-7] (l1). Slurm's tree would pick the fullest leaf (l0); one node
    # is on one leaf whatever is chosen, and Corral's node order already fills l0 first.
    nodes, part = fabric(TREE, "n[0-2,8-15]")
    assert start_of(nodes, part, job(1, min_nodes=1, nodes_given=True)) == {1: "n3"}
    assert start_of(nodes, part, fixed(2)) == {1: "n[4-5]"}


def test_topo_optional_places_only_jobs_that_ask() -> None:
    nodes, part = fabric(TREE, "n[0-2,8-15]", optional=True)
    assert start_of(nodes, part, fixed(2)) == {1: "n[3-4]"}  # flat: the first free nodes
    assert start_of(nodes, part, fixed(2, topology_required=1)) == {1: "n[4-5]"}


def test_lower_weight_nodes_come_first_within_the_switch() -> None:
    weights = {"n14": 1, "n15": 1, **{n: 5 for n in NODES if n not in ("n14", "n15")}}
    nodes, part = fabric(TREE, BUSY, weights=weights)
    # s1 holds five: l2 is its best fit, but the light nodes n14 and n15 are taken first.
    assert start_of(nodes, part, fixed(4, topology_required=1)) == {1: "n[9-10,14-15]"}


def test_packed_tasks_are_placed_in_one_switch() -> None:
    nodes, part = fabric(TREE, BUSY)
    # -n 8 (four CPUs a node): two nodes; l0 holds them with the fewest free.
    packed = job(1, num_tasks=8)
    assert start_of(nodes, part, packed) == {1: "n[2-3]"}


def test_nodes_under_no_switch_are_never_given() -> None:
    text = "SwitchName=a Nodes=n[0-3]\nSwitchName=b Nodes=n[4-7]\nSwitchName=t Switches=a,b\n"
    nodes, part = fabric(text, "n[0-3]", names=[f"n{i}" for i in range(10)])
    assert start_of(nodes, part, fixed(5)) == {1: Reason.RESOURCES}  # n[8-9] are on none
    assert start_of(nodes, part, fixed(4)) == {1: "n[4-7]"}


# ---------------------------------------------------------------- backfill


def test_backfill_expects_the_start_no_earlier_than_the_wait_allows() -> None:
    nodes, part = fabric(WIDE, WIDE_BUSY, WIDE_NODES)
    # Six nodes on one leaf only from when a0's busy nodes and its neighbours free up:
    # never within the window; so --switches=1@10:00 expects a start at its wait's end.
    waiting = fixed(6, switches=1, switch_wait=600, switch_wait_start=NOW, time_limit=60)
    plan = schedule(cluster(nodes, [part]).snapshot([waiting]), NOW, BackfillParams())
    expected = plan.expected[1]
    assert expected.start_time >= NOW + 600
    assert topo.leaves_of(part.topology, expected.nodes) == 3  # type: ignore[arg-type]


def test_backfill_keeps_a_required_level_in_its_reservation() -> None:
    nodes, part = fabric(TREE, "n[0-1,4-6,8,12-13]")
    # Six nodes within one spine: s1 gets them when the job on n[8,12-13] ends.
    ending = Running(9, ("n8", "n12", "n13"), (4, 4, 4), (0, 0, 0), NOW + 3600)
    snap = cluster(nodes, [part]).snapshot([fixed(6, topology_required=1)], running=[ending])
    plan = schedule(snap, NOW, BackfillParams())
    assert plan.reasons[1] is Reason.RESOURCES
    expected = plan.expected[1]
    assert NOW + 3600 <= expected.start_time < NOW + 3660  # rounded up to bf_resolution
    assert set(expected.nodes) <= {f"n{i}" for i in range(8, 16)}


# ---------------------------------------------------------------- block


#: Eight base blocks of four nodes; blocks of 4, 8 and 16 nodes.
BLOCKS = "".join(f"BlockName=b{i} Nodes=n[{4 * i}-{4 * i + 3}]\n" for i in range(8))
BLOCKS += "BlockSizes=4,8,16\n"
BLOCK_NODES = [f"n{i}" for i in range(32)]
# Free per base block: b0 1, b1 3, b2 2, b3 4, b4 4, b5 4, b6 0, b7 3.
BLOCK_BUSY = "n[0-2,4,8-9,24-27,28]"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"nodes": 3}, "n[29-31]"),
        ({"nodes": 2}, "n[10-11]"),
        ({"nodes": 5}, "n[10,12-15]"),
        ({"nodes": 8}, "n[16-23]"),
        ({"nodes": 10}, "n[3,5-7,10-15]"),
        ({"nodes": 2, "topology_preferred": 1}, "n[29-30]"),
        ({"nodes": 8, "segment": 4}, "n[16-23]"),
        ({"nodes": 6, "segment": 3}, "n[5-7,29-31]"),
        ({"nodes": 5, "topology_required": 0}, Reason.RESOURCES),
    ],
    ids=[
        "three nodes: the fullest base block that holds them (b7 over b1: the last on ties)",
        "two nodes: b2, exactly",
        "five: the fullest level-1 block that holds them (b2+b3), the fuller base block first",
        "eight: the one level-1 block with eight free (b4+b5)",
        "ten: a level-2 block (b0-b3, ten free in its two best pairs)",
        "preferred level 1: the fullest level-1 block (b6+b7), not the fullest base block (b2)",
        "segments of four: each in one base block (the last on ties)",
        "segments of three: the two fullest base blocks that hold three",
        "required level 0: five nodes never fit one base block",
    ],
)
def test_block_placement(fields: dict[str, Any], expected: Any) -> None:
    nodes, part = fabric(BLOCKS, BLOCK_BUSY, BLOCK_NODES, topologyconf.BLOCK)
    count = fields.pop("nodes")
    assert start_of(nodes, part, fixed(count, **fields)) == {1: expected}


# ---------------------------------------------------------------- submission


def _conf(text: str, plugin: str, *lines: str) -> SlurmConfig:
    conf = slurm_conf(
        f"TopologyPlugin={plugin}",
        "NodeName=n[0-31] CPUs=4 RealMemory=4000",
        "PartitionName=batch Nodes=ALL Default=YES",
        *lines,
    )
    return replace(conf, topology=topologyconf.parse(text, "topology.conf", plugin, BLOCK_NODES))


# n[16-19] under a tree of their own, n[20-31] under none (so in no partition).
TREE_CONF = _conf(
    TREE + "SwitchName=m0 Nodes=n[16-19]\nSwitchName=m Switches=m0\n", topologyconf.TREE
)
BLOCK_CONF = _conf(BLOCKS, topologyconf.BLOCK)
FLAT_CONF = slurm_conf("NodeName=n[0-31] CPUs=4", "PartitionName=batch Nodes=ALL Default=YES")


def submit(conf: SlurmConfig, **fields: Any) -> Any:
    message = codec.encode("JobSpec", {"script": "#!/bin/sh\n", **fields})
    spec = from_fields(codec.decode("JobSpec", message))
    return admit(spec, principal_for(4242, 4242), conf, {}, 100, NOW, 0).job


@pytest.mark.parametrize(
    ("conf", "fields"),
    [
        (FLAT_CONF, {"switches": 1}),
        (BLOCK_CONF, {"switches": 1}),
        (TREE_CONF, {"segment": 2, "min_nodes": 4}),
        (BLOCK_CONF, {"segment": 8, "min_nodes": 8}),
        (BLOCK_CONF, {"segment": 3, "min_nodes": 4}),
        (BLOCK_CONF, {"segment": 2, "min_nodes": 4, "req_nodes": "n0"}),
        (TREE_CONF, {"topology_required": 3}),
        (FLAT_CONF, {"topology_preferred": 0}),
        (TREE_CONF, {"topology_required": 0, "topology_preferred": 1}),
        (TREE_CONF, {"topology_required": 0, "min_nodes": 5}),
        (TREE_CONF, {"topology_required": 1, "min_nodes": 9}),
        (BLOCK_CONF, {"topology_required": 1, "min_nodes": 9}),
    ],
    ids=[
        "--switches on a flat cluster",
        "--switches with topology/block",
        "--segment with topology/tree",
        "--segment larger than the base block",
        "--segment not dividing the node count",
        "--segment with -w",
        "a level above the top",
        "a level on a flat cluster",
        "preferred above required",
        "more nodes than any leaf has, bound to a leaf",
        "more nodes than any spine has, bound to a spine",
        "more nodes than a level-1 block has, bound to one",
    ],
)
def test_topology_requests_that_cannot_be_met_are_refused(
    conf: SlurmConfig, fields: dict[str, Any]
) -> None:
    with pytest.raises(SlurmError) as caught:
        submit(conf, **fields)
    assert caught.value.code == errors.ESLURM_REQUESTED_TOPO_CONFIG_UNAVAILABLE
    assert str(caught.value) == "Requested topology configuration is not available"


def test_a_job_no_switch_holds_is_never_runnable() -> None:
    with pytest.raises(SlurmError) as caught:  # top has 16 nodes, m 4: none holds 18
        submit(TREE_CONF, min_nodes=18)
    assert caught.value.code == errors.ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE


def test_switch_wait_is_capped_by_max_switch_wait() -> None:
    assert submit(TREE_CONF, switches=2).switches == 2
    assert submit(TREE_CONF, switches=1).switch_wait == 300
    assert submit(TREE_CONF, switches=1, switch_wait=60).switch_wait == 60
    assert submit(TREE_CONF, switches=1, switch_wait=900).switch_wait == 300
    capped = replace(TREE_CONF, scheduler_parameters=(("max_switch_wait", "30"),))
    assert submit(capped, switches=1, switch_wait=60).switch_wait == 30
    levels = submit(TREE_CONF, min_nodes=8, topology_required=2, topology_preferred=1)
    assert (levels.topology_required, levels.topology_preferred) == (2, 1)
    assert submit(BLOCK_CONF, min_nodes=8, segment=4).segment == 4


def test_nodes_under_no_switch_are_left_out_of_the_partition() -> None:
    conf = _conf("SwitchName=a Nodes=n[0-3]\n", topologyconf.TREE)
    assert partition_view(conf, "batch").nodes == ("n0", "n1", "n2", "n3")
    loose = replace(conf, topo_optional=True)
    assert len(partition_view(loose, "batch").nodes) == 32


# ---------------------------------------------------------------- properties


@st.composite
def fabrics(draw: st.DrawFn) -> tuple[str, list[str], set[str]]:
    """A random two- or three-level tree: leaves of 1-5 nodes under 1-3 spines each."""
    leaves = draw(st.lists(st.integers(1, 5), min_size=2, max_size=8))
    lines, names, at = [], [], 0
    for i, size in enumerate(leaves):
        lines.append(f"SwitchName=l{i} Nodes=n[{at}-{at + size - 1}]")
        names += [f"n{k}" for k in range(at, at + size)]
        at += size
    groups = draw(st.integers(1, len(leaves)))
    spines = [list(range(g, len(leaves), groups)) for g in range(groups)]
    for g, members in enumerate(spines):
        lines.append(f"SwitchName=s{g} Switches={','.join(f'l{i}' for i in members)}")
    if groups > 1 and draw(st.booleans()):
        lines.append(f"SwitchName=top Switches=s[0-{groups - 1}]")
    busy = set(draw(st.lists(st.sampled_from(names), max_size=len(names))))
    return "\n".join(lines) + "\n", names, busy


@given(
    fabrics(),
    st.lists(
        st.tuples(st.integers(1, 8), st.integers(-1, 2), st.integers(0, 3), st.booleans()),
        min_size=1,
        max_size=6,
    ),
)
def test_a_job_never_spans_more_than_it_may(
    fabric_: tuple[str, list[str], set[str]], asks: list[tuple[int, int, int, bool]]
) -> None:
    """Started now or planned by backfill: never beyond one switch of the required
    level, and, while the --switches wait lasts, never over more leaves than asked."""
    text, names, busy = fabric_
    nodes, part = fabric(text, ",".join(sorted(busy)), names)
    view = part.topology
    assert view is not None
    ending = [Running(900 + i, (n,), (4,), (0,), NOW + 600 * (i + 1)) for i, n in enumerate(busy)]
    jobs = [
        fixed(
            count,
            topology_required=min(level, view.top),
            switches=switches,
            switch_wait=3600 if waits else 0,
            switch_wait_start=NOW if switches else 0,
            time_limit=30,
        )
        for count, level, switches, waits in asks
    ]
    jobs = [replace(j, job_id=i + 1) for i, j in enumerate(jobs)]
    plan = schedule(cluster(nodes, [part]).snapshot(jobs, running=ending), NOW, BackfillParams())
    placed = [(s.job_id, NOW, s.nodes) for s in plan.starts]
    placed += [(i, e.start_time, e.nodes) for i, e in plan.expected.items()]
    by_id = {j.job_id: j for j in jobs}
    for job_id, when, chosen in placed:
        asked = by_id[job_id]
        if asked.topology_required >= 0:
            under = [
                d
                for level in range(asked.topology_required + 1)
                for d in (view.domains[i] for i in view.by_level[level])
                if {view.leaf_of[n] for n in chosen} <= set(d.leaves)
            ]
            assert under, (job_id, chosen)
        if asked.switches and when < NOW + asked.switch_wait:
            assert topo.leaves_of(view, chosen) <= asked.switches, (job_id, chosen)


# ---------------------------------------------------------------- corral why


def test_why_says_the_switch_bound_keeps_the_job_waiting() -> None:
    nodes, part = fabric(WIDE, WIDE_BUSY, WIDE_NODES)
    waiting = fixed(6, switches=1, switch_wait=300, switch_wait_start=NOW, time_limit=60)
    answer = explain(cluster(nodes, [part]).snapshot([waiting]), NOW, 1, BackfillParams())
    assert answer.reason is Reason.RESOURCES
    assert answer.topology == TopologyAsk(
        switches=1, wait_end=NOW + 300, required=-1, preferred=-1, segment=0, held=True
    )
    assert ("--switches=3", NOW) in [(s.option, s.start) for s in answer.suggestions]
    reply = _reply(answer, hide_others=False)
    words = why_text(why_document(codec.decode("WhyReply", reply.SerializeToString())))
    assert "Placement: at most 1 leaf switch (--switches) until " in words
    assert "then any. That is what keeps it waiting (see below)." in words
    assert "--switches=3 (now)" in words


def test_why_suggests_a_level_up_when_the_required_one_is_full() -> None:
    nodes, part = fabric(TREE, BUSY)
    bound = fixed(6, topology_required=1, time_limit=60)
    answer = explain(cluster(nodes, [part]).snapshot([bound]), NOW, 1, BackfillParams())
    assert answer.topology is not None and answer.topology.held
    assert "--topology-level=2" in [s.option for s in answer.suggestions]


def test_why_of_a_job_that_asks_nothing_of_the_network() -> None:
    nodes, part = fabric(TREE, BUSY)
    answer = explain(cluster(nodes, [part]).snapshot([fixed(2)]), NOW, 1, BackfillParams())
    assert answer.topology is None
    doc = why_document(codec.decode("WhyReply", _reply(answer, False).SerializeToString()))
    assert doc["topology"] is None
