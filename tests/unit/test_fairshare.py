"""Fair share: usage decay and charging, reset periods, Fair Tree and classic factors.

Expected numbers are worked by hand from the formulas quoted in each test
(Slurm's priority_multifactor.c, fair_tree.c and classic_fair_share.shtml).
"""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.fairshare import (
    Account,
    Charge,
    ShareRow,
    Usage,
    accrued,
    advance,
    decay_factor,
    next_reset,
    reset,
    share_tree,
)

HOUR = 3600
DAY = 86400
WEEK = 7 * DAY
T0 = 1796014614  # Mon 2026-11-30 04:56:54 UTC


def utc(*parts: int) -> int:
    year, month, day, *clock = parts
    return int(dt.datetime(year, month, day, *clock, tzinfo=dt.UTC).timestamp())


def started(raw: dict[tuple[str, str], float] | None = None, at: int = T0) -> Usage:
    return Usage(raw or {}, last_decay=at, last_reset=at)


# ---------------------------------------------------------------- decay and charging
@pytest.mark.parametrize(
    ("seconds", "half_life", "factor"),
    [
        pytest.param(0, WEEK, 1.0, id="no time"),
        pytest.param(WEEK, WEEK, 0.5, id="one half-life"),
        pytest.param(2 * WEEK, WEEK, 0.25, id="two half-lives"),
        pytest.param(WEEK // 2, WEEK, 2**-0.5, id="half a half-life"),
        pytest.param(WEEK, 0, 1.0, id="no decay"),
    ],
)
def test_decay_factor(seconds: int, half_life: int, factor: float) -> None:
    # 2**(-dt/half_life)
    assert decay_factor(seconds, half_life) == pytest.approx(factor)


@pytest.mark.parametrize(
    ("cpus", "start", "end", "now", "half_life", "usage"),
    [
        # no decay: cpus * (end - start)
        pytest.param(4, 0, 100, 100, 0, 400.0, id="undecayed"),
        # cpus * h/ln2 * (2**(-(now-end)/h) - 2**(-(now-start)/h)) = 4 * h/ln2 * (1 - 1/2)
        pytest.param(4, 0, WEEK, WEEK, WEEK, 2 * WEEK / math.log(2), id="one half-life"),
        # used long ago: 2 * h/ln2 * (2**-1 - 2**-2) = h / (2 ln2)
        pytest.param(2, 0, WEEK, 2 * WEEK, WEEK, WEEK / (2 * math.log(2)), id="decayed since"),
        pytest.param(4, 100, 100, 200, WEEK, 0.0, id="empty interval"),
        pytest.param(0, 0, 100, 100, WEEK, 0.0, id="no cpus"),
    ],
)
def test_accrued(cpus: int, start: int, end: int, now: int, half_life: int, usage: float) -> None:
    assert accrued(cpus, start, end, now, half_life) == pytest.approx(usage)


def test_short_interval_is_nearly_cpu_seconds() -> None:
    # 5 minutes of 8 CPUs with a week's half-life: 2400 CPU-seconds less a 1.7e-4 share.
    assert accrued(8, 0, 300, 300, WEEK) == pytest.approx(2400, rel=2e-4)


def test_first_advance_starts_the_clock_and_charges_nothing() -> None:
    usage = advance(Usage(), T0, [Charge("a", "u", 4, T0 - HOUR)], half_life=WEEK)
    assert usage == Usage({}, last_decay=T0, last_reset=T0)


@pytest.mark.parametrize(
    ("charge", "usage"),
    [
        pytest.param(Charge("a", "u", 2, T0 - HOUR), 2 * HOUR, id="running since before"),
        pytest.param(Charge("a", "u", 2, T0 + 600), 2 * (HOUR - 600), id="started inside"),
        pytest.param(Charge("a", "u", 2, T0 - HOUR, T0 + 600), 1200, id="ended inside"),
        pytest.param(Charge("a", "u", 2, T0 - HOUR, T0 - 1), 0, id="ended before"),
        pytest.param(Charge("a", "u", 2, 0), 0, id="never started"),
    ],
)
def test_advance_charges_the_overlap(charge: Charge, usage: float) -> None:
    # Without decay the charge is cpus x seconds inside [last_decay, now].
    after = advance(started(), T0 + HOUR, [charge], half_life=0)
    assert after.of("a", "u") == pytest.approx(usage)
    assert after.last_decay == T0 + HOUR


def test_advance_decays_existing_usage() -> None:
    after = advance(started({("a", "u"): 1000.0}), T0 + WEEK, [], half_life=WEEK)
    assert after.of("a", "u") == pytest.approx(500.0)  # 1000 * 2**-1


def test_advance_backwards_changes_nothing() -> None:
    usage = started({("a", "u"): 10.0})
    assert advance(usage, T0 - 5, [Charge("a", "u", 1, T0 - HOUR)], half_life=WEEK) is usage


def test_recharging_a_finished_job_adds_nothing() -> None:
    job = Charge("a", "u", 2, T0 - HOUR, T0 + 600)
    once = advance(started(), T0 + HOUR, [job], half_life=0)
    twice = advance(once, T0 + 2 * HOUR, [job], half_life=0)
    assert twice.of("a", "u") == once.of("a", "u") == 1200


# ---------------------------------------------------------------- resets
@pytest.mark.parametrize(
    ("period", "last", "expected"),
    [
        pytest.param("DAILY", T0, utc(2026, 12, 1), id="daily"),
        pytest.param("WEEKLY", T0, utc(2026, 12, 6), id="weekly: next Sunday"),
        pytest.param("WEEKLY", utc(2026, 12, 6, 10), utc(2026, 12, 13), id="weekly from Sunday"),
        pytest.param("MONTHLY", T0, utc(2026, 12, 1), id="monthly"),
        pytest.param("MONTHLY", utc(2026, 12, 31, 23), utc(2027, 1, 1), id="monthly at year end"),
        pytest.param("QUARTERLY", T0, utc(2027, 1, 1), id="quarterly in Q4"),
        pytest.param("QUARTERLY", utc(2026, 2, 15), utc(2026, 4, 1), id="quarterly in Q1"),
        pytest.param("QUARTERLY", utc(2026, 4, 1), utc(2026, 7, 1), id="quarterly on a start"),
        pytest.param("YEARLY", T0, utc(2027, 1, 1), id="yearly"),
        pytest.param("NONE", T0, None, id="none"),
        pytest.param("NOW", T0, None, id="now is the controller's"),
    ],
)
def test_next_reset(period: str, last: int, expected: int | None) -> None:
    assert next_reset(period, last) == expected


def test_next_reset_in_a_time_zone() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    assert next_reset("DAILY", T0, plus_two) == utc(2026, 11, 30, 22)  # midnight at +02:00


def test_advance_across_a_reset_keeps_only_what_follows() -> None:
    usage = started({("a", "u"): 5000.0, ("b", "v"): 7.0})
    midnight = utc(2026, 12, 1)
    after = advance(
        usage, midnight + HOUR, [Charge("a", "u", 1, T0)], half_life=0, reset_period="DAILY"
    )
    assert after.of("a", "u") == pytest.approx(HOUR)  # 1 CPU since midnight
    assert after.of("b", "v") == 0.0
    assert (after.last_reset, after.last_decay) == (midnight, midnight + HOUR)


def test_advance_over_many_boundaries_resets_at_the_last() -> None:
    usage = started({("a", "u"): 5.0})
    after = advance(usage, utc(2026, 12, 10, 6), [], half_life=0, reset_period="DAILY")
    assert (after.of("a", "u"), after.last_reset) == (0.0, utc(2026, 12, 10))


def test_reset_zeroes_and_remembers_when() -> None:
    usage = reset(started({("a", "u"): 5.0}), T0 + 10)
    assert usage == Usage({("a", "u"): 0.0}, last_decay=T0, last_reset=T0 + 10)


# ---------------------------------------------------------------- persistence
def test_json_round_trip() -> None:
    usage = Usage({("b", "v"): 1.5, ("a", "u"): 2.0}, last_decay=T0, last_reset=T0 - DAY)
    text = usage.to_json()
    assert text == (
        '{"version":1,"last_decay":1796014614,"last_reset":1795928214,'
        '"usage":[["a","u",2.0],["b","v",1.5]],"wall":[],"qos":[],"qos_wall":[],'
        '"tres":[],"qos_tres":[]}'
    )
    assert Usage.from_json(text) == usage
    older = text.replace(',"qos":[],"qos_wall":[],"tres":[],"qos_tres":[]', "")  # before QOS
    assert Usage.from_json(older) == usage


def test_usage_is_also_summed_per_qos() -> None:
    charges = [
        Charge("a", "u", 2, T0, T0 + 100, "gold"),
        Charge("b", "v", 1, T0, T0 + 50, "gold"),
        Charge("a", "u", 4, T0, T0 + 10),
    ]
    usage = advance(started({}), T0 + 100, charges, half_life=0, reset_period="MONTHLY")
    assert usage.qos == {("", "gold"): 2 * 100 + 1 * 50}
    assert usage.qos_wall == {("", "gold"): 150}
    assert usage.of("a", "u") == 2 * 100 + 4 * 10
    assert Usage.from_json(usage.to_json()) == usage


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '{"version":2,"last_decay":0,"last_reset":0,"usage":[]}',
        '{"version":1,"last_decay":"x","last_reset":0,"usage":[]}',
        '{"version":1,"last_decay":0,"last_reset":0,"usage":{}}',
        '{"version":1,"last_decay":0,"last_reset":0,"usage":[["a","u"]]}',
        '{"version":1,"last_decay":0,"last_reset":0,"usage":[["a","u",-1]]}',
        '{"version":1,"last_decay":0,"last_reset":0,"usage":[["a","u",true]]}',
        '{"version":1,"last_decay":0,"last_reset":0,"usage":[["a",1,2]]}',
    ],
)
def test_from_json_rejects_what_it_did_not_write(text: str) -> None:
    with pytest.raises(ValueError):
        Usage.from_json(text)


