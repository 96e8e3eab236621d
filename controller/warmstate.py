"""A standby's warm copy of the state: the jobs and nodes of the state database,
kept current while it waits for the lease (docs/ha.md).

Reading and parsing every job row is most of a takeover's load once the queue
is large, so a standby does it while it waits instead: it reads everything once,
then every second asks the database whether the state changed (the serving
controller bumps a change counter with every batch it writes) and re-reads only
the jobs and nodes those batches touched (controller/dbjournal.py keeps which,
deleted jobs included). At takeover it catches up once more, under the lease,
and hands the copy to the store instead of reading every row again.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from controller.journal import JournalError
from controller.model import Job

log = logging.getLogger("corral.controller")

#: How often a standby asks the database whether the state changed.
FOLLOW_S = 1.0


@dataclass
class WarmCopy:
    """Jobs and nodes as of change ``seq`` of the database (-1: nothing read yet)."""

    seq: int = -1
    jobs: dict[int, Job] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)


class Followed(Protocol):
    """What ``follow`` needs of a journal: one catch-up with the database (its
    change counter now), or ``JournalError``."""

    path: str

    def follow(self) -> int: ...


async def follow(journal: Followed) -> None:
    """Keep ``journal``'s warm copy current until cancelled (a standby's task). A
    database that cannot be reached is tried again at the next poll."""
    said = False
    while True:
        try:
            await asyncio.to_thread(journal.follow)
            said = False
        except JournalError as exc:  # tried again; at worst the takeover reads all
            if not said:
                log.warning("standby: %s not followed: %s", journal.path, exc)
                said = True
        await asyncio.sleep(FOLLOW_S)
