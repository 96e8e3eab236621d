"""Node features set by ``scontrol update NodeName=`` (``controller/nodefeatures.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import nodefeatures
from controller.journal import Journal
from controller.model import NodeRuntime
from controller.store import JobStore
from corral.config import parse
from corral.errors import SlurmError

TEXT = (
    "ClusterName=t\nSlurmctldHost=c\nNodeName=n1 CPUs=1 Feature=slow\n"
    "NodeName=n2 CPUs=1\nPartitionName=p Nodes=ALL\n"
)


@pytest.mark.parametrize(
    ("available", "active", "expected"),
    [
        ("fast,big", None, ("fast,big", "fast,big")),
        (None, "slow", ("slow", "slow")),
        ("fast,big", "big", ("fast,big", "big")),
        ("", None, ("", "")),
    ],
    ids=["available sets active too", "active alone", "both", "cleared"],
)
def test_features_follow_slurm_without_a_node_features_plugin(
    available: str | None, active: str | None, expected: tuple[str, str]
) -> None:
    conf = parse(TEXT, "slurm.conf").node("n1")
    node = nodefeatures.update(NodeRuntime("n1"), conf, available, active)
    assert (node.available_features, node.active_features) == expected


@pytest.mark.parametrize(
    ("available", "active", "message"),
    [
        (None, "fast", "Active features not subset of available"),
        ("a|b", None, "Invalid feature specification"),
        (",", None, "Invalid feature specification"),
    ],
    ids=["active not available", "grammar in a name", "no name"],
)
def test_bad_features_are_refused(available: str | None, active: str | None, message: str) -> None:
    conf = parse(TEXT, "slurm.conf").node("n1")
    with pytest.raises(SlurmError, match=message):
        nodefeatures.update(NodeRuntime("n1"), conf, available, active)


def test_set_features_reach_the_configuration_and_outlive_restart_and_reconfigure(
    tmp_path: Path,
) -> None:
    def store() -> JobStore:
        made = JobStore(parse(TEXT, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
        made.load(0.0)
        return made

    first = store()
    first.set_node_features(["n1", "n2"], "fast", None, 100)
    assert [n.features for n in first.conf.nodes] == [("fast",), ("fast",)]
    asyncio.run(first.flush())
    first.durable.journal.close()
    again = store()
    assert again.conf.node("n1").features == ("fast",)
    again.apply_config(parse(TEXT, str(tmp_path / "slurm.conf")))  # scontrol reconfigure
    assert again.conf.node("n2").features == ("fast",)
    assert nodefeatures.available_of(again.nodes["n1"], again.conf.node("n1")) == ("fast",)
