"""scrontab's file grammar and the next time an entry is due, as Slurm 22.05 has them.

A crontab is lines of four kinds: blank, ``#SCRON`` (sbatch options for the next
entry), other ``#`` comments, and entries. An entry is five time fields and a
command, or an ``@`` word and a command::

    minute hour day-of-month month day-of-week command
    @yearly @annually @monthly @weekly @daily @midnight @hourly   command

Each field is ``*``, or numbers, ranges and lists (``1-5,7``), optionally with a
step (``*/15``, ``0-30/10``); month and day of week also take one three-letter
name (``jan``, ``mon``). The grammar is Slurm's (src/scrontab/parse.c), quirks
included, so a crontab Slurm takes Corral takes, and one it refuses Corral
refuses in its words: a step keeps the values ``start, start+N, ...`` of the
field's own range (0 for minute and hour, 1 for the others), minute 60 and hour
24 mean 0, day of week 7 means Sunday (0).

When an entry is due (``CronSpec.next_after``) follows cron's rules in local
time: the first whole minute after the current one whose month, day, hour and
minute match; when both day of month and day of week are restricted, a day
matching either will do (cron's OR). The CLI parses the file to build its jobs;
the controller parses each entry's time fields again (``parse_times``) and never
trusts the client's word for when a job is due.

Pure: no clock is read; ``now`` comes in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from corral.arrayspec import compress
from corral.errors import CorralError

#: How a field is sized in Slurm's bitstrings: values 0 .. size-1 parse.
_SIZES = {"minute": 61, "hour": 25, "dom": 32, "month": 13, "dow": 8}
#: Where a step's values start (Slurm's _handle_step ``start``).
_STEP_START = {"minute": 0, "hour": 0, "dom": 1, "month": 1, "dow": 1}
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # 1 .. 7 (7: Sunday, 0)
#: The @ words and the five fields they stand for (wild fields as ``*``).
_SHORTHANDS = (
    (("yearly", "annually"), "0 0 1 1 *"),
    (("monthly",), "0 0 1 * *"),
    (("weekly",), "0 0 * * 0"),
    (("daily", "midnight"), "0 0 * * *"),
    (("hourly",), "0 * * * *"),
)
#: A spec that names only 29 February is due once in four years; further is a bug.
_SEARCH_DAYS = 8 * 366


class CronError(CorralError):
    """A crontab entry Slurm refuses; ``detail`` is Slurm's specific complaint ("" if
    it has none beyond its catch-all "something is broken")."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail or "something is broken")
        self.detail = detail


class CrontabError(CorralError):
    """A crontab with a bad line: ``line`` counts from 1, ``detail`` is Slurm's words."""

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(f"line {line}: {detail}")
        self.line = line
        self.detail = detail


@dataclass(frozen=True, slots=True)
class CronSpec:
    """An entry's five time fields as sets of values; ``wild`` names the fields given
    as a plain ``*`` (a ``*/N`` is not wild, as in Slurm)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # of the month, 1-31
    months: frozenset[int]  # 1-12
    weekdays: frozenset[int]  # 0-6, 0 Sunday
    wild: frozenset[str]

    def text(self) -> str:
        """The canonical spec Slurm shows (``CrontabSpec=``): ``*`` for a wild field,
        else its values as ranges and lists (``0-5,30``)."""
        parts = []
        for name, values in (
            ("minute", self.minutes),
            ("hour", self.hours),
            ("dom", self.days),
            ("month", self.months),
            ("dow", self.weekdays),
        ):
            parts.append("*" if name in self.wild else compress(sorted(values)))
        return " ".join(parts)

    def matches_day(self, year: int, month: int, day: int, weekday: int) -> bool:
        """Whether the spec runs on this date (``weekday`` 0 is Sunday)."""
        if "month" not in self.wild and month not in self.months:
            return False
        dom_wild, dow_wild = "dom" in self.wild, "dow" in self.wild
        if dom_wild and dow_wild:
            return True
        if dom_wild:
            return weekday in self.weekdays
        if dow_wild:
            return day in self.days
        return day in self.days or weekday in self.weekdays  # cron's OR

    def next_after(self, now: int) -> int:
        """The first minute after ``now``'s minute when the entry is due (local time)."""
        start = time.localtime(now)
        first = time.mktime((*start[:4], start.tm_min + 1, 0, 0, 0, -1))
        hours = sorted(h for h in range(24) if "hour" in self.wild or h in self.hours)
        minutes = sorted(m for m in range(60) if "minute" in self.wild or m in self.minutes)
        day = time.localtime(first)
        for offset in range(_SEARCH_DAYS):
            date = time.localtime(time.mktime((*day[:2], day.tm_mday + offset, 12, 0, 0, 0, 0, -1)))
            weekday = (date.tm_wday + 1) % 7  # struct_time: Monday 0; cron: Sunday 0
            if not self.matches_day(date.tm_year, date.tm_mon, date.tm_mday, weekday):
                continue
            for hour in hours:
                for minute in minutes:
                    due = time.mktime((*date[:3], hour, minute, 0, 0, 0, -1))
                    if due >= first:
                        return int(due)
        raise CronError("no time matches the crontab entry")


