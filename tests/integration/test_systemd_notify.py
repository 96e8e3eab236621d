"""The four daemons speak systemd's notify protocol as their Type=notify units expect:
READY=1 only once they serve (a call made the moment it arrives is answered), WATCHDOG=1
from their event loops (none while a daemon is stopped, as a wedged loop would be),
STOPPING=1 at SIGTERM, and no process they start inherits their NOTIFY_SOCKET. Each
daemon gets its own socket, bound here as systemd binds it (an abstract name)."""

from __future__ import annotations

import os
import selectors
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.corral import restd_env
from dbd.config import load as load_dbd_config
from tests.integration.cluster import Cluster, free_port, listening

DAEMONS = ("dbd", "controller", "nodeagent", "restd")
#: Pings every half second.
WATCHDOG_USEC = "1000000"


def _gather(socks: dict[str, socket.socket], seconds: float) -> dict[str, list[str]]:
    """What arrives on each socket within ``seconds`` (0: what is waiting), read as
    it comes, as systemd reads its socket (a full queue would hold the senders up)."""
    got: dict[str, list[str]] = {name: [] for name in socks}
    with selectors.DefaultSelector() as selector:
        for name, sock in socks.items():
            selector.register(sock, selectors.EVENT_READ, name)
        deadline = time.monotonic() + seconds
        while events := selector.select(max(0.0, deadline - time.monotonic())):
            for key, _ in events:
                got[key.data].append(key.fileobj.recv(4096).decode())  # type: ignore[union-attr]
    return got


def _first(sock: socket.socket, seconds: float = 30) -> str:
    sock.settimeout(seconds)
    return sock.recv(4096).decode()


@pytest.fixture
def sockets() -> Iterator[dict[str, tuple[str, socket.socket]]]:
    made = {}
    for name in DAEMONS:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        address = f"@corral-test-notify-{os.getpid()}-{time.monotonic_ns()}-{name}"
        sock.bind("\0" + address[1:])
        made[name] = (address, sock)
    try:
        yield made
    finally:
        for _, sock in made.values():
            sock.close()


def _holding(names: list[str], daemons: set[int]) -> list[int]:
    """Processes other than ``daemons`` whose environment names one of the sockets."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in daemons:
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if any(name.encode() in environ for name in names):
            found.append(int(entry))
    return found


def test_daemons_notify_ready_watchdog_and_stopping(
    tmp_path: Path, sockets: dict[str, tuple[str, socket.socket]]
) -> None:
    cluster = Cluster(tmp_path / "c", nodes=1, accounting=True)

    def env(name: str) -> dict[str, str]:
        extra = restd_env() if name == "restd" else {}
        address = sockets[name][0]
        return {**cluster.env, "NOTIFY_SOCKET": address, "WATCHDOG_USEC": WATCHDOG_USEC, **extra}

    try:
        dbd_conf = str(cluster.dir / "slurmdbd.conf")
        dbd = load_dbd_config(dbd_conf)
        cluster.dbd = cluster._spawn("dbd.main", conf=dbd_conf, env=env("dbd"))
        ready = _first(sockets["dbd"][1])
        assert listening(dbd.dbd_addr, dbd.dbd_port)
        assert ready == f"READY=1\nSTATUS=serving accounting on {dbd.dbd_addr}:{dbd.dbd_port}"

        cluster.controller = cluster._spawn("controller.main", env=env("controller"))
        assert _first(sockets["controller"][1]).startswith("READY=1\nSTATUS=serving cluster")
        assert cluster._ping()  # served the moment READY=1 arrives

        cluster.agent = cluster._spawn("nodeagent.main", "--nodes", "node1", env=env("nodeagent"))
        assert _first(sockets["nodeagent"][1]) == "READY=1\nSTATUS=serving 1 node(s)"

        port = free_port()
        listen = f"127.0.0.1:{port}"
        cluster.restds.append(cluster._spawn("restd.main", listen, env=env("restd")))
        assert _first(sockets["restd"][1]) == f"READY=1\nSTATUS=serving {listen}"
        assert listening("127.0.0.1", port)

        cluster.wait_for(cluster.all_nodes_up, 20, "node1 did not register")
        job = cluster.sbatch("--wrap", "sleep 1")
        cluster.wait_for(lambda: cluster.job(job)["state"] == "COMPLETED", 30, "job not done")

        socks = {name: sock for name, (_, sock) in sockets.items()}
        pings = _gather(socks, 1.6)
        for name in DAEMONS:  # every loop pings, about twice a second
            assert pings[name].count("WATCHDOG=1") >= 2, (name, pings[name])

        pids = {p.pid for p in (cluster.dbd, cluster.controller, cluster.agent, *cluster.restds)}
        assert _holding([address for address, _ in sockets.values()], pids) == []

        cluster.controller.send_signal(signal.SIGSTOP)  # its loop turns no more
        _gather(socks, 0.1)  # a ping sent as it stopped
        assert _gather(socks, 1.5)["controller"] == []
        cluster.controller.send_signal(signal.SIGCONT)
        assert "WATCHDOG=1" in _gather(socks, 1.5)["controller"]

        for name, proc in (
            ("restd", cluster.restds[0]),
            ("nodeagent", cluster.agent),
            ("controller", cluster.controller),
            ("dbd", cluster.dbd),
        ):
            _gather(socks, 0)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, name
            sent = [m for m in _gather(socks, 0.3)[name] if m != "WATCHDOG=1"]
            assert sent == ["STOPPING=1\nSTATUS=shutting down"], name
    finally:
        cluster.stop()