# ---------------------------------------------------------------- the tree
def _rows(tree_rows: tuple[ShareRow, ...]) -> list[tuple[object, ...]]:
    return [
        (r.account, r.user, r.depth, r.raw_shares, r.norm_shares, r.effective_usage, r.fairshare)
        for r in tree_rows
    ]


def test_golden_tree_without_usage() -> None:
    # What Slurm 22.05's sshare printed on the golden cluster (root/root and bench/root).
    tree = share_tree(Usage(), [("bench", "root")])
    inf = math.inf
    assert _rows(tree.rows) == [
        ("root", "", 0, None, 0.0, 1.0, None),
        ("root", "root", 1, 1, 0.5, 0.0, 1.0),
        ("bench", "", 1, 1, 0.5, 0.0, None),
        ("bench", "root", 2, 1, 1.0, 0.0, 1.0),
    ]
    assert [r.level_fs for r in tree.rows] == [None, inf, inf, inf]
    assert [r.norm_usage for r in tree.rows] == [None, 0.0, 0.0, 0.0]
    assert tree.fairshare("bench", "root") == 1.0
    assert tree.fairshare("nosuch", "x") == 0.0


def test_order_users_before_accounts_alphabetically() -> None:
    tree = share_tree(
        Usage(),
        [("zeta", "b"), ("zeta", "a"), ("alpha", "c"), ("root", "admin")],
        root_user=False,
    )
    assert [(r.account, r.user) for r in tree.rows] == [
        ("root", ""),
        ("root", "admin"),
        ("alpha", ""),
        ("alpha", "c"),
        ("zeta", ""),
        ("zeta", "a"),
        ("zeta", "b"),
    ]


