"""corral.sdnotify: systemd's notifications, received on a real datagram socket as systemd
would (a path, and an abstract name), the variables taken from the environment, and
the watchdog pinged from the event loop, so that a wedged loop stops the pings."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.sdnotify import Notifier


@pytest.fixture(params=["path", "abstract"])
def listener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, socket.socket]]:
    """systemd's end: a bound SOCK_DGRAM socket and its $NOTIFY_SOCKET spelling."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if request.param == "path":
        name = str(tmp_path / "notify")
        sock.bind(name)
    else:
        name = f"@corral-test-{os.getpid()}-{time.monotonic_ns()}"
        sock.bind("\0" + name[1:])
    sock.settimeout(5)
    with sock:
        yield name, sock


def _received(sock: socket.socket) -> list[str]:
    """Every message waiting on ``sock``, without waiting for more."""
    got = []
    sock.setblocking(False)
    try:
        while True:
            got.append(sock.recv(4096).decode())
    except BlockingIOError:
        return got
    finally:
        sock.settimeout(5)


def test_ready_and_stopping_reach_the_socket(listener: tuple[str, socket.socket]) -> None:
    name, sock = listener
    env = {"NOTIFY_SOCKET": name, "PATH": "/bin"}
    notifier = Notifier.from_environment(env)
    assert env == {"PATH": "/bin"}  # what the daemon starts does not inherit it
    assert notifier.interval is None

    async def lifetime() -> None:
        assert notifier.ready("serving 2 node(s)")
        assert notifier.stopping()

    asyncio.run(lifetime())
    assert sock.recv(4096) == b"READY=1\nSTATUS=serving 2 node(s)"
    assert sock.recv(4096) == b"STOPPING=1\nSTATUS=shutting down"


def test_without_notify_socket_nothing_is_sent_and_nothing_fails() -> None:
    env = {"WATCHDOG_USEC": "1000000"}
    notifier = Notifier.from_environment(env)
    assert (notifier.address, notifier.interval, env) == (None, None, {})
    assert not notifier.send("READY=1")


@pytest.mark.parametrize(
    ("usec", "pid", "interval"),
    [
        ("4000000", None, 2.0),
        ("4000000", "4242", 2.0),
        ("4000000", "4243", None),
        ("0", None, None),
        ("-5", None, None),
        ("soon", None, None),
    ],
    ids=["half the timeout", "for this pid", "for another pid", "zero", "negative", "not a number"],
)
def test_watchdog_interval(usec: str, pid: str | None, interval: float | None) -> None:
    env = {"NOTIFY_SOCKET": "/run/systemd/notify", "WATCHDOG_USEC": usec}
    if pid is not None:
        env["WATCHDOG_PID"] = pid
    assert Notifier.from_environment(env, pid=4242).interval == interval
    assert env == {}


def test_a_relative_notify_socket_is_refused_as_sd_notify_does() -> None:
    assert Notifier.from_environment({"NOTIFY_SOCKET": "notify"}).address is None


def test_a_vanished_socket_is_logged_not_raised(tmp_path: Path) -> None:
    notifier = Notifier(str(tmp_path / "gone"))
    assert not notifier.send("READY=1")


def test_the_watchdog_is_pinged_from_the_loop_and_stops_when_it_is_wedged(
    listener: tuple[str, socket.socket],
) -> None:
    name, sock = listener
    notifier = Notifier.from_environment(
        {"NOTIFY_SOCKET": name, "WATCHDOG_USEC": "40000"}, pid=os.getpid()
    )
    assert notifier.interval == 0.02

    async def lifetime() -> tuple[list[str], list[str], list[str]]:
        notifier.ready()
        await asyncio.sleep(0.2)  # the loop turns: pings every 20 ms
        turning = _received(sock)
        time.sleep(0.2)  # the loop is wedged: no ping can go out
        wedged = _received(sock)
        await asyncio.sleep(0.1)
        notifier.stopping()
        await asyncio.sleep(0.1)  # after STOPPING no more pings
        return turning, wedged, _received(sock)

    turning, wedged, after = asyncio.run(lifetime())
    assert turning[0] == "READY=1"
    assert turning[1:].count("WATCHDOG=1") >= 3
    assert wedged == []
    assert after[-1] == "STOPPING=1\nSTATUS=shutting down"
    assert after[:-1] and set(after[:-1]) == {"WATCHDOG=1"}  # the loop turned again
