"""NodeSet, the scheduler's node bitmap: the C-backed class and its pure-Python twin.

Every behavioural test runs on both classes. A hypothesis state machine then drives
both through the same random operations next to a frozenset model and compares all
three after every step, and a fuzz test feeds both the same range strings.

The C extension is built in place (python csrc/nodeset_build.py) when it is missing
or older than its sources, so a plain checkout works. If it cannot be built, the
C tests error out: a missing extension must never pass as a skip.
"""

from __future__ import annotations

import copy
import importlib.util
import operator
import pickle
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

import corral.pynodeset
from corral.pynodeset import NodeClaims as PyNodeClaims
from corral.pynodeset import NodeCounts as PyNodeCounts

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
SOURCES = [CSRC / "nodeset.c", CSRC / "nodeset.h", CSRC / "nodeset_build.py"]

PyNodeSet = corral.pynodeset.NodeSet
#: (NodeSet, NodeCounts, NodeClaims) of one implementation.
Kit = tuple[type[Any], type[Any], type[Any]]

# Word-boundary capacities (the C side stores 64 bits a word) plus the degenerate one.
SIZES = [0, 1, 63, 64, 65, 128, 130]


def _extension_needs_build() -> bool:
    """Missing, or an in-tree build older than its sources (a stale in-place build)."""
    if "corral._nodeset" in sys.modules:
        return False
    spec = importlib.util.find_spec("corral._nodeset")
    if spec is None or spec.origin is None:
        return True
    built = Path(spec.origin)
    if built.parent != ROOT / "corral":
        return False
    return built.stat().st_mtime < max(source.stat().st_mtime for source in SOURCES)


@pytest.fixture(scope="session")
def c_nodeset() -> type[Any]:
    """The C-backed NodeSet class, built in place first when needed."""
    if _extension_needs_build():
        build = subprocess.run(
            [sys.executable, str(CSRC / "nodeset_build.py")],
            capture_output=True,
            text=True,
            check=False,
        )
        if build.returncode != 0:
            pytest.fail(
                f"cannot build corral._nodeset:\n{build.stdout}\n{build.stderr}", pytrace=False
            )
    from corral.nodeset import NodeSet

    return NodeSet


@pytest.fixture(params=["c", "python"])
def ns(request: pytest.FixtureRequest) -> type[Any]:
    """Each NodeSet implementation in turn."""
    if request.param == "c":
        cls: type[Any] = request.getfixturevalue("c_nodeset")
        return cls
    return PyNodeSet


@pytest.fixture(params=["c", "python"])
def kit(request: pytest.FixtureRequest) -> Kit:
    """Each implementation's NodeSet, NodeCounts and NodeClaims in turn."""
    if request.param == "c":
        request.getfixturevalue("c_nodeset")
        from corral import nodeset

        return nodeset.NodeSet, nodeset.NodeCounts, nodeset.NodeClaims
    return PyNodeSet, PyNodeCounts, PyNodeClaims


def model_scan(
    members: frozenset[int],
    counts: list[int],
    least: int,
    claims: list[tuple[int, int, list[int]]] | None,
    begin: int,
    end: int,
    start: int,
    want: int | None,
) -> list[int]:
    """What ``NodeSet.scan`` must return, written as plainly as possible."""
    found = [
        i
        for i in sorted(members)
        if i >= start
        and counts[i] >= least
        and not (claims and any(i in nodes and b < end and begin < e for b, e, nodes in claims))
    ]
    return found if want is None else found[:want]


# --- construction and text -------------------------------------------------------------


def test_from_range_string(ns: type[Any]) -> None:
    s = ns("0-3,7", size=16)
    assert list(s) == [0, 1, 2, 3, 7]
    assert len(s) == 5
    assert s.size == 16
    assert str(s) == "0-3,7"
    assert repr(s) == "NodeSet('0-3,7', size=16)"


