"""corral.ratelimit: slurm.conf's rate limit and connection ceilings, and the token buckets."""

from __future__ import annotations

import pytest

from corral.ratelimit import Gate, Limits, RateSettings, TokenBuckets, limits


def test_slurm_defaults_apply_and_the_limit_is_off_without_rl_enable() -> None:
    got = limits({})
    assert got.rate is None
    assert (got.max_connections, got.read_timeout, got.per_user_connections) == (150, 10, 37)
    assert limits({"SlurmctldParameters": "rl_enable"}).rate == RateSettings(30, 2, 1, 8192)


def test_every_key_is_read() -> None:
    text = "rl_enable,rl_bucket_size=5,rl_refill_rate=3,rl_refill_period=7,rl_table_size=9"
    got = limits(
        {"SlurmctldParameters": f"{text},conmgr_max_connections=40", "MessageTimeout": "4"}, 77
    )
    assert got.rate == RateSettings(5, 3, 7, 9)
    assert (got.max_connections, got.read_timeout, got.exempt) == (40, 4, frozenset({0, 77}))


@pytest.mark.parametrize(
    "settings",
    [
        {"SlurmctldParameters": "rl_enable,rl_bucket_size=0"},
        {"SlurmctldParameters": "rl_enable,rl_refill_rate=x"},
        {"SlurmctldParameters": "conmgr_max_connections=-1"},
        {"MessageTimeout": "0"},
    ],
)
def test_a_malformed_number_is_an_error(settings: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="bad"):
        limits(settings)


def test_a_bucket_empties_and_refills_at_its_rate() -> None:
    buckets = TokenBuckets(RateSettings(bucket_size=3, refill_rate=1, refill_period=2))
    assert [buckets.allow(5, 100.0) for _ in range(4)] == [True, True, True, False]
    assert not buckets.allow(5, 101.0)  # half a token back
    assert buckets.allow(5, 102.0)
    assert buckets.allow(6, 102.0)  # every user has a bucket of their own


def test_the_table_forgets_the_least_recently_seen_user() -> None:
    buckets = TokenBuckets(RateSettings(bucket_size=1, table_size=2))
    assert buckets.allow(1, 0.0) and buckets.allow(2, 0.0) and buckets.allow(3, 0.0)
    assert not buckets.allow(3, 0.0)
    assert buckets.allow(1, 0.0)  # forgotten: starts with a full bucket


def test_root_and_slurm_user_are_never_limited() -> None:
    gate = Gate(Limits(rate=RateSettings(bucket_size=1), exempt=frozenset({0, 64})))
    assert all(gate.allow(0, 0.0) and gate.allow(64, 0.0) for _ in range(100))
    assert gate.allow(1000, 0.0) and not gate.allow(1000, 0.0)


def test_connections_are_capped_in_all_and_per_user() -> None:
    gate = Gate(Limits(max_connections=8))
    assert [gate.enter(1000) for _ in range(3)] == [True, True, False]  # a quarter each
    assert all(gate.enter(0) for _ in range(6))  # root: only the total counts
    assert not gate.enter(0) and not gate.enter(2000)
    gate.leave(1000)
    assert gate.enter(2000)
    assert gate.open == 8
