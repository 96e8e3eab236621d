"""The node agent's socket for local clients (nodeagent/clientproxy.py) when several
agents of one host share its path: emulated nodes, or cloud nodes one ResumeProgram
started together (CI once saw the second of two such agents die at start, the path
taken between its unlink and its bind)."""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path

from corral.ratelimit import Limits
from corral.tlsconf import TlsConfig
from nodeagent.clientproxy import ClientProxy


def _proxy(path: Path) -> ClientProxy:
    return ClientProxy(str(path), ["127.0.0.1:1"], b"k" * 32, "ctld", Limits(), TlsConfig())


def _serving(path: Path) -> bool:
    """Whether something accepts connections at ``path``."""
    with socket.socket(socket.AF_UNIX) as client:
        try:
            client.connect(str(path))
        except OSError:
            return False
    return True


def test_the_last_agent_started_serves_and_the_first_to_stop_leaves_it_serving(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spool" / "corral-agent.sock"

    async def scenario() -> None:
        first, second = _proxy(path), _proxy(path)
        await first.start()
        assert oct(path.stat().st_mode & 0o777) == "0o666" and _serving(path)
        await second.start()  # over the first's live socket
        assert (path.stat().st_dev, path.stat().st_ino) == second.socket_id
        await first.close()  # not the first's any more: left alone
        assert _serving(path)
        await second.close()
        assert not path.exists()
        assert os.listdir(path.parent) == []  # no socket of its own left beside it

    asyncio.run(scenario())


def test_a_dead_agents_socket_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "corral-agent.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening: what a killed agent leaves
    own = tmp_path / f".agent{os.getpid()}"
    own.write_text("")  # and one of a dead process that had this pid

    async def scenario() -> None:
        proxy = _proxy(path)
        await proxy.start()
        assert _serving(path) and not own.exists()
        await proxy.close()

    asyncio.run(scenario())


def test_a_path_at_the_limit_of_a_unix_socket_is_served(tmp_path: Path) -> None:
    """The socket is bound under a name of its own first: never a longer one than the
    path (107 bytes at most on Linux; CI's temporary directories came near it)."""
    room = 107 - len(str(tmp_path / "corral-agent.sock")) - 1
    path = tmp_path / ("d" * room) / "corral-agent.sock"
    assert len(str(path)) == 107

    async def scenario() -> None:
        proxy = _proxy(path)
        await proxy.start()
        assert _serving(path)
        await proxy.close()

    asyncio.run(scenario())
