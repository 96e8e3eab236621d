"""scontrol reboot's rules (``controller/reboots.py``), and their record surviving a restart."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from controller import reboots
from controller.effects import RebootNode
from controller.journal import Journal
from controller.model import NodeRuntime
from controller.principal import principal_for
from controller.store import JobStore
from corral.config import parse
from corral.errors import SlurmError

ROOT = principal_for(0, 0)
UP = NodeRuntime("n1", responding=True, state="UP", reason="")


def _request(node: NodeRuntime = UP, **options: object) -> NodeRuntime:
    settings: dict[str, object] = {"asap": False, "next_state": "", "reason": "", **options}
    return reboots.request(node, who=ROOT, now=100, **settings)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "drain", "reason"),
    [
        ({}, False, ""),
        ({"asap": True}, True, "Reboot ASAP"),
        ({"asap": True, "reason": "bios"}, True, "bios"),
        ({"reason": "bios"}, False, "bios"),
    ],
    ids=["plain", "asap drains", "asap with a reason", "a reason alone"],
)
def test_a_request_drains_only_asap_and_sets_slurms_reasons(
    options: dict[str, object], drain: bool, reason: str
) -> None:
    node = _request(**options)
    assert (node.reboot, node.drain, node.reason) == (reboots.REQUESTED, drain, reason)


@pytest.mark.parametrize(
    ("options", "state", "drain"),
    [
        ({"asap": True}, "UP", False),
        ({"next_state": "RESUME"}, "UP", False),
        ({"next_state": "DOWN"}, "DOWN", False),
        ({}, "UP", True),
    ],
    ids=["asap resumes", "nextstate=resume", "nextstate=down stays down", "a drain stays"],
)
def test_a_node_back_from_its_reboot_takes_its_next_state(
    options: dict[str, object], state: str, drain: bool
) -> None:
    drained = NodeRuntime("n1", responding=True, state="UP", drain=True, reason="old")
    issued = reboots.issued(_request(drained, **options), now=200)
    assert (issued.state, issued.reboot, issued.reboot_time) == ("DOWN", reboots.ISSUED, 200)
    assert not reboots.booted_since_issue(issued, 199)  # the boot before the reboot
    back = reboots.back(issued)
    assert (back.state, back.drain, back.reboot) == (state, drain, "")


def test_only_an_idle_answering_node_is_rebooted_and_one_issued_cannot_be_cancelled() -> None:
    requested = _request(asap=True)
    assert not reboots.due(requested, busy=True)
    assert reboots.due(requested, busy=False)
    cancelled = reboots.cancel(requested)
    assert (cancelled.reboot, cancelled.drain, cancelled.reason) == ("", False, "")
    issued = reboots.issued(requested, now=200)
    with pytest.raises(SlurmError, match="already been issued"):
        reboots.cancel(issued)
    assert not reboots.timed_out(issued, 260, 60)
    assert reboots.timed_out(issued, 261, 60)


def test_the_store_issues_reboots_and_keeps_them_across_a_restart(tmp_path: Path) -> None:
    text = (
        "ClusterName=t\nSlurmctldHost=c\nRebootProgram=/sbin/reboot\nResumeTimeout=30\n"
        "NodeName=n[1-2] CPUs=1\nPartitionName=p Nodes=ALL\n"
    )

    def store() -> JobStore:
        made = JobStore(parse(text, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
        made.load(0.0)
        return made

    first = store()
    for name in ("n1", "n2"):
        first.nodes[name] = NodeRuntime(name, responding=True, state="UP", reason="")
    sent: list[object] = []
    first.dispatch_to(sent.extend)
    reboots.ask(first, ["n1"], ROOT, 100, asap=True, next_state="DOWN")
    assert reboots.advance(first, 101)
    asyncio.run(first.flush())
    assert sent == [RebootNode("n1")]
    assert not reboots.advance(first, 131)  # within ResumeTimeout
    first.durable.journal.close()
    again = store()
    node = again.nodes["n1"]
    assert (node.reboot, node.reboot_next, node.reboot_time) == (reboots.ISSUED, "DOWN", 101)
    assert reboots.advance(again, 132)
    assert (again.nodes["n1"].state, again.nodes["n1"].reason) == ("DOWN", "reboot timed out")


def test_a_reboot_needs_reboot_program_and_a_known_next_state(tmp_path: Path) -> None:
    text = "ClusterName=t\nSlurmctldHost=c\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=ALL\n"
    store = JobStore(parse(text, str(tmp_path / "slurm.conf")), Journal(str(tmp_path / "s")))
    with pytest.raises(SlurmError, match="RebootProgram isn't defined"):
        reboots.ask(store, ["n1"], ROOT, 100)
    with_program = "RebootProgram=/sbin/reboot\n" + text
    store = JobStore(parse(with_program, str(tmp_path / "b.conf")), Journal(str(tmp_path / "b")))
    with pytest.raises(SlurmError, match="Invalid state: UP"):
        reboots.ask(store, ["n1"], ROOT, 100, next_state="UP")
    assert store.nodes["n1"].reboot == ""
