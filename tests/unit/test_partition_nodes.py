"""A partition's Nodes= as clients see it: the node names, never the word ALL."""

from __future__ import annotations

from pathlib import Path

from cli.nodes.record import partition_lines
from controller import views
from controller.journal import Journal
from controller.store import JobStore
from corral.config import parse as parse_conf
from corral.wire import codec
from restd import cluster

CONF = """\
ClusterName=test
SlurmctldHost=ctl
NodeName=n[1-3] CPUs=2 RealMemory=1000
NodeName=gpu1 CPUs=2 RealMemory=1000
NodeSet=evens Nodes=n2
PartitionName=all Nodes=ALL Default=YES
PartitionName=some Nodes=evens,gpu1
"""


def test_nodes_all_is_shown_as_the_node_list(tmp_path: Path) -> None:
    """Slurm 22.05: ``scontrol show partition`` of a ``Nodes=ALL`` partition prints the
    node list, hostlist-compressed in node-definition order; so does slurmrestd."""
    store = JobStore(parse_conf(CONF, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    infos = [views.partition_info(part, store) for part in store.conf.partitions]
    records = [codec.decode("PartitionInfo", info.SerializeToString()) for info in infos]
    assert "Nodes=n[1-3],gpu1" in partition_lines(records[0])
    assert "Nodes=n2,gpu1" in partition_lines(records[1])
    assert cluster.partition(infos[0])["nodes"]["configured"] == "n[1-3],gpu1"
