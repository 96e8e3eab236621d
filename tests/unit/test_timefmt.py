"""Slurm time formats: parse_time.c's rules and what squeue, sinfo and scontrol print."""

from __future__ import annotations

import calendar
import contextlib
import os
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.timefmt import (
    UNLIMITED,
    format_elapsed,
    format_hms,
    format_limit_hms,
    format_minutes,
    format_sinfo_limit,
    format_timestamp,
    parse_duration,
    parse_seconds,
    parse_timestamp,
)


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    """Local time is UTC here, so timestamps are the same on every machine."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if saved is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = saved
    time.tzset()


def epoch(stamp: str) -> int:
    """The epoch of a UTC timestamp, whatever the test machine's zone."""
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%S"))


# The golden capture's clock: Mon Nov 30 04:56:52 2026.
NOW = epoch("2026-11-30T04:56:52")


# ---------------------------------------------------------------- durations
@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        pytest.param("5", 5, id="MM"),
        pytest.param("90", 90, id="MM-over-hour"),
        pytest.param("5:30", 6, id="MM:SS-rounds-up"),
        pytest.param("5:00", 5, id="MM:SS-exact"),
        pytest.param("0:01", 1, id="one-second"),
        pytest.param("1:00:00", 60, id="HH:MM:SS"),
        pytest.param("1:00:01", 61, id="HH:MM:SS-rounds-up"),
        pytest.param("2-0", 2880, id="D-HH"),
        pytest.param("1-2", 1560, id="D-HH-hours"),
        pytest.param("1-2:3", 1563, id="D-HH:MM"),
        pytest.param("1-2:3:4", 1564, id="D-HH:MM:SS"),
        pytest.param("0", UNLIMITED, id="zero"),
        pytest.param("0:00", UNLIMITED, id="zero-clock"),
        pytest.param("-1", UNLIMITED, id="minus-one"),
        pytest.param("UNLIMITED", UNLIMITED, id="UNLIMITED"),
        pytest.param("infinite", UNLIMITED, id="infinite-lower"),
        pytest.param("Infinite", UNLIMITED, id="infinite-mixed"),
    ],
)
def test_parse_duration(text: str, minutes: int) -> None:
    assert parse_duration(text) == minutes


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("abc", id="letters"),
        pytest.param("1h", id="unit"),
        pytest.param("-5", id="negative"),
        pytest.param("1-", id="days-only-dash"),
        pytest.param("1:2:3:4", id="four-parts"),
        pytest.param("1-2:3:4:5", id="five-parts"),
        pytest.param("1:", id="trailing-colon"),
        pytest.param(" 5", id="leading-space"),
        pytest.param("\u0663", id="non-ascii-digit"),
        pytest.param("99999999999", id="too-large"),
        pytest.param("1" * 5000, id="huge"),
    ],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid time specification"):
        parse_duration(text)


@given(st.text(max_size=40))
def test_parse_duration_raises_only_value_error(text: str) -> None:
    try:
        minutes = parse_duration(text)
    except ValueError:
        return
    assert minutes == UNLIMITED or minutes > 0


@given(st.integers(1, 365 * 24 * 60))
def test_format_minutes_round_trips(minutes: int) -> None:
    assert parse_duration(format_minutes(minutes)) == minutes


@given(st.integers(1, 10**8))
def test_format_limit_hms_round_trips(minutes: int) -> None:
    assert parse_duration(format_limit_hms(minutes)) == minutes


@given(st.integers(0, 365 * 86400))
def test_format_elapsed_parses_back_rounded_up(seconds: int) -> None:
    expected = UNLIMITED if seconds == 0 else -(-seconds // 60)
    assert parse_duration(format_elapsed(seconds)) == expected


# ---------------------------------------------------------------- printers
@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0, "0:00", id="zero"),
        pytest.param(5, "0:05", id="seconds"),
        pytest.param(65, "1:05", id="minutes"),
        pytest.param(3600, "1:00:00", id="hour"),
        pytest.param(36000, "10:00:00", id="ten-hours"),
        pytest.param(86400 + 3661, "1-01:01:01", id="day"),
        pytest.param(365 * 86400, "365-00:00:00", id="one-year"),
        pytest.param(365 * 86400 + 1, "INVALID", id="over-a-year"),
        pytest.param(-1, "INVALID", id="negative"),
    ],
)
def test_format_elapsed(seconds: int, text: str) -> None:
    assert format_elapsed(seconds) == text


