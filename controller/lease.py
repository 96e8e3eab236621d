"""The leader lease: which controller serves a cluster whose state is in a database.

One row per cluster in the state database (``lease``: holder, fencing token,
expiry), taken and renewed in transactions that lock it, with the database
server's clock (``UNIX_TIMESTAMP``) so the controllers' clocks do not matter.
A controller serves only once it holds the lease; taking it from a holder
whose expiry has passed raises the token by one. Every journal write locks
the row too and checks the token (``check``): a controller that lost the
lease (it hung, or was cut off, past its expiry, and another took over) has
its next write refused with ``Fenced``, and stops serving, so it never acts
on the state it had. ``scontrol takeover`` hands the lease to one named
SlurmctldHost line (``hand_over``): for one lease length no other standby
takes it. docs/ha.md says what exists.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sqlalchemy import Connection, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import InterfaceError, OperationalError

from controller.journal import Fenced

log = logging.getLogger("corral.controller")

_NOW = "UNIX_TIMESTAMP(NOW(6))"
#: The holder of a lease handed to one SlurmctldHost line: this, then the line's name.
HANDED_TO = "handed to "
#: The longest wait between two tries of a standby to take the lease.
POLL_S = 1.0


class Lease:
    """This controller's view of its cluster's lease row; ``token`` 0: not held."""

    def __init__(
        self, engine: Engine, cluster: str, holder: str, duration_s: float, line: str = ""
    ) -> None:
        self.engine = engine
        self.cluster = cluster
        self.holder = holder
        self.duration_s = duration_s
        self.line = line  # this controller's SlurmctldHost name, for a handed-over lease
        self.token = 0

    def create(self, connection: Connection) -> None:
        """The cluster's row, free (token 0, expired), unless it exists: taking it is
        then always an update of a locked row, never two racing inserts."""
        connection.execute(
            text("INSERT IGNORE INTO lease VALUES (:cluster, '', 0, 0)"),
            {"cluster": self.cluster},
        )

    def _row(self, connection: Connection) -> tuple[str, int, float]:
        """(holder, token, seconds left) of the row, locked until the transaction ends."""
        row = connection.execute(
            text(
                f"SELECT holder, token, expires - {_NOW} FROM lease WHERE cluster = :c FOR UPDATE"
            ),
            {"c": self.cluster},
        ).one()
        return str(row[0]), int(row[1]), float(row[2])

    def take(self) -> str | None:
        """Take the lease, or renew it if held: None when this controller holds it
        now, else who holds it and for how long. ``Fenced`` if it was held and another
        took it since; ``OperationalError`` when the database cannot be reached."""
        with self.engine.begin() as connection:
            holder, token, left = self._row(connection)
            if self.token:
                if token != self.token:
                    raise Fenced(self.token, token, holder)
                mine = token  # renewed, even past its expiry: nobody took it
            elif left > 0:
                return f"held by {holder} (token {token}) for {left:.1f} s more"
            elif self._handed_elsewhere(holder, left):
                return f"{holder} for {left + self.duration_s:.1f} s more"
            else:
                mine = token + 1
            connection.execute(
                text(
                    f"UPDATE lease SET holder = :h, token = :t, expires = {_NOW} + :d "
                    "WHERE cluster = :c"
                ),
                {"h": self.holder, "t": mine, "d": self.duration_s, "c": self.cluster},
            )
        self.token = mine
        return None

    def _handed_elsewhere(self, holder: str, left: float) -> bool:
        """Whether the lease was handed to another line's controller, which has not
        had one lease length to take it yet."""
        to = holder.removeprefix(HANDED_TO) if holder.startswith(HANDED_TO) else None
        return to is not None and to != self.line and left > -self.duration_s

    def hand_over(self, line: str) -> None:
        """Give the lease up to SlurmctldHost ``line``'s controller (scontrol takeover):
        free at once for it; for the others only after one more lease length."""
        if self.token:
            with self.engine.begin() as connection:
                connection.execute(
                    text(
                        f"UPDATE lease SET holder = :h, expires = {_NOW} "
                        "WHERE cluster = :c AND token = :t"
                    ),
                    {"h": HANDED_TO + line, "c": self.cluster, "t": self.token},
                )
            self.token = 0

    def check(self, connection: Connection) -> None:
        """In a write's transaction: refuse it (``Fenced``) unless this controller's
        token is the row's. The row stays locked to the commit, so a takeover waits
        for the write or the write for the takeover, never both at once."""
        holder, token, _ = self._row(connection)
        if token != self.token or not self.token:
            raise Fenced(self.token, token, holder)

    def release(self) -> None:
        """Let a standby take over at once (a clean shutdown), if still held."""
        if self.token:
            with self.engine.begin() as connection:
                connection.execute(
                    text("UPDATE lease SET expires = 0 WHERE cluster = :c AND token = :t"),
                    {"c": self.cluster, "t": self.token},
                )
            self.token = 0


async def acquire(lease: Lease) -> None:
    """Wait until this controller holds the lease (a third of its duration, at most
    ``POLL_S``, between tries: a backup serves soon after the holder's lease ends),
    saying once who holds it meanwhile."""
    said = False
    while True:
        try:
            held = await asyncio.to_thread(lease.take)
        except (OperationalError, InterfaceError) as exc:
            held = f"not known: {exc.orig}"
        if held is None:
            log.info("lease: held by %s under token %d", lease.holder, lease.token)
            return
        if not said:
            log.info("lease: %s; waiting to serve", held)
            said = True
        await asyncio.sleep(min(lease.duration_s / 3, POLL_S))


async def keep(lease: Lease, lost: Callable[[], None]) -> None:
    """Renew the lease every third of its duration; when another controller took it,
    log it and call ``lost`` (stop serving). A database that cannot be reached is
    tried again: the writes' fencing keeps the state safe meanwhile."""
    while True:
        await asyncio.sleep(lease.duration_s / 3)
        try:
            await asyncio.to_thread(lease.take)
        except Fenced as exc:
            log.error("lease: %s; this controller stops serving", exc.reason)
            lost()
            return
        except (OperationalError, InterfaceError) as exc:
            log.warning("lease: not renewed: %s", exc.orig)
