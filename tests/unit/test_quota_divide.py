"""KAI's two-phase division of the cluster among queues (controller/core/quotadivide.py)."""

from __future__ import annotations

import pytest

from controller.core.quota import divide
from corral.queueconf import QueueConf, ResourceQuota
from tests.unit.quotascenario import CPU, GPU, departments, gpus, team, tree

TWO_TEAMS = tree(team("a", gpus(4)), team("b", gpus(4)))
#: GPUs named, nothing guaranteed: the surplus phase alone.
UNGUARANTEED = tree(team("a", gpus()), team("b", gpus()))


def _fair(
    conf: QueueConf,
    capacity: int,
    asks: dict[str, int],
    usage: dict[str, float] | None = None,
    k: float = 1.0,
) -> dict[str, int]:
    requested = {q: {GPU: n} for q, n in asks.items()}
    shares = divide(conf, {GPU: capacity}, requested, usage or {}, k)
    return {q: shares.fair_of(q, GPU) for q in conf.queues if q != "root"}


def _each(text: str) -> dict[str, int]:
    """``"a=8 b=2"`` as ``{"a": 8, "b": 2}``: one GPU count per queue."""
    return {q: int(n) for q, n in (item.split("=") for item in text.split())}


#: What is shown -> (queues, GPUs, what each asks, each one's fair share).
DIVISIONS = {
    "guarantees first, then the surplus to whoever asks": (TWO_TEAMS, 8, "a=8 b=2", "a=6 b=2"),
    "nobody asks: nothing is shared": (TWO_TEAMS, 8, "", "a=0 b=0"),
    "the surplus evenly at equal weights": (UNGUARANTEED, 10, "a=10 b=10", "a=5 b=5"),
    "the surplus by over-quota weight": (
        tree(team("a", gpus(), over_quota_weight=1), team("b", gpus(), over_quota_weight=4)),
        10,
        "a=10 b=10",
        "a=2 b=8",
    ),
    "KAI: priority=2 weight=1 gets surplus before priority=1 weight=100": (
        tree(team("a", gpus(), priority=2), team("b", gpus(), priority=1, over_quota_weight=100)),
        10,
        "a=10 b=10",
        "a=10 b=0",
    ),
    "a lower bucket gets what the higher one does not ask for": (
        tree(team("a", gpus(), priority=2), team("b", gpus(), priority=1, over_quota_weight=100)),
        10,
        "a=3 b=10",
        "a=3 b=7",
    ),
    "priority plays no part in the deserved phase": (
        tree(team("a", gpus(2), priority=9), team("b", gpus(6))),
        8,
        "a=8 b=8",
        "a=2 b=6",
    ),
    "a limit caps the share and the rest goes to others": (
        tree(team("a", gpus(0, limit=3)), team("b")),
        10,
        "a=10 b=10",
        "a=3 b=7",
    ),
    "units left by rounding go one at a time, largest remainder first": (
        tree(team("a", gpus(), over_quota_weight=1), team("b", gpus(), over_quota_weight=3)),
        10,
        "a=10 b=10",
        "a=2 b=8",
    ),
    "equal remainders: by name": (
        tree(team("b", gpus()), team("a", gpus()), team("c", gpus())),
        5,
        "a=5 b=5 c=5",
        "b=2 a=2 c=1",
    ),
    "capacity below the guarantees: split in proportion to them": (
        tree(team("a", gpus(6)), team("b", gpus(2))),
        4,
        "a=6 b=2",
        "a=3 b=1",
    ),
}


@pytest.mark.parametrize("what", DIVISIONS)
def test_division(what: str) -> None:
    conf, capacity, asks, fair = DIVISIONS[what]
    assert _fair(conf, capacity, _each(asks)) == _each(fair)


def test_usage_reweights_the_surplus_within_a_bucket() -> None:
    conf = UNGUARANTEED
    asks = {"a": 10, "b": 10}
    # KAI: P_i = max(0, W' + k(W' - U')): W' = 0.5 each, U' = 0.9 and 0.1.
    assert _fair(conf, 10, asks, usage={"a": 0.9, "b": 0.1}) == {"a": 1, "b": 9}
    assert _fair(conf, 10, asks, usage={"a": 0.9, "b": 0.1}, k=0.0) == {"a": 5, "b": 5}
    assert _fair(conf, 10, asks, usage={"a": 0.3, "b": 0.3}) == {"a": 5, "b": 5}


