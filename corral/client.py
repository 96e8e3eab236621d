"""The CLI's connection to the controller: protobuf frames over a Unix socket.

One request per connection: a 4-byte big-endian length, then a ``Frame``
(method name + request bytes); the reply is a ``Frame`` with the reply bytes or
a Slurm errno and message. The controller learns the caller's uid and gid from
the socket itself (SO_PEERCRED), so a client cannot claim to be someone else.

This module must stay import-light: it is on every client command's start-up
path (see docs/wire.md for the budget).
"""

from __future__ import annotations

# The C module directly: ``socket`` would pull in enum and selectors (~6 ms).
import _socket
import os
import struct

from corral.errors import ControllerUnreachable, SlurmError
from corral.wire import codec
from corral.wire.codec import Message

#: Largest reply frame a client accepts (a 10,000-job squeue is ~3 MiB). The daemons
#: bound requests much lower (corral/framedserver.py).
MAX_FRAME = 256 << 20
#: How often a call rate-limited by the controller (SLURMCTLD_COMMUNICATIONS_BACKOFF)
#: is made again, a second apart, as Slurm's clients wait and retry, before the
#: error is the answer.
BACKOFF_RETRIES = 5
_BACKOFF = 1804


def socket_path(state_save_location: str) -> str:
    """Where the controller listens for local clients."""
    return os.path.join(state_save_location, "corral-ctld.sock")


def agent_socket_path(slurmd_spool_dir: str) -> str:
    """Where a host's node agent listens for local clients (nodeagent/clientproxy.py):
    in SlurmdSpoolDir, above any per-node ``%n``/``%h`` part of it."""
    base = slurmd_spool_dir
    if "%" in base:
        base = base.split("%", 1)[0]
        base = base if base.endswith("/") else os.path.dirname(base)
    return os.path.join(base, "corral-agent.sock")


def local_socket(state_save_location: str, slurmd_spool_dir: str) -> str:
    """The controller's socket on its own host, else this host's node agent's."""
    controller = socket_path(state_save_location)
    if os.path.exists(controller):
        return controller
    agent = agent_socket_path(slurmd_spool_dir)
    return agent if os.path.exists(agent) else controller


def recv_exact(sock: _socket.socket, size: int) -> bytes:
    """Read exactly ``size`` bytes or raise ``ConnectionError``."""
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 20))
        if not chunk:
            raise ConnectionError("connection closed by peer")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class Client:
    """Calls Controller methods by name with dict messages."""

    def __init__(self, socket_path: str, timeout: float = 60.0, cluster: str = "") -> None:
        self.socket_path = socket_path
        self.timeout = timeout
        self.cluster = cluster  # -M: the cluster whose controller answers ("" this one)

    def call(self, method: str, request: Message | None = None) -> Message:
        """Call ``method`` (e.g. ``"Submit"``); raise ``SlurmError`` on failure."""
        body = codec.encode(f"{method}Request", request or {})
        frame = codec.encode("Frame", {"method": method, "body": body, "cluster": self.cluster})
        for _ in range(BACKOFF_RETRIES):
            try:
                return self._once(method, frame)
            except SlurmError as exc:
                if exc.code != _BACKOFF:
                    raise
            import time  # only when rate-limited: off the start-up path

            time.sleep(1)
        return self._once(method, frame)

    def _once(self, method: str, frame: bytes) -> Message:
        try:
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(self.socket_path)
                try:  # noqa: SIM105 - contextlib is not imported on the start-up path
                    sock.sendall(struct.pack(">I", len(frame)) + frame)
                except BrokenPipeError:
                    pass  # refused unread (too many connections): its answer is waiting
                (size,) = struct.unpack(">I", recv_exact(sock, 4))
                if size > MAX_FRAME:
                    raise ConnectionError("reply too large")
                reply = codec.decode("Frame", recv_exact(sock, size))
            finally:
                sock.close()
        except (OSError, ConnectionError, struct.error) as exc:
            raise ControllerUnreachable() from exc
        if reply["code"]:
            raise SlurmError(reply["code"], reply["error"] or None, reply.get("detail", ""))
        return codec.decode(f"{method}Reply", reply["body"])
