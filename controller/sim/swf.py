"""Standard Workload Format (SWF) traces: the header and the job records a replay needs.

SWF (the Parallel Workloads Archive's format) is one job per line, 18
whitespace-separated numbers with -1 for "unknown", after a header of ``;``
lines such as ``; MaxNodes: 338``. It is small enough to read ourselves, and
a replay wants three things a general reader would not give it: plain and
gzip files of 200,000+ lines read in about a second (the whole file is
decompressed at once and split, and only the fields the replay uses are
converted), problems reported as ``path:line: message`` so that ``corral sim``
prints them instead of a traceback, and a slice by record order (``--jobs
A:B``) that stops reading once it has its records.

A job line must have exactly 18 fields, and the ones the replay uses (1-5, 8,
9, 11-13) must be numbers; the others are not looked at. A line that is neither a
job line nor a header or comment is skipped and kept with its number and what is
wrong with it (``Trace.malformed``): the replay counts it with the records it skips
and ``corral sim`` names the first, so one bad line in a 200,000-job archive costs
that line, not the replay. A file that cannot be read at all is a ``TraceError``.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.sim.errors import TraceError

FIELDS = 18
_GZIP_MAGIC = b"\x1f\x8b"

#: Field numbers (1-based, as the SWF definition counts) of what a Record keeps.
_USED = (
    (1, "job number"),
    (2, "submit time"),
    (3, "wait time"),
    (4, "run time"),
    (5, "allocated processors"),
    (8, "requested processors"),
    (9, "requested time"),
    (11, "status"),
    (12, "user id"),
    (13, "group id"),
)


@dataclass(frozen=True, slots=True)
class Header:
    """The ``; Key: value`` lines of a trace (the first value of each key)."""

    values: Mapping[str, str]

    def number(self, key: str) -> int | None:
        """The integer a header value starts with (``338 (batch partition; ...)`` → 338)."""
        words = self.values.get(key, "").split()
        if not words:
            return None
        try:
            value = int(words[0])
        except ValueError:
            return None
        return value if value > 0 else None

    @property
    def max_nodes(self) -> int | None:
        return self.number("MaxNodes")

    @property
    def max_procs(self) -> int | None:
        return self.number("MaxProcs")


@dataclass(frozen=True, slots=True)
class Record:
    """One job line; times in seconds from the log's start, -1 where unknown."""

    position: int  # 0-based among the job lines of the file: what ``--jobs A:B`` slices
    line: int  # 1-based line number, for messages
    number: int  # field 1: the original job number
    submit: int  # field 2
    wait: int  # field 3: the wait the original scheduler gave it
    run: int  # field 4
    alloc_procs: int  # field 5
    req_procs: int  # field 8
    req_time: int  # field 9: the user's estimate (what backfill plans with)
    status: int  # field 11: 1 done, 0 failed, 5 cancelled
    user: int = -1  # field 12: the user's number (what ``--queue-map`` maps to accounts)
    group: int = -1  # field 13: the group's number

    @property
    def procs(self) -> int:
        """Processors the job asked for, or was given when the request is unknown."""
        return self.req_procs if self.req_procs > 0 else self.alloc_procs

    @property
    def limit(self) -> int:
        """Seconds the job asked for, or its run time when the request is unknown."""
        return self.req_time if self.req_time > 0 else self.run


@dataclass(frozen=True, slots=True)
class Malformed:
    """A line that is not a job record: its number (1-based) and what is wrong."""

    line: int
    why: str


@dataclass(frozen=True, slots=True)
class Trace:
    path: str
    header: Header
    records: tuple[Record, ...]  # those in the slice, in file order
    malformed: tuple[Malformed, ...] = ()  # bad lines among them (from the slice's start)

    def warning(self) -> str | None:
        """What ``corral sim`` warns of the malformed lines skipped (None: there are none)."""
        if not self.malformed:
            return None
        first = self.malformed[0]
        count = len(self.malformed)
        lines = "line" if count == 1 else "lines"
        return f"{count} malformed {lines} skipped, the first {self.path}:{first.line}: {first.why}"


def read(path: str, start: int = 0, stop: int | None = None) -> Trace:
    """Read ``path`` (plain or gzip), keeping job records ``start`` to ``stop - 1``."""
    try:
        with open(path, "rb") as src:
            data = src.read()
    except OSError as exc:
        raise TraceError(path, f"cannot read: {exc.strerror or exc}") from None
    if data.startswith(_GZIP_MAGIC) or path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(path, f"not a readable gzip file: {exc}") from None
    return parse(data.split(b"\n"), path, start, stop)


def parse(lines: Iterable[bytes], path: str, start: int = 0, stop: int | None = None) -> Trace:
    """The header and the job records ``start`` to ``stop - 1`` of ``lines``."""
    header: dict[str, str] = {}
    records: list[Record] = []
    malformed: list[Malformed] = []
    position = 0
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text:
            continue
        if text.startswith(b";"):
            key, colon, value = text[1:].decode("latin-1").partition(":")
            key = key.strip()
            if colon and key and " " not in key:
                header.setdefault(key, value.strip())
            continue
        fields = text.split()
        if len(fields) != FIELDS:  # not a job line: it takes no place in the record order
            if position >= start and (stop is None or position < stop):
                why = f"expected {FIELDS} fields, found {len(fields)}"
                malformed.append(Malformed(lineno, why))
            continue
        if position < start:
            position += 1
            continue
        if stop is not None and position >= stop:
            break
        try:
            records.append(Record(position, lineno, *_numbers(fields)))
        except ValueError as exc:  # a job line all the same: it keeps its place
            malformed.append(Malformed(lineno, str(exc)))
        position += 1
    return Trace(path, Header(header), tuple(records), tuple(malformed))


def _numbers(fields: list[bytes]) -> list[int]:
    """The fields the replay uses, as integers (plain ones the fast way)."""
    try:
        return [int(fields[n - 1]) for n, _ in _USED]
    except ValueError:
        return [_number(fields, n, what) for n, what in _USED]


def _number(fields: list[bytes], n: int, what: str) -> int:
    """Field ``n`` as an integer; ``3.0`` is accepted (some converters write floats).
    A ValueError says which field is not a number."""
    token = fields[n - 1]
    try:
        return int(token)
    except ValueError:
        pass
    try:
        value = float(token)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        shown = token.decode("latin-1")
        raise ValueError(f"field {n} ({what}) is not a number: {shown!r}")
    return round(value)
