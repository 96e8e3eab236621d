"""corral.arrayspec: the one ``--array`` parser of sbatch and the controller."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import arrayspec
from corral.arrayspec import parse

VALID = [
    ("0", None, [0], 0),
    ("7", None, [7], 0),
    ("0-15", None, list(range(16)), 0),
    ("0,6,16-32", None, [0, 6, *range(16, 33)], 0),
    ("0-15:4", None, [0, 4, 8, 12], 0),
    ("1-9:2%3", None, [1, 3, 5, 7, 9], 3),
    ("1-10:2%3", None, [1, 3, 5, 7, 9], 3),
    ("5-5", None, [5], 0),
    ("0-9:5", None, [0, 5], 0),
    ("0-9:100", None, [0], 0),
    ("3,1,2-3", None, [1, 2, 3], 0),
    ("1,1,1", None, [1], 0),
    ("[1,5]", None, [1, 5], 0),
    ("[0-3]%1", None, [0, 1, 2, 3], 1),
    ("1-3%0", None, [1, 2, 3], 0),
    ("007", None, [7], 0),
    (" 1-3 ", None, [1, 2, 3], 0),
    ("99", 100, [99], 0),
    ("0-99", 100, list(range(100)), 0),
    ("4294967296", None, [4294967296], 0),
]


@pytest.mark.parametrize(
    ("text", "max_size", "indices", "throttle"),
    VALID,
    ids=[
        "zero",
        "single",
        "range",
        "list-and-range",
        "step",
        "step-and-throttle",
        "doc-example",
        "one-element-range",
        "step-beyond-end",
        "step-beyond-range",
        "overlap-sorted",
        "duplicates",
        "brackets-list",
        "brackets-then-throttle",
        "zero-throttle",
        "leading-zeros",
        "surrounding-blanks",
        "max-minus-one",
        "range-to-max-minus-one",
        "no-bound-without-max-size",
    ],
)
def test_valid(text: str, max_size: int | None, indices: list[int], throttle: int) -> None:
    assert parse(text, max_size) == (indices, throttle)


INVALID = [
    ("", None),
    (" ", None),
    ("abc", None),
    ("1-", None),
    ("-", None),
    ("-1", None),
    ("-1-3", None),
    ("5-1", None),
    ("1:2", None),
    ("1-5:0", None),
    ("1-5:", None),
    ("1-5:-1", None),
    ("1-2-3", None),
    ("1,,2", None),
    ("1,", None),
    (",1", None),
    ("[1-3", None),
    ("1-3]", None),
    ("1]", None),
    ("[1]]", None),
    ("[[1]", None),
    ("[]", None),
    ("1-3%", None),
    ("%2", None),
    ("1-3%a", None),
    ("1-3%-1", None),
    ("1-3%2%3", None),
    ("1.5", None),
    ("1 - 3", None),
    ("1, 2", None),
    ("+1", None),
    ("0x10", None),
    ("\u0661-\u0663", None),
    ("\u00b2", None),
    ("1-\uff13", None),
    ("1-3%\u0662", None),
    ("100", 100),
    ("0-100", 100),
    ("0,100", 100),
    ("0", 0),
]


@pytest.mark.parametrize(
    ("text", "max_size"),
    INVALID,
    ids=[
        "empty",
        "blank",
        "letters",
        "open-range",
        "dash-only",
        "negative",
        "negative-range",
        "reversed",
        "step-without-range",
        "zero-step",
        "empty-step",
        "negative-step",
        "two-dashes",
        "empty-item",
        "trailing-comma",
        "leading-comma",
        "unclosed-bracket",
        "unopened-bracket-range",
        "unopened-bracket",
        "extra-close-bracket",
        "extra-open-bracket",
        "empty-brackets",
        "empty-throttle",
        "throttle-only",
        "letter-throttle",
        "negative-throttle",
        "two-throttles",
        "decimal",
        "inner-blanks",
        "blank-after-comma",
        "plus-sign",
        "hex",
        "arabic-indic-digits",
        "superscript-digit",
        "fullwidth-digit",
        "non-ascii-throttle",
        "at-max-size",
        "range-to-max-size",
        "list-reaches-max-size",
        "max-size-zero",
    ],
)
def test_invalid(text: str, max_size: int | None) -> None:
    with pytest.raises(ValueError):
        parse(text, max_size)


def test_max_size_bounds_the_highest_index() -> None:
    assert parse("0-9", 10) == (list(range(10)), 0)
    with pytest.raises(ValueError):
        parse("0-10", 10)
    # The bound applies to the range's end even when the step skips it.
    with pytest.raises(ValueError):
        parse("0-10:3", 10)


@given(
    lo=st.integers(0, 999),
    span=st.integers(0, 999),
    step=st.integers(1, 50),
    throttle=st.integers(0, 64),
    brackets=st.booleans(),
)
def test_range_matches_python_range(
    lo: int, span: int, step: int, throttle: int, brackets: bool
) -> None:
    hi = lo + span
    body = f"{lo}-{hi}:{step}"
    text = (f"[{body}]" if brackets else body) + (f"%{throttle}" if throttle else "")
    if hi >= 1000:
        with pytest.raises(ValueError):
            parse(text, 1000)
        return
    assert parse(text, 1000) == (list(range(lo, hi + 1, step)), throttle)


@given(st.lists(st.integers(0, 99), min_size=1, max_size=10))
def test_list_is_sorted_and_unique(items: list[int]) -> None:
    assert parse(",".join(map(str, items)), 100) == (sorted(set(items)), 0)


_SPEC_CHARS = "0123456789-,:%[] \u0661\u00b2x"


@settings(max_examples=500, deadline=None)
@given(
    text=st.one_of(st.text(alphabet=_SPEC_CHARS, max_size=16), st.text(max_size=16)),
    max_size=st.integers(0, 2000),  # bounded: "0-9999999999" would expand for ever
)
def test_parse_raises_only_value_error(text: str, max_size: int) -> None:
    """Malformed input of any kind is a ValueError; what parses is sane."""
    try:
        indices, throttle = parse(text, max_size)
    except ValueError:
        return
    assert indices == sorted(set(indices))
    assert indices
    assert all(i >= 0 for i in indices)
    assert throttle >= 0
    assert indices[-1] < max_size


# ---------------------------------------------------------------- task sets

task_lists = st.lists(st.integers(0, 300), unique=True).map(sorted)


@given(task_lists)
def test_compress_expand_round_trip(indices: list[int]) -> None:
    text = arrayspec.compress(indices)
    assert arrayspec.expand(text) == indices
    assert arrayspec.count(text) == len(indices)


@given(task_lists, st.integers(0, 300))
def test_set_operations_agree_with_python_sets(indices: list[int], index: int) -> None:
    text = arrayspec.compress(indices)
    assert arrayspec.contains(text, index) == (index in indices)
    assert arrayspec.expand(arrayspec.without(text, index)) == [i for i in indices if i != index]
    if indices:
        assert arrayspec.first(text) == indices[0]
    picked = frozenset(range(index, index + 7))
    assert arrayspec.intersection(text, picked) == sorted(picked & set(indices))


@pytest.mark.parametrize(
    ("indices", "text"),
    [([1, 2, 3, 5], "1-3,5"), ([7], "7"), ([], ""), ([1, 3, 5], "1,3,5"), ([0, 1], "0-1")],
)
def test_compress_prints_as_slurm(indices: list[int], text: str) -> None:
    assert arrayspec.compress(indices) == text


def test_without_splits_a_range() -> None:
    assert arrayspec.without("1-10", 5) == "1-4,6-10"
    assert arrayspec.without("1-10", 1) == "2-10"
    assert arrayspec.without("4", 4) == ""