def test_from_iterable(ns: type[Any]) -> None:
    s = ns([7, 3, 3, 0, 1, 2], size=16)
    assert s == ns("0-3,7", size=16)
    assert ns(range(4, 8), size=8) == ns("4-7", size=8)
    assert ns(iter([5]), size=6) == ns("5", size=6)


def test_empty(ns: type[Any]) -> None:
    for empty in (ns(size=10), ns("", size=10), ns([], size=10)):
        assert len(empty) == 0
        assert not empty
        assert list(empty) == []
        assert empty.first() is None
        assert str(empty) == ""
        assert repr(empty) == "NodeSet('', size=10)"


@pytest.mark.parametrize("size", SIZES)
def test_full(ns: type[Any], size: int) -> None:
    full = ns.full(size)
    assert len(full) == size
    assert list(full) == list(range(size))
    assert str(full) == {0: "", 1: "0"}.get(size, f"0-{size - 1}")
    assert full == ns(range(size), size=size)


def test_zero_capacity(ns: type[Any]) -> None:
    s = ns(size=0)
    assert s == ns.full(0)
    assert (s | s) == s
    assert s <= s
    assert not s.overlaps(s)
    with pytest.raises(IndexError):
        s.with_(0)


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("3,0-2,2-5", "0-5"),
        ("0-1,2-3", "0-3"),
        ("3-4", "3-4"),
        ("5,5,5", "5"),
        ("9-9", "9"),
        ("0,2,4", "0,2,4"),
        ("007", "7"),
        ("62-66,127", "62-66,127"),
    ],
)
def test_str_is_canonical(ns: type[Any], spec: str, canonical: str) -> None:
    assert str(ns(spec, size=128)) == canonical


@pytest.mark.parametrize("size", SIZES)
def test_word_boundaries(ns: type[Any], size: int) -> None:
    picks = [i for i in (0, 62, 63, 64, 65, 127, 129) if i < size]
    s = ns(picks, size=size)
    assert list(s) == picks
    assert len(s) == len(picks)
    assert list(ns.full(size) - s) == [i for i in range(size) if i not in picks]


def test_repr_round_trips_through_eval(ns: type[Any]) -> None:
    s = ns("1,4-9,100", size=101)
    assert eval(repr(s), {"NodeSet": ns}) == s


@pytest.mark.parametrize(
    "spec",
    ["1-", "-1", "1,,2", ",1", "1,", " 1", "1 ", "1-2-3", "+1", "a", "0x1", "٣", "1_0", "-"],
)
def test_malformed_string(ns: type[Any], spec: str) -> None:
    with pytest.raises(ValueError, match="malformed"):
        ns(spec, size=16)


def test_descending_range(ns: type[Any]) -> None:
    with pytest.raises(ValueError, match="descending"):
        ns("5-3", size=16)


@pytest.mark.parametrize("spec", ["16", "0-16", "3,99999999999999999999"])
def test_string_index_out_of_range(ns: type[Any], spec: str) -> None:
    with pytest.raises(IndexError, match="out of range"):
        ns(spec, size=16)


@pytest.mark.parametrize("bad", [[16], [-1], [0, 2**70]])
def test_iterable_index_out_of_range(ns: type[Any], bad: list[int]) -> None:
    with pytest.raises(IndexError):
        ns(bad, size=16)


def test_bad_size(ns: type[Any]) -> None:
    with pytest.raises(ValueError):
        ns(size=-1)
    with pytest.raises(ValueError):
        ns.full(-1)
    with pytest.raises(TypeError):
        ns(size=2.0)


def test_non_integer_index(ns: type[Any]) -> None:
    s = ns("1", size=4)
    with pytest.raises(TypeError):
        ns([1.0], size=4)
    with pytest.raises(TypeError):
        s.with_("1")
    with pytest.raises(TypeError):
        _ = "1" in s


# --- queries --------------------------------------------------------------------------


