"""corral.units: memory sizes in MiB, as Slurm reads --mem."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.units import parse_memory


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        pytest.param("2048", 2048, id="plain-is-mib"),
        pytest.param("0", 0, id="zero-all-memory"),
        pytest.param("954M", 954, id="M"),
        pytest.param("954m", 954, id="m"),
        pytest.param("954MB", 954, id="MB"),
        pytest.param("1G", 1024, id="G"),
        pytest.param("1g", 1024, id="g"),
        pytest.param("1GB", 1024, id="GB"),
        pytest.param("1gb", 1024, id="gb"),
        pytest.param("15G", 15360, id="dask"),
        pytest.param("2T", 2 * 1024 * 1024, id="T"),
        pytest.param("1024K", 1, id="K"),
        pytest.param("500k", 1, id="k-rounds-up"),
        pytest.param("1025K", 2, id="K-rounds-up-past-one"),
        pytest.param("0K", 0, id="zero-K"),
        pytest.param("1KB", 1, id="KB"),
    ],
)
def test_sizes(text: str, mib: int) -> None:
    assert parse_memory(text) == mib


@pytest.mark.parametrize(
    "text",
    [
        *("", "G", "1B", "1P", "-1", "1.5G", "1 G", "1GiB", "1GBB", "abc", "١٢", "1G ", " 1G"),
        pytest.param("1\u212a", id="kelvin-sign-is-not-K"),
    ],
)
def test_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_memory(text)


@given(st.text(max_size=20))
def test_only_value_error(text: str) -> None:
    with contextlib.suppress(ValueError):
        assert parse_memory(text) >= 0


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "M", "G", "T", "K"]))
def test_units_scale(value: int, unit: str) -> None:
    factor = {"": 1, "M": 1, "G": 1024, "T": 1024**2}
    expected = -(-value // 1024) if unit == "K" else value * factor[unit]
    assert parse_memory(f"{value}{unit}") == expected
    assert parse_memory(f"{value}{unit.lower()}b" if unit else str(value)) == expected