@pytest.mark.parametrize(
    ("minutes", "text"),
    [
        pytest.param(UNLIMITED, "UNLIMITED", id="unlimited"),
        pytest.param(10, "10:00", id="golden-10-min"),
        pytest.param(2, "2:00", id="golden-2-min"),
        pytest.param(60, "1:00:00", id="hour"),
        pytest.param(1440, "1-00:00:00", id="day"),
    ],
)
def test_format_minutes(minutes: int, text: str) -> None:
    assert format_minutes(minutes) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0, "00:00:00", id="zero"),
        pytest.param(5, "00:00:05", id="seconds"),
        pytest.param(3600, "01:00:00", id="hour"),
        pytest.param(86400, "1-00:00:00", id="day"),
        pytest.param(10 * 86400 + 59, "10-00:00:59", id="days"),
        pytest.param(-1, "INVALID", id="negative"),
    ],
)
def test_format_hms(seconds: int, text: str) -> None:
    assert format_hms(seconds) == text


@pytest.mark.parametrize(
    ("minutes", "text"),
    [
        pytest.param(UNLIMITED, "UNLIMITED", id="unlimited"),
        pytest.param(2, "00:02:00", id="golden-TimeLimit"),
        pytest.param(1440, "1-00:00:00", id="day"),
        pytest.param(-5, "INVALID", id="other-negative"),
    ],
)
def test_format_limit_hms(minutes: int, text: str) -> None:
    assert format_limit_hms(minutes) == text


@pytest.mark.parametrize(
    ("minutes", "text"),
    [
        pytest.param(UNLIMITED, "infinite", id="golden-infinite"),
        pytest.param(30, "30:00", id="minutes"),
        pytest.param(60, "1:00:00", id="hour"),
        pytest.param(1440, "1-00:00:00", id="day"),
        pytest.param(2 * 525600, "730-00:00:00", id="no-year-cap"),
        pytest.param(-2, "INVALID", id="other-negative"),
    ],
)
def test_format_sinfo_limit(minutes: int, text: str) -> None:
    assert format_sinfo_limit(minutes) == text


def test_format_timestamp() -> None:
    assert format_timestamp(NOW) == "2026-11-30T04:56:52"
    assert format_timestamp(0) == "Unknown"


# ---------------------------------------------------------------- timestamps
@pytest.mark.parametrize(
    ("text", "stamp"),
    [
        pytest.param("10:00", "2026-11-30T10:00:00", id="later-today"),
        pytest.param("04:57", "2026-11-30T04:57:00", id="next-minute"),
        pytest.param("04:56", "2026-12-01T04:56:00", id="this-minute-is-tomorrow"),
        pytest.param("03:00:30", "2026-12-01T03:00:30", id="past-is-tomorrow"),
        pytest.param("4:00 pm", "2026-11-30T16:00:00", id="pm"),
        pytest.param("4:00PM", "2026-11-30T16:00:00", id="pm-joined"),
        pytest.param("12:30 pm", "2026-11-30T12:30:00", id="noon-pm"),
        pytest.param("12:00am", "2026-12-01T00:00:00", id="midnight-am"),
        pytest.param("1201", "2026-12-01T00:00:00", id="MMDD"),
        pytest.param("1130", "2027-11-30T00:00:00", id="MMDD-today-is-next-year"),
        pytest.param("0101", "2027-01-01T00:00:00", id="MMDD-next-year"),
        pytest.param("120527", "2027-12-05T00:00:00", id="MMDDYY"),
        pytest.param("12/05", "2026-12-05T00:00:00", id="MM/DD"),
        pytest.param("1/5/27", "2027-01-05T00:00:00", id="M/D/YY"),
        pytest.param("12.05.26", "2026-12-05T00:00:00", id="MM.DD.YY"),
        pytest.param("12/05-10:30", "2026-12-05T10:30:00", id="date-dash-time"),
        pytest.param("2027-01-02", "2027-01-02T00:00:00", id="iso-date"),
        pytest.param("2027-01-02T03:04", "2027-01-02T03:04:00", id="iso-minutes"),
        pytest.param("2027-01-02T03:04:05", "2027-01-02T03:04:05", id="iso-seconds"),
        pytest.param("2020-01-02", "2020-01-02T00:00:00", id="iso-past-kept"),
        pytest.param("now", "2026-11-30T04:56:52", id="now"),
        pytest.param("NOW", "2026-11-30T04:56:52", id="now-upper"),
        pytest.param("now+90", "2026-11-30T04:58:22", id="now-seconds-default"),
        pytest.param("now+30seconds", "2026-11-30T04:57:22", id="now-seconds"),
        pytest.param("now+1minute", "2026-11-30T04:57:52", id="now-minute"),
        pytest.param("now+5min", "2026-11-30T05:01:52", id="now-min-prefix"),
        pytest.param("now + 2 hours", "2026-11-30T06:56:52", id="now-spaces"),
        pytest.param("now+1hour", "2026-11-30T05:56:52", id="now-hour"),
        pytest.param("now+1day", "2026-12-01T04:56:52", id="now-day"),
        pytest.param("now+2weeks", "2026-12-14T04:56:52", id="now-weeks"),
        pytest.param("now-1days", "2026-11-29T04:56:52", id="now-minus"),
        pytest.param("midnight", "2026-12-01T00:00:00", id="midnight"),
        pytest.param("noon", "2026-11-30T12:00:00", id="noon"),
        pytest.param("elevenses", "2026-11-30T11:00:00", id="elevenses"),
        pytest.param("fika", "2026-11-30T15:00:00", id="fika"),
        pytest.param("teatime", "2026-11-30T16:00:00", id="teatime"),
        pytest.param("today", "2026-11-30T00:00:00", id="today"),
        pytest.param("tomorrow", "2026-12-01T00:00:00", id="tomorrow"),
        pytest.param("Tomorrow", "2026-12-01T00:00:00", id="tomorrow-capital"),
        pytest.param("tomorrow noon", "2026-12-01T12:00:00", id="tomorrow-noon"),
        pytest.param("teatime tomorrow", "2026-12-01T16:00:00", id="teatime-tomorrow"),
        pytest.param("today 03:00", "2026-11-30T03:00:00", id="today-past-time-kept"),
        pytest.param("uts1700000000", "2023-11-14T22:13:20", id="uts"),
    ],
)
def test_parse_timestamp(text: str, stamp: str) -> None:
    assert parse_timestamp(text, NOW) == epoch(stamp)