def test_usage_never_touches_guarantees_or_priority() -> None:
    conf = tree(team("a", gpus(4), priority=1), team("b"))
    fair = _fair(conf, 10, {"a": 10, "b": 10}, usage={"a": 1.0, "b": 0.0})
    assert fair == {"a": 10, "b": 0}


def test_usage_may_be_given_per_resource_and_sums_up_the_tree() -> None:
    conf = tree(
        team("d1", gpus()),
        team("t1", gpus(), parent="d1"),
        team("t2", gpus(), parent="d1"),
        team("d2", gpus()),
    )
    asks = {"t1": {GPU: 10}, "t2": {GPU: 10}, "d2": {GPU: 10}}
    shares = divide(conf, {GPU: 10}, asks, {"t1": {GPU: 0.45}, "t2": {GPU: 0.45}, "d2": 0.1})
    # d1's usage is its children's: 0.9 against d2's 0.1.
    assert (shares.fair_of("d1", GPU), shares.fair_of("d2", GPU)) == (1, 9)


def test_each_parents_share_is_divided_among_its_children() -> None:
    conf = departments(d1=gpus(6), t1=gpus(4), t2=gpus(2), d2=gpus(2), t3=gpus(2))
    shares = divide(conf, {GPU: 10}, {"t1": {GPU: 10}, "t2": {GPU: 1}, "t3": {GPU: 10}}, {})
    fair = {q: shares.fair_of(q, GPU) for q in conf.queues}
    # Surplus 2 at the top splits 1/1; in d1, t2 asks only 1, so t1 gets the rest.
    assert fair == {"root": 10, "d1": 7, "t1": 6, "t2": 1, "d2": 3, "t3": 3}
    assert shares.guarantee_of("t1", GPU) == 4
    assert shares.guarantee_of("root", GPU) == 10


def test_a_parent_limit_caps_its_subtree_and_no_share_is_stranded_in_it() -> None:
    conf = tree(
        team("d1", gpus(0, limit=4)),
        team("t1", parent="d1"),
        team("d2"),
    )
    shares = divide(conf, {GPU: 10}, {"t1": {GPU: 10}, "d2": {GPU: 10}}, {})
    assert (shares.fair_of("d1", GPU), shares.fair_of("t1", GPU)) == (4, 4)
    assert shares.fair_of("d2", GPU) == 6


def test_resources_are_divided_separately() -> None:
    conf = tree(
        team("a", {GPU: ResourceQuota(4), CPU: ResourceQuota(0)}),
        team("b", {CPU: ResourceQuota(32)}),
    )
    shares = divide(conf, {GPU: 8, CPU: 64}, {"a": {GPU: 8, CPU: 64}, "b": {GPU: 8, CPU: 64}}, {})
    assert (shares.fair_of("a", GPU), shares.fair_of("b", GPU)) == (6, 2)
    assert (shares.fair_of("a", CPU), shares.fair_of("b", CPU)) == (16, 48)


def test_only_resources_a_queue_names_are_divided() -> None:
    shares = divide(TWO_TEAMS, {GPU: 8, CPU: 64}, {"a": {GPU: 8, CPU: 64}}, {})
    assert shares.resources == (GPU,)
    assert shares.fair_of("a", CPU) == 0
    assert divide(tree(team("a"), team("b")), {GPU: 8}, {"a": {GPU: 8}}, {}).resources == ()


def test_a_resource_with_a_quota_but_no_capacity_has_no_share() -> None:
    conf = tree(team("a", {"gres/gpu:a100": ResourceQuota(4)}))
    shares = divide(conf, {GPU: 8}, {"a": {"gres/gpu:a100": 4}}, {})
    assert shares.fair_of("a", "gres/gpu:a100") == 0
    assert "gres/gpu:a100" in shares.resources