def test_membership(ns: type[Any]) -> None:
    s = ns("0-3,7", size=8)
    assert 0 in s
    assert 7 in s
    assert 4 not in s
    for outside in (8, -1):
        with pytest.raises(IndexError):
            _ = outside in s


def test_first(ns: type[Any]) -> None:
    assert ns("5,9", size=10).first() == 5
    assert ns("64", size=65).first() == 64


def test_bool_and_len(ns: type[Any]) -> None:
    assert ns("70", size=71)
    assert len(ns("0-69", size=71)) == 70


# --- operations -------------------------------------------------------------------------


def test_set_algebra(ns: type[Any]) -> None:
    a = ns("0-5", size=70)
    b = ns("4-9,69", size=70)
    assert str(a & b) == "4-5"
    assert str(a | b) == "0-9,69"
    assert str(a - b) == "0-3"
    assert str(b - a) == "6-9,69"
    assert str(a ^ b) == "0-3,6-9,69"
    assert a.overlaps(b)
    assert not a.isdisjoint(b)
    assert (a - b).isdisjoint(b)
    assert not (a - b).overlaps(b)


def test_operations_return_new_sets(ns: type[Any]) -> None:
    a = ns("1-3", size=8)
    before = str(a)
    results = [a & a, a | a, a - a, a ^ a, a.with_(5), a.without(2), a.copy()]
    assert all(result is not a for result in results)
    assert str(a) == before
    assert str(a.with_(5)) == "1-3,5"
    assert str(a.without(2)) == "1,3"
    assert a.with_(1) == a
    assert a.without(7) == a


def test_copy(ns: type[Any]) -> None:
    a = ns("2,64", size=65)
    b = a.copy()
    assert b == a
    assert b is not a
    assert b.without(2) != a


def test_subset_order(ns: type[Any]) -> None:
    small = ns("1-2", size=8)
    big = ns("0-3", size=8)
    other = ns("4", size=8)
    assert small <= big
    assert small < big
    assert big >= small
    assert big > small
    assert small <= small
    assert not small < small
    assert small >= small
    assert not small > small
    assert not other <= big
    assert not big <= small


def test_equality_and_hash(ns: type[Any]) -> None:
    a = ns("0-3,7", size=16)
    b = ns([7, 0, 1, 2, 3], size=16)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b, a.copy()}) == 1
    assert a != ns("0-3,7", size=17)
    assert a != ns("0-3", size=16)
    assert a != "0-3,7"
    assert a != {0, 1, 2, 3, 7}


def test_sizes_must_match(ns: type[Any]) -> None:
    a = ns("1", size=8)
    b = ns("1", size=9)
    binary: list[Callable[[], object]] = [
        lambda: a & b,
        lambda: a | b,
        lambda: a - b,
        lambda: a ^ b,
        lambda: a <= b,
        lambda: a < b,
        lambda: a >= b,
        lambda: a > b,
        lambda: a.overlaps(b),
        lambda: a.isdisjoint(b),
    ]
    for operation in binary:
        with pytest.raises(ValueError, match="sizes differ"):
            operation()


def test_other_operand_types(ns: type[Any]) -> None:
    a = ns("1", size=8)
    with pytest.raises(TypeError):
        _ = a & {1}
    with pytest.raises(TypeError):
        _ = a <= {1}


def test_pickle_and_deepcopy(ns: type[Any]) -> None:
    a = ns("0-3,64-70", size=100)
    assert pickle.loads(pickle.dumps(a)) == a
    assert copy.deepcopy(a) == a
    assert copy.copy(a) == a


def test_large(ns: type[Any]) -> None:
    size = 100_000
    evens = ns(range(0, size, 2), size=size)
    full = ns.full(size)
    assert len(evens) == size // 2
    assert len(full - evens) == size // 2
    assert (full - evens) ^ evens == full
    assert str(ns(f"1-{size - 2}", size=size)) == f"1-{size - 2}"