def test_fair_tree_ranks_by_level_fairshare() -> None:
    # Accounts A and B (1 share each); A's users a1 (30) and a2 (10), B's b1 (60).
    # Level FS = S/U: A = .5/.4 = 1.25, B = .5/.6 = 0.8333; a1 = .5/.75 = 0.6667,
    # a2 = .5/.25 = 2. Visit A first: a2 rank 3, a1 rank 2; then b1 rank 1; F = rank/3.
    usage = Usage({("A", "a1"): 30.0, ("A", "a2"): 10.0, ("B", "b1"): 60.0})
    tree = share_tree(usage, root_user=False)
    assert dict(tree.factors) == pytest.approx(
        {("A", "a1"): 2 / 3, ("A", "a2"): 1.0, ("B", "b1"): 1 / 3}
    )
    level = {(r.account, r.user): r.level_fs for r in tree.rows}
    assert level[("A", "")] == pytest.approx(1.25)
    assert level[("B", "")] == pytest.approx(0.5 / 0.6)
    assert level[("A", "a2")] == pytest.approx(2.0)
    effective = {(r.account, r.user): r.effective_usage for r in tree.rows}
    assert effective[("A", "a1")] == pytest.approx(0.75)  # usage / parent's usage
    assert effective[("A", "")] == pytest.approx(0.4)


