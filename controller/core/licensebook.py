"""Licenses as the core counts them: cluster-wide amounts held over intervals of time.

A license (slurm.conf ``Licenses=fluent:30``) belongs to no node: a job holds its
``-L`` counts from its start to its end, wherever it runs. One ``LicenseBook`` serves
a whole pass:

* running jobs hold theirs from their start until their time limit (for ever when
  they have none, or are suspended: when they end is unknown);
* the main pass's and backfill's starts hold theirs from now to their end;
* backfill's plans (a waiting job's expected start) hold theirs over the interval
  it expects the job to run, so a later job may start now only if it leaves enough
  for every plan ahead of it: a license-limited job is not delayed by jobs behind it.

A job fits when, for each license it asks for, the most claimed at any moment of its
interval plus its count is at most the total. The number of holdings is that of
jobs holding licenses, so the scans stay short.

Advance reservations may hold licenses (``scontrol create reservation Licenses=foo:2``)
over their time: what they hold is kept for their jobs. At a moment, a license's
claim is what jobs outside the reservations holding it hold, plus for each such
reservation the larger of its count and what its own jobs hold (they may take
unreserved ones too). A job of a reservation adds to its reservation's part, any
other job to the outside part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from controller.core.snapshot import ResvView
from corral.licenses import Licenses, parse

#: An interval's open end: held for ever (a job without a time limit, or suspended).
FOREVER = 2**62


@dataclass(frozen=True, slots=True)
class _Hold:
    job_id: int
    name: str
    count: int
    begin: int
    end: int
    reservation: str = ""  # the holder's reservation ("": none)


@dataclass(frozen=True, slots=True)
class Reserved:
    """``count`` of license ``name`` kept for reservation ``reservation``'s jobs
    over ``[begin, end)``."""

    reservation: str
    name: str
    count: int
    begin: int
    end: int


def needs(text: str) -> Licenses:
    """A job's ``licenses`` as (name, count) pairs (admission checked the text)."""
    return parse(text) if text else ()


class LicenseBook:
    """The licenses of one pass: totals and who holds how many when."""

    def __init__(self, totals: Mapping[str, int], reserved: Iterable[Reserved] = ()) -> None:
        self.totals = dict(totals)
        self.holds: list[_Hold] = []
        self.reserved = [r for r in reserved if r.count > 0]

    def hold(
        self, job_id: int, asked: Licenses, begin: int, end: int | None, reservation: str = ""
    ) -> None:
        """``job_id`` (of ``reservation``, if any) holds ``asked`` over ``[begin, end)``
        (``end`` None: for ever)."""
        stop = FOREVER if end is None else end
        self.holds.extend(
            _Hold(job_id, name, count, begin, stop, reservation) for name, count in asked
        )

    def until(self, job_id: int, end: int | None) -> None:
        """``job_id``'s holdings end at ``end`` (a start whose end became known)."""
        stop = FOREVER if end is None else end
        self.holds = [
            _Hold(h.job_id, h.name, h.count, h.begin, stop, h.reservation)
            if h.job_id == job_id
            else h
            for h in self.holds
        ]

    def short(
        self, asked: Licenses, begin: int, end: int | None, reservation: str = ""
    ) -> str | None:
        """The first license of ``asked`` too few of which are free at some moment of
        ``[begin, end)`` for a job of ``reservation`` (""; none), or None when all fit."""
        stop = FOREVER if end is None else end
        for name, count in asked:
            if self._peak(name, begin, stop, reservation, count) > self.totals.get(name, 0):
                return name
        return None

    def fits(self, asked: Licenses, begin: int, end: int | None, reservation: str = "") -> bool:
        return self.short(asked, begin, end, reservation) is None

    def _peak(self, name: str, begin: int, end: int, reservation: str, count: int) -> int:
        """The most of ``name`` claimed at any moment of ``[begin, end)`` with ``count``
        more held by a job of ``reservation``: the claim only rises where a holding or
        a reservation begins, so those moments (and ``begin``) are checked."""
        mine = [h for h in self.holds if h.name == name and h.begin < end and h.end > begin]
        kept = [r for r in self.reserved if r.name == name and r.begin < end and r.end > begin]
        starts = [h.begin for h in mine] + [r.begin for r in kept]
        moments = {begin} | {t for t in starts if t > begin}
        return max(self._claim(mine, kept, t, reservation, count) for t in moments)

    @staticmethod
    def _claim(
        holds: list[_Hold], kept: list[Reserved], at: int, reservation: str, count: int
    ) -> int:
        """What is claimed of one license at ``at`` (see the module docstring)."""
        pools = {r.reservation: r.count for r in kept if r.begin <= at < r.end}
        used = dict.fromkeys(pools, 0)
        outside = 0
        for h in holds:
            if h.begin <= at < h.end:
                if h.reservation in pools:
                    used[h.reservation] += h.count
                else:
                    outside += h.count
        if reservation in pools:
            used[reservation] += count
        else:
            outside += count
        return outside + sum(max(pools[r], used[r]) for r in pools)

    def without(self, job_ids: AbstractSet[int]) -> LicenseBook:
        """This book as if ``job_ids`` held nothing (preemption's trial of victims)."""
        book = LicenseBook(self.totals)
        book.reserved = self.reserved
        book.holds = [h for h in self.holds if h.job_id not in job_ids]
        return book

    def ends(self, after: int, before: int) -> list[int]:
        """The moments in ``(after, before)`` at which some holding ends, in order: when
        a license-limited job may start sooner than a probe."""
        return sorted({h.end for h in self.holds if after < h.end < before})

    def used(self, at: int) -> dict[str, int]:
        """How many of each license are held at ``at``."""
        counts = dict.fromkeys(self.totals, 0)
        for h in self.holds:
            if h.begin <= at < h.end:
                counts[h.name] = counts.get(h.name, 0) + h.count
        return counts


def book_of(
    totals: Mapping[str, int],
    running: Iterable[tuple[int, str, int, int, str]],
    now: int,
    reservations: Iterable[ResvView] = (),
) -> LicenseBook:
    """The book at the start of a pass: ``running`` as (job id, licenses, start, end,
    reservation) where end 0 is unknown; what ``reservations`` hold kept for their
    jobs. A job past its limit and not yet ended still holds its licenses now: it is
    counted to just after ``now``."""
    reserved = [
        Reserved(r.name, name, count, r.start, r.end)
        for r in reservations
        for name, count in r.licenses
    ]
    book = LicenseBook(totals, reserved)
    for job_id, text, start, end, resv in running:
        if text:
            stop = max(end, now + 1) if end else None
            book.hold(job_id, needs(text), min(start, now), stop, resv)
    return book