def test_c_and_python_sets_do_not_mix(c_nodeset: type[Any]) -> None:
    c = c_nodeset("1", size=4)
    py = PyNodeSet("1", size=4)
    assert c != py
    with pytest.raises(TypeError):
        _ = c | py


# --- candidate scans, counts and claims ----------------------------------------------


def test_scan_by_count_and_claims(kit: Kit) -> None:
    node_set, node_counts, node_claims = kit
    s = node_set("0-9,64-70", size=72)
    counts = node_counts([i % 4 for i in range(72)])
    assert s.scan(counts, 2) == [2, 3, 6, 7, 66, 67, 70]
    assert s.scan(counts, 0) == list(s)
    claims = node_claims(72)
    claims.add(100, 200, [3, 66])
    assert s.scan(counts, 2, claims, 0, 100) == [2, 3, 6, 7, 66, 67, 70]  # half open
    assert s.scan(counts, 2, claims, 199, 300) == [2, 6, 7, 67, 70]
    assert s.scan(counts, 2, claims, 200, 300) == [2, 3, 6, 7, 66, 67, 70]
    assert s.scan(counts, 2, claims, 50, 150, start=7, want=2) == [7, 67]
    assert s.scan(counts, 2, start=72) == []
    assert s.scan(counts, 2, want=0) == []
    counts[66] = -1
    assert counts[66] == -1
    assert s.scan(counts, 0, start=64) == [64, 65, 67, 68, 69, 70]


def test_scan_checks_its_operands(kit: Kit) -> None:
    node_set, node_counts, node_claims = kit
    s = node_set("1-3", size=8)
    counts = node_counts([1] * 8)
    with pytest.raises(ValueError, match="length 7"):
        s.scan(node_counts([1] * 7), 1)
    with pytest.raises(ValueError, match="NodeClaims of size 9"):
        s.scan(counts, 1, node_claims(9))
    with pytest.raises(IndexError):
        s.scan(counts, 1, start=9)
    with pytest.raises(IndexError):
        s.scan(counts, 1, start=-1)
    with pytest.raises(ValueError):
        s.scan(counts, 1, want=-1)
    with pytest.raises(OverflowError):
        s.scan(counts, 2**31)
    with pytest.raises(TypeError):
        s.scan([1] * 8, 1)


def test_scan_does_not_mix_implementations(c_nodeset: type[Any]) -> None:
    with pytest.raises(TypeError):
        c_nodeset("1", size=4).scan(PyNodeCounts([1] * 4), 1)
    with pytest.raises(TypeError):
        PyNodeSet("1", size=4).scan(PyNodeCounts([1] * 4), 1, corral.nodeset.NodeClaims(4))


def test_counts(kit: Kit) -> None:
    _, node_counts, _ = kit
    counts = node_counts(range(5))
    assert len(counts) == 5
    assert [counts[i] for i in range(5)] == [0, 1, 2, 3, 4]
    counts[4] = -7
    assert counts[4] == -7
    for bad in (5, -1):
        with pytest.raises(IndexError):
            counts[bad] = 1
        with pytest.raises(IndexError):
            _ = counts[bad]
    with pytest.raises(OverflowError):
        counts[0] = 2**31
    with pytest.raises(OverflowError):
        node_counts([2**40])
    assert counts[0] == 0


def test_claims(kit: Kit) -> None:
    _, _, node_claims = kit
    claims = node_claims(70)
    assert claims.size == 70
    claims.add(10, 20, [0, 69])
    claims.add(30, 40, [69])
    assert claims.spans(69) == [(10, 20), (30, 40)]
    assert claims.spans(1) == []
    assert claims.overlaps(69, 19, 30)
    assert not claims.overlaps(69, 20, 30)
    assert not claims.overlaps(0, 0, 10)
    with pytest.raises(IndexError):
        claims.add(0, 1, [3, 70])
    assert claims.spans(3) == []  # nothing claimed when an index is bad
    with pytest.raises(IndexError):
        claims.overlaps(70, 0, 1)
    with pytest.raises(OverflowError):
        claims.add(2**63, 0, [1])
    assert claims.spans(1) == []
    for many in range(100):  # grows past its first allocation
        claims.add(many, many + 1, [5])
    assert len(claims.spans(5)) == 100