def test_fair_tree_tied_users_share_a_rank() -> None:
    # A's users have no usage (LF infinite, tied): both rank 3 of 3; B's user ranks 1.
    usage = Usage({("B", "v"): 10.0})
    tree = share_tree(usage, [("A", "u1"), ("A", "u2")], root_user=False)
    assert dict(tree.factors) == pytest.approx(
        {("A", "u1"): 1.0, ("A", "u2"): 1.0, ("B", "v"): 1 / 3}
    )


def test_fair_tree_account_tied_with_a_user_starts_tied() -> None:
    # r (a user) and A (an account) both have infinite LF; users come first and
    # A's first user takes r's rank: 2/2 for both, as in the golden sshare.
    tree = share_tree(Usage(), [("root", "r"), ("A", "a")], root_user=False)
    assert dict(tree.factors) == {("root", "r"): 1.0, ("A", "a"): 1.0}


def test_fair_tree_zero_shares_rank_last() -> None:
    # LF is 0 when S is 0: z ranks after y even though y has used more.
    usage = Usage({("A", "y"): 100.0})
    tree = share_tree(usage, [("A", "z")], user_shares={("A", "z"): 0}, root_user=False)
    assert dict(tree.factors) == {("A", "y"): 1.0, ("A", "z"): 0.5}


def test_tied_accounts_descend_one_after_the_other() -> None:
    # A and B tie (equal shares and usage). Slurm's code descends A then B (no
    # merge): A's users rank 4 and 3, B's first user starts tied (3), then 1.
    usage = Usage({("A", "a1"): 1.0, ("A", "a2"): 3.0, ("B", "b1"): 1.0, ("B", "b2"): 3.0})
    tree = share_tree(usage, root_user=False)
    assert dict(tree.factors) == pytest.approx(
        {("A", "a1"): 1.0, ("A", "a2"): 0.75, ("B", "b1"): 0.75, ("B", "b2"): 0.25}
    )


CLASSIC_ACCOUNTS = [
    Account("A", shares=40),
    Account("D", shares=60),
    Account("B", parent="A", shares=30),
    Account("C", parent="A", shares=10),
    Account("E", parent="D", shares=25),
    Account("F", parent="D", shares=35),
]


def test_classic_fair_share_worked_example() -> None:
    # classic_fair_share.shtml: usage .2 (user 1), .25 (user 2), .25 (user 4) of a
    # machine whose total usage is 1 (the remaining .3 sits with a 0-share user so
    # no shares change). F = 2**(-UE/S).
    usage = Usage({("B", "u1"): 0.2, ("C", "u2"): 0.25, ("E", "u4"): 0.25, ("root", "other"): 0.3})
    tree = share_tree(
        usage,
        [("C", "u3"), ("F", "u5")],
        CLASSIC_ACCOUNTS,
        user_shares={("root", "other"): 0},
        fair_tree=False,
        root_user=False,
    )
    factors = dict(tree.factors)
    assert factors[("B", "u1")] == pytest.approx(0.408479, abs=1e-6)
    assert factors[("C", "u2")] == pytest.approx(0.022097, abs=1e-6)
    assert factors[("C", "u3")] == pytest.approx(0.125, abs=1e-6)
    assert factors[("E", "u4")] == pytest.approx(0.5, abs=1e-6)
    assert factors[("F", "u5")] == pytest.approx(0.749154, abs=1e-6)
    rows = {(r.account, r.user): r for r in tree.rows}
    # UE(B) = .2 + (.45 - .2) * 30/40; S(u2) = .4 * 10/40 * 1/2
    assert rows[("B", "")].effective_usage == pytest.approx(0.3875)
    assert rows[("C", "u2")].norm_shares == pytest.approx(0.05)
    assert rows[("root", "")].fairshare == pytest.approx(0.5)  # 2**(-1/1): accounts too


def test_classic_damping() -> None:
    # One user under root with all the usage: UE = 1, S = 1 -> 2**(-1/2).
    tree = share_tree(Usage({("root", "u"): 5.0}), fair_tree=False, damping=2, root_user=False)
    assert tree.fairshare("root", "u") == pytest.approx(2**-0.5)


