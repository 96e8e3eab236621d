"""A node the controller set DOWN for its silence comes back when heard again (issue 16)."""

from __future__ import annotations

from controller import drain
from controller.model import NodeRuntime


def silent(reason: str = "Not responding", user: str = "slurm") -> NodeRuntime:
    return drain.down(NodeRuntime("node1", state="UP"), reason, user, 0, 100)


def test_a_node_down_for_its_silence_returns_with_return_to_service() -> None:
    assert drain.back_from_silence(silent(), 1)
    assert drain.back_from_silence(silent(), 2)


def test_it_stays_down_without_return_to_service() -> None:
    assert not drain.back_from_silence(silent(), 0)


def test_an_administrators_down_stays_whatever_its_reason() -> None:
    assert not drain.back_from_silence(silent("maintenance", "root"), 2)
    assert not drain.back_from_silence(silent("Not responding", "root"), 2)


def test_a_node_up_is_not_returned() -> None:
    assert not drain.back_from_silence(NodeRuntime("node1", state="UP"), 2)