# --- the two implementations agree -----------------------------------------------------

SPEC_TEXT = st.text(alphabet="0123456789,- ", max_size=12)


@settings(max_examples=400, deadline=None)
@given(spec=SPEC_TEXT, size=st.sampled_from(SIZES))
def test_same_verdict_on_any_string(c_nodeset: type[Any], spec: str, size: int) -> None:
    outcomes = []
    for cls in (c_nodeset, PyNodeSet):
        try:
            outcomes.append(repr(cls(spec, size=size)))
        except (ValueError, IndexError) as error:
            outcomes.append(type(error).__name__)
    assert outcomes[0] == outcomes[1]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), size=st.sampled_from(SIZES))
def test_text_round_trip(c_nodeset: type[Any], data: st.DataObject, size: int) -> None:
    indices = data.draw(st.sets(st.integers(0, size - 1)) if size else st.just(set[int]()))
    for cls in (c_nodeset, PyNodeSet):
        s = cls(indices, size=size)
        assert set(s) == indices
        assert cls(str(s), size=size) == s
        assert eval(repr(s), {"NodeSet": cls}) == s


Triple = tuple[Any, Any, frozenset[int]]


class NodeSetMachine(RuleBasedStateMachine):
    """Random operation sequences on (C set, Python set, frozenset) triples of one size."""

    sets = Bundle("sets")
    c_cls: type[Any]  # the C-backed class, set by a subclass in the test

    def __init__(self) -> None:
        super().__init__()
        self.size = 0
        self.latest: list[Triple] = []

    def _keep(self, c: Any, py: Any, model: frozenset[int]) -> Triple:
        triple = (c, py, model)
        self.latest = [triple, *self.latest[:3]]
        return triple

    def _index(self, data: st.DataObject) -> int:
        """An index, sometimes just outside the capacity to exercise the bounds checks."""
        return data.draw(st.integers(-2, self.size + 1))

    @initialize(size=st.sampled_from(SIZES))
    def choose_size(self, size: int) -> None:
        self.size = size

    @rule(target=sets, data=st.data())
    def from_indices(self, data: st.DataObject) -> Triple:
        indices = data.draw(st.lists(st.integers(0, max(self.size - 1, 0)), max_size=20))
        indices = [i for i in indices if i < self.size]
        return self._keep(
            self.c_cls(indices, size=self.size),
            PyNodeSet(indices, size=self.size),
            frozenset(indices),
        )

    @rule(target=sets, data=st.data())
    def from_ranges(self, data: st.DataObject) -> Triple:
        bounds = st.integers(0, max(self.size - 1, 0))
        pairs = data.draw(st.lists(st.tuples(bounds, bounds), max_size=4)) if self.size else []
        runs = [(min(pair), max(pair)) for pair in pairs]
        spec = ",".join(f"{lo}-{hi}" for lo, hi in runs)
        model = frozenset(i for lo, hi in runs for i in range(lo, hi + 1))
        return self._keep(self.c_cls(spec, size=self.size), PyNodeSet(spec, size=self.size), model)

    @rule(target=sets)
    def full(self) -> Triple:
        return self._keep(
            self.c_cls.full(self.size), PyNodeSet.full(self.size), frozenset(range(self.size))
        )

    @rule(target=sets, a=sets, b=sets, op=st.sampled_from(["&", "|", "-", "^"]))
    def combine(self, a: Triple, b: Triple, op: str) -> Triple:
        apply = {"&": operator.and_, "|": operator.or_, "-": operator.sub, "^": operator.xor}[op]
        return self._keep(apply(a[0], b[0]), apply(a[1], b[1]), apply(a[2], b[2]))

    @rule(target=sets, a=sets, data=st.data(), adding=st.booleans())
    def with_or_without(self, a: Triple, data: st.DataObject, adding: bool) -> Triple:
        index = self._index(data)
        if not 0 <= index < self.size:
            for s in a[:2]:
                operation = s.with_ if adding else s.without
                with pytest.raises(IndexError):
                    operation(index)
            return a
        if adding:
            return self._keep(a[0].with_(index), a[1].with_(index), a[2] | {index})
        return self._keep(a[0].without(index), a[1].without(index), a[2] - {index})

    @rule(target=sets, a=sets)
    def copy(self, a: Triple) -> Triple:
        return self._keep(a[0].copy(), a[1].copy(), a[2])

    @rule(a=sets, b=sets)
    def compare(self, a: Triple, b: Triple) -> None:
        model_a, model_b = a[2], b[2]
        for x, y in ((a[0], b[0]), (a[1], b[1])):
            assert (x == y) == (model_a == model_b)
            assert (x <= y) == (model_a <= model_b)
            assert (x < y) == (model_a < model_b)
            assert (x >= y) == (model_a >= model_b)
            assert (x > y) == (model_a > model_b)
            assert x.overlaps(y) == bool(model_a & model_b)
            assert x.isdisjoint(y) == model_a.isdisjoint(model_b)
            if model_a == model_b:
                assert hash(x) == hash(y)

    @rule(a=sets, data=st.data())
    def membership(self, a: Triple, data: st.DataObject) -> None:
        index = self._index(data)
        for s in a[:2]:
            if 0 <= index < self.size:
                assert (index in s) == (index in a[2])
            else:
                with pytest.raises(IndexError):
                    _ = index in s

    @rule(a=sets, data=st.data())
    def scan(self, a: Triple, data: st.DataObject) -> None:
        from corral import nodeset

        values = data.draw(st.lists(st.integers(-2, 4), min_size=self.size, max_size=self.size))
        nodes = st.lists(st.integers(0, self.size - 1), max_size=4) if self.size else st.just([])
        time = st.integers(-5, 50)
        spans = data.draw(st.lists(st.tuples(time, time, nodes), max_size=4))
        with_claims = data.draw(st.booleans())
        least, begin, end = data.draw(st.integers(-1, 4)), data.draw(time), data.draw(time)
        start = data.draw(st.integers(0, self.size))
        want = data.draw(st.none() | st.integers(0, self.size + 2))
        expected = model_scan(
            a[2], values, least, spans if with_claims else None, begin, end, start, want
        )
        for s, node_counts, node_claims in (
            (a[0], nodeset.NodeCounts, nodeset.NodeClaims),
            (a[1], PyNodeCounts, PyNodeClaims),
        ):
            claims = node_claims(self.size) if with_claims else None
            for b, e, indices in spans if claims is not None else ():
                claims.add(b, e, indices)
            got = s.scan(node_counts(values), least, claims, begin, end, start, want)
            assert got == expected

    @invariant()
    def latest_sets_agree(self) -> None:
        for c, py, model in self.latest:
            expected = sorted(model)
            assert list(c) == list(py) == expected
            assert len(c) == len(py) == len(model)
            assert bool(c) == bool(py) == bool(model)
            assert c.first() == py.first() == (expected[0] if expected else None)
            assert str(c) == str(py)
            assert repr(c) == repr(py)
            assert c.size == py.size == self.size


def test_random_operation_sequences(c_nodeset: type[Any]) -> None:
    class CNodeSetMachine(NodeSetMachine):
        c_cls = c_nodeset

    run_state_machine_as_test(
        CNodeSetMachine,
        settings=settings(max_examples=150, stateful_step_count=40, deadline=None),
    )
