"""A partition's State set by ``scontrol update PartitionName=`` is journaled."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controller.journal import Journal
from controller.store import JobStore
from corral.config import parse


def test_a_partition_state_set_by_scontrol_survives_a_restart(tmp_path: Path) -> None:
    text = "ClusterName=t\nSlurmctldHost=c\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n"

    def store() -> JobStore:
        made = JobStore(parse(text, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
        made.load(0.0)
        return made

    first = store()
    first.set_partition_state("p", "DRAIN")
    asyncio.run(first.flush())
    first.durable.journal.close()
    assert store().partition_state == {"p": "DRAIN"}
