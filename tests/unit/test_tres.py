"""TRES lists as the controller writes them (scontrol's TRES, sacct's AllocTRES)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from controller import jobtres
from controller.priorities import PriorityKeeper
from controller.views import tres
from corral import config
from tests.unit import scenario


def test_cpu_memory_nodes_and_billing() -> None:
    assert tres(4, 1000, 2) == "cpu=4,mem=1000M,node=2,billing=4"
    assert tres(4, 0, 1) == "cpu=4,node=1,billing=4"


def test_gres_summed_over_nodes_in_all_and_per_type() -> None:
    per_node = [(("gpu", "a100", 2),), (("gpu", "a100", 1), ("gpu", "v100", 1), ("nic", "", 0))]
    assert tres(8, 0, 2, per_node) == (
        "cpu=8,node=2,billing=8,gres/gpu=4,gres/gpu:a100=3,gres/gpu:v100=1"
    )


def test_billing_weighs_each_tres_as_tresbillingweights_says(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text(
        "ClusterName=c\nSlurmctldHost=h\nGresTypes=gpu\nNodeName=n[1-2] CPUs=8 Gres=gpu:a100:4\n"
        "PartitionName=gpu Nodes=ALL TRESBillingWeights=CPU=1.0,Mem=0.5G,GRES/gpu=4.0\n"
        "PartitionName=plain Nodes=ALL\n"
    )
    conf = config.load(str(tmp_path / "slurm.conf"))
    weights = dict(conf.partition("gpu").billing_weights)  # type: ignore[union-attr]
    assert weights == {"cpu": 1.0, "mem": 0.5 / 1024, "gres/gpu": 4.0}
    job = scenario.job(
        1,
        partition="gpu",
        nodes=("n1", "n2"),
        cpus=(4, 2),
        alloc_mem=(4096, 2048),
        gres_alloc=((("gpu", "a100", 2),), (("gpu", "a100", 1),)),
    )
    # 6 CPUs + 6 GiB x 0.5 + 3 GPUs x 4
    assert jobtres.billing(job, conf.partition("gpu").billing_weights) == 6 + 3 + 12  # type: ignore[union-attr]
    assert jobtres.billing(job, ()) == 6  # no weights: the CPUs
    keeper = PriorityKeeper(conf)
    assert keeper.billing(job) == 21
    assert keeper.billing(replace(job, partition="plain")) == 6
    (tmp_path / "slurm.conf").write_text(
        (tmp_path / "slurm.conf").read_text().replace("GRES/gpu=4.0", "GRES/gpu=lots")
    )
    with pytest.raises(config.ConfigError, match="bad TRESBillingWeights value"):
        config.load(str(tmp_path / "slurm.conf"))
