"""scrontab's grammar and next-time computation (corral/crontab.py), pure.

The times are worked out in local time; these tests pin the zone to UTC.
"""

from __future__ import annotations

import calendar
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from corral.crontab import CronError, CrontabError, parse_crontab, parse_times, split_entry
from tests.unit.test_timefmt import utc  # noqa: F401  (autouse: local time is UTC)

#: Tuesday 14 November 2023, 22:13:20 UTC.
NOW = 1_700_000_000


def at(text: str) -> int:
    return calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M"))


@pytest.mark.parametrize(
    ("line", "canonical", "command"),
    [
        ("* * * * * echo hi", "* * * * *", "echo hi"),
        ("*/15 * * * * x", "0,15,30,45 * * * *", "x"),
        ("0-30/10 * * * * x", "0,10,20,30 * * * *", "x"),
        ("1-5,7 1 * jan mon x", "1-5,7 1 * 1 1", "x"),
        ("60 24 * * 7 x", "0 0 * * 0", "x"),
        ("0 0 * * sun x", "0 0 * * 0", "x"),
        ("5 \t4 * jan/2 * x y", "5 4 * 1 *", "x y"),
        ("@hourly x", "0 * * * *", "x"),
        ("@daily x", "0 0 * * *", "x"),
        ("@midnight x", "0 0 * * *", "x"),
        ("@weekly x", "0 0 * * 0", "x"),
        ("@monthly x", "0 0 1 * *", "x"),
        ("@yearly x", "0 0 1 1 *", "x"),
        ("@annually x", "0 0 1 1 *", "x"),
        ("0 0 29 2 * leap", "0 0 29 2 *", "leap"),
    ],
    ids=[
        "every minute", "step from wild", "step over a range", "list, range and names",
        "60, 24 and 7 wrap to 0", "sunday by name", "tabs, and a step on a name",
        "hourly", "daily", "midnight", "weekly", "monthly", "yearly", "annually",
        "leap day only",
    ],
)  # fmt: skip
def test_entries_slurm_takes(line: str, canonical: str, command: str) -> None:
    spec, rest = split_entry(line)
    assert (spec.text(), rest) == (canonical, command)
    assert parse_times(canonical).text() == canonical


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        ("*/1 * * * * x", "bad step value"),
        ("*/61 * * * * x", "bad step value"),
        ("@reboot x", "invalid @ line"),
        ("@hourly", ""),
        ("* * * *", ""),
        ("61 * * * * x", ""),
        ("5-3 * * * * x", ""),
        ("* * 0 * * x", ""),
        ("* * * foo * x", "bad month specification"),
        ("* * * * fun x", "bad day specification"),
        ("0 0 31 2,4 * x", ""),
        ("0 0 30 2 * x", ""),
        ("* * * * *x", ""),
        ("a * * * * x", ""),
    ],
    ids=[
        "step 1", "step past the field", "reboot", "no command after @", "four fields",
        "minute 61", "backwards range", "day 0", "month name", "day name",
        "31st of short months", "30 February", "no space before the command",
        "letters in minute",
    ],
)  # fmt: skip
def test_entries_slurm_refuses_in_its_words(line: str, detail: str) -> None:
    with pytest.raises(CronError) as refused:
        split_entry(line)
    assert refused.value.detail == detail
    assert str(refused.value) == (detail or "something is broken")


def test_a_crontab_gives_each_entry_its_scron_options_and_lines() -> None:
    text = (
        "# a comment\n"
        "#SCRON -t 1\n"
        "  #SCRON --job-name=tick -p debug\n"
        "* * * * * date\n"
        "\n"
        "@daily /bin/true\n"
    )
    first, second = parse_crontab(text)
    assert first.options == ("-t", "1", "--job-name=tick", "-p", "debug")
    assert first.scron_lines == ("#SCRON -t 1", "  #SCRON --job-name=tick -p debug")
    assert (first.line_start, first.line_end, first.command) == (2, 4, "date")
    assert (second.options, second.line_start, second.line_end) == ((), 6, 6)


def test_a_bad_line_is_named_by_its_number() -> None:
    with pytest.raises(CrontabError) as refused:
        parse_crontab("# ok\n* * * * * date\n*/1 * * * * date\n")
    assert (refused.value.line, refused.value.detail) == (3, "bad step value")


@pytest.mark.parametrize(
    ("spec", "due"),
    [
        ("* * * * *", "2023-11-14 22:14"),
        ("0 * * * *", "2023-11-14 23:00"),
        ("13 22 * * *", "2023-11-15 22:13"),
        ("0 0 * * 0", "2023-11-19 00:00"),
        ("0 0 1 * *", "2023-12-01 00:00"),
        ("0 0 1 1 *", "2024-01-01 00:00"),
        ("30 6 13 * 5", "2023-11-17 06:30"),
        ("0 0 29 2 *", "2024-02-29 00:00"),
        ("0 0 31 * *", "2023-12-31 00:00"),
    ],
    ids=[
        "next minute, not this one", "top of the hour", "this minute tomorrow",
        "next sunday", "first of next month", "new year", "day of month or of week",
        "next leap day", "next month with a 31st",
    ],
)  # fmt: skip
def test_next_time(spec: str, due: str) -> None:
    assert parse_times(spec).next_after(NOW) == at(due)


FIELD_VALUES = {
    "minute": st.sampled_from(["*", "*/5", "0", "0-10", "7,37", "*/20"]),
    "hour": st.sampled_from(["*", "*/3", "0", "9-17", "23"]),
    "dom": st.sampled_from(["*", "1", "15", "28-31", "*/10"]),
    "month": st.sampled_from(["*", "1", "2", "6-8", "dec", "*/4"]),
    "dow": st.sampled_from(["*", "0", "1-5", "sat", "6"]),
}


def _matches(spec_text: str, when: int) -> bool:
    spec = parse_times(spec_text)
    tm = time.gmtime(when)
    return (
        spec.matches_day(tm.tm_year, tm.tm_mon, tm.tm_mday, (tm.tm_wday + 1) % 7)
        and ("hour" in spec.wild or tm.tm_hour in spec.hours)
        and ("minute" in spec.wild or tm.tm_min in spec.minutes)
    )


@settings(max_examples=150, deadline=None)
@given(
    fields=st.fixed_dictionaries(FIELD_VALUES),
    now=st.integers(min_value=946_684_800, max_value=4_102_444_800),
)
def test_next_time_is_the_first_matching_minute_after_this_one(
    fields: dict[str, str], now: int
) -> None:
    text = " ".join(fields[name] for name in ("minute", "hour", "dom", "month", "dow"))
    try:
        spec = parse_times(text)
    except CronError:
        assume(False)
        return
    due = spec.next_after(now)
    assert due % 60 == 0
    assert due > now - now % 60
    assert _matches(text, due)
    # No minute in between matches: checked where the gap is short enough to walk.
    if due - now < 3 * 86_400:
        minute = now - now % 60 + 60
        while minute < due:
            assert not _matches(text, minute), time.strftime("%c", time.gmtime(minute))
            minute += 60


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789*/-, \t@abcdefhijklmnoprstuvwy", max_size=40))
def test_any_line_is_an_entry_or_refused_in_slurms_words(line: str) -> None:
    try:
        spec, _ = split_entry(line)
    except CronError:
        return
    assert parse_times(spec.text()) == spec
