"""Slurm's time formats, parsed and printed byte for byte.

Durations (``-t``, ``MaxTime=``) are minutes with ``UNLIMITED`` = -1, as on
the wire. Each printer matches one Slurm client: squeue's ``M:SS`` clock,
scontrol's ``HH:MM:SS``, sinfo's ``infinite``. ``parse_timestamp`` takes
``now`` as a parameter so callers (and tests) decide what "now" is.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False  # typing costs ~9 ms of a client's 30 ms budget
if TYPE_CHECKING:
    import re

#: The duration sentinel for "no limit" (Slurm's INFINITE).
UNLIMITED = -1

# Slurm keeps minutes in 32 bits and reserves the two top values as sentinels.
_MAX_MINUTES = 0xFFFFFFFD
# squeue prints INVALID for anything longer than this (Slurm's YEAR_SECONDS).
_YEAR_SECONDS = 365 * 24 * 3600
# No valid time string is longer; the bound keeps int() away from huge digit runs.
_MAX_TEXT = 64

_DIGITS = "0123456789"
_UNLIMITED_WORDS = frozenset({"-1", "0", "unlimited", "infinite"})
_UNITS = (("seconds", 1), ("minutes", 60), ("hours", 3600), ("days", 86400), ("weeks", 604800))
_NAMED_CLOCKS = {
    "midnight": (0, 0, 0),
    "noon": (12, 0, 0),
    "elevenses": (11, 0, 0),
    "fika": (15, 0, 0),
    "teatime": (16, 0, 0),
}
_DAY = 86400


def parse_duration(text: str) -> int:
    """Minutes in a Slurm time string (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``).

    Seconds round up to whole minutes; ``0``, ``-1``, ``UNLIMITED`` and
    ``INFINITE`` mean no limit and give ``UNLIMITED``.
    """
    if text.lower() in _UNLIMITED_WORDS:
        return UNLIMITED
    minutes = (duration_seconds(text) + 59) // 60
    if minutes == 0:
        return UNLIMITED
    if minutes > _MAX_MINUTES:
        raise ValueError(f"Invalid time specification: {text}")
    return minutes


def duration_seconds(text: str) -> int:
    """Seconds in a Slurm time string, not rounded (PreemptExemptTime's precision);
    ``0`` is 0 and the words for no limit are not times here."""
    days, dash, clock = text.partition("-")
    fields = clock.split(":") if dash else days.split(":")
    if (
        len(text) > _MAX_TEXT
        or len(fields) > 3
        or not all(_is_number(field) for field in fields)
        or (dash and not _is_number(days))
    ):
        raise ValueError(f"Invalid time specification: {text}")
    numbers = [int(field) for field in fields]
    if dash:  # D-H[:M[:S]]
        hours, minutes, secs = (*numbers, 0, 0)[:3]
        seconds = int(days) * _DAY + hours * 3600 + minutes * 60 + secs
    elif len(numbers) == 3:  # H:M:S
        seconds = numbers[0] * 3600 + numbers[1] * 60 + numbers[2]
    else:  # M[:S]
        seconds = numbers[0] * 60 + sum(numbers[1:])
    return seconds


def _is_number(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits."""
    return text != "" and not text.strip(_DIGITS)


def format_elapsed(seconds: int) -> str:
    """squeue's TIME/TIME_LEFT: ``M:SS``, ``H:MM:SS`` or ``D-HH:MM:SS``.

    Negative values and values over a year print ``INVALID``, as squeue does.
    """
    if seconds < 0 or seconds > _YEAR_SECONDS:
        return "INVALID"
    return _clock(seconds)


def format_minutes(minutes: int) -> str:
    """squeue's TIME_LIMIT (``%l``): ``UNLIMITED`` or the ``format_elapsed`` clock."""
    if minutes == UNLIMITED:
        return "UNLIMITED"
    return format_elapsed(minutes * 60)


def format_hms(seconds: int) -> str:
    """scontrol's RunTime: ``HH:MM:SS``, or ``D-HH:MM:SS`` from one day on."""
    if seconds < 0:
        return "INVALID"
    days, rest = divmod(seconds, _DAY)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{hours:02d}:{minutes:02d}:{secs:02d}"


def format_limit_hms(minutes: int) -> str:
    """scontrol's TimeLimit: ``UNLIMITED`` or the ``format_hms`` clock."""
    if minutes == UNLIMITED:
        return "UNLIMITED"
    return format_hms(minutes * 60)


def format_sinfo_limit(minutes: int) -> str:
    """sinfo's TIMELIMIT column: ``infinite`` or the squeue-style clock (no one-year cap)."""
    if minutes == UNLIMITED:
        return "infinite"
    if minutes < 0:
        return "INVALID"
    return _clock(minutes * 60)


def _clock(seconds: int) -> str:
    """``M:SS``, ``H:MM:SS`` or ``D-HH:MM:SS``, no leading zero on the first unit."""
    days, rest = divmod(seconds, _DAY)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_timestamp(epoch: int) -> str:
    """Local ``YYYY-MM-DDTHH:MM:SS`` as scontrol prints it; 0 is ``Unknown``."""
    if epoch == 0:
        return "Unknown"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(epoch))


