"""Hostlist expressions, checked against what Slurm 22.05 and its docs show."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.hostlist import MAX_RANGE, compress, expand


@pytest.mark.parametrize(
    ("expr", "hosts"),
    [
        pytest.param("n1", ["n1"], id="plain"),
        pytest.param("", [], id="empty"),
        pytest.param("n[1-3],x5", ["n1", "n2", "n3", "x5"], id="golden-show-hostnames"),
        pytest.param(
            "node[001-003,15]", ["node001", "node002", "node003", "node15"], id="pad-per-range"
        ),
        pytest.param("n[05-7]", ["n05", "n06", "n07"], id="pad-from-low"),
        pytest.param("n[1-010]", [f"n{i}" for i in range(1, 11)], id="unpadded-low"),
        pytest.param("n[099-100]", ["n099", "n100"], id="pad-grows"),
        pytest.param(
            "rack[1-2]-n[1-2]",
            ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"],
            id="cartesian-left-slowest",
        ),
        pytest.param("a[1-3]b", ["a1b", "a2b", "a3b"], id="suffix"),
        pytest.param("[1-2]", ["1", "2"], id="no-prefix"),
        pytest.param("n1 n2\tn3\nn4", ["n1", "n2", "n3", "n4"], id="whitespace"),
        pytest.param("n1,,n2, ", ["n1", "n2"], id="empty-items"),
        pytest.param("n2,n1,n2", ["n2", "n1", "n2"], id="order-and-duplicates-kept"),
        pytest.param("n[3,1,3]", ["n3", "n1", "n3"], id="bracket-order-kept"),
        pytest.param("n[7]", ["n7"], id="single-in-brackets"),
        pytest.param("gpu-a.b", ["gpu-a.b"], id="punctuation"),
        pytest.param(
            f"n[1-{MAX_RANGE}]", [f"n{i}" for i in range(1, MAX_RANGE + 1)], id="max-range"
        ),
    ],
)
def test_expand(expr: str, hosts: list[str]) -> None:
    assert expand(expr) == hosts


@pytest.mark.parametrize(
    "expr",
    [
        pytest.param("n[1-3", id="unclosed"),
        pytest.param("n1-3]", id="unopened"),
        pytest.param("n[[1-2]]", id="nested"),
        pytest.param("n[3-1]", id="low-above-high"),
        pytest.param("n[a]", id="letter"),
        pytest.param("n[1-x]", id="letter-high"),
        pytest.param("n[-1]", id="negative"),
        pytest.param("n[1-2-3]", id="double-dash"),
        pytest.param("n[]", id="empty-brackets"),
        pytest.param("n[1,]", id="empty-range"),
        pytest.param("n[1 -2]", id="space-in-brackets"),
        pytest.param(f"n[1-{MAX_RANGE + 1}]", id="range-too-big"),
        pytest.param("a[0-999]b[0-999]", id="product-too-big"),
        pytest.param("n[\u0661]", id="non-ascii-digit"),
    ],
)
def test_expand_rejects(expr: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"Invalid hostlist: {expr}")):
        expand(expr)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param(["n1", "n2", "n3", "n7"], "n[1-3,7]", id="golden-show-hostlist"),
        pytest.param(["n4", "n1", "n3", "n2"], "n[1-4]", id="sorted"),
        pytest.param(["n1", "n1", "n2"], "n[1-2]", id="deduplicated"),
        pytest.param(["n1"], "n1", id="single-no-brackets"),
        pytest.param(["n007"], "n007", id="single-padded"),
        pytest.param([], "", id="empty"),
        pytest.param(["n8", "n9", "n10", "n11", "n099", "n100"], "n[8-11,099-100]", id="widths"),
        pytest.param(
            ["node001", "node002", "node003", "node015"], "node[001-003,015]", id="padded"
        ),
        pytest.param(["x3", "n2", "x1", "n1", "n3"], "n[1-3],x[1,3]", id="prefixes"),
        pytest.param(["b", "a", "n1"], "a,b,n1", id="plain-names"),
        pytest.param(["n9", "n10"], "n[9-10]", id="unpadded-grows"),
        pytest.param(["n09", "n10"], "n[09-10]", id="padded-grows"),
        pytest.param(["n1", "n01"], "n[1,01]", id="same-number-two-widths"),
        pytest.param(
            ["rack1-n1", "rack1-n2", "rack2-n1"], "rack1-n[1-2],rack2-n1", id="digits-in-prefix"
        ),
    ],
)
def test_compress_sorted(names: list[str], expected: str) -> None:
    assert compress(names) == expected


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param(["n9", "n10", "n11", "n1"], "n[9-11,1]", id="input-order"),
        pytest.param(["n1", "x1", "n2"], "n1,x1,n2", id="prefix-change-splits"),
        pytest.param(["n1", "n1"], "n[1,1]", id="duplicates-kept"),
        pytest.param(["n3", "n2", "n1"], "n[3,2,1]", id="descending"),
        pytest.param(["n1", "plain", "n2"], "n1,plain,n2", id="plain-between"),
    ],
)
def test_compress_unsorted(names: list[str], expected: str) -> None:
    assert compress(names, sort=False) == expected


def test_compress_accepts_any_iterable() -> None:
    assert compress(name for name in ("n2", "n1")) == "n[1-2]"


# Names as clusters use them: no brackets, commas or whitespace.
_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,8}", fullmatch=True)


def _hostlist_order(name: str) -> tuple[str, int, int]:
    """Sort by prefix, then number, then digit count: what squeue and sinfo print."""
    match = re.fullmatch(r"(.*?)(\d*)", name, re.ASCII | re.DOTALL)
    assert match is not None
    digits = match.group(2)
    return match.group(1), int(digits) if digits else -1, len(digits)


@given(st.lists(_NAMES, max_size=30))
def test_sorted_compress_round_trips(names: list[str]) -> None:
    hosts = expand(compress(names))
    assert hosts == sorted(set(names), key=_hostlist_order)


@given(st.lists(_NAMES, max_size=30))
def test_unsorted_compress_keeps_order_and_duplicates(names: list[str]) -> None:
    assert expand(compress(names, sort=False)) == names


@given(st.lists(st.integers(0, 2000), max_size=40), st.sampled_from(["n", "gpu-", "r1n"]))
def test_numbered_round_trip(numbers: list[int], prefix: str) -> None:
    names = [f"{prefix}{n}" for n in numbers]
    assert expand(compress(names, sort=False)) == names
    assert expand(compress(names)) == [f"{prefix}{n}" for n in sorted(set(numbers))]
