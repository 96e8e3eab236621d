"""TRES lists as the controller writes them (scontrol's TRES, sacct's AllocTRES)."""

from __future__ import annotations

from controller.views import tres


def test_cpu_memory_nodes_and_billing() -> None:
    assert tres(4, 1000, 2) == "cpu=4,mem=1000M,node=2,billing=4"
    assert tres(4, 0, 1) == "cpu=4,node=1,billing=4"


def test_gres_summed_over_nodes_in_all_and_per_type() -> None:
    per_node = [(("gpu", "a100", 2),), (("gpu", "a100", 1), ("gpu", "v100", 1), ("nic", "", 0))]
    assert tres(8, 0, 2, per_node) == (
        "cpu=8,node=2,billing=8,gres/gpu=4,gres/gpu:a100=3,gres/gpu:v100=1"
    )
