"""The GRES TRES a controller registers with dbd, from slurm.conf."""

from __future__ import annotations

from controller.accounting import gres_tres
from tests.unit.scenario import slurm_conf


def test_gres_types_and_node_types_are_registered_once_each() -> None:
    conf = slurm_conf(
        "GresTypes=gpu,mps",
        "AccountingStorageTRES=gres/gpu:h100,license/iop1,gres/gpu",
        "NodeName=a[1-2] Gres=gpu:a100:2,mps:100,craynetwork:4 CPUs=4",
        "NodeName=b1 Gres=gpu:v100:1,gpu:a100:1 CPUs=4",
        "NodeName=c1 CPUs=4",
        "PartitionName=debug Nodes=ALL",
    )
    assert gres_tres(conf) == [
        "gres/gpu",
        "gres/mps",
        "gres/gpu:a100",
        "gres/gpu:v100",
        "gres/gpu:h100",
        "license/iop1",
    ]


def test_a_cluster_without_gres_registers_none() -> None:
    conf = slurm_conf("NodeName=n1 CPUs=4", "PartitionName=debug Nodes=ALL")
    assert gres_tres(conf) == []