@dataclass(frozen=True, slots=True)
class Entry:
    """One job of a crontab: its times, command and ``#SCRON`` lines (their text and
    option words), and the lines it spans (from its first ``#SCRON`` line; from 1)."""

    spec: CronSpec
    command: str
    scron_lines: tuple[str, ...]
    options: tuple[str, ...]
    line_start: int
    line_end: int


def parse_crontab(text: str) -> list[Entry]:
    """Every entry of a crontab, or ``CrontabError`` naming the first bad line."""
    entries: list[Entry] = []
    scron: list[str] = []
    options: list[str] = []
    start = 0
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip(" \t")
        if not stripped:
            continue
        if stripped.startswith("#SCRON"):
            scron.append(line)
            options += line[len(line) - len(stripped) + 6 :].split()
            start = start or number
            continue
        if stripped.startswith("#"):
            continue
        try:
            spec, command = split_entry(stripped)
        except CronError as exc:
            raise CrontabError(number, str(exc)) from None
        entries.append(Entry(spec, command, tuple(scron), tuple(options), start or number, number))
        scron, options, start = [], [], 0
    return entries


def parse_times(text: str) -> CronSpec:
    """The times of an entry's spec alone (``CrontabSpec``'s text, an @ word)."""
    return split_entry(text.strip(" \t") + " ")[0]


def split_entry(line: str) -> tuple[CronSpec, str]:
    """An entry line's times and its command, in Slurm's grammar and words."""
    if line.startswith("@"):
        word = line[1:]
        for names, fields in _SHORTHANDS:
            if any(word[: len(name)].lower() == name for name in names):
                rest = word.lstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
                return split_entry(fields + _command_part(rest))
        raise CronError("invalid @ line")
    values: dict[str, frozenset[int]] = {}
    wild: set[str] = set()
    pos = 0
    for name in ("minute", "hour", "dom", "month", "dow"):
        if pos >= len(line) or line[pos] == "\n":
            raise CronError("cronspec_to_bitstring: unexpected end of line")
        values[name], pos, is_wild = _field(name, line, pos)
        if is_wild:
            wild.add(name)
        if pos >= len(line) or line[pos] not in " \t":
            raise CronError()
        if name != "dow":
            while pos < len(line) and line[pos] in " \t":
                pos += 1
    spec = CronSpec(
        minutes=values["minute"],
        hours=values["hour"],
        days=values["dom"] - {0},
        months=values["month"] - {0},
        weekdays=values["dow"],
        wild=frozenset(wild),
    )
    _check(spec)
    return spec, line[pos:].lstrip(" \t")


def _command_part(rest: str) -> str:
    if not rest or rest[0] not in " \t":
        raise CronError()
    return rest


def _field(name: str, line: str, pos: int) -> tuple[frozenset[int], int, bool]:
    """One field at ``pos``: its values, where it ends, and whether it is a plain ``*``."""
    size = _SIZES[name]
    wild = False
    if line[pos] == "*":
        bits = set(range(size))
        pos += 1
        wild = pos >= len(line) or line[pos] != "/"
    elif line[pos].isalpha() and name in ("month", "dow"):
        word = line[pos : pos + 3].lower()
        names = _MONTHS if name == "month" else _DAYS
        if word not in names:
            raise CronError(
                "bad month specification" if name == "month" else "bad day specification"
            )
        bits = {names.index(word) + 1}
        pos += 3
    else:
        end = pos
        while end < len(line) and (line[end].isdigit() or line[end] in "-,"):
            end += 1
        bits = _list(line[pos:end], size)
        pos = end
    if pos < len(line) and line[pos] == "/":
        end = pos + 1
        while end < len(line) and line[end].isdigit():
            end += 1
        digits = line[pos + 1 : end]
        if not digits or not 1 < int(digits) < size:
            raise CronError("bad step value")
        bits &= set(range(_STEP_START[name], size, int(digits)))
        pos = end
    if name == "minute" and 60 in bits:
        bits = (bits - {60}) | {0}
    if name == "hour" and 24 in bits:
        bits = (bits - {24}) | {0}
    if name == "dow" and 7 in bits:
        bits = (bits - {7}) | {0}
    return frozenset(bits), pos, wild


def _list(text: str, size: int) -> set[int]:
    """``1-5,7``: what Slurm's bit_unfmt takes for a field of ``size`` values."""
    bits: set[int] = set()
    for item in text.split(","):
        low, dash, high = item.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise CronError()
        first, last = int(low), int(high) if dash else int(low)
        if first > last or last >= size:
            raise CronError()
        bits.update(range(first, last + 1))
    return bits


def _check(spec: CronSpec) -> None:
    """Slurm's valid_cron_entry: every field has a value, and the days exist."""
    fields = (
        ("minute", spec.minutes),
        ("hour", spec.hours),
        ("dom", spec.days),
        ("month", spec.months),
        ("dow", spec.weekdays),
    )
    if any(not values and name not in spec.wild for name, values in fields):
        raise CronError()
    if "dom" in spec.wild:
        return
    first = min(spec.days)
    if first == 31 and not spec.months & {1, 3, 5, 7, 8, 10, 12}:
        raise CronError()
    if first == 30 and spec.months == frozenset({2}):
        raise CronError()
