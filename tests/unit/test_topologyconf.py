"""topology.conf as Slurm reads it (corral/topologyconf.py), and the slurm.conf keys
that turn it on (TopologyPlugin, TopologyParam, SchedulerParameters max_switch_wait)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.config import load
from corral.confsyntax import ConfigError
from corral.topologyconf import BLOCK, TREE, parse
from tests.unit.scenario import slurm_conf

NODES = [f"tux{i}" for i in range(16)]

#: topology.shtml's second example: four leaves under four spines.
SPINES = """\
# topology.conf
SwitchName=s0 Nodes=tux[0-3]   LinkSpeed=900
SwitchName=s1 Nodes=tux[4-7]   LinkSpeed=900
SwitchName=s2 Nodes=tux[8-11]  LinkSpeed=900
SwitchName=s3 Nodes=tux[12-15] LinkSpeed=1800
SwitchName=s4 Switches=s[0-3]  LinkSpeed=1800
switchname=s5 switches=s[0-3]
"""


def test_tree_levels_nodes_and_scontrol_lines() -> None:
    conf = parse(SPINES, "/etc/topology.conf", TREE, NODES)
    assert [(s.name, s.level) for s in conf.switches] == [
        ("s0", 0),
        ("s1", 0),
        ("s2", 0),
        ("s3", 0),
        ("s4", 1),
        ("s5", 1),
    ]
    assert [line for _, _, line in conf.records()] == [
        "SwitchName=s0 Level=0 LinkSpeed=900 Nodes=tux[0-3]",
        "SwitchName=s1 Level=0 LinkSpeed=900 Nodes=tux[4-7]",
        "SwitchName=s2 Level=0 LinkSpeed=900 Nodes=tux[8-11]",
        "SwitchName=s3 Level=0 LinkSpeed=1800 Nodes=tux[12-15]",
        "SwitchName=s4 Level=1 LinkSpeed=1800 Nodes=tux[0-15] Switches=s[0-3]",
        "SwitchName=s5 Level=1 LinkSpeed=1 Nodes=tux[0-15] Switches=s[0-3]",
    ]
    assert conf.levels == 2
    assert conf.warnings == ()


def test_level_is_one_above_the_highest_child() -> None:
    text = (
        "SwitchName=a Nodes=tux[0-1]\nSwitchName=b Nodes=tux[2-3]\n"
        "SwitchName=ab Switches=a,b\nSwitchName=top Switches=ab,a\n"
    )
    conf = parse(text, "t", TREE, NODES[:4])
    assert {s.name: s.level for s in conf.switches} == {"a": 0, "b": 0, "ab": 1, "top": 2}


def test_nodes_under_no_switch_are_warned_as_slurm_does() -> None:
    conf = parse("SwitchName=a Nodes=tux[0-3]\n", "/t.conf", TREE, NODES[:6])
    assert conf.warnings == (
        "/t.conf: switches lack access to 2 nodes: tux[4-5]",
        "/t.conf: TOPOLOGY: warning -- no switch can reach all nodes through its descendants."
        " If this is not intentional, fix the topology.conf file.",
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "SwitchName=a Nodes=tux0\nSwitchName=a Nodes=tux1\n",
            2,
            "Switch (a) has already been defined",
        ),
        ("SwitchName=a Nodes=tux0 Switches=b\n", 1, "switch a has both child switches and nodes"),
        ("SwitchName=a LinkSpeed=3\n", 1, "switch a has neither child switches nor nodes"),
        (
            "SwitchName=a Nodes=tux0\nSwitchName=b Switches=a,c\n",
            2,
            "Switch configuration b has invalid child (c)",
        ),
        ("SwitchName=a Switches=a\n", 1, "Switch configuration a has invalid child (a)"),
        (
            "SwitchName=l Nodes=tux0\nSwitchName=a Switches=b,l\nSwitchName=b Switches=a\n",
            2,
            "Switch configuration is not a tree",
        ),
        (
            "SwitchName=a Nodes=tux[0-1],gpu7\n",
            1,
            "Invalid hostnames in switch configuration: gpu7",
        ),
        ("SwitchName=a Nodes=tux[0-1\n", 1, "Invalid node name (tux[0-1) in switch config (a)"),
        (
            "SwitchName=a Nodes=tux[0-2]\nSwitchName=b Nodes=tux[2-3]\n",
            2,
            "Multiple leaf switches contain nodes: tux2",
        ),
        ("SwitchName=a Nodes=tux0 Speed=3\n", 1, "Parsing error at unrecognized key: Speed"),
        ("BlockName=a Nodes=tux0\n", 1, "Parsing error at unrecognized key: BlockName"),
        ("SwitchName=a Nodes=tux0 LinkSpeed=fast\n", 1, "bad LinkSpeed value 'fast': not a number"),
        ("# nothing\n", None, "No switches configured"),
    ],
    ids=[
        "duplicate switch",
        "nodes and switches",
        "no children",
        "unknown child",
        "own child",
        "cycle",
        "unknown node",
        "bad hostlist",
        "node under two leaves",
        "unknown key",
        "a block line in a tree",
        "link speed not a number",
        "empty file",
    ],
)
def test_bad_tree_lines_are_refused_with_file_and_line(
    text: str, line: int | None, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text, "/etc/topology.conf", TREE, NODES)
    assert (caught.value.path, caught.value.line, caught.value.message) == (
        "/etc/topology.conf",
        line,
        message,
    )


#: topology.conf(5)'s block example (Slurm 24.11).
BLOCKS = """\
BlockName=block1 Nodes=node[1-32]
BlockName=block2 Nodes=node[33-64]
BlockName=block3 Nodes=node[65-96]
BlockName=block4 Nodes=node[97-128]
BlockSizes=30,120
"""


def test_block_sizes_and_aggregated_blocks() -> None:
    conf = parse(BLOCKS, "t", BLOCK, [f"node{i}" for i in range(1, 129)])
    assert (conf.block_size, conf.block_levels) == (30, (0, 2))
    assert [line for _, _, line in conf.records()] == [
        "BlockName=block1 BlockIndex=0 Nodes=node[1-32] BlockSize=30",
        "BlockName=block2 BlockIndex=1 Nodes=node[33-64] BlockSize=30",
        "BlockName=block3 BlockIndex=2 Nodes=node[65-96] BlockSize=30",
        "BlockName=block4 BlockIndex=3 Nodes=node[97-128] BlockSize=30",
        "AggregatedBlock=block[1-4] BlockIndex=4 Nodes=node[1-128] BlockSize=120",
    ]


def test_default_block_sizes_aggregate_one_to_sixteen_and_stop_at_all() -> None:
    text = "".join(f"BlockName=b{i} Nodes=tux[{2 * i}-{2 * i + 1}]\n" for i in range(5))
    conf = parse(text, "t", BLOCK, NODES[:10])
    assert (conf.block_size, conf.block_levels) == (2, (0, 1, 2, 3))
    aggregated = [(b.name, b.level, b.index, b.size) for b in conf.blocks if b.level]
    # Slurm's aggregation: aligned pairs (the lone b4 is dropped), a group of four,
    # then all five (a short last group is kept when it holds more than one below).
    assert aggregated == [
        ("b[0-1]", 1, 5, 4),
        ("b[2-3]", 1, 8, 4),
        ("b[0-3]", 2, 6, 8),
        ("b[0-4]", 3, 7, 16),
    ]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "BlockName=a Nodes=tux[0-3]\nBlockName=a Nodes=tux[4-7]\n",
            2,
            "Block (a) has already been defined",
        ),
        ("BlockName=a\n", 1, "block a hasn't got nodes"),
        (
            "BlockName=a Nodes=tux[0-3]\nBlockName=b Nodes=tux[4-5]\n",
            2,
            "Block configuration (b) children count lower than bblock_node_cnt",
        ),
        ("BlockName=a Nodes=tux[0-3]\nBlockSizes=4,12\n", 2, "Invalid BlockSizes value: 12"),
        ("BlockName=a Nodes=tux[0-3]\nBlockSizes=4,x\n", 2, "Invalid BlockSizes value: x"),
        (
            "BlockName=a Nodes=tux[0-3]\nBlockName=b Nodes=tux[3-6]\n",
            2,
            "Multiple blocks contain nodes: tux3",
        ),
        ("BlockName=a Nodes=tux[0-3],n9\n", 1, "Invalid hostnames in block configuration: n9"),
        ("SwitchName=a Nodes=tux[0-3]\n", 1, "Parsing error at unrecognized key: SwitchName"),
        ("BlockSizes=4\n", None, "No blocks configured"),
    ],
    ids=[
        "duplicate block",
        "no nodes",
        "smaller than the base size",
        "size not a power of two of the base",
        "size not a number",
        "node in two blocks",
        "unknown node",
        "a switch line in a block file",
        "no blocks",
    ],
)
def test_bad_block_lines_are_refused_with_file_and_line(
    text: str, line: int | None, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text, "/etc/topology.conf", BLOCK, NODES)
    assert (caught.value.line, caught.value.message) == (line, message)


# ---------------------------------------------------------------- slurm.conf


HEAD = "ClusterName=c\nSlurmctldHost=ctl\nNodeName=tux[0-15] CPUs=4\n"


def test_load_reads_topology_conf_beside_slurm_conf(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(HEAD + "TopologyPlugin=topology/tree\n")
    (tmp_path / "topology.conf").write_text(SPINES)
    conf = load(str(tmp_path / "slurm.conf"))
    assert conf.topology is not None and conf.topology.plugin == TREE
    assert conf.topology_plugin == "topology/tree"


def test_tree_without_topology_conf_is_refused(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(HEAD + "TopologyPlugin=topology/block\n")
    with pytest.raises(ConfigError, match="TopologyPlugin=topology/block needs this file"):
        load(str(tmp_path / "slurm.conf"))


def test_flat_reads_no_topology_conf(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(HEAD + "TopologyPlugin=topology/flat\n")
    (tmp_path / "topology.conf").write_text("this is not read\n")
    assert load(str(tmp_path / "slurm.conf")).topology is None


def test_topology_warnings_join_the_configuration_s(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(HEAD + "TopologyPlugin=topology/tree\n")
    (tmp_path / "topology.conf").write_text("SwitchName=a Nodes=tux[0-13]\n")
    warnings = load(str(tmp_path / "slurm.conf")).warnings
    assert any("switches lack access to 2 nodes: tux[14-15]" in w for w in warnings)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("TopologyPlugin=topology/3d_torus", "TopologyPlugin=topology/3d_torus is not supported"),
        ("TopologyParam=Dragonfly", "TopologyParam=Dragonfly: dragonfly is not supported"),
        ("TopologyParam=SwitchAsNodeRank", "switchasnoderank is not supported"),
        ("SchedulerParameters=max_switch_wait=-1", "bad SchedulerParameters value"),
        ("PartitionName=p Nodes=ALL Topology=t1", "Topology=t1 is not supported"),
    ],
    ids=["torus", "dragonfly", "node ranks", "negative wait", "partition topology"],
)
def test_topology_settings_corral_cannot_honour_are_refused(line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        slurm_conf("NodeName=tux[0-15] CPUs=4", line)


def test_topo_optional_and_routing_words() -> None:
    conf = slurm_conf("NodeName=tux[0-15] CPUs=4", "TopologyParam=TopoOptional,RouteTree")
    assert conf.topo_optional
    assert any("TopologyParam routetree has no effect" in w for w in conf.warnings)
    assert not slurm_conf("NodeName=tux[0-15] CPUs=4").topo_optional
