"""systemd's readiness protocol (sd_notify): READY, STOPPING and the watchdog.

Why: the units are ``Type=notify``, so systemd orders the daemons after each
other and reports a start as done only once the daemon really serves (its
port bound, its state loaded), not once its process exists; and with
``WatchdogSec=`` it restarts a daemon whose event loop is wedged. The protocol
is one datagram per message, ``KEY=VALUE`` lines, sent to the AF_UNIX socket
named by ``$NOTIFY_SOCKET`` (a path, or an abstract name written with a
leading ``@``). Nothing is sent when the variable is unset: the daemons run the
same under ``corral up``, a test harness or by hand.

The watchdog pings go out from the daemon's own event loop (``keep_alive``, a
task that ``ready`` starts and ``stopping`` ends), at half of ``$WATCHDOG_USEC``
as sd_watchdog_enabled(3) advises: a loop that stops turning stops the pings,
which is what the watchdog is for. A ``$WATCHDOG_PID`` naming another process
means the watchdog is not ours.

``from_environment`` removes the three variables from ``os.environ`` (as
sd_notify's ``unset_environment`` does): what a daemon starts (the node
agent's zygote, supervisors and jobs) must not inherit the daemon's socket and
send its readiness or pings in its name.

A failed send is logged and otherwise ignored: losing a message to systemd
must never stop a daemon (if pings are lost the watchdog acts, which is its job).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import MutableMapping

log = logging.getLogger(__name__)

NOTIFY_SOCKET = "NOTIFY_SOCKET"
WATCHDOG_USEC = "WATCHDOG_USEC"
WATCHDOG_PID = "WATCHDOG_PID"
#: The longest a notification may hold up the event loop: systemd reads its socket at
#: once, so only a stalled systemd makes a sender wait, and that must not stop a daemon.
SEND_TIMEOUT = 1.0


def _address(name: str) -> str | None:
    """The socket address of a ``$NOTIFY_SOCKET`` value: an absolute path, or an
    abstract name for ``@name`` (Linux writes it with a leading NUL); None for
    anything else, which sd_notify also refuses."""
    if name.startswith("@") and len(name) > 1:
        return "\0" + name[1:]
    if name.startswith("/"):
        return name
    return None


def _watchdog_interval(usec: str | None, pid: str | None, own_pid: int) -> float | None:
    """Seconds between pings (half the timeout), or None when there is no watchdog for
    this process: no ``$WATCHDOG_USEC``, a value that is not a positive number, or a
    ``$WATCHDOG_PID`` that names another process."""
    if not usec or not usec.isascii() or not usec.isdigit() or int(usec) == 0:
        return None
    if pid is not None and (not pid.isascii() or not pid.isdigit() or int(pid) != own_pid):
        return None
    return int(usec) / 2_000_000


class Notifier:
    """Where this daemon's notifications go (``address`` None: nowhere), how often its
    watchdog wants a ping (``interval`` seconds; None: no watchdog), and the task
    that pings it between ``ready`` and ``stopping``."""

    __slots__ = ("_pinger", "address", "interval")

    def __init__(self, address: str | None = None, interval: float | None = None) -> None:
        self.address = address
        self.interval = interval if address is not None else None
        self._pinger: asyncio.Task[None] | None = None

    @classmethod
    def from_environment(
        cls, environ: MutableMapping[str, str] | None = None, pid: int | None = None
    ) -> Notifier:
        """The notifier systemd's variables describe, taken out of ``environ``
        (``os.environ`` by default) so that no child process inherits them."""
        env = os.environ if environ is None else environ
        name = env.pop(NOTIFY_SOCKET, None)
        usec = env.pop(WATCHDOG_USEC, None)
        watched = env.pop(WATCHDOG_PID, None)
        address = _address(name) if name else None
        if name and address is None:
            log.warning("%s=%s: not a path or @name; systemd is not told", NOTIFY_SOCKET, name)
        return cls(address, _watchdog_interval(usec, watched, os.getpid() if pid is None else pid))

    def send(self, *lines: str) -> bool:
        """Send one notification of ``KEY=VALUE`` lines; True if it went out. A receiver
        whose queue is full (systemd busy) holds the sender up to ``SEND_TIMEOUT``
        seconds, then the message is dropped and logged."""
        if self.address is None:
            return False
        message = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.settimeout(SEND_TIMEOUT)
                sock.sendto(message, self.address)
        except OSError as exc:
            log.warning("sd_notify %s: %s", lines[0] if lines else "", exc)
            return False
        return True

    def ready(self, status: str = "") -> bool:
        """The daemon serves: systemd's start job ends here and units ordered after
        this one start. From now on the watchdog is pinged from the running loop
        (systemd arms it at readiness too)."""
        if self.interval is not None and self._pinger is None:
            self._pinger = asyncio.get_running_loop().create_task(
                self.keep_alive(), name="sd-watchdog"
            )
        return self.send("READY=1", *([f"STATUS={status}"] if status else []))

    def stopping(self) -> bool:
        """The daemon has begun to shut down (also when systemd did not ask it to);
        the watchdog pings stop, TimeoutStopSec bounds the rest."""
        if self._pinger is not None:
            self._pinger.cancel()
            self._pinger = None
        return self.send("STOPPING=1", "STATUS=shutting down")

    async def keep_alive(self) -> None:
        """Ping the watchdog every ``interval`` seconds until cancelled; returns at
        once when there is no watchdog."""
        if self.interval is None:
            return
        while True:
            self.send("WATCHDOG=1")
            await asyncio.sleep(self.interval)