@pytest.mark.parametrize(
    ("text", "stamp"),
    [
        pytest.param("03:00", "2026-11-30T03:00:00", id="earlier-today"),
        pytest.param("10:00", "2026-11-30T10:00:00", id="later-still-today"),
        pytest.param("1201", "2025-12-01T00:00:00", id="later-month-is-last-year"),
        pytest.param("1101", "2026-11-01T00:00:00", id="earlier-month-this-year"),
    ],
)
def test_parse_timestamp_past(text: str, stamp: str) -> None:
    assert parse_timestamp(text, NOW, past=True) == epoch(stamp)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("T", id="nothing-named"),
        pytest.param("yesterday", id="unknown-word"),
        pytest.param("25:00", id="hour-too-big"),
        pytest.param("10:60", id="minute-too-big"),
        pytest.param("10:00:60", id="second-too-big"),
        pytest.param("10:5", id="one-digit-minute"),
        pytest.param("13:00 am", id="am-over-12"),
        pytest.param("13:00 pm", id="pm-over-12"),
        pytest.param("1300", id="month-13"),
        pytest.param("1232", id="day-32"),
        pytest.param("2027-13-01", id="iso-month-13"),
        pytest.param("2027-01-00", id="iso-day-0"),
        pytest.param("now+", id="now-no-count"),
        pytest.param("now+1fortnight", id="now-bad-unit"),
        pytest.param("now5", id="now-no-sign"),
        pytest.param("now+1hour tomorrow", id="now-then-more"),
        pytest.param("today x", id="trailing-junk"),
        pytest.param("uts", id="uts-no-number"),
        pytest.param("uts12a", id="uts-letters"),
        pytest.param("now+" + "9" * 40, id="overflow"),
    ],
)
def test_parse_timestamp_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid time specification"):
        parse_timestamp(text, NOW)


@given(st.text(max_size=40), st.booleans())
def test_parse_timestamp_raises_only_value_error(text: str, past: bool) -> None:
    with contextlib.suppress(ValueError):
        parse_timestamp(text, NOW, past=past)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0", 0), ("0:30", 30), ("2", 120), ("1:00:01", 3601), ("1-0", 86400), ("2-1:2:3", 176523)],
)
def test_parse_seconds_keeps_every_second(text: str, seconds: int) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-1", "UNLIMITED", "", "1:2:3:4", "a", "1-x"])
def test_parse_seconds_refuses_what_is_not_a_span(text: str) -> None:
    with pytest.raises(ValueError, match="Invalid time specification"):
        parse_seconds(text)


@given(st.integers(min_value=1, max_value=10**7))
def test_parse_duration_is_parse_seconds_rounded_up_to_minutes(seconds: int) -> None:
    text = f"{seconds // 3600}:{seconds // 60 % 60}:{seconds % 60}"
    assert parse_seconds(text) == seconds
    assert parse_duration(text) == -(-seconds // 60)