def parse_timestamp(text: str, now: int, *, past: bool = False) -> int:
    """The epoch named by a ``--begin``/``--deadline`` style time.

    Accepts ``HH:MM[:SS] [AM|PM]``, ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``,
    ``YYYY-MM-DD[THH:MM[:SS]]``, a date and a time together, ``today``,
    ``tomorrow``, ``midnight``, ``noon``, ``elevenses``, ``fika``, ``teatime``,
    ``now[{+|-}N[unit]]`` (unit: any prefix of seconds, minutes, hours, days or
    weeks; default seconds) and ``uts<epoch>``. A time of day without a date is
    the next one to come (the last one gone when ``past``, as sacct wants); a
    date without a year likewise. All in local time.
    """
    try:
        return _parse_timestamp(text, now, past)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"Invalid time specification: {text}") from exc


class _Patterns:
    """``parse_timestamp``'s regular expressions, compiled on first use.

    ``re`` and the ``enum`` it imports cost about 5 ms, a sixth of a client
    command's start-up budget; only ``--begin``/``--deadline`` style times need
    them, so the formatters and ``parse_duration`` never pay for it.
    """

    __slots__ = ("clock", "iso_date", "now", "us_date")

    def __init__(self) -> None:
        import re

        self.clock = re.compile(
            r"(\d{1,2}):(\d\d)(?::(\d\d))?(?:[ \t]*(am|pm))?", re.ASCII | re.IGNORECASE
        )
        self.iso_date = re.compile(r"(\d{4})-(\d\d)-(\d{1,2})", re.ASCII)
        self.us_date = re.compile(r"(\d{1,2})[./]?(\d{1,2})[./]?(\d\d)?", re.ASCII)
        self.now = re.compile(
            r"now(?:[ \t]*([+-])[ \t]*(\d+)[ \t]*([a-z]*))?[ \t]*", re.ASCII | re.IGNORECASE
        )


_compiled: list[_Patterns] = []  # the one _Patterns, once made


def _patterns() -> _Patterns:
    if not _compiled:
        _compiled.append(_Patterns())
    return _compiled[0]