def test_account_parents_and_cycles() -> None:
    tree = share_tree(Usage(), [("child", "u")], [Account("child", parent="mid")])
    assert [(r.account, r.user, r.depth) for r in tree.rows][-3:] == [
        ("mid", "", 1),
        ("child", "", 2),
        ("child", "u", 3),
    ]
    with pytest.raises(ValueError, match="its own ancestor"):
        share_tree(Usage(), [], [Account("x", parent="y"), Account("y", parent="x")])


# ---------------------------------------------------------------- properties
_NAMES = st.sampled_from(["a", "b", "c", "d"])
_USAGE = st.dictionaries(
    st.tuples(st.sampled_from(["A", "B", "root"]), _NAMES),
    st.floats(min_value=0, max_value=1e9, allow_nan=False),
    max_size=8,
)
_SHARES = st.dictionaries(
    st.tuples(st.sampled_from(["A", "B", "root"]), _NAMES), st.integers(0, 5), max_size=4
)


@given(_USAGE, _SHARES, st.booleans())
def test_factors_are_between_0_and_1(
    raw: dict[tuple[str, str], float], shares: dict[tuple[str, str], int], fair_tree: bool
) -> None:
    tree = share_tree(Usage(raw), list(shares), user_shares=shares, fair_tree=fair_tree)
    for row in tree.rows:
        if row.fairshare is not None:
            assert 0.0 <= row.fairshare <= 1.0
        assert 0.0 <= row.effective_usage <= 1.0 + 1e-9
        assert 0.0 <= row.norm_shares <= 1.0


@settings(max_examples=200)
@given(
    _USAGE,
    _SHARES,
    st.tuples(st.sampled_from(["A", "B", "root"]), _NAMES),
    st.floats(min_value=1, max_value=1e9),
    st.booleans(),
)
def test_more_usage_never_raises_a_users_factor(
    raw: dict[tuple[str, str], float],
    shares: dict[tuple[str, str], int],
    who: tuple[str, str],
    extra: float,
    fair_tree: bool,
) -> None:
    users = [*shares, who]
    before = share_tree(Usage(raw), users, user_shares=shares, fair_tree=fair_tree)
    more = dict(raw)
    more[who] = more.get(who, 0.0) + extra
    after = share_tree(Usage(more), users, user_shares=shares, fair_tree=fair_tree)
    assert after.fairshare(*who) <= before.fairshare(*who) + 1e-12


@given(st.floats(min_value=0, max_value=1e12), st.integers(1, 10**6), st.integers(1, 10 * WEEK))
def test_decay_is_monotone(value: float, first: int, later: int) -> None:
    usage = started({("a", "u"): value})
    early = advance(usage, T0 + first, [], half_life=WEEK)
    late = advance(usage, T0 + first + later, [], half_life=WEEK)
    assert late.of("a", "u") <= early.of("a", "u") <= value


@given(st.floats(min_value=0, max_value=1e12), st.integers(60, 4 * WEEK))
def test_two_halvings_equal_one_decay_of_two_half_lives(value: float, half_life: int) -> None:
    usage = started({("a", "u"): value})
    halved = advance(usage, T0 + half_life, [], half_life=half_life)
    stepwise = advance(halved, T0 + 2 * half_life, [], half_life=half_life)
    at_once = advance(usage, T0 + 2 * half_life, [], half_life=half_life)
    assert stepwise.of("a", "u") == pytest.approx(at_once.of("a", "u"), rel=1e-9)
    assert at_once.of("a", "u") == pytest.approx(value / 4, rel=1e-9, abs=1e-12)


@given(
    st.lists(st.integers(1, 3 * DAY), min_size=1, max_size=5),
    st.integers(1, 64),
    st.integers(0, DAY),
    st.sampled_from([0, HOUR, WEEK]),
)
def test_advancing_in_steps_equals_one_step(
    steps: list[int], cpus: int, offset: int, half_life: int
) -> None:
    job = Charge("a", "u", cpus, T0 - offset)
    stepwise = started()
    now = T0
    for step in steps:
        now += step
        stepwise = advance(stepwise, now, [job], half_life=half_life)
    at_once = advance(started(), now, [job], half_life=half_life)
    assert stepwise.of("a", "u") == pytest.approx(at_once.of("a", "u"), rel=1e-9)
