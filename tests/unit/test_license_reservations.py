"""Licenses kept by advance reservations (``Licenses=`` of ``scontrol create
reservation``): their jobs may use them, others not (``core/licensebook.py``)."""

from __future__ import annotations

import pytest

from controller.core.licensebook import LicenseBook, Reserved

HOUR = 3600
KEPT = Reserved("r", "foo", 2, 0, HOUR)  # 2 of 4 kept for r's jobs during the first hour


@pytest.mark.parametrize(
    ("holds", "count", "reservation", "fits"),
    [
        ((), 2, "", True),
        ((), 3, "", False),
        ((), 4, "r", True),
        ((("", 2),), 2, "r", True),
        ((("", 2),), 3, "r", False),
        ((("r", 3),), 1, "", True),
        ((("r", 3),), 2, "", False),
    ],
    ids=[
        "outside: the unreserved ones",
        "outside: not the reserved ones",
        "inside: the reserved ones and the rest",
        "inside: its own beside outside jobs",
        "inside: not what outside jobs hold",
        "outside: what the reservation's jobs leave",
        "outside: not what they took beyond it",
    ],
)
def test_a_reservation_keeps_its_licenses_for_its_jobs(
    holds: tuple[tuple[str, int], ...], count: int, reservation: str, fits: bool
) -> None:
    book = LicenseBook({"foo": 4}, [KEPT])
    for job_id, (resv, held) in enumerate(holds, 1):
        book.hold(job_id, (("foo", held),), 0, None, resv)
    assert book.fits((("foo", count),), 10, 20, reservation) is fits


def test_the_reserved_licenses_are_free_to_all_outside_its_time() -> None:
    book = LicenseBook({"foo": 4}, [KEPT])
    assert book.fits((("foo", 4),), HOUR, 2 * HOUR)
    assert not book.fits((("foo", 4),), HOUR - 1, 2 * HOUR)  # its last second is kept