def _parse_timestamp(text: str, now: int, past: bool) -> int:
    invalid = ValueError(f"Invalid time specification: {text}")
    if len(text) > _MAX_TEXT or not text.isascii():  # ASCII: lower() keeps the length
        raise invalid
    lowered = text.lower()
    if lowered.startswith("uts"):
        if not text[3:].isdigit():
            raise invalid
        return _representable(int(text[3:]))
    patterns = _patterns()
    relative = patterns.now.fullmatch(text)
    if relative is not None:
        return _representable(now + _delta(relative, invalid))
    today = time.localtime(now)
    date: tuple[int | None, int, int] | None = None
    clock: tuple[int, int, int] | None = None
    pos = 0
    while pos < len(text):
        word = next((w for w in ("today", "tomorrow") if lowered.startswith(w, pos)), None)
        if word is not None:
            day = today if word == "today" else time.localtime(now + _DAY)
            date = (day.tm_year, day.tm_mon, day.tm_mday)
            pos += len(word)
            continue
        named = next((w for w in _NAMED_CLOCKS if lowered.startswith(w, pos)), None)
        if named is not None:
            clock = _NAMED_CLOCKS[named]
            pos += len(named)
            continue
        if lowered[pos] in " \t-t":
            pos += 1
            continue
        if ":" in text[pos + 1 : pos + 3]:
            match = patterns.clock.match(text, pos)
        elif text[pos + 4 : pos + 5] == "-" and text[pos + 7 : pos + 8] == "-":
            match = patterns.iso_date.match(text, pos)
        else:
            match = patterns.us_date.match(text, pos)
        if match is None:
            raise invalid
        if match.re is patterns.clock:
            clock = _read_clock(match, invalid)
        else:
            date = _read_date(match, invalid)
        pos = match.end()
    return _resolve(date, clock, today, now, past, invalid)


def _representable(epoch: int) -> int:
    """``epoch`` itself, once the C library has shown it can express it as a date."""
    time.localtime(epoch)
    return epoch


def _delta(match: re.Match[str], invalid: ValueError) -> int:
    """Seconds of a ``now+N[unit]`` offset."""
    if match.group(1) is None:
        return 0
    unit = match.group(3).lower()
    factor = 1 if unit == "" else next((f for name, f in _UNITS if name.startswith(unit)), 0)
    if factor == 0:
        raise invalid
    count = int(match.group(2)) * factor
    return -count if match.group(1) == "-" else count


def _read_clock(match: re.Match[str], invalid: ValueError) -> tuple[int, int, int]:
    hour, minute, second = (int(match.group(i) or 0) for i in (1, 2, 3))
    meridiem = (match.group(4) or "").lower()
    if meridiem == "pm":
        hour = 12 if hour == 12 else hour + 12
    elif meridiem == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59 or (meridiem == "am" and hour > 11):
        raise invalid
    return hour, minute, second


def _read_date(match: re.Match[str], invalid: ValueError) -> tuple[int | None, int, int]:
    """(year or None, month, day) from an ISO (year first) or US (year last) match."""
    if match.re is _patterns().iso_date:
        year: int | None = int(match.group(1))
        month, day = int(match.group(2)), int(match.group(3))
    else:
        month, day = int(match.group(1)), int(match.group(2))
        year = None if match.group(3) is None else 2000 + int(match.group(3))
    if not (1 <= month <= 12 and 1 <= day <= 31):
        raise invalid
    return year, month, day


def _resolve(
    date: tuple[int | None, int, int] | None,
    clock: tuple[int, int, int] | None,
    today: time.struct_time,
    now: int,
    past: bool,
    invalid: ValueError,
) -> int:
    """Fill in what the text left out the way Slurm does, then convert to an epoch."""
    if date is None and clock is None:
        raise invalid
    if clock is None:
        clock = (0, 0, 0)
    hour, minute, second = clock
    if date is None:
        later = (hour, minute) > (today.tm_hour, today.tm_min)
        day = today if past or later else time.localtime(now + _DAY)
        date = (day.tm_year, day.tm_mon, day.tm_mday)
    year, month, mday = date
    if year is None:
        if past:
            year = today.tm_year - 1 if month > today.tm_mon else today.tm_year
        else:
            upcoming = (month, mday, hour, minute) > (
                today.tm_mon,
                today.tm_mday,
                today.tm_hour,
                today.tm_min,
            )
            year = today.tm_year if upcoming else today.tm_year + 1
    return int(time.mktime((year, month, mday, hour, minute, second, 0, 0, -1)))
